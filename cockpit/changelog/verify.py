"""Checking a change log's integrity: its hash chain (:mod:`.chain`) and every signature
(:mod:`.sshsig`), block by block, naming the first seq that fails and why.

What a signature covers, exactly: the block's *signed bytes*, from its leading newline
through the last line of the event's own tables (``[events.NNNNNN]`` and its sub-tables,
``prev`` included), i.e. everything the CRC covers except the ``[events.NNNNNN.sig]``
table that follows. ``prev`` binds a signed event to the whole history before it.

A process with a key signs every event it writes, the cockpit's own (probes, automatic
triggers) with the operator's key, as the process acting for her; when signatures are
required (the site's word, :mod:`.trust`), an unsigned event is a failure. A chain can be
recomputed by whoever can rewrite the file, so a head held elsewhere (``--head``, or the
anchors of ``--anchor``, :mod:`.anchor`) is what proves a log was not cut or rewritten
after it, and signatures are what prove who wrote an event.
"""

from __future__ import annotations

import base64
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from cockpit.changelog.blocks import JournalDamaged, loads_block, parse_header
from cockpit.changelog.chain import (
    SESSION_MAX_BYTES,
    BlockMeta,
    ChainCheck,
    ChainReport,
    SignatureTally,
    digest,
    trailers,
    worker_count,
)
from cockpit.changelog.events import Event
from cockpit.changelog.header import SessionHeader
from cockpit.changelog.reader import (
    LogReading,
    SessionLog,
    gc_paused,
    parse_session_bytes,
    salvage_session_bytes,
    session_signers,
    start_reading,
)
from cockpit.changelog.spread import SPREAD_FROM_BYTES as _SPREAD_FROM_BYTES
from cockpit.changelog.spread import SpreadChecks
from cockpit.changelog.sshsig import AllowedSigner, armor, read_allowed_signers
from cockpit.errors import BadInput, read_user_file


@dataclass(frozen=True)
class Verification:
    """The verdict on one change log."""

    chain: ChainReport | None  # None when a damaged block stopped the read
    #: seq -> the principal whose allowed key validly signed it (the fold's input for sign-offs)
    signed: dict[int, str] = field(default_factory=dict)
    unsigned: int = 0  # events by a person without a signature
    invalid: int = 0
    failures: tuple[tuple[int, str], ...] = ()  # (seq, why), in seq order
    signers_checked: bool = False  # an allowed_signers file was given
    events: int = 0
    #: a log read past its damage (:func:`.reader.salvage_session_bytes`): each seq not read as written
    damaged: tuple[tuple[int, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures and self.chain is not None and self.chain.chained

    @property
    def first_failure(self) -> tuple[int, str] | None:
        return self.failures[0] if self.failures else None

    def chain_words(self) -> str:
        if self.chain is None:  # a damaged block stopped the read: that is where the chain ends
            seq, why = self.failures[0]
            return f"chain: BROKEN at seq {seq}: {why}"
        return self.chain.describe()

    def signature_words(self) -> str:
        whose = "" if self.signers_checked else " (signers not checked: no allowed_signers)"
        return f"signatures: {len(self.signed)} valid, {self.unsigned} unsigned, {self.invalid} invalid{whose}"

    last_seq: int = 0

    def head_words(self) -> str:
        """The head as ``--head`` takes it back: ``SEQ:sha256:...``."""
        return f"head {self.last_seq}:{self.chain.head}" if self.chain is not None else "head unknown (damaged)"

    def summary(self) -> str:
        """One line: chain, signatures, head (the first line of exports, replay and review)."""
        line = f"{self.chain_words()}; {self.signature_words()}; {self.head_words()}"
        if self.failures and self.chain is not None:
            seq, why = self.failures[0]
            line += f"; FAILED at seq {seq}: {why}"
        if self.damaged:  # every damaged seq, not only the first: what the rest of the reading lacks
            line += "; DAMAGED, read past: " + "; ".join(f"seq {seq} {why}" for seq, why in self.damaged)
        return line


def verify_log(
    log: SessionLog, data: bytes, allowed: list[AllowedSigner] | None, anchor: Anchors = None
) -> Verification:
    """Check the chain and every signature of ``log`` (read from ``data``)."""
    tally = SignatureTally()
    header = log.header
    tally.add(log.events, log.blocks, data, 0, allowed, require=header.require_signatures, operator=header.operator)
    return _verdict(log, data, tally, allowed, anchor, len(log.events))


def _verdict(
    log: SessionLog,
    data: bytes,
    tally: SignatureTally,
    allowed: list[AllowedSigner] | None,
    anchor: Anchors,
    events: int,
) -> Verification:
    failures: list[tuple[int, str]] = []
    if log.chain.broken_at is not None:
        failures.append((log.chain.broken_at, log.chain.why or "chain broken"))
    failures.extend(tally.failures)
    # a complete block that is not a readable event: its bytes are as written (the chain
    # went through it) but nothing in it can be checked or folded
    failures.extend((seq, f"unreadable event, left out of the fold: {why}") for seq, why in log.unreadable)
    failures.extend(log.damaged)
    if log.torn is not None:
        seq = max(log.torn.seq_seen, log.last_seq + 1)
        failures.append((seq, f"{log.torn.describe()}: not a complete block"))
    failures.extend(_check_anchors(_anchors(anchor), log, data))
    return Verification(
        chain=log.chain,
        signed=tally.valid,
        unsigned=tally.unsigned,
        invalid=tally.invalid,
        failures=tuple(sorted(failures, key=lambda f: f[0])),
        signers_checked=allowed is not None,
        events=events,
        last_seq=log.last_seq,
        damaged=log.damaged,
    )


#: a head the log must still reach, or several (every anchor a sink holds for it)
Anchors = tuple[int, str] | list[tuple[int, str]] | None


def _anchors(anchor: Anchors) -> list[tuple[int, str]]:
    if anchor is None:
        return []
    if isinstance(anchor, tuple):
        return [anchor]
    return list(dict.fromkeys(anchor))  # each head once


def _check_anchors(anchors: list[tuple[int, str]], log: SessionLog, data: bytes) -> list[tuple[int, str]]:
    """What the log says against each head it must still reach: cut before it (said once,
    for the furthest), the seq gone, or another block there."""
    if not anchors:
        return []
    out: list[tuple[int, str]] = []
    furthest = max(seq for seq, _ in anchors)
    if furthest > log.last_seq:
        out.append(
            (log.last_seq + 1, f"the log ends at seq {log.last_seq}, before seq {furthest} the anchor names (cut)")
        )
    blocks = {b.seq: b for b in log.blocks}
    view = memoryview(data)
    for seq, want in anchors:
        if seq > log.last_seq:
            continue
        block = blocks.get(seq)
        if block is None:
            out.append((seq, f"seq {seq} the anchor names is not in the log"))
        elif digest(view[block.start : block.end]) != want:
            out.append((seq, "not the block the anchor names (rewritten after it was recorded)"))
    return out


def parse_anchor(text: str) -> tuple[int, str]:
    match = re.fullmatch(r"(\d+):(sha256:[0-9a-f]{64})", text.strip())
    if match is None:
        raise BadInput(f"--head {text!r}: expected SEQ:sha256:HEX (as an export prints it)")
    return int(match.group(1)), match.group(2)


def verify_file(
    path: str | os.PathLike[str],
    allowed: list[AllowedSigner] | None,
    anchor: Anchors = None,
    *,
    signers_from_header: bool = False,
    keep_blocks: bool = True,
    require: bool | None = None,
    fold: Callable[[SessionHeader, list[Event]], None] | None = None,
    spread: SpreadChecks | None = None,
) -> tuple[Verification, SessionLog | None, bytes]:
    """Read and verify the log at ``path``; a damaged block is a failure at its seq, not an error.

    ``signers_from_header``: with no ``allowed`` given, check against the allowed_signers
    file the session recorded (read before the log is parsed: the log is read once).
    ``keep_blocks``: False when no block is looked at afterwards (the log returned then
    holds only the last block's record: 100,000 of them cost a spread read's parent a
    second to take back from its readers). ``require``: every event must be signed (the
    site's word, :mod:`.trust`); None: as the header says. ``fold``: handed every event in
    order as it is read (the log is then read once, here, its signatures checked by other
    processes meanwhile). ``spread``: those processes, started already on the file's bytes
    (:meth:`.spread.SpreadChecks.start`; the log is then read from them)."""
    path = Path(path)
    if spread is not None:
        data = spread.data
    else:
        data = read_user_file(path, "a session file", max_bytes=SESSION_MAX_BYTES, no_links=True)
    if allowed is None and signers_from_header:
        raw, _ = parse_header(data, str(path))
        recorded = raw.get("allowed_signers")
        if isinstance(recorded, str) and recorded:
            allowed = read_allowed_signers(recorded)
    try:
        with gc_paused():  # a fold makes many objects and no garbage
            reading = read_for_verify(
                data,
                str(path),
                allowed,
                keep_blocks=keep_blocks or anchor is not None,
                require=require,
                fold=fold,
                spread=spread,
            )
    except JournalDamaged as exc:
        damaged = Verification(chain=None, failures=((exc.seq, str(exc)),), signers_checked=allowed is not None)
        return damaged, None, data
    assert reading.tally is not None
    log = reading.log(path)
    return _verdict(log, data, reading.tally, allowed, anchor, reading.count), log, data


#: past this many bytes of blocks, verify spreads the work over the cores: a fold's read has
#: its signatures checked by forked workers (:mod:`.spread`), a plain one reads the log in as
#: many ranges as there are cores, each in a forked process (parse, chain and signatures of a
#: 100,000-event log took most of 10 s of CPU on one core)
SPREAD_FROM_BYTES = _SPREAD_FROM_BYTES

#: what the forked readers share (inherited, never sent): the bytes, the reading to copy, the ranges
_SPREAD: tuple[bytes, LogReading, list[tuple[int, int, str, int]]] | None = None


def read_for_verify(
    data: bytes,
    where: str,
    allowed: list[AllowedSigner] | None,
    *,
    keep_blocks: bool = True,
    require: bool | None = None,
    fold: Callable[[SessionHeader, list[Event]], None] | None = None,
    spread: SpreadChecks | None = None,
) -> LogReading:
    """Read ``data`` once, checking the chain and every signature as it goes (only the last
    event is kept, the count of all of them, and every block's record); a big log is read
    in ranges, one per core, each from the link and seq where the one before it ends, or,
    for a ``fold``, here in order, its signatures checked by forked workers meanwhile
    (``spread``, when started already). A damaged block is :class:`JournalDamaged`, the
    first in the file."""
    global _SPREAD
    reading, header_end = start_reading(data, where)
    reading.tally, reading.signers, reading.only = SignatureTally(), allowed, None
    reading.require = reading.header.require_signatures if require is None else require
    reading.keep_events = False
    reading.keep_blocks = keep_blocks
    workers = worker_count()
    reading.consume = fold
    if fold is not None and spread is not None:
        return _read_folding(reading, data, header_end, allowed, spread)
    if len(data) - header_end < SPREAD_FROM_BYTES or workers < 2:
        reading.read(data, header_end, len(data))
        return reading
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if fold is not None:
        with SpreadChecks(data, header_end, workers) as started:
            return _read_folding(reading, data, header_end, allowed, started)

    ranges = _ranges(data, header_end, workers)
    _SPREAD = (data, reading, ranges)
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(len(ranges), mp_context=context, initializer=_in_worker) as pool:
            parts = list(pool.map(_read_range, range(len(ranges))))
    finally:
        _SPREAD = None
    for part in parts:
        if isinstance(part, tuple):  # what went wrong in that range, the first in the file
            message, seq, offset = part
            raise JournalDamaged(message, seq=seq, offset=offset)
        _merge(reading, part)
    return reading


def _read_folding(
    reading: LogReading, data: bytes, header_end: int, allowed: list[AllowedSigner] | None, spread: SpreadChecks
) -> LogReading:
    """A big log read once, here, in order (parsed, chained, each chunk's events handed to
    the fold), its signatures checked by forked workers meanwhile (:mod:`.spread`): one
    parse of the file, where the ranges of :func:`read_for_verify` would need a second one
    to fold. The workers' answers are taken once the read is done, share by share as they
    come in, for the blocks whose signature table is where the journal writes it; any
    other is checked here as it is read."""
    assert reading.tally is not None
    deferred: list[tuple[int, int, int, str]] = []
    reading.defer = deferred  # read in order: reader.FOLD_CHUNK_BYTES at a time
    try:
        reading.read(data, header_end, len(data))
    finally:
        reading.defer = None
    spread.settle(deferred, allowed, reading.header.operator, reading.tally)
    return reading


def _ranges(data: bytes, header_end: int, n: int) -> list[tuple[int, int, str, int]]:
    """``n`` ranges of about equal size, each (start, stop, the hash of the block before it,
    that block's seq), split just past a block's trailer."""
    out: list[tuple[int, int, str, int]] = []
    start, before, seq = header_end, digest(memoryview(data)[:header_end]), 0
    size = (len(data) - header_end) // n
    for k in range(1, n):
        split = next(trailers(data, max(start, header_end + k * size)), None)
        if split is None or split.end() >= len(data):
            break
        block_start = _block_start(data, split.start(), start)
        out.append((start, split.end(), before, seq))
        start, before, seq = split.end(), digest(memoryview(data)[block_start : split.end()]), int(split.group(1))
    out.append((start, len(data), before, seq))
    return out


def _block_start(data: bytes, trailer_at: int, floor: int) -> int:
    """Where the block whose trailer is at ``trailer_at`` starts: just past the trailer before it."""
    at = trailer_at
    while True:
        at = data.rfind(b"# end of event ", floor, at)
        if at < 0:
            return floor
        match = next(trailers(data, at), None)
        if match is not None and match.start() == at and match.end() <= trailer_at:
            return match.end()


def _in_worker() -> None:
    """A forked reader: no pool of its own (its signatures are its share), no collector
    walking the objects it inherited."""
    import gc

    from cockpit.changelog import chain

    chain.PARALLEL_FROM = sys.maxsize
    gc.disable()


def _read_range(index: int) -> LogReading | tuple[str, int, int]:
    assert _SPREAD is not None
    data, template, ranges = _SPREAD
    start, stop, before, seq = ranges[index]
    reading = replace(
        template,
        chain=ChainCheck(before, template.chain.chained, seq),
        tally=SignatureTally(),
        expect=seq + 1,
        events=[],
        blocks=[],
        unreadable=[],
        end=start,
    )
    try:
        reading.read(data, start, stop)
    except JournalDamaged as exc:  # sent back as plain values: the exception does not pickle
        return str(exc), exc.seq, exc.offset
    return reading


def _merge(into: LogReading, part: LogReading) -> None:
    """``part`` (the range after what ``into`` holds) added to ``into``."""
    assert into.tally is not None and part.tally is not None
    into.blocks = into.blocks + part.blocks if into.keep_blocks else part.blocks or into.blocks
    into.unreadable += part.unreadable
    into.count += part.count
    into.events = part.events or into.events
    into.tally.valid.update(part.tally.valid)
    into.tally.unsigned += part.tally.unsigned
    into.tally.invalid += part.tally.invalid
    into.tally.failures = sorted(into.tally.failures + part.tally.failures, key=lambda f: f[0])
    if into.chain.broken is None:
        into.chain.broken = part.chain.broken
    into.chain.gaps += part.chain.gaps
    into.chain.head, into.chain.last_seq = part.chain.head, part.chain.last_seq
    into.expect, into.end, into.torn = part.expect, part.end, part.torn


def actor_of(log: SessionLog, data: bytes, seq: int) -> str:
    """The actor event ``seq``'s block names (read from its bytes: a verify keeps no events)."""
    block = block_of(log, seq)
    try:
        table = loads_block(data[block.start : block.end].decode())["events"]
        actor = next(iter(table.values())).get("actor")
    except (ValueError, KeyError, StopIteration, AttributeError):
        actor = None
    return actor if isinstance(actor, str) else "?"


def block_of(log: SessionLog, seq: int) -> BlockMeta:
    for block in log.blocks:
        if block.seq == seq:
            return block
    raise BadInput(f"--dump-seq {seq}: the log has no event {seq}")


def dump_signed(log: SessionLog, data: bytes, seq: int, out: Path) -> tuple[Path, Path | None]:
    """Write event ``seq``'s signed bytes (``event-N.data``) and, when signed, its armored
    SSHSIG (``event-N.sig``) for ``ssh-keygen -Y verify -n cockpit-changelog``."""
    block = block_of(log, seq)
    out.mkdir(parents=True, exist_ok=True)
    data_path = out / f"event-{seq}.data"
    data_path.write_bytes(data[block.start : block.signed_end])
    if block.sshsig is None:
        return data_path, None
    sig_path = out / f"event-{seq}.sig"
    sig_path.write_text(armor(base64.b64decode(block.sshsig)))
    return data_path, sig_path


def log_integrity(log: SessionLog, verification: Verification | None = None) -> str:
    """The one line exports, replay and review open with: the chain, the signatures, the head.

    Without a ``verification`` (the caller read the log without its bytes) the signatures
    are counted, not checked, and the line says so."""
    if verification is not None:
        return verification.summary()
    signed = sum(1 for block in log.blocks if block.sshsig is not None)
    line = (
        f"{log.chain.describe()}; signatures: {signed} present, not checked here (cockpit verify checks them); "
        f"head {log.last_seq}:{log.chain.head}"
    )
    if log.unreadable:
        seq, why = log.unreadable[0]
        line += f"; {len(log.unreadable)} unreadable event(s) left out, first seq {seq}: {why}"
    if log.torn is not None:
        line += f"; FAILED at seq {max(log.torn.seq_seen, log.last_seq + 1)}: {log.torn.describe()}"
    return line


def read_verified(path: str | os.PathLike[str]) -> tuple[SessionLog, Verification]:
    """Read a log once and verify it against the allowed signers its header names: what
    export and replay show in their first lines. A log with a damaged block is read past
    its damage (:func:`salvage_session_bytes`), each damaged seq named in the verification."""
    path = Path(path)
    data = read_user_file(path, "a session file", max_bytes=SESSION_MAX_BYTES, no_links=True)
    try:
        log = parse_session_bytes(data, str(path), path)
    except JournalDamaged:  # an auditor still gets all that can be read, the damage named first
        log = salvage_session_bytes(data, str(path), path)
    allowed = session_signers(log.header) if log.header.allowed_signers else None
    return log, verify_log(log, data, allowed)
