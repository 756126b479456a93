"""Replay and ``--cast``: the state shown at every event is the state the live session had,
and the asciicast written for a recorded window is valid v2 with its chapters."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from repo_paths import EXAMPLE, with_example_runbook
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.session.review import session_runbook
from cockpit.view.cast import SPEEDS, Player, compressed_times, write_cast
from cockpit.view.replay import Replay

pytestmark = pytest.mark.timeout(120)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def live_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, Any]]:
    """A demo window driven by the autopilot on the simulator; the live state after every event."""
    from cockpit.session.autopilot import drive
    from cockpit.session.demo import demo_session

    folder = tmp_path_factory.mktemp("live")
    states: dict[int, Any] = {}

    async def run() -> Path:
        async with demo_session(
            in_process=True,
            nodes=2,
            scenario="gpu-missing",
            sessions_dir=folder,
            change_id="CHG-LIVE",
            speed=IN_PROCESS_WALK_SPEED,
        ) as (session, _fleet):
            states[session.state.last_seq] = session.state.copy()
            session.subscribe(lambda event: states.__setitem__(event.seq, session.state.copy()))
            await drive(session)
            return session.path

    path = asyncio.run(run())
    return path, states


def load_cast(path: Path) -> tuple[dict[str, Any], list[list[Any]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    events = [json.loads(line) for line in lines[1:]]
    return header, events


def assert_valid_v2(header: dict[str, Any], events: list[list[Any]], width: int, height: int) -> None:
    assert header["version"] == 2
    assert header["width"] == width and header["height"] == height
    assert isinstance(header["timestamp"], int) and isinstance(header["title"], str) and header["title"]
    times = [e[0] for e in events]
    assert all(isinstance(t, float | int) and t >= 0 for t in times)
    assert times == sorted(times), "event times must never decrease"
    assert {e[1] for e in events} <= {"o", "m"}
    assert all(len(e) == 3 and isinstance(e[2], str) for e in events)
    for _, code, data in events:
        if code == "o" and data.startswith("\x1b[H"):
            shown = ANSI.sub("", data).split("\r\n")
            assert len(shown) <= height
            assert max(len(line) for line in shown) <= width


def test_state_at_every_event_equals_what_the_live_session_had(live_demo: tuple[Path, dict[int, Any]]) -> None:
    path, live = live_demo
    log = read_session(path)
    assert log.torn is None and len(log.events) > 50
    assert any(e.kind is EventKind.TRIGGER_FIRED for e in log.events)
    runbook = session_runbook(log.header, path).runbook
    # small checkpoint interval so copies, checkpoints and folds in between are all exercised
    player = Player(Replay.for_session(log, runbook, every=16))
    assert set(live) == set(range(1, len(log.events) + 1))
    last = len(log.events)
    for seq in [*range(1, last + 1), *range(last, 0, -7)]:  # forward, then scrubbing back
        player.seek(seq)
        assert player.state == live[seq], f"replay differs from the live session at event {seq}"


def test_cast_of_the_live_demo_marks_the_trigger(live_demo: tuple[Path, dict[int, Any]], tmp_path: Path) -> None:
    path, _ = live_demo
    log = read_session(path)
    out = tmp_path / "live.cast"
    summary = write_cast(log, session_runbook(log.header, path).runbook, out, width=100, height=30)
    header, events = load_cast(out)
    assert_valid_v2(header, events, 100, 30)
    marks = [e[2] for e in events if e[1] == "m"]
    assert summary.markers == len(marks)
    assert "TRIGGER gpu-missing fired on gpu02" in marks
    assert "rollback started on gpu02" in marks


def test_example_cast_is_valid_v2_with_trigger_and_override_markers(tmp_path: Path) -> None:
    out = tmp_path / "example.cast"
    assert main(["replay", str(EXAMPLE), "--cast", str(out), "--width", "110", "--height", "36"]) == 0
    header, events = load_cast(out)
    assert_valid_v2(header, events, 110, 36)
    log = read_session(EXAMPLE)
    assert header["timestamp"] == int(log.header.created_at.timestamp())
    marks = [(t, label) for t, code, label in events if code == "m"]
    labels = [label for _, label in marks]
    assert "TRIGGER gpu-missing fired on gpu02" in labels
    assert any(label.startswith("OVERRIDE record on gpu02: gpu02 left the Kubernetes pool") for label in labels)
    # one chapter per stage change and wave
    passed = [e for e in log.events if e.kind is EventKind.GATE_PASSED]
    assert sum(label.startswith(f"{e.stage} passed") for e in passed for label in labels[:]) >= len(passed)
    assert [label for label in labels if label.startswith("wave ")] == ["wave 1 started", "wave 2 started"]
    # the 78-minute window plays in minutes: no gap longer than the cap
    times = [t for t, _, _ in events]
    assert max(b - a for a, b in itertools.pairwise(times)) <= 2.0 + 1e-9
    assert times[-1] < (log.events[-1].ts - log.events[0].ts).total_seconds() / 10
    frames = [ANSI.sub("", data) for _, code, data in events if code == "o" and data.startswith("\x1b[H")]
    fired_at = next(t for t, label in marks if label.startswith("TRIGGER"))
    at_fire = [ANSI.sub("", d) for t, c, d in events if c == "o" and t == fired_at and d.startswith("\x1b[H")]
    assert at_fire and "TRIGGER FIRED" in at_fire[-1] and "gpu-missing FIRED on gpu02" in at_fire[-1]
    assert "ENDED" in frames[-1].splitlines()[0] and "TRIGGER" not in frames[-1].splitlines()[0]
    assert f"event {len(log.events)}/{len(log.events)}" in frames[-1]


def test_compressed_times_cap_gaps_and_never_go_back() -> None:
    t0 = datetime(2026, 8, 5, 22, 0, tzinfo=UTC)
    stamps = [
        t0,
        t0 + timedelta(seconds=1),
        t0 + timedelta(hours=1),
        t0 + timedelta(minutes=59),
        t0 + timedelta(hours=1, seconds=3),
    ]
    assert compressed_times(stamps, max_gap=2.0) == [0.0, 1.0, 3.0, 3.0, 5.0]
    assert compressed_times(stamps, max_gap=2.0, speed=2.0) == [0.0, 0.5, 2.5, 2.5, 4.0]
    with pytest.raises(ValueError):
        compressed_times(stamps, speed=0)


def example_player() -> Player:
    log = read_session(EXAMPLE)
    return Player(Replay.for_session(log, session_runbook(log.header, EXAMPLE).runbook, every=8))


def test_player_plays_steps_and_changes_speed() -> None:
    player = example_player()
    assert player.seq == 0 and not player.advance(10.0)  # paused: time does not move
    player.toggle()
    assert player.advance(0.0) and player.seq == 1  # the first event is at t=0
    assert player.advance(0.01) is False  # the second is seconds later
    player.advance(100.0)
    assert 1 < player.seq < player.last
    before = player.seq
    player.step(-1)
    assert not player.playing and player.seq == before - 1
    player.step(+1)
    assert player.seq == before
    for _ in range(10):
        player.faster()
    assert player.speed == SPEEDS[-1] == 64
    for _ in range(10):
        player.slower()
    assert player.speed == 1
    player.toggle()
    player.advance(10_000.0)
    assert player.seq == player.last and not player.playing
    player.toggle()  # from the end: plays again from the start
    assert player.playing and player.seq == 0


def test_player_jumps_to_events_of_interest_and_searches() -> None:
    player = example_player()
    kinds = []
    while (found := player.next_of_interest()) is not None:
        assert player.seq == found.seq
        kinds.append((found.kind, found.seq))
    seen = {k for k, _ in kinds}
    assert {EventKind.TRIGGER_FIRED, EventKind.OVERRIDE, EventKind.SIGNOFF} <= seen
    assert [s for _, s in kinds] == sorted(s for _, s in kinds)
    player.seek(0)
    hit = player.search("PLAT-311")
    assert hit is not None and hit.kind is EventKind.OVERRIDE and player.seq == hit.seq
    again = player.search("plat-311")  # wraps around to the same single match
    assert again is not None and again.seq == hit.seq
    player.seek(player.last)
    back = player.search("gpu-missing", forward=False)
    assert (
        back is not None
        and back.seq < player.last
        and "gpu-missing" in (back.trigger or json.dumps(back.facts_as_written(), default=str))
    )
    assert player.search("no such words anywhere") is None
    assert player.state.last_seq == player.seq


def test_replay_cli_refuses_newer_schema_and_reports_a_torn_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = tmp_path / "newer.toml"
    newer.write_text(EXAMPLE.read_text().replace("schema_version = 2", "schema_version = 7", 1))
    assert main(["replay", str(newer), "--cast", str(tmp_path / "x.cast")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "newer cockpit (schema 7)" in err
    assert not (tmp_path / "x.cast").exists()

    torn = tmp_path / "torn.toml"
    torn.write_bytes(EXAMPLE.read_bytes() + b"\n[events.000146]\nseq = 146\nts = 2026-08-05 23:")
    with_example_runbook(tmp_path)
    before = torn.read_bytes()
    assert main(["replay", str(torn), "--cast", str(tmp_path / "torn.cast")]) == 0
    captured = capsys.readouterr()
    assert "torn final block ignored" in captured.err and "145 events" in captured.out
    assert captured.out.startswith("change log: chain: ok;")  # the verification is the first line
    assert torn.read_bytes() == before  # replay never writes to the session file

    assert main(["replay", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml: no such file" in capsys.readouterr().err
