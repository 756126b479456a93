"""The view model (cockpit/view/model.py, panes.py, detail.py, words.py) on the recorded
gpu-missing window: what each pane says at a given event, and the one event-to-text
function in both its forms."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from repo_paths import EXAMPLE

from cockpit.changelog.events import Event, EventKind, parse_event
from cockpit.changelog.journal import SessionLog, read_session
from cockpit.engine.planner import plan
from cockpit.engine.state import CockpitState
from cockpit.runbook.model import Runbook, StepKind
from cockpit.session.review import session_runbook
from cockpit.view.detail import gpu_table, node_facts, outcome_lines
from cockpit.view.lines import Line, fit_rows, more_text
from cockpit.view.model import (
    STRIP_LEVELS,
    CockpitView,
    cockpit_view,
    header_view,
    log_line,
    next_line,
    progress_segments,
    strip_runs,
)
from cockpit.view.panes import stage_pane, trigger_panel
from cockpit.view.replay import Replay
from cockpit.view.words import CHAPTER_KINDS, Form, event_text

T0 = datetime(2026, 8, 5, 22, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def recorded() -> tuple[SessionLog, Runbook, Replay]:
    log = read_session(EXAMPLE)
    runbook = session_runbook(log.header, EXAMPLE).runbook
    return log, runbook, Replay.for_session(log, runbook)


def view_at(recorded: tuple[SessionLog, Runbook, Replay], seq: int) -> tuple[CockpitState, CockpitView]:
    log, runbook, replay = recorded
    state = replay.state_at(seq)
    view = cockpit_view(
        state,
        change_id=log.header.change_id,
        runbook_id=log.header.runbook_id,
        operator=log.header.operator,
        now=log.events[seq - 1].ts,
        next_plan=plan(state, runbook, log.header.operator),
    )
    return state, view


def test_the_fired_trigger_is_said_in_every_pane(recorded) -> None:
    _, view = view_at(recorded, 95)  # gpu02 came back from its reboot one GPU short
    assert view.header.alarm
    assert view.header.parts[:2] == ("demo-gpu-missing", "⚠ 1 TRIGGER FIRED")
    gpu02 = next(row for row in view.fleet if row.node == "gpu02")
    assert gpu02.cells[2:7] == ("reboot", "580.65.06", "13.0", "7/8", "gpu-missing")
    assert gpu02.tones[6] == "alarm"  # the health cell
    assert view.stage.title == "reboot on gpu02: Reboot into the new driver"
    assert view.stage.gate == Line.of("Gate blocked (1): item 'boot-id-changed' not verified", "warning")
    assert view.triggers.alarm and view.triggers.summary == "Rollback triggers: 11 armed, 1 fired"
    fired, hint, quiet = view.triggers.lines
    assert fired.tone == "alarm" and fired.text.startswith("● gpu-missing FIRED on gpu02: gpu02 shows 7 GPUs")
    assert hint.text.startswith("Rollback: b rolls back the node that fired")
    assert quiet.text.startswith("◉ driver-versions-inconsistent")
    assert view.next.text == "Next: start the rollback on gpu02   [n] to do it"


def test_panes_before_the_first_event_and_after_the_last(recorded) -> None:
    log, runbook, replay = recorded
    start = replay.state_at(0)
    header = header_view(start, change_id="CHG-1", runbook_id="rb", operator="alice", now=T0)
    assert header.text == "CHG-1 · rb · op alice · rev none yet · ⏱ N/A · wave -/2" and not header.alarm
    assert next_line(plan(start, runbook, "alice"), start).text == "Next: run step freeze/host-smi   [n] to do it"
    assert trigger_panel(start).summary == "Rollback triggers: NOT ARMED (12 written)"
    _, end = view_at(recorded, len(log.events))
    assert end.header.parts[-1] == "ENDED" and not end.header.alarm
    assert end.next == Line.of("Session ended.", "dim")
    assert [row.cells[2] for row in end.fleet] == ["done", "rolled-back"]
    assert end.triggers.lines[0].text.startswith("○ gpu-missing cleared by alice: gpu02 back on 575.57.08")


def test_idle_stage_pane_says_what_the_window_waits_for(recorded) -> None:
    state = recorded[2].state_at(74)  # gpu01 passed expand; wave 2 not started yet
    pane = stage_pane(state, None, None)
    assert pane.key is None and pane.rows == ()
    assert pane.title == "No stage in progress"
    assert pane.gate.text == "Wave 1 is through. Press w to start the next wave."


def test_the_header_drops_the_runbook_then_the_reviewers_when_narrow(recorded) -> None:
    _, view = view_at(recorded, 86)  # gpu02's override
    header = view.header
    assert header.fit(200) == header.text
    narrow = header.fit(len(header.text) - 5)
    assert "driver-upgrade-r580" not in narrow and "rev bob" in narrow
    narrower = header.fit(50)
    assert "rev bob" not in narrower and narrower.startswith("demo-gpu-missing · op alice")


def test_the_strip_folds_until_it_fits(recorded) -> None:
    segments = progress_segments(recorded[2].state_at(86))
    widths = [len("".join(text for text, _ in strip_runs(segments, level))) for level in range(STRIP_LEVELS)]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]
    tightest = "".join(text for text, _ in strip_runs(segments, STRIP_LEVELS - 1))
    assert "upg 1/2" in tightest and "drain" not in tightest


def test_what_does_not_fit_becomes_plus_n_more(recorded) -> None:
    assert fit_rows([1, 2, 3], 3) == ([1, 2, 3], 0)
    assert fit_rows([1, 2, 3, 4, 5], 3) == ([1, 2], 3)
    assert more_text(3) == "+3 more"
    panel = trigger_panel(recorded[2].state_at(95))
    assert len(panel.lines) == 3
    fitted = panel.fit(3)  # the summary and two lines: one trigger line, then "+2 more"
    assert [line.text for line in fitted.lines[1:]] == ["+2 more"]
    assert fitted.lines[0] == panel.lines[0] and fitted.summary == panel.summary
    assert panel.fit(10) == panel


def test_event_text_long_and_short_forms(recorded) -> None:
    log = recorded[0]
    by_seq = {e.seq: e for e in log.events}
    assert event_text(by_seq[39]) == "Wave 1 started: gpu01"
    assert event_text(by_seq[39], Form.SHORT) == "wave 1 started"
    assert event_text(by_seq[84]) == "Step record/k8s-labels on gpu02 failed: exit status 1"
    assert event_text(by_seq[84], Form.SHORT) == "failure: record/k8s-labels on gpu02"
    fired = by_seq[95]
    assert event_text(fired).startswith("Trigger gpu-missing FIRED on gpu02: gpu02 shows 7 GPUs")
    assert event_text(fired, Form.SHORT) == "TRIGGER gpu-missing fired on gpu02"
    # every event has words in both forms; the chapter kinds' short words never carry a blank
    for event in log.events:
        assert event_text(event) and event_text(event, Form.SHORT)
        if event.kind in CHAPTER_KINDS:
            assert "None" not in event_text(event, Form.SHORT)


def test_event_text_without_the_optional_facts() -> None:
    def event(kind: EventKind, **fields: object) -> Event:
        return parse_event(dict(seq=1, ts=T0, actor="alice", kind=kind, **fields))

    assert event_text(event(EventKind.TRIGGER_CLEARED, trigger="t1")) == "Trigger t1 cleared"
    assert event_text(event(EventKind.OVERRIDE, stage="drain", node="n1")) == "OVERRIDE of drain on n1"
    assert event_text(event(EventKind.ROLLBACK_FINISHED, node="n1")) == "Rollback FAILED on n1"
    assert event_text(event(EventKind.ROLLBACK_FINISHED, node="n1"), Form.SHORT) == "rollback finished on n1 (failed)"
    assert event_text(event(EventKind.NOTE, note="coffee")) == "Note: coffee"
    assert event_text(event(EventKind.SESSION_RESUMED, facts={"interrupted": ["drain/cordon/n1"]})) == (
        "Session resumed (interrupted: drain/cordon/n1)"
    )


def test_a_log_line_is_time_seq_actor_kind_and_the_long_words(recorded) -> None:
    fired = recorded[0].events[94]
    line = log_line(fired)
    assert line.text.startswith("22:49:23    95 cockpit        trigger-fired  Trigger gpu-missing FIRED on gpu02")
    assert dict((text.strip(), tone) for text, tone in line.runs)["trigger-fired"] == "alarm"


def test_node_detail_without_a_live_probe() -> None:
    assert node_facts("gpu01", None, None)[0].text == "gpu01  (no live probe yet)"
    assert gpu_table(None).empty == Line.of("not probed yet", "dim")
    assert outcome_lines(None, None, None) == (Line.of("no command run on this node yet", "dim"),)
    running = outcome_lines(None, "upgrade/install", None)
    assert running[0].text == "running: upgrade/install" and running[0].tone == "running"


def test_what_the_log_does_not_hold_is_labelled_live_on_screen() -> None:
    from rich.console import Console

    from cockpit.view.detail import LIVE_NOT_RECORDED, GpuTableView
    from cockpit.view.richtext import gpu_table as render_gpu_table

    console = Console(width=100, record=True)
    console.print(
        render_gpu_table(GpuTableView(rows=(("0", "H100", "1/80000", "0%", "30C", "70/700", "0"),), empty=None))
    )
    assert LIVE_NOT_RECORDED in console.export_text()


def test_every_health_has_a_short_word_that_fits_and_keeps_its_tone() -> None:
    from cockpit.gpu.nodestate import Health
    from cockpit.view.model import HEALTH_SHORT, health_of, health_tone, health_word

    assert set(HEALTH_SHORT) == set(Health)  # a new verdict needs its word
    assert len(set(HEALTH_SHORT.values())) == len(Health)  # no two verdicts read alike
    for health in Health:
        word = health_word(str(health), narrow=True)
        assert word == HEALTH_SHORT[health] and len(word) <= 9
        assert health_of(word) is health and health_of(str(health)) is health  # either form reads back
        assert health_word(str(health)) == str(health)  # wide: the long form
    assert health_of("no such word") is Health.UNKNOWN
    assert health_tone(Health.GPU_MISSING) == "alarm" and health_tone(Health.REBOOTING) == "warning"
    assert health_tone(Health.OK) == "ok"


def test_fleet_cells_carry_their_tone_from_the_state_not_their_text() -> None:
    from datetime import UTC, datetime

    from cockpit.engine.state import NodeProgress, StageState, StepState
    from cockpit.view.fleet import FLEET_COLUMNS, fleet_row

    at = {key: i for i, (key, _) in enumerate(FLEET_COLUMNS)}
    install = StepState(id="install", title="Install", kind=StepKind.COMMAND, destructive=True)
    upgrade = StageState(id="upgrade", title="Upgrade", scope="node", steps={"install": install})
    progress = NodeProgress(node="FAILED-gpu✗", wave=0, current="upgrade", _templates=(upgrade,))
    quiet = fleet_row(progress, None, datetime.now(UTC))
    # a node whose name reads like a failure is not one: the tone comes from the steps
    assert quiet.tone(at["stage"]) == "" and quiet.tone(at["node"]) == ""
    progress.stages["upgrade"].steps["install"].status = "failed"
    failed = fleet_row(progress, None, datetime.now(UTC))
    assert failed.cells[at["stage"]] == "upgrade ✗" and failed.tone(at["stage"]) == "alarm"
    assert failed.tone(at["health"]) == "warning"  # no probe yet: unknown


@pytest.mark.parametrize("width", [80, 60])
def test_a_long_next_line_shortens_its_evidence_and_keeps_its_instruction(recorded, width) -> None:
    from cockpit.engine.planner import KEY_DETAIL, KEY_OVERRIDE, KEY_REVERIFY, Plan

    state = recorded[2].state_at(0)
    evidence = "dcgm diag level 3 failed: " + "GPU 3 PCIe replay counter rising " * 4
    keys = f"{KEY_REVERIFY}, {KEY_DETAIL}, b rolls gpu05 back, {KEY_OVERRIDE}"
    failed = Plan(person_must=f"check 'dcgm-diag' on gpu05 failed: {evidence}; the operator decides: {keys}")
    assert len(next_line(failed, state).text) > 200  # unfitted: the whole of it
    line = next_line(failed, state, width).text
    assert len(line) <= width
    assert line.endswith(KEY_REVERIFY)  # the key that acts, whole, and last
    assert "dcgm-diag" in line if width == 80 else line.startswith("Next: check")
    assert "…" in line  # what was left out is marked
    # an action's "[n] to do it" and a wait's "(k cancels it)" stay whole the same way
    waiting = Plan(waiting_for=f"upgrade/install on gpu05 to finish, {'x' * 80} (k cancels it)")
    assert next_line(waiting, state, width).text.endswith(" (k cancels it)")
    assert len(next_line(waiting, state, width).text) <= width
    # a line that fits is the planner's words, untouched
    short = Plan(person_must="the gate of 'drain' is shut (item 'x'); o overrides")
    assert next_line(short, state, width) == next_line(short, state)


def test_a_node_whose_wave_started_and_nothing_ran_on_reads_waiting(tmp_path: Path) -> None:
    from offline_session import start_offline, through_opening

    from cockpit.view.fleet import WAITING, stage_cell

    session = start_offline(tmp_path, ["gpu01", "gpu02"], change_id="CHG-WAIT")
    try:
        through_opening(session)  # the canary's wave started: it is in its first stage, nothing ran
        canary = session.state.nodes["gpu01"]
        assert canary.current == "drain" and not canary.begun
        assert stage_cell(canary) == WAITING  # "drain" with a growing time read as a drain under way
        assert stage_cell(session.state.nodes["gpu02"]) == "pending"  # its wave has not started
    finally:
        session.journal.close()
