"""Typed events: one class per kind with its facts model, and an event of a kind this
version does not know (a log from a newer cockpit) read, folded, exported, replayed and
resumed over without stopping the window."""

from __future__ import annotations

import shutil
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from gating_scenarios import take_planned
from repo_paths import EXAMPLE
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import (
    UNKNOWN_KIND,
    EventKind,
    NoteEvent,
    ProbeEvent,
    UnknownEvent,
    event_class,
    parse_event,
)
from cockpit.changelog.facts import ProbeFacts
from cockpit.changelog.journal import (
    Journal,
    read_session,
    render_log,
)
from cockpit.engine.fold import fold
from cockpit.engine.planner import OUTCOME_KEEP_UPGRADE
from cockpit.engine.state import CockpitState
from cockpit.export import FORMATS, export_text
from cockpit.runbook.loader import load_runbook
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session
from cockpit.view.cast import write_cast
from cockpit.view.replay import Replay

RUNBOOK = Path(__file__).resolve().parent / "golden" / "driver-upgrade-r580.toml"
T0 = datetime(2026, 8, 5, 22, 0, tzinfo=UTC)

#: what a newer cockpit might write: a kind, a top-level field and facts this one has never seen
FUTURE = {
    "actor": "cockpit",
    "kind": "power-capped",
    "node": "gpu01",
    "watts": 450,
    "facts": {"limit_w": 450, "gpus": [{"index": 0, "before_w": 700}]},
}


def test_every_kind_has_a_class_whose_facts_are_closed_but_the_probe_summary() -> None:
    for kind in EventKind:
        cls = event_class(kind)
        assert cls.model_fields["kind"].default is kind
        facts_model = cls.model_fields["facts"].annotation
        assert isinstance(facts_model, type)
        extra = facts_model.model_config.get("extra")
        assert extra == ("allow" if kind is EventKind.PROBE else "forbid"), kind


def test_reading_narrows_to_the_kind_and_its_facts() -> None:
    event = parse_event({"seq": 1, "ts": T0, "actor": "cockpit", "kind": "probe", "facts": {"gpu_count": 8}})
    assert isinstance(event, ProbeEvent) and isinstance(event.facts, ProbeFacts)
    assert event.facts.gpu_count == 8 and event.facts.boot_id is None
    note = parse_event({"seq": 2, "ts": T0, "actor": "alice", "kind": "note", "note": "hi"})
    assert isinstance(note, NoteEvent) and note.facts_as_written() == {}


def test_facts_a_kind_does_not_have_are_refused_at_the_append(tmp_path: Path) -> None:
    log = read_session(EXAMPLE)
    with Journal.create(tmp_path, log.header.model_copy(update={"change_id": "CHG-FACTS"})) as journal:
        size = journal.path.stat().st_size
        with pytest.raises(ValueError, match=r"item-verified event not recorded: facts\.okay"):
            journal.append(EventKind.ITEM_VERIFIED, stage="plan", item="x", facts={"okay": True})
        with pytest.raises(ValueError, match="gpu_count"):
            journal.append(EventKind.PROBE, node="gpu01", facts={"gpu_count": "eight"})
        with pytest.raises(ValueError, match="power-capped"):
            journal.append("power-capped")  # this version never writes a kind it does not know
        assert journal.path.stat().st_size == size
        assert journal.append(EventKind.NOTE, note="still writable").seq == 1


def test_a_block_with_a_known_kind_and_wrong_facts_is_corruption(tmp_path: Path) -> None:
    log = read_session(EXAMPLE)
    first = render_log(log.header, [parse_event({**FUTURE, "seq": 1, "ts": T0})])
    text = first.decode().replace("power-capped", "note")
    # a valid checksum over a known kind with fields it does not have: the reader says so, never guesses
    body = text[: text.index("# end of event")].encode()
    path = tmp_path / "CHG-BAD.toml"
    path.write_bytes(body + b"# end of event 000001, crc32 %08x\n" % zlib.crc32(body[body.index(b"\n[events.") :]))
    # ... and goes on: the block is named with its seq and left out of the fold (a bad block never stops a window)
    bad = read_session(path)
    assert not bad.events and bad.last_seq == 1
    assert [seq for seq, _ in bad.unreadable] == [1] and "Extra inputs are not permitted" in bad.unreadable[0][1]


def _with_future_event(tmp_path: Path, at: int) -> Path:
    """The example log with a well-checksummed block of an unknown kind after event ``at``."""
    log = read_session(EXAMPLE)
    events = list(log.events)
    future = parse_event({**FUTURE, "seq": at + 1, "ts": events[at - 1].ts})
    later = [e.model_copy(update={"seq": e.seq + 1}) for e in events[at:]]
    target = tmp_path / "demo-gpu-missing.toml"
    target.write_bytes(render_log(log.header, [*events[:at], future, *later]))
    shutil.copytree(EXAMPLE.with_suffix(""), target.with_suffix(""))
    return target


def test_an_unknown_kind_mid_log_reads_folds_replays_exports_and_takes_appends(tmp_path: Path) -> None:
    path = _with_future_event(tmp_path, at=20)
    log = read_session(path)
    original = read_session(EXAMPLE)
    assert log.torn is None and len(log.events) == len(original.events) + 1
    future = log.events[20]
    assert isinstance(future, UnknownEvent) and future.kind == UNKNOWN_KIND
    assert future.raw_kind == "power-capped" and future.facts == FUTURE["facts"]
    assert future.to_toml_dict()["kind"] == "power-capped" and future.to_toml_dict()["watts"] == 450

    runbook = load_runbook(RUNBOOK).runbook
    h = log.header

    def folded(events: list) -> CockpitState:
        return fold(runbook, h.parameters, h.hosts, events, operator=h.operator)

    with_it, without = folded(log.events), folded(original.events)
    assert [a for a in with_it.anomalies if "power-capped" in a] == [
        "seq 21 (power-capped): a kind this version does not know (written by a newer cockpit?): ignored"
    ]
    assert {n: p.current for n, p in with_it.nodes.items()} == {n: p.current for n, p in without.nodes.items()}
    assert with_it.decision is not None and without.decision is not None
    assert with_it.decision.facts.outcome == without.decision.facts.outcome

    replay = Replay.for_session(log, runbook, every=8)
    assert replay.state_at(21).last_seq == 21 and replay.state_at(len(log.events)).last_seq == len(log.events)

    loaded = load_runbook(RUNBOOK)
    for fmt in FORMATS:
        assert "gpu-missing" in export_text(log, fmt, loaded)
    write_cast(log, runbook, tmp_path / "window.cast")
    assert (tmp_path / "window.cast").stat().st_size > 0

    # the file stays writable, and the unknown block is kept byte for byte
    kept = log.blocks[20]
    block = path.read_bytes()[kept.start : kept.end]
    assert log.chain.ok and b'kind = "power-capped"' in block
    with Journal.open_for_append(path, "bob", exclusive=False) as journal:
        assert journal.append(EventKind.NOTE, note="after the future").seq == len(log.events) + 1
    assert block in path.read_bytes()
    assert read_session(path).events[-1].note == "after the future"


async def test_resume_over_an_unknown_kind_finishes_the_window(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True,
        nodes=2,
        scenario="happy",
        sessions_dir=tmp_path,
        change_id="CHG-FUTURE",
        speed=IN_PROCESS_WALK_SPEED,
    ) as (
        session,
        fleet,
    ):
        for _ in range(6):
            await take_planned(session)
        path = session.path
        session.pause()
        await session.close()
        before = read_session(path)
        future = parse_event({**FUTURE, "seq": before.last_seq + 1, "ts": datetime.now(UTC)})
        with path.open("ab") as fh:  # a newer cockpit appended this before handing the window back
            fh.write(render_log(before.header, [future], prev=before.chain.head))
        from cockpit.sim.inprocess import InProcessTransport

        resumed = Session.resume(
            path, transport_factory=lambda _h: InProcessTransport(fleet, fleet.transport_options(None))
        )
        try:
            assert any("power-capped" in a for a in resumed.state.anomalies)
            # the demo's pace, which demo_session set on the session before the pause
            resumed.executor.reboot_poll_s = session.executor.reboot_poll_s
            result = await drive(resumed)
            assert result.outcome == OUTCOME_KEEP_UPGRADE, result.stuck_on
        finally:
            await resumed.close()
        log = read_session(path)
        seq = future.seq
        assert isinstance(log.events[seq - 1], UnknownEvent) and log.events[-1].seq > seq and log.chain.ok
        session.close = _noop  # type: ignore[method-assign]  # already closed; the context manager would close it again


async def _noop() -> None:
    return None
