"""The change log on real files: round trip, torn tails, locks, concurrent writers, full disk, follower."""

from __future__ import annotations

import errno
import multiprocessing
import os
import re
import subprocess
import tomllib
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cockpit.changelog.events import SCHEMA_VERSION, EventKind
from cockpit.changelog.journal import (
    HEADER_END,
    Journal,
    JournalCorrupt,
    JournalDamaged,
    JournalFollower,
    JournalWriteError,
    SessionHeader,
    SessionLocked,
    read_artifact,
    read_session,
    render_event,
    seq_key,
    to_toml_value,
    validate_change_id,
)
from cockpit.errors import BadInput, CockpitError

T0 = datetime(2026, 8, 5, 22, 0, tzinfo=UTC)


def header(change_id: str = "CHG-1042", **over: object) -> SessionHeader:
    fields: dict[str, object] = {
        "change_id": change_id,
        "runbook_id": "driver-upgrade-r580",
        "runbook_sha256": "ab" * 32,
        "runbook_path": "checklists/driver-upgrade-r580.toml",
        "operator": "alice",
        "hosts": ["gpu01", "gpu02"],
        "parameters": {"target_branch": "580", "wave_size": 4, "reboot": True},
        "created_at": T0,
    }
    fields.update(over)
    return SessionHeader.model_validate(fields)


def ticking_clock(start: datetime = T0):
    state = {"n": 0}

    def clock() -> datetime:
        state["n"] += 1
        return start + timedelta(seconds=state["n"])

    return clock


RICH_FACTS = {
    "command": "apt-get install -y 'nvidia-driver-580'",
    "stdout": 'line one\nline "two"\ttabbed \\ back\x01ctl ünïcode',
    "exit_status": 0,
    "ok": True,
    "duration_s": 12.25,
    "dropped": None,
    "when": datetime(2026, 8, 5, 22, 1, tzinfo=UTC),
    "day": date(2026, 8, 5),
    "codes": [79, None, 48],
    "nested": {"a": {"b": [1, 2]}, "empty": {}, "gone": None},
    "gpus": [{"index": 0, "uuid": "GPU-1", "mem": {"total": 81559}}, {"index": 1, "uuid": None}],
    "matrix": [[1, 2], [3]],
    "small_aot": [{"x": 1}, {"x": 2}],
    "tuple": ("a", "b"),
    "set": {"b", "a"},
    "kind": EventKind.PROBE,
}


def test_round_trip_and_whole_file_is_one_toml_document(tmp_path: Path) -> None:
    with Journal.create(tmp_path, header(), clock=ticking_clock()) as journal:
        started = journal.append(EventKind.SESSION_STARTED)
        probe = journal.append("probe", node="gpu01", facts=RICH_FACTS)
        note = journal.append(EventKind.NOTE, note="window opened", actor="bob")
        # each append leaves a file that parses as one document
        whole = tomllib.loads(journal.path.read_text())
        assert list(whole["events"]) == [seq_key(1), seq_key(2), seq_key(3)]

    log = read_session(tmp_path / "CHG-1042.toml")
    assert log.torn is None
    assert log.header == header()
    assert log.events == [started, probe, note]
    assert [e.seq for e in log.events] == [1, 2, 3]
    assert note.actor == "bob" and started.actor == "alice"
    assert started.ts == T0 + timedelta(seconds=1)
    facts = probe.facts_as_written()
    assert "dropped" not in facts and facts["codes"] == [79, 48]
    assert facts["nested"] == {"a": {"b": [1, 2]}, "empty": {}}
    assert facts["gpus"] == [{"index": 0, "uuid": "GPU-1", "mem": {"total": 81559}}, {"index": 1}]
    assert facts["set"] == ["a", "b"] and facts["tuple"] == ["a", "b"] and facts["kind"] == "probe"
    assert facts["when"] == datetime(2026, 8, 5, 22, 1, tzinfo=UTC) and facts["day"] == date(2026, 8, 5)
    assert facts["stdout"] == RICH_FACTS["stdout"]
    # the whole file, read by plain tomllib, holds the same facts
    assert log.path is not None
    assert tomllib.loads(log.path.read_text())["events"][seq_key(2)]["facts"] == facts


def test_blocks_appended_one_by_one_parse_as_one_document(tmp_path: Path) -> None:
    """Rendered alone and concatenated, blocks with lists of tables still make one valid document."""
    path = tmp_path / "CHG-2.toml"
    Journal.create(tmp_path, header("CHG-2"), clock=ticking_clock()).close()
    shapes: list[dict[str, Any]] = [
        {"gpus": [{"index": 0, "x": {"y": 1}}, {"index": 1}]},
        {"pairs": [{"a": 1}, {"a": 2}]},
        {"deep": {"list": [{"k": [{"z": 1}]}]}},
        {},
    ]
    for i, facts in enumerate(shapes, start=1):
        with Journal.open_for_append(path, "alice", clock=ticking_clock()) as journal:
            journal.append(EventKind.PROBE, note=f"n{i}", facts=facts)
        doc = tomllib.loads(path.read_text())
        assert len(doc["events"]) == i
        assert doc["events"][seq_key(i)].get("facts", {}) == to_toml_value(facts)
    assert [e.note for e in read_session(path).events] == ["n1", "n2", "n3", "n4"]


def test_naive_datetime_and_bytes_are_refused_before_writing(tmp_path: Path) -> None:
    with Journal.create(tmp_path, header()) as journal:
        size = journal.path.stat().st_size
        with pytest.raises(ValueError, match="naive"):
            journal.append(EventKind.PROBE, facts={"at": datetime(2026, 1, 1)})  # noqa: DTZ001 - a naive time is what is refused
        with pytest.raises(ValueError, match="store_artifact"):
            journal.append(EventKind.PROBE, facts={"raw": b"\x00"})
        assert journal.path.stat().st_size == size
        assert journal.append(EventKind.NOTE).seq == 1


def test_create_refuses_existing_and_bad_change_ids(tmp_path: Path) -> None:
    Journal.create(tmp_path, header()).close()
    with pytest.raises(BadInput, match="already exists"):
        Journal.create(tmp_path, header())
    for bad in ("../etc", "-x", "", "a b", "x" * 65, "a/b"):
        with pytest.raises(BadInput):
            validate_change_id(bad)
        with pytest.raises(ValueError):
            header(bad)
    assert validate_change_id("CHG-1042.r2_b") == "CHG-1042.r2_b"


def test_operator_lock_names_the_holder_and_reviewers_still_append(tmp_path: Path) -> None:
    operator = Journal.create(tmp_path, header())
    operator.append(EventKind.SESSION_STARTED)
    with pytest.raises(SessionLocked) as info:
        Journal.open_for_append(operator.path, "mallory")
    message = str(info.value)
    assert "\n" not in message
    assert "CHG-1042" in message and "alice" in message and f"pid {os.getpid()}" in message
    assert isinstance(info.value, CockpitError)
    with Journal.open_for_append(operator.path, "bob", exclusive=False) as reviewer:
        signoff = reviewer.append(EventKind.SIGNOFF, stage="plan")
    assert signoff.seq == 2 and signoff.actor == "bob"
    # the operator learns of the reviewer's event under the lock: seq stays dense
    assert operator.append(EventKind.NOTE).seq == 3
    operator.close()
    # once the operator's process is gone, the operator may take the session up again
    with Journal.open_for_append(operator.path, "alice") as takeover:
        assert takeover.append(EventKind.SESSION_RESUMED).seq == 4
    # ... and nobody else may write what moves the window, under any spelling
    with Journal.open_for_append(operator.path, "carol") as other, pytest.raises(ValueError, match="only the operator"):
        other.append(EventKind.SESSION_RESUMED)


def _append_many(path: str, actor: str, count: int) -> None:
    with Journal.open_for_append(path, actor, exclusive=False) as journal:
        for i in range(count):
            journal.append(EventKind.NOTE, note=f"{actor}-{i}")  # a kind a reviewer may write too


def test_two_processes_append_concurrently_with_dense_ordered_seqs(tmp_path: Path) -> None:
    Journal.create(tmp_path, header()).close()
    path = str(tmp_path / "CHG-1042.toml")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(path, actor, 200)) for actor in ("alice", "bob")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    log = read_session(path)
    assert log.torn is None
    assert [e.seq for e in log.events] == list(range(1, 401))
    for actor in ("alice", "bob"):
        mine = [e.note for e in log.events if e.actor == actor]
        assert mine == [f"{actor}-{i}" for i in range(200)]  # each writer's own order kept
    assert len(tomllib.loads(Path(path).read_text())["events"]) == 400


def _last_block_bounds(path: Path) -> tuple[int, int]:
    """(start, end) of the last event block: it starts just past the previous block's trailer."""
    data = path.read_bytes()
    trailers = list(re.finditer(rb"^# end of event \d+, crc32 [0-9a-f]{8}\n", data, re.MULTILINE))
    return trailers[-2].end(), len(data)


@pytest.mark.parametrize(
    "facts",
    [{}, {"stdout": "x" * 40, "codes": [1, 2, 3]}, {"gpus": [{"index": 0, "m": {"t": 1}}, {"index": 1}]}],
    ids=["bare", "scalars-and-array", "list-of-tables"],
)
def test_torn_tail_at_every_byte_of_the_last_block(tmp_path: Path, facts: dict) -> None:
    with Journal.create(tmp_path, header(), clock=ticking_clock()) as journal:
        first = journal.append(EventKind.SESSION_STARTED)
        journal.append(EventKind.PROBE, node="gpu01", facts=facts)
    path = journal.path
    full = path.read_bytes()
    start, end = _last_block_bounds(path)
    torn_path = tmp_path / "torn.toml"
    for cut in range(start, end - 1):
        torn_path.write_bytes(full[:cut])
        log = read_session(torn_path)
        assert log.events == [first], cut
        if cut == start:
            assert log.torn is None
        else:
            assert log.torn is not None and (log.torn.offset, log.torn.length) == (start, cut - start), cut
    # only the trailer's newline missing: the block was complete, so acknowledged; never moved aside by itself
    torn_path.write_bytes(full[: end - 1])
    with pytest.raises(JournalDamaged, match=r"event 2 .*last byte is missing") as cut_info:
        read_session(torn_path)
    assert cut_info.value.seq == 2
    # a flipped byte inside the complete last block is damage to an acknowledged block, not a torn tail
    damaged = bytearray(full)
    damaged[start + 5] ^= 0x20
    torn_path.write_bytes(bytes(damaged))
    with pytest.raises(JournalDamaged, match=r"event 2 .*checksum") as info:
        read_session(torn_path)
    assert info.value.seq == 2
    with pytest.raises(JournalDamaged):  # and nothing is appended after it
        Journal.open_for_append(torn_path, "alice")


def test_damage_before_the_last_block_is_corruption(tmp_path: Path) -> None:
    with Journal.create(tmp_path, header()) as journal:
        for _ in range(3):
            journal.append(EventKind.NOTE, note="hello")
    data = bytearray(journal.path.read_bytes())
    second = data.find(b"[events.000002]")
    data[second + 30] ^= 0x01
    journal.path.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt, match="damaged"):
        read_session(journal.path)


def test_resuming_writer_moves_the_torn_tail_aside(tmp_path: Path) -> None:
    with Journal.create(tmp_path, header(), clock=ticking_clock()) as journal:
        journal.append(EventKind.SESSION_STARTED)
        journal.append(EventKind.NOTE, note="about to crash")
    path = journal.path
    start, _end = _last_block_bounds(path)
    full = path.read_bytes()
    path.write_bytes(full[: start + 40])  # the crash tore the second block
    with Journal.open_for_append(path, "alice") as resumed:
        assert (
            resumed.last_seq == 3
        )  # the move aside is recorded (seq 3); seq 2, which the torn bytes named, is skipped
        again = resumed.append(EventKind.SESSION_RESUMED)
    assert again.seq == 4
    kept = tmp_path / "CHG-1042" / f"torn-{start}.bin"
    assert kept.read_bytes() == full[start : start + 40]
    log = read_session(path)
    assert log.torn is None and log.chain.ok and log.chain.gaps == ((2, 2),)
    assert [e.kind for e in log.events] == [EventKind.SESSION_STARTED, EventKind.NOTE, EventKind.SESSION_RESUMED]
    repair = log.events[1]
    assert (
        repair.actor == "cockpit"
        and f"torn-{start}.bin" in (repair.note or "")
        and "seq 2 is not used" in (repair.note or "")
    )
    # torn again at the same offset (the resumed writer crashed too): the first copy is kept
    path.write_bytes(path.read_bytes()[:start] + b"\n[events.000002]\nseq = 2\n")
    Journal.open_for_append(path, "alice").close()
    assert kept.read_bytes() == full[start : start + 40]
    assert (tmp_path / "CHG-1042" / f"torn-{start}-2.bin").read_bytes() == b"\n[events.000002]\nseq = 2\n"
    again_log = read_session(path)
    assert again_log.events[:1] == log.events[:1] and f"torn-{start}-2.bin" in (again_log.events[1].note or "")


def test_full_disk_is_a_write_error_and_nothing_half_written_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal.create(tmp_path, header())
    ok = journal.append(EventKind.SESSION_STARTED)
    size = journal.path.stat().st_size
    real_write = os.write

    def half_then_enospc(fd: int, data: bytes) -> int:
        if fd == journal._fd:  # the change log itself: write half, as a filling disk does, then fail
            real_write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", half_then_enospc)
    with pytest.raises(JournalWriteError, match="No space left") as info:
        journal.append(EventKind.NOTE, note="lost")
    assert "\n" not in str(info.value)
    assert journal.path.stat().st_size == size  # the half block was rolled back
    monkeypatch.undo()
    after = journal.append(EventKind.NOTE, note="kept")
    journal.close()
    log = read_session(journal.path)
    assert log.events == [ok, after] and after.seq == 2 and log.torn is None


@pytest.fixture
def tiny_tmpfs(tmp_path: Path):
    """A 64 KiB tmpfs, where the kernel lets us mount one (root in a container usually may)."""
    mountpoint = tmp_path / "tiny"
    mountpoint.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mountpoint)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    yield mountpoint
    subprocess.run(["umount", str(mountpoint)], check=True)


def test_a_really_full_disk_loses_nothing_acknowledged(tiny_tmpfs: Path) -> None:
    journal = Journal.create(tiny_tmpfs, header())
    acked = []
    with pytest.raises(JournalWriteError, match="No space left") as info:
        for i in range(10_000):
            acked.append(journal.append(EventKind.PROBE, note=f"n{i}", facts={"stdout": "x" * 3000}))
    assert "\n" not in str(info.value) and len(acked) > 5
    journal.close()
    log = read_session(tiny_tmpfs / "CHG-1042.toml")
    assert log.events == acked and log.torn is None


def test_newer_schema_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "CHG-9.toml"
    Journal.create(tmp_path, header("CHG-9")).close()
    text = path.read_text().replace(f"schema_version = {SCHEMA_VERSION}", f"schema_version = {SCHEMA_VERSION + 1}")
    path.write_text(text)
    with pytest.raises(BadInput) as info:
        read_session(path)
    assert f"newer cockpit (schema {SCHEMA_VERSION + 1}); this one reads up to {SCHEMA_VERSION}" in str(info.value)
    with pytest.raises(BadInput, match="newer cockpit"):
        JournalFollower(path).poll()


def test_missing_and_foreign_files_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"nope\.toml: no such file"):
        read_session(tmp_path / "nope.toml")
    with pytest.raises(BadInput, match="is a directory, expected a session file"):
        read_session(tmp_path)
    other = tmp_path / "other.toml"
    other.write_text('title = "not a change log"\n')
    with pytest.raises(BadInput, match="not a cockpit change log"):
        read_session(other)


def test_follower_returns_only_new_events_and_waits_for_partial_blocks(tmp_path: Path) -> None:
    journal = Journal.create(tmp_path, header(), clock=ticking_clock())
    follower = JournalFollower(journal.path)
    assert follower.poll() == [] and follower.header == header()
    a = journal.append(EventKind.SESSION_STARTED)
    b = journal.append(EventKind.NOTE, note="x")
    assert follower.poll() == [a, b]
    assert follower.poll() == []
    c = journal.append(EventKind.NOTE, note="y")
    # a half-written block at the end is left for the next poll
    block = render_event(c.model_copy(update={"seq": 4, "note": "z"}))
    with open(journal.path, "ab") as fh:
        fh.write(block[:25])
    offset_before = follower.offset
    assert follower.poll() == [c]
    assert follower.torn is not None and follower.offset > offset_before
    with open(journal.path, "ab") as fh:
        fh.write(block[25:])
    (d,) = follower.poll()
    assert d.seq == 4 and d.note == "z" and follower.torn is None
    journal.close()


def test_follower_parses_only_new_bytes(tmp_path: Path) -> None:
    """Corrupting bytes the follower already consumed does not affect later polls: it never rereads them."""
    journal = Journal.create(tmp_path, header())
    follower = JournalFollower(journal.path)
    journal.append(EventKind.NOTE, note="first")
    assert len(follower.poll()) == 1
    data = bytearray(journal.path.read_bytes())
    data[: len(HEADER_END)] = b"#" * len(HEADER_END)  # wreck the header in place (same size)
    journal.path.write_bytes(bytes(data))
    second = journal.append(EventKind.NOTE, note="second")
    assert follower.poll() == [second]
    journal.close()


def test_artifacts_are_content_addressed_and_checked(tmp_path: Path) -> None:
    with Journal.create(tmp_path, header()) as journal:
        output = "NVRM: loading module\n" * 1000
        digest = journal.store_artifact(output)
        assert journal.store_artifact(output.encode()) == digest  # idempotent
        journal.append(
            EventKind.STEP_FINISHED, node="gpu01", stage="upgrade", step="install", facts={"artifact": digest}
        )
    target = tmp_path / "CHG-1042" / "artifacts" / digest
    assert target.read_text() == output
    assert read_artifact(journal.path, digest) == output.encode()
    assert not list(target.parent.glob("*.tmp"))
    target.write_text("tampered")
    with pytest.raises(BadInput, match="does not match"):
        read_artifact(journal.path, digest)
    with pytest.raises(BadInput, match="bad artifact reference"):
        read_artifact(journal.path, "../../etc/passwd")
