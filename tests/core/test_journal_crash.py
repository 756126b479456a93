"""Kill a writer with SIGKILL at random moments: the file always parses and nothing acknowledged is lost.

The writer is a forked child (forking keeps each start at a few milliseconds, so a
hundred kills fit in seconds). It appends in a loop and reports each seq on a pipe
only after ``append`` returned, exactly as the session engine treats an event as
done. Some events carry a large output so that a kill can land inside a write.
"""

from __future__ import annotations

import os
import random
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from journals import gpu01_header

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import Journal, read_session

KILLS = 100
BUDGET_S = 20.0


def _writer(path: Path, ack_fd: int) -> None:
    journal = Journal.open_for_append(path, "alice")
    i = 0
    while True:
        i += 1
        facts = {"stdout": "y" * (64_000 if i % 5 == 0 else 100), "exit_status": i}
        event = journal.append(EventKind.STEP_FINISHED, node="gpu01", stage="upgrade", step="install", facts=facts)
        os.write(ack_fd, f"{event.seq}\n".encode())


def _run_child(path: Path) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_fd)
            _writer(path, write_fd)
        finally:
            os._exit(1)
    os.close(write_fd)
    return pid, read_fd


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


@pytest.mark.slow
def test_sigkill_at_random_moments_never_loses_an_acknowledged_event(tmp_path: Path) -> None:
    header = gpu01_header("CHG-KILL", created_at=datetime(2026, 8, 5, tzinfo=UTC))
    Journal.create(tmp_path, header).close()
    path = tmp_path / "CHG-KILL.toml"
    rng = random.Random(20260805)
    acknowledged: set[int] = set()
    kills = 0
    torn_seen: set[bytes] = set()  # a torn tail may be seen twice if the next writer died before opening
    deadline = time.monotonic() + BUDGET_S
    while kills < KILLS and time.monotonic() < deadline:
        pid, ack = _run_child(path)
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status), "the writer died on its own"
        kills += 1
        acknowledged.update(int(line) for line in _read_all(ack).split())
        log = read_session(path)  # parses after every kill, minus a torn tail
        seqs = [e.seq for e in log.events]
        # dense but for the seqs a torn tail named (moved aside, recorded, never used again)
        skipped = {s for first, last in log.chain.gaps for s in range(first, last + 1)}
        assert seqs == sorted(seqs) and sorted({*seqs, *skipped}) == list(range(1, max(seqs, default=0) + 1))
        assert log.chain.ok
        missing = acknowledged - set(seqs)
        assert not missing, f"acknowledged events lost after kill {kills}: {sorted(missing)[:5]}"
        if log.torn is not None:
            torn_seen.add(path.read_bytes()[log.torn.offset :])
    assert kills >= KILLS, f"only {kills} kills fitted in {BUDGET_S}s"
    assert len(acknowledged) >= KILLS // 2  # the writers did make progress between kills
    print(f"{kills} kills, {len(acknowledged)} acknowledged, {len(torn_seen)} torn tails seen")
    # every torn tail was moved aside by the next writer (a copy each), never appended after
    final = read_session(path)
    kept = list((tmp_path / "CHG-KILL").glob("torn-*.bin")) if (tmp_path / "CHG-KILL").exists() else []
    assert len(kept) == len(torn_seen) - (final.torn is not None)
    # and the log records the moves (a kill between the move and its record loses only the record)
    repairs = [e.note for e in final.events if e.note and e.note.startswith("log repaired: a torn final block")]
    names = {p.name for p in kept}
    assert len(repairs) <= len(kept) and all(any(name in note for name in names) for note in repairs)
