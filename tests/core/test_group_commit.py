"""Group commit: inside an event loop, appends are written at once and in order, their fsyncs
batched in a thread; an event is acknowledged (``durable`` lets go, its head anchored, the
listeners told) only once an fsync covering it returned. Outside a loop an append still
fsyncs before it returns. The real file and the real ``os.fsync`` throughout: the tests only
count the fsyncs, or hold one back on a gate, to see what waits for it."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest
from journals import minute_journal

from cockpit.changelog.anchor import AnchorSinks, read_anchors
from cockpit.changelog.journal import Journal, JournalWriteError, read_session

REAL_FSYNC = os.fsync


def grouped(tmp_path: Path, change_id: str) -> Journal:
    journal = minute_journal(tmp_path, change_id)
    journal.group_commit = True
    return journal


def test_a_burst_of_appends_is_written_in_order_with_fewer_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs: list[int] = []

    def counted(fd: int) -> None:
        fsyncs.append(fd)
        REAL_FSYNC(fd)

    journal = grouped(tmp_path, "CHG-BURST")
    monkeypatch.setattr(os, "fsync", counted)
    acked: list[int] = []
    journal.acknowledged.append(acked.append)

    async def burst() -> None:
        for i in range(200):
            journal.append("note", note=f"n{i}")
            if i % 20 == 0:
                await asyncio.sleep(0)  # the loop turns: the flush task runs beside the appends
        assert journal.last_seq == 200
        await journal.durable()
        assert journal.acknowledged_seq == 200
        # nothing more written: no more fsyncs (a flush that never saw its own progress
        # went on syncing in a loop, and a busy process made the UI's pauses a second long)
        settled = len(fsyncs)
        await asyncio.sleep(0.3)
        assert len(fsyncs) == settled, f"{len(fsyncs) - settled} fsyncs with nothing written"

    asyncio.run(burst())
    journal.close()
    log = read_session(journal.path)
    assert [e.seq for e in log.events] == list(range(1, 201))
    assert [e.note for e in log.events] == [f"n{i}" for i in range(200)]
    assert log.chain.broken_at is None and log.chain.chained
    assert 1 <= len(fsyncs) < 50, f"{len(fsyncs)} fsyncs for 200 appends"
    assert acked == sorted(acked) and acked[-1] == 200


def test_acknowledgement_waits_for_the_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    started = threading.Event()

    def held(fd: int) -> None:
        started.set()
        assert gate.wait(10), "the test never let the fsync go"
        REAL_FSYNC(fd)

    journal = grouped(tmp_path, "CHG-ACK")
    monkeypatch.setattr(os, "fsync", held)
    anchors = tmp_path / "anchors"
    journal.anchors = AnchorSinks(file=str(anchors))
    acked: list[int] = []
    journal.acknowledged.append(acked.append)

    async def scenario() -> None:
        first = journal.append("note", note="first")
        second = journal.append("note", note="second")
        # written, in order, readable by anyone at once, though not yet acknowledged
        assert [e.note for e in read_session(journal.path).events] == ["first", "second"]
        waiting = asyncio.ensure_future(journal.durable(second.seq))
        await asyncio.to_thread(started.wait, 10)
        await asyncio.sleep(0.05)
        assert not waiting.done(), "acknowledged before its fsync returned"
        assert journal.acknowledged_seq == 0 and not journal.is_acknowledged(first.seq)
        assert acked == [] and not anchors.exists(), "anchored or told before the fsync"
        gate.set()
        await asyncio.wait_for(waiting, 10)
        assert journal.acknowledged_seq == 2 and journal.is_acknowledged(first.seq)
        assert acked == [2]

    asyncio.run(scenario())
    journal.close()
    log = read_session(journal.path)
    assert read_anchors(anchors, "CHG-ACK") == [(2, log.chain.head)]


def test_a_failed_fsync_is_never_acknowledged_and_stops_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = grouped(tmp_path, "CHG-EIO")

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    async def scenario() -> None:
        journal.append("note", note="before")
        await journal.durable()
        monkeypatch.setattr(os, "fsync", failing)
        lost = journal.append("note", note="lost")
        with pytest.raises(JournalWriteError, match="could not sync"):
            await journal.durable(lost.seq)
        assert journal.acknowledged_seq == 1
        with pytest.raises(JournalWriteError, match="nothing more is recorded"):
            journal.append("note", note="after")

    asyncio.run(scenario())
    monkeypatch.setattr(os, "fsync", REAL_FSYNC)
    journal.close()


def test_outside_a_loop_an_append_is_acknowledged_when_it_returns(tmp_path: Path) -> None:
    journal = grouped(tmp_path, "CHG-SYNC")
    event = journal.append("note", note="at once")
    assert journal.acknowledged_seq == event.seq == 1

    async def in_loop() -> int:
        return journal.append("note", note="in a loop").seq

    seq = asyncio.run(in_loop())  # the loop ended with its flush maybe pending: synced here
    journal.append("note", note="after the loop")
    assert journal.acknowledged_seq == 3 and seq == 2
    journal.close()
    assert [e.seq for e in read_session(journal.path).events] == [1, 2, 3]
