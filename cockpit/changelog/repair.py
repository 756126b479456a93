"""A person's repair of a damaged change log (``cockpit verify --repair``).

Nothing acknowledged is ever dropped by the cockpit on its own: a damaged block, a
broken link or an invalid signature stops appends until a person decides. The repair
moves everything from the first untrustworthy block to the end aside (a copy in the
session folder, ``damaged-<offset>.bin``), then records in the log who did it and
what was removed, signed when the person gives a key. The seqs removed are never
used again (the record's block carries ``gap``).
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from cockpit.changelog.blocks import JournalDamaged
from cockpit.changelog.files import OperatorLock, fsync_dir, open_own_file, session_paths, write_atomically
from cockpit.changelog.journal import Journal
from cockpit.changelog.reader import SessionLog, parse_session_bytes
from cockpit.changelog.sshsig import Signer
from cockpit.errors import BadInput

_SEQ = re.compile(rb"^\[events\.(\d+)[\].]", re.MULTILINE)


def _cut_offset(data: bytes, where: str, seq: int) -> int | None:
    """Where the untrustworthy part starts: the damaged block, or for a broken link the
    block before it too (either may be the edited one); None when a torn tail is all."""
    try:
        log: SessionLog = parse_session_bytes(data, where, None)
    except JournalDamaged as exc:
        return exc.offset
    starts = {block.seq: block.start for block in log.blocks}
    if log.chain.broken_at == seq and log.chain.why and "chained to" in log.chain.why:
        return starts.get(seq - 1, starts.get(seq))
    if seq in starts:
        return starts[seq]
    return None  # past the last block: a torn tail, which opening the journal moves aside


def repair(path: Path, seq: int, actor: str, signer: Signer | None) -> str:
    """Move the log's bytes from the block of ``seq`` (see :func:`_cut_offset`) aside and
    record that as ``actor``; returns what was done, in words."""
    lock_path, folder, _ = session_paths(path)
    lock = OperatorLock(lock_path, path.stem, actor)  # no operator may be appending meanwhile
    try:
        fd = open_own_file(path, os.O_RDWR, "a change log")  # never through a planted link
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0)
            offset = _cut_offset(data, str(path), seq)
            removed = data[offset:] if offset is not None else b""
            if offset is not None:
                folder.mkdir(exist_ok=True)
                target = folder / f"damaged-{offset}.bin"
                if target.exists() and target.read_bytes() != removed:
                    raise BadInput(f"{target} exists with other bytes; move it away first")
                if not target.exists():
                    write_atomically(target, removed, replace=False)
                os.ftruncate(fd, offset)
                os.fsync(fd)
                fsync_dir(folder)
        finally:
            os.close(fd)
    finally:
        lock.release()
    with Journal.open_for_append(path, actor, signer=signer) as journal:
        if offset is None:
            return f"{path}: a torn tail was moved aside (the log records it); nothing else removed"
        seqs = [int(m.group(1)) for m in _SEQ.finditer(removed)]
        span = f"seq {min(seqs)}-{max(seqs)}" if seqs else "no complete seq"
        note = (
            f"log repaired by {actor}: {len(removed)} bytes from byte {offset} ({span}) moved aside to "
            f"damaged-{offset}.bin after verify failed at seq {seq}"
        )
        event = journal.record_repair(note, max(seqs, default=0))
    return f"{path}: {note}; recorded as seq {event.seq}"
