"""Replay over the real gating engine: any position equals folding from scratch, checkpoints stay independent."""

from __future__ import annotations

import importlib.util
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from repo_paths import EXAMPLE, REPO

from cockpit.changelog.events import EventKind, parse_event
from cockpit.changelog.journal import SessionHeader, SessionLog, read_session
from cockpit.engine.fold import (
    Folder,
    fold,
)
from cockpit.runbook.loader import load_runbook
from cockpit.view.replay import DEFAULT_INTEREST, FAILURE, Replay
from cockpit.view.words import is_failure

RUNBOOK = load_runbook(Path(__file__).resolve().parent / "golden" / "driver-upgrade-r580.toml").runbook


def _from_scratch(log: SessionLog, seq: int):
    h = log.header
    return fold(RUNBOOK, h.parameters, h.hosts, log.events[:seq], operator=h.operator)


@pytest.fixture(scope="module")
def example() -> SessionLog:
    return read_session(EXAMPLE)


def test_every_position_equals_folding_from_scratch(example: SessionLog) -> None:
    replay = Replay.for_session(example, RUNBOOK, every=8)  # a small interval crosses many checkpoints
    for seq in range(0, example.last_seq + 1):
        assert replay.state_at(seq) == _from_scratch(example, seq), seq
    assert replay.final == _from_scratch(example, example.last_seq)
    assert replay.final.anomalies == []  # the recorded scenario is one the gating engine understands


def test_states_handed_out_are_independent_of_the_checkpoints(example: SessionLog) -> None:
    replay = Replay.for_session(example, RUNBOOK, every=16)
    first = replay.state_at(20)
    first.nodes["gpu01"].current = "tampered"
    first.anomalies.append("tampered")
    again = replay.state_at(20)
    assert again.nodes["gpu01"].current != "tampered" and "tampered" not in again.anomalies
    assert replay.state_at(16) == _from_scratch(example, 16)  # exactly on a checkpoint
    final = replay.folder_at(example.last_seq)
    final.apply(example.events[0].model_copy(update={"seq": 999}))
    assert replay.final.last_seq == example.last_seq


def test_the_story_of_the_example(example: SessionLog) -> None:
    replay = Replay.for_session(example, RUNBOOK)
    fired = next(e for e in example.events if e.kind is EventKind.TRIGGER_FIRED)
    at_fire = replay.state_at(fired.seq)
    assert at_fire.triggers["gpu-missing"].status == "fired" and at_fire.nodes["gpu02"].current == "reboot"
    assert replay.state_at(fired.seq - 1).triggers["gpu-missing"].status == "armed"
    end = replay.final
    assert end.nodes["gpu01"].current == "done" and end.nodes["gpu02"].current == "rolled-back"
    assert end.triggers["gpu-missing"].status == "cleared"
    assert [o.reason for o in end.overrides] == [e.reason for e in example.events if e.kind is EventKind.OVERRIDE]


def test_time_positions(example: SessionLog) -> None:
    replay = Replay.for_session(example, RUNBOOK)
    events = example.events
    assert replay.seq_at(events[0].ts - timedelta(seconds=1)) == 0
    assert replay.seq_at(events[-1].ts + timedelta(days=1)) == len(events)
    for e in events:
        seq = replay.seq_at(e.ts)
        assert events[seq - 1].ts == e.ts and (seq == len(events) or events[seq].ts > e.ts)
    middle = events[30].ts + timedelta(milliseconds=1)
    assert replay.state_at_time(middle) == _from_scratch(example, replay.seq_at(middle))


def test_jumping_between_events_of_interest(example: SessionLog) -> None:
    replay = Replay.for_session(example, RUNBOOK)
    interesting = replay.events_of_interest()
    kinds = {str(e.kind) for e in interesting}
    assert {"trigger-fired", "trigger-cleared", "override", "signoff", "step-finished"} == kinds
    assert all(str(e.kind) in DEFAULT_INTEREST or is_failure(e) for e in interesting)
    failures = replay.events_of_interest({FAILURE})
    assert [(e.stage, e.step) for e in failures] == [("record", "k8s-labels")]
    seq = 0
    visited = []
    while (nxt := replay.next_of_interest(seq)) is not None:
        visited.append(nxt.seq)
        seq = nxt.seq
    assert visited == [e.seq for e in interesting]
    previous = replay.previous_of_interest(visited[-1])
    assert previous is not None and previous.seq == visited[-2]
    assert replay.previous_of_interest(1) is None
    fired = replay.events_of_interest({EventKind.TRIGGER_FIRED})
    assert [e.trigger for e in fired] == ["gpu-missing"]


def test_timeline_marks_waves_and_stage_gates(example: SessionLog) -> None:
    markers = Replay.for_session(example, RUNBOOK).timeline()
    waves = [(m.seq, m.label) for m in markers if m.kind == "wave"]
    # the labels are the events' short words, as the cast's chapters name them
    assert waves == [(39, "wave 1 started"), (75, "wave 2 started")]
    gates = [(m.label, m.node) for m in markers if m.kind == "stage"]
    assert ("expand passed on gpu01", "gpu01") in gates
    assert any(label.startswith("OVERRIDE record on gpu02: ") and node == "gpu02" for label, node in gates)
    assert [m.label for m in markers if m.kind == "session"] == ["session started", "session ended"]
    assert [m.seq for m in markers] == sorted(m.seq for m in markers)


def _bench_module():
    spec = importlib.util.spec_from_file_location("journal_bench", REPO / "benchmarks" / "journal_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_long_synthetic_window_at_random_positions() -> None:
    """1,500 events over several waves (the benchmark's generator): random positions match a fresh fold."""
    bench = _bench_module()
    params = RUNBOOK.defaults()
    hosts = [f"gpu{i:02d}" for i in range(1, 25)]
    fields = list(bench.synthetic_fields(RUNBOOK, hosts, params))[:1500]
    start = datetime(2026, 8, 5, 22, tzinfo=UTC)
    events = [parse_event(dict(seq=i, ts=start + timedelta(seconds=i), **f)) for i, f in enumerate(fields, start=1)]
    header = SessionHeader(change_id="long", runbook_id=RUNBOOK.id, runbook_sha256="e" * 64, operator="alice",
                           hosts=hosts, parameters=params)  # fmt: skip
    log = SessionLog(header=header, events=events)
    replay = Replay(log, lambda: Folder(RUNBOOK, params, hosts, operator="alice"), every=100)
    rng = random.Random(3)
    for seq in [0, 1, 99, 100, 101, 1499, 1500] + [rng.randint(0, 1500) for _ in range(12)]:
        assert replay.state_at(seq) == fold(RUNBOOK, params, hosts, events[:seq], operator="alice"), seq
    assert replay.final.anomalies == []
    assert len(replay.events_of_interest({EventKind.WAVE_STARTED})) >= 3


def test_bad_interval_is_refused(example: SessionLog) -> None:
    with pytest.raises(ValueError):
        Replay.for_session(example, RUNBOOK, every=0)


def test_view_moves_one_cursor_and_agrees_with_state_at(example: SessionLog) -> None:
    replay = Replay.for_session(example, RUNBOOK, every=8)
    rng = random.Random(11)
    order = (
        list(range(0, example.last_seq + 1)) + [rng.randint(0, example.last_seq) for _ in range(40)] + [0, 66, 3, 2, 1]
    )
    for seq in order:  # forward steps, random jumps, steps back
        assert replay.view_at(seq) == replay.state_at(seq), seq
    # the cursor never touches the checkpoints
    assert replay.state_at(8) == _from_scratch(example, 8)
