"""Big fleets: the fleet table's node-set rows (cockpit/view/fleet.py), and the engine's
shortcuts for 2,000 nodes giving what the long way gives. Pure and fast: no SSH, no UI."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gating_scenarios import HOSTS, Log, small_runbook

from cockpit.changelog.events import EventKind
from cockpit.changelog.facts import ProbeFacts
from cockpit.engine.fold import fold
from cockpit.engine.fold_base import initial_state
from cockpit.engine.state import new_stage_state
from cockpit.engine.triggers import evaluate
from cockpit.fleet.nodeset import expand_nodeset
from cockpit.runbook.backends import with_backend
from cockpit.runbook.loader import load
from cockpit.sim.fleet import node_names
from cockpit.view import fleet
from cockpit.view.fleet import EXPAND_CHUNK, FOLD_ABOVE, FleetRow, FleetRows, fleet_rows, nodeset_label, row_for

NOW = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
RUNBOOK = load().runbook


def state_of(nodes: int):
    return initial_state(RUNBOOK, {"control_host": "c"}, node_names(nodes), "alice")


def test_node_names_pad_to_the_widest_number() -> None:
    assert node_names(8)[-1] == "gpu08"
    assert node_names(256)[0] == "gpu001"
    names = node_names(2000)
    assert (names[0], names[-1]) == ("gpu0001", "gpu2000")
    assert sorted(names) == names  # padded: sorted as numbered, as a node set folds them


def test_a_small_fleet_has_a_row_per_node_as_before() -> None:
    state = state_of(FOLD_ABOVE)
    rows = fleet_rows(state, {}, NOW)
    assert [r.node for r in rows] == list(state.nodes)
    assert all(not r.is_set and r.fold is None and r.key == r.node for r in rows)


def test_a_big_fleet_folds_alike_nodes_into_one_node_set_row_and_keeps_the_canary() -> None:
    state = state_of(2000)
    rows = fleet_rows(state, {}, NOW)
    assert [r.node for r in rows] == ["gpu0001", "gpu0002"]
    canary, rest = rows
    assert not canary.is_set  # the canary wave: never folded
    assert rest.is_set and len(rest.members) == 1999
    assert rest.cells[0] == "▸ gpu[0002-2000] (1999)"
    assert rest.cells[2] == "pending"
    assert rest.cells[1] == f"2-{len(state.waves)}"  # the waves it spans
    assert set(expand_nodeset("gpu[0002-2000]")) == set(rest.members)
    assert rest.key.startswith(fleet.SET_KEY_PREFIX)


def test_the_current_wave_and_the_nodes_that_fired_or_failed_are_never_folded() -> None:
    state = state_of(2000)
    state.current_wave = 3
    wave = state.waves[3]
    trigger = next(iter(state.triggers.values()))
    trigger.status, trigger.node, trigger.fired_nodes = "fired", "gpu1500", {"gpu1500": "gpu1500: 7 GPUs, baseline 8"}
    failed = state.nodes["gpu1700"]
    failed.current = state.node_stage_order[0]
    step = next(iter(failed.stages[failed.current].steps.values()))
    step.status = "failed"
    rows = fleet_rows(state, {}, NOW)
    own = {r.node for r in rows if not r.is_set}
    assert {"gpu0001", "gpu1500", "gpu1700", *wave} <= own
    folded = {n for r in rows if r.is_set for n in r.members}
    assert not folded & {"gpu0001", "gpu1500", "gpu1700", *wave}
    assert len(own) + len(folded) == 2000
    # a set is placed where its first node stands, in fleet order
    firsts = [r.node for r in rows]
    assert firsts == sorted(firsts)


def test_nodes_differing_in_more_than_name_wave_and_time_are_not_folded_together() -> None:
    state = state_of(100)
    for name in node_names(100)[50:]:
        state.nodes[name].probe = ProbeFacts(driver_version="580.65.06", kernel_module_version="580.65.06")
    rows = fleet_rows(state, {}, NOW)
    sets = [r for r in rows if r.is_set]
    assert [len(r.members) for r in sets] == [49, 50]
    assert [r.cells[3] for r in sets] == ["N/A", "580.65.06"]


def test_fewer_alike_nodes_than_the_minimum_stay_rows_of_their_own() -> None:
    state = state_of(40)
    for name in ("gpu35", "gpu36"):
        state.nodes[name].probe = ProbeFacts(health="unreachable")
    rows = fleet_rows(state, {}, NOW)
    assert {"gpu35", "gpu36"} <= {r.node for r in rows if not r.is_set}


def test_an_expanded_big_set_shows_sets_of_64_then_a_chunk_its_nodes() -> None:
    state = state_of(2000)
    folded = fleet_rows(state, {}, NOW)
    key = folded[1].key
    opened = fleet_rows(state, {}, NOW, expanded={key})
    chunks = [r for r in opened if r.fold is not None and r.fold.startswith(key + "#")]
    assert opened[1].expanded and opened[1].cells[0].startswith("▾ ")
    assert len(chunks) == -(-1999 // EXPAND_CHUNK)
    assert chunks[0].cells[0] == "  ▸ gpu[0002-0065] (64)"
    assert sum(len(c.members) for c in chunks) == 1999
    deeper = fleet_rows(state, {}, NOW, expanded={key, chunks[0].key})
    nodes = [r for r in deeper if r.fold == chunks[0].key and not r.is_set]
    assert [r.node for r in nodes] == [f"gpu{i:04d}" for i in range(2, 66)]
    assert row_for(deeper, "gpu0010") == nodes[8]
    assert row_for(deeper, "gpu0100") == next(r for r in deeper if r.key == chunks[1].key)
    assert row_for(folded, "gpu0100") == folded[1]


def test_a_set_is_named_in_short_when_its_nodes_are_scattered() -> None:
    names = tuple(f"gpu{i:04d}" for i in range(1, 400, 2))
    label = nodeset_label(names)
    assert label.endswith(",…] (200)") and len(label) < 45
    assert nodeset_label(("gpu0001", "gpu0002", "gpu0003")) == "gpu[0001-0003] (3)"


def test_a_sets_time_in_stage_is_its_longest() -> None:
    rows = [FleetRow(f"n{i}", (f"n{i}", "1", "drain", "N/A", "N/A", "8", "ok", "x")) for i in range(1, 41)]
    entered = {f"n{i}": NOW - timedelta(minutes=i) for i in range(1, 41)}
    out = fleet.fold_rows(rows, pinned=set(), entered=entered, now=NOW)
    assert len(out) == 1 and out[0].cells[-1] == "40m00s"


def test_remembered_rows_change_only_their_time_between_events() -> None:
    state = state_of(2000)
    state.nodes["gpu0001"].entered_at = NOW
    cache = FleetRows()
    first = cache.rows(state, {}, NOW)
    later = cache.rows(state, {}, NOW + timedelta(seconds=90))
    assert [r.key for r in later] == [r.key for r in first]
    assert later[0].cells[-1] == "1m30s" and first[0].cells[-1] != later[0].cells[-1]
    assert later[1] is first[1]  # nothing of it changed: the same row
    assert later == fleet_rows(state, {}, NOW + timedelta(seconds=90))
    state.last_seq += 1  # an event: worked out anew
    state.nodes["gpu0002"].current = "drain"
    anew = cache.rows(state, {}, NOW + timedelta(seconds=90))
    assert anew == fleet_rows(state, {}, NOW + timedelta(seconds=90)) and anew != later


def test_every_nodes_stages_start_as_if_made_for_it_alone() -> None:
    state = state_of(40)
    merged = with_backend({**RUNBOOK.defaults(), "control_host": "c"}, None)  # ssh, as the fold reads it
    for name, progress in state.nodes.items():
        for s in RUNBOOK.node_stages:
            alone = new_stage_state(
                s.steps, s.items, "node", name, merged, sid=s.id, title=s.title, arms=s.arms_triggers
            )
            assert progress.stages[s.id] == alone
    a, b = state.nodes["gpu01"].stages, state.nodes["gpu02"].stages
    first = next(iter(a))
    assert a[first] is not b[first] and next(iter(a[first].items.values())) is not next(iter(b[first].items.values()))


def test_triggers_judging_some_nodes_find_what_the_whole_evaluation_finds_on_them() -> None:
    rb = small_runbook()
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="reboot")
    log.probed("gpu01", "gpu01-new", gpus=7)
    state = fold(rb, {}, HOSTS, log.events)
    now = state.last_at or NOW
    whole = evaluate(rb, state, {}, now)
    assert [f.node for f in whole if f.trigger_id == "gpu-missing"] == ["gpu01"]
    alone = evaluate(rb, state, {}, now, nodes=["gpu01"])
    per_node = {"versions", "budget"}  # the fleet-wide evaluators wait for the whole evaluation
    assert [f for f in whole if f.trigger_id not in per_node] == alone
    assert evaluate(rb, state, {}, now, nodes=["gpu02"]) == []


def test_ssh_config_index_finds_literal_blocks_by_name_as_a_full_match_does(tmp_path: Path) -> None:
    from cockpit.fleet.sshconfig import SshConfigIndex

    path = tmp_path / "ssh_config"
    blocks = [f"Host gpu{i:04d}\n    Port {2000 + i}\n" for i in range(1, 51)]
    path.write_text(
        "User ops\n"
        + "".join(blocks)
        + "Host gpu00* !gpu0002\n    IdentityFile a\nHost gpu0003 other\n    ProxyJump b\nHost *\n    Port 22\n"
    )
    index = SshConfigIndex([str(path)])
    for host in ("gpu0001", "gpu0002", "gpu0003", "gpu0050", "other", "nothing"):
        text = Path(index.paths_for(host)[0]).read_text().splitlines()[1:]
        full = ["User ops"]
        for patterns, block in index.blocks:
            if patterns.matches(host):
                full.extend(block)
        assert text == full, host
    index.cleanup()


def test_the_fleet_table_reads_a_nodes_stage_without_copying_its_templates() -> None:
    state = state_of(2000)
    rows = fleet_rows(state, {}, NOW)
    assert len(rows) < 2000 and any(r.node == "gpu0001" for r in rows)  # folded, the canary its own row
    # no node's stages were copied to draw it: the lazy copy stays lazy for the view
    assert all(p._stages is None for p in state.nodes.values())
    progress = state.nodes["gpu0001"]
    stage = RUNBOOK.node_stages[0].id
    template = progress.peek_stage(stage)
    assert template is not None and progress._stages is None
    copied = progress.stages[stage]  # the node's own copy, once read as the fold reads it
    assert copied == replace(template, node="gpu0001") and copied is not template  # the same, but its node's
    assert progress.peek_stage(stage) is copied  # from then on the copy, never the template
    assert progress.peek_stage("no-such-stage") is None
