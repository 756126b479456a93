"""Reading a change log: the whole file (:func:`read_session`), or a live one as it grows
(:class:`JournalFollower`). Every event is validated into its kind's class as it is read;
an older schema goes through :func:`migrate` first.
"""

from __future__ import annotations

import errno
import gc
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cockpit.changelog.blocks import (
    JournalCorrupt,
    TornTail,
    event_table,
    parse_header,
    scan_blocks,
    validate_header,
)
from cockpit.changelog.chain import (
    CHAINED_SCHEMA,
    SESSION_MAX_BYTES,
    BlockMeta,
    ChainCheck,
    ChainReport,
    SignatureTally,
    chain_words,
    digest,
    take_meta,
    trailers,
    unreadable_meta,
    worker_count,
)
from cockpit.changelog.events import SCHEMA_VERSION, Event, parse_event, parse_events
from cockpit.changelog.header import SessionHeader
from cockpit.changelog.sshsig import AllowedSigner, read_allowed_signers
from cockpit.changelog.trust import trust_for
from cockpit.errors import BadInput, read_user_file


@dataclass(frozen=True)
class SessionLog:
    """A change log as read from disk: header, the complete events in order, a torn tail if any."""

    header: SessionHeader
    events: list[Event]
    torn: TornTail | None = None
    path: Path | None = None
    #: byte offset just past the last complete block (where the next block goes)
    end_offset: int = 0
    #: what the hash chain says (unchained for a log written before it)
    chain: ChainReport = field(default_factory=lambda: ChainReport(chained=False, head=""))
    #: where each event's block lies and its integrity fields, in order
    blocks: tuple[BlockMeta, ...] = ()
    #: the schema the file was written with (before :func:`migrate`)
    schema_written: int = SCHEMA_VERSION
    #: when the session requires signatures: seq -> the principal whose allowed key validly
    #: signed that sign-off (the fold counts no other); None when it does not
    signatures: dict[int, str] | None = None
    #: complete blocks that are not readable events, (seq, why): reported, left out of ``events``
    unreadable: tuple[tuple[int, str], ...] = ()
    #: the seq of the last complete block, readable or not
    tail_seq: int = 0
    #: read past damage (:func:`salvage_session_bytes`): each seq not read as written, (seq,
    #: why: missing, out of place, its checksum or seq not holding), in seq order; the
    #: events around them are in ``events``, in seq order
    damaged: tuple[tuple[int, str], ...] = ()

    @property
    def last_seq(self) -> int:
        """The last seq the file holds (a seq is never used twice, not even an unreadable one's)."""
        return max(self.tail_seq, self.events[-1].seq if self.events else 0)


def migrate(header: dict[str, Any], events: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Bring a change log written by an older schema up to :data:`SCHEMA_VERSION`.

    Works on the raw TOML tables, before validation, one version step at a time.
    Migration notes:

    - schema 1: the first schema, written before the hash chain.
    - schema 2: every block carries ``prev`` (and, when signed, a ``sig`` table; see
      :mod:`.chain`), which the scanner takes off before validation, and the header may
      say ``require_signatures``. From 1: nothing to rewrite (a schema-1 log reads as
      unchained; its header reads as not requiring signatures).

    A step rewrites what changed (renamed keys, new required fields with their old
    meaning) and sets ``schema_version``. Files are never rewritten in place: the
    migration happens on every read.
    """
    version = header.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise JournalCorrupt(f"unknown change-log schema {version!r}")
    steps: dict[int, Callable[[dict[str, Any], list[dict[str, Any]]], tuple[dict[str, Any], list[dict[str, Any]]]]] = {
        1: _from_1
    }
    while version < SCHEMA_VERSION:
        header, events = steps[version](header, events)
        version = header["schema_version"]
    return header, events


#: events validated at a time: each chunk's raw tables are dropped once validated, so a big
#: log never holds all its raw tables and all its events at once
VALIDATE_CHUNK = 4096


@contextmanager
def gc_paused() -> Iterator[None]:
    """Reading a big log makes millions of objects and no garbage; the cyclic collector's
    passes over them took two thirds of the read of a 100,000-event log."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _from_1(header: dict[str, Any], events: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return header | {"schema_version": 2}, events


def _events_from_raw(
    raw_events: list[dict[str, Any]], where: str, bad: list[tuple[int, str]] | None = None
) -> list[Event]:
    """The events of ``raw_events``, validated; consumes the list (emptied as it goes).

    An event that does not validate is left out and named in ``bad`` (seq, why); without
    ``bad`` it raises :class:`JournalCorrupt`."""
    events: list[Event] = []
    while raw_events:
        chunk = raw_events[:VALIDATE_CHUNK]
        del raw_events[:VALIDATE_CHUNK]  # the raw tables go as soon as their events exist
        events += _validated(chunk, where, bad)
    return events


def _validated(raw_events: list[dict[str, Any]], where: str, bad: list[tuple[int, str]] | None) -> list[Event]:
    try:
        return parse_events(raw_events)
    except (ValidationError, RecursionError):
        pass  # find and name each bad event, one by one
    events = []
    for raw in raw_events:
        try:
            events.append(parse_event(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            if first["type"] == "union_tag_not_found":
                why = "kind: missing or not a string"
            else:  # the first part of the location is the kind the union chose: the rest is the field
                why = f"{'.'.join(str(p) for p in first['loc'][1:])}: {first['msg']}"
            if bad is None:
                raise JournalCorrupt(f"{where}: event {raw.get('seq')}: {why}") from None
            bad.append((int(raw["seq"]), f"not a valid event: {why}"))
        except RecursionError:
            if bad is None:
                raise JournalCorrupt(f"{where}: event {raw.get('seq')}: nested too deeply") from None
            bad.append((int(raw["seq"]), "not a valid event: nested too deeply"))
    return events


def read_session(path: str | os.PathLike[str]) -> SessionLog:
    """Read a change log: its header, every complete event, and a torn tail if there is one."""
    path = Path(path)
    data = read_user_file(path, "a session file", max_bytes=SESSION_MAX_BYTES, no_links=True)
    with gc_paused():
        return _parse_session(data, str(path), path)


def read_session_folding(
    path: str | os.PathLike[str],
    consume: Callable[[SessionHeader, list[Event]], None],
    *,
    signatures: dict[int, str] | None = None,
) -> SessionLog:
    """:func:`read_session` for a log that need not be held whole (``resume`` folds it as it
    reads): each chunk of events goes to ``consume`` with the header as soon as it is read,
    and the log returned keeps only the last event and the last block (its ``last_seq``,
    chain head and signatures hold). ``signatures``: the dict the validly signed sign-offs
    are put in (when the session requires signatures), each chunk's before it is consumed,
    so a fold given the same dict counts them as it goes."""
    path = Path(path)
    data = read_user_file(path, "a session file", max_bytes=SESSION_MAX_BYTES, no_links=True)
    with gc_paused():
        return _parse_session(data, str(path), path, consume, signatures)


#: blocks handed to the scanner at a time while forked workers check each chunk's signatures,
#: in bytes (a job per chunk: with 128 KB, resuming a signed 100,000-event log took 1.2 s more
#: wall, waiting on three times as many jobs); a whole log's raw tables, events and block
#: records held at once took a gigabyte
SCAN_CHUNK_BYTES = 2 * 1024 * 1024
#: blocks read at a time in order, with no workers, in bytes: ~180 events, whose tables,
#: models and fold stay in a core's cache from one step to the next (2 MB, ~2,900 events, took
#: 22 % more CPU to resume a 100,000-event log, and 0.8 s more in verify's reader)
FOLD_CHUNK_BYTES = 128 * 1024


def _chunk_end(data: bytes, pos: int, stop: int, size: int | None = None) -> int:
    """Just past the first block trailer at or after ``pos + size`` (:data:`SCAN_CHUNK_BYTES`
    unless given; ``stop`` if none before it)."""
    size = SCAN_CHUNK_BYTES if size is None else size
    if pos + size >= stop:
        return stop
    match = next(trailers(data, pos + size), None)
    return match.end() if match and match.end() <= stop else stop


def _mark_unreadable(blocks: list[BlockMeta], bad: list[tuple[int, str]]) -> list[BlockMeta]:
    """``blocks`` with those whose event did not validate marked unreadable (the tally skips them)."""
    if not bad:
        return blocks
    why = dict(bad)
    return [b._replace(unreadable=why[b.seq]) if b.seq in why else b for b in blocks]


@dataclass
class LogReading:
    """A read of a log's blocks in progress, carried from chunk to chunk (and, for
    ``cockpit verify`` spread over processes, one range of the file): the chain's state,
    the signature tally, the seq expected next, and what was read."""

    header: SessionHeader
    raw_header: dict[str, Any]
    where: str
    chain: ChainCheck
    tally: SignatureTally | None = None
    signers: list[AllowedSigner] | None = None  # None: signatures checked against their own key only
    only: frozenset[str] | None = None  # the kinds whose signatures are checked (None: all)
    require: bool = True  # an unsigned event by a person is a failure
    expect: int = 1
    consume: Callable[[SessionHeader, list[Event]], None] | None = None
    #: signature checks handed to other processes as each chunk is read (see :meth:`SignatureTally.add`)
    submit: Callable[[list[tuple[int, int, int, str, str]]], None] | None = None
    #: signature checks left to :mod:`.spread`'s workers (see :meth:`SignatureTally.add`)
    defer: list[tuple[int, int, int, str]] | None = None
    keep_events: bool = True
    keep_blocks: bool = True
    #: bytes of blocks scanned at a time (None: :data:`SCAN_CHUNK_BYTES` with workers, else
    #: :data:`FOLD_CHUNK_BYTES`)
    chunk: int | None = None
    events: list[Event] = field(default_factory=list)
    blocks: list[BlockMeta] = field(default_factory=list)
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    count: int = 0  # events read
    end: int = 0  # past the last complete block
    torn: TornTail | None = None

    def read(self, data: bytes, pos: int, stop: int) -> None:
        """Read the blocks of ``data[pos:stop]`` (``stop`` just past a trailer, or the end)."""
        self.end = max(self.end, pos)
        # with workers waiting on the signatures, a small first chunk sets them going sooner
        first: int | None = SCAN_CHUNK_BYTES // 8 if self.submit is not None else None
        # (the smaller of the two in order, so a test that makes chunks small makes them all small)
        size = self.chunk or (SCAN_CHUNK_BYTES if self.submit is not None else min(SCAN_CHUNK_BYTES, FOLD_CHUNK_BYTES))
        while pos < stop:
            cut, first = _chunk_end(data, pos, stop, first or size), None
            part = data[pos:cut]
            scan = scan_blocks(part, pos, self.expect, self.where)
            if scan.torn is not None and cut < stop:
                # damage with blocks after it: scan the rest in one go, which tells corruption from a torn tail
                part = data[pos:stop]
                scan = scan_blocks(part, pos, self.expect, self.where)
                cut = stop
            bad = [(b.seq, b.unreadable or "") for b in scan.unreadable]
            chunk = _events_from_raw(migrate(dict(self.raw_header), scan.raw_events)[1], self.where, bad)
            blocks = _mark_unreadable(scan.blocks, bad[len(scan.unreadable) :])
            self.chain.feed(blocks, part, pos)
            if self.tally is not None:
                operator = self.header.operator
                self.tally.add(
                    chunk,
                    blocks,
                    part,
                    pos,
                    self.signers,
                    require=self.require,
                    only=self.only,
                    operator=operator,
                    submit=self.submit,
                    defer=self.defer,
                )
            self.unreadable += bad
            self.count += len(chunk)
            if self.consume is not None and chunk:
                self.consume(self.header, chunk)
            if self.keep_events:
                self.events += chunk
            elif chunk:
                self.events = chunk[-1:]
            if self.keep_blocks:
                self.blocks += blocks
            elif blocks:
                self.blocks = blocks[-1:]
            if scan.blocks:
                self.expect = scan.blocks[-1].seq + 1
            self.end, self.torn = scan.end, scan.torn
            pos = cut

    def log(self, path: Path | None) -> SessionLog:
        written = self.raw_header.get("schema_version")
        return SessionLog(
            header=self.header,
            events=self.events,
            torn=self.torn,
            path=path,
            end_offset=self.end,
            chain=self.chain.report(),
            blocks=tuple(self.blocks),
            schema_written=written if isinstance(written, int) else 0,
            signatures=self.tally.valid if self.tally is not None else None,
            unreadable=tuple(sorted(self.unreadable)),
            tail_seq=self.expect - 1,
        )


def start_reading(data: bytes, where: str) -> tuple[LogReading, int]:
    """The header of ``data`` read, and a reading of its blocks ready to start at the offset returned."""
    raw_header, header_end = parse_header(data, where)
    written = raw_header.get("schema_version")
    header = validate_header(migrate(dict(raw_header), [])[0], where)
    chained = isinstance(written, int) and written >= CHAINED_SCHEMA
    chain = ChainCheck(digest(memoryview(data)[:header_end]), chained)
    return LogReading(header, raw_header, where, chain, end=header_end), header_end


def _parse_session(
    data: bytes,
    where: str,
    path: Path | None,
    consume: Callable[[SessionHeader, list[Event]], None] | None = None,
    signatures: dict[int, str] | None = None,
) -> SessionLog:
    """Read ``data`` a chunk of blocks at a time: each chunk is scanned, validated, its links
    followed and its sign-offs' signatures checked, then handed to ``consume`` (or kept);
    the chain's head and the signature tally are carried from chunk to chunk, so with
    ``consume`` nothing holds the whole log's events or block records."""
    reading, header_end = start_reading(data, where)
    signers = trust_for(reading.header, where).signers_for(reading.header)  # the site's word, never the header's alone
    if signers is not None:
        reading.tally = SignatureTally(valid={} if signatures is None else signatures)
        reading.signers, reading.only = signers, _SIGNED_KINDS
    if consume is not None:
        reading.consume, reading.keep_events, reading.keep_blocks = consume, False, False
        workers = worker_count()
        if signers is not None and workers >= 2 and len(data) - header_end >= PIPELINE_FROM_BYTES:
            _read_pipelined(reading, data, header_end, consume, workers)
            return reading.log(path)
    reading.read(data, header_end, len(data))
    return reading.log(path)


#: past this many bytes of blocks, a fold that needs every signature (``resume`` of a log that
#: requires them) has them checked by forked workers while the next chunk is read
PIPELINE_FROM_BYTES = 4 * 1024 * 1024


def _read_pipelined(
    reading: LogReading,
    data: bytes,
    header_end: int,
    consume: Callable[[SessionHeader, list[Event]], None],
    workers: int,
) -> None:
    """Read ``data`` here, in order, each chunk's signatures checked by forked workers while
    the next chunk is parsed; a chunk is handed to ``consume`` only once its signatures are
    in the tally (the fold reads them), so what is folded is what a plain read folds."""
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    from cockpit.changelog import chain

    tally = reading.tally
    assert tally is not None
    operator = reading.header.operator
    submitted: list[Future[list[tuple[int, str | None, str]]]] = []
    waiting: list[tuple[SessionHeader, list[Event], Future[list[tuple[int, str | None, str]]]]] = []

    def fold_ready(everything: bool) -> None:
        while waiting and (everything or len(waiting) > 1 or waiting[0][2].done()):
            header, chunk, checked = waiting.pop(0)
            tally.take(checked.result(), operator)
            consume(header, chunk)

    def hold(header: SessionHeader, chunk: list[Event]) -> None:
        waiting.append((header, chunk, submitted[-1]))  # the chunk's checks were submitted just before
        fold_ready(False)

    chain._SHARED = data  # inherited by the workers, never sent
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=chain._gc_off) as pool:
            reading.submit = lambda jobs: submitted.append(
                pool.submit(chain._check_chunk, jobs, reading.signers, operator)
            )
            reading.consume = hold
            reading.read(data, header_end, len(data))
            fold_ready(True)
    finally:
        chain._SHARED = b""
        reading.submit, reading.consume = None, consume


#: the kinds whose signatures the fold needs: every one, when signatures are required (an
#: unsigned event then counts for nothing, the cockpit's own included)
_SIGNED_KINDS: frozenset[str] | None = None


def session_signers(header: SessionHeader) -> list[AllowedSigner]:
    """The allowed signers the session recorded; none (so no signature counts) when the
    file is gone or unreadable: a missing file must never make any key acceptable."""
    if not header.allowed_signers:
        return []
    try:
        return read_allowed_signers(header.allowed_signers)
    except BadInput:
        return []


#: the bytes of a change log read into a :class:`SessionLog` (``cockpit verify`` reads the file once)
parse_session_bytes = _parse_session


def salvage_session_bytes(data: bytes, where: str, path: Path | None = None) -> SessionLog:
    """What can still be read of a log a strict read refuses (a block deleted, moved or
    edited): every complete block whose checksum and seq hold, in seq order, and each seq
    that could not be read as written named in :attr:`SessionLog.damaged`. For an auditor's
    export and replay, never for appending: the chain is followed in file order, so it
    breaks where the damage is."""
    reading, header_end = start_reading(data, where)
    kept: dict[int, tuple[dict[str, Any] | None, BlockMeta]] = {}
    in_file: list[BlockMeta] = []  # every complete block, in file order: the chain's walk
    damaged: dict[int, str] = {}
    pos, highest = header_end, 0
    for match in trailers(data, header_end):
        body, span = data[pos : match.start()], (pos, match.start(), match.end())
        seq_named, pos = int(match.group(1)), match.end()
        if int(match.group(2), 16) != zlib.crc32(body):
            in_file.append(unreadable_meta(body, span, seq_named, "checksum"))
            damaged.setdefault(seq_named, "its checksum does not match (edited after it was written): left out")
            continue
        raw, why = event_table(body)
        if raw is None:  # well written, not an event this cockpit reads: as a strict read names it
            meta = unreadable_meta(body, span, seq_named, why)
        else:
            key = raw.pop("\0key")
            meta = take_meta(raw, span, data, 0)
            if key != seq_named or meta.seq != seq_named:
                in_file.append(meta)
                damaged.setdefault(seq_named, f"its table names seq {key}, its trailer {seq_named}: left out")
                continue
        in_file.append(meta)
        if seq_named in kept:
            damaged.setdefault(seq_named, "written twice: the second copy left out")
            continue
        if seq_named < highest:  # this one, and the one found before it, are out of place
            damaged.setdefault(seq_named, f"out of place: found after seq {highest}")
            damaged.setdefault(highest, f"out of place: found before seq {seq_named}")
        highest = max(highest, seq_named)
        kept[seq_named] = (raw, meta)
    tail = data[pos:]
    seen = [int(m.group(1)) for m in re.finditer(rb"^\[events\.(\d+)[\].]", tail, re.MULTILINE)]
    torn = TornTail(pos, len(tail), max(seen, default=0)) if tail else None
    moved_aside = {s for _, m in kept.values() for s in range(m.seq - m.gap, m.seq)}  # a repair's, recorded
    for seq in range(1, max(kept, default=0)):
        if seq not in kept and seq not in damaged and seq not in moved_aside:
            damaged[seq] = "missing: no block holds it (deleted)"
    reading.chain.feed(in_file, data, 0)
    order = sorted(kept)
    raws = [raw for seq in order if (raw := kept[seq][0]) is not None]
    bad = [(kept[seq][1].seq, kept[seq][1].unreadable or "") for seq in order if kept[seq][0] is None]
    first_bad = len(bad)
    with gc_paused():
        events = _events_from_raw(migrate(dict(reading.raw_header), raws)[1], where, bad)
    blocks = [kept[seq][1] for seq in order]
    blocks = _mark_unreadable([b for b in blocks if b.unreadable is None], bad[first_bad:]) + [
        b for b in blocks if b.unreadable is not None
    ]
    blocks.sort(key=lambda b: b.seq)
    if reading.header.require_signatures:  # the fold's sign-offs, as a strict read checks them
        reading.tally = SignatureTally()
        reading.tally.add(
            events,
            blocks,
            data,
            0,
            session_signers(reading.header),
            require=True,
            only=_SIGNED_KINDS,
            operator=reading.header.operator,
        )
    reading.events, reading.blocks, reading.unreadable, reading.count = events, blocks, bad, len(events)
    reading.end, reading.torn, reading.expect = pos, torn, max(max(kept, default=0), max(damaged, default=0)) + 1
    return replace(reading.log(path), damaged=tuple(sorted(damaged.items())))


class JournalFollower:
    """Follows a live change log: each :meth:`poll` returns only the events appended since.

    It keeps the offset just past the last complete block and parses only the bytes
    after it; a partial block at the end is left for the next poll. Cheap when
    nothing changed (one ``stat``), so a reviewer's view can poll several times a
    second.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.header: SessionHeader | None = None
        self.offset = 0  # past the last complete block seen
        self.last_seq = 0
        self.torn: TornTail | None = None  # the partial block at the end, as of the last poll
        self.head = ""  # the hash of the last block read (the chain, followed as it grows)
        self.chain_broken: tuple[int, str] | None = None
        #: as :attr:`SessionLog.signatures`, filled as sign-offs arrive
        self.signatures: dict[int, str] | None = None
        self._signers: list[AllowedSigner] = []
        self._chained = False
        #: complete blocks that are not readable events, (seq, why), as :attr:`SessionLog.unreadable`
        self.unreadable: list[tuple[int, str]] = []

    def poll(self) -> list[Event]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            raise BadInput(f"{self.path}: no such file") from None
        if size < self.offset:
            raise JournalCorrupt(f"{self.path}: the file shrank below its last complete event (replaced?)")
        if self.header is not None and size == self.offset:
            self.torn = None
            return []
        try:  # never through a link planted in place of the log since the last poll
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise BadInput(
                    f"{self.path}: is a symbolic link, refused as a session file (someone may have planted it)"
                ) from None
            raise BadInput(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise BadInput(f"{self.path}: not a regular file, refused as a session file")
            fh.seek(self.offset)
            data = fh.read(size - self.offset)
        where = str(self.path)
        base = self.offset
        if self.header is None:
            raw_header, header_end = parse_header(data, where)
            written = raw_header.get("schema_version")
            raw_header, _ = migrate(raw_header, [])
            self.header = validate_header(raw_header, where)
            self._chained = isinstance(written, int) and written >= CHAINED_SCHEMA
            self.head = digest(data[:header_end])
            signers = trust_for(self.header, self.path).signers_for(self.header)
            if signers is not None:
                self.signatures, self._signers = {}, signers
            data = data[header_end:]
            base = header_end
            self.offset = header_end
        with gc_paused():
            scan = scan_blocks(data, base, self.last_seq + 1, where)
            bad = [(b.seq, b.unreadable or "") for b in scan.unreadable]
            events = _events_from_raw(scan.raw_events, where, bad)
        blocks = _mark_unreadable(scan.blocks, bad[len(scan.unreadable) :])
        self.unreadable += sorted(bad)
        self._follow_chain(blocks, data, base)
        if self.signatures is not None:
            tally = SignatureTally(valid=self.signatures)
            operator = self.header.operator if self.header else None
            signers = self._signers
            tally.add(events, blocks, data, base, signers, require=True, only=_SIGNED_KINDS, operator=operator)
        self.offset = scan.end
        self.torn = scan.torn
        if blocks:
            self.last_seq = blocks[-1].seq
        return events

    def _follow_chain(self, blocks: list[BlockMeta], data: bytes, base: int) -> None:
        for block in blocks:
            if self._chained and self.chain_broken is None and block.prev != self.head:
                self.chain_broken = (block.seq, "the block before it is not the one it was chained to")
            self.head = digest(data[block.start - base : block.end - base])

    @property
    def chained(self) -> bool:
        """The log was written with the chain (schema 2 on)."""
        return self._chained

    def chain_words(self) -> str:
        return chain_words(self._chained, self.chain_broken)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.poll())


def read_header(path: str | os.PathLike[str], data: bytes | None = None) -> SessionHeader:
    """The ``[session]`` header of the log at ``path`` (its bytes ``data`` when read
    already), read without its events."""
    path = Path(path)
    if data is None:
        data = read_user_file(path, "a session file", max_bytes=SESSION_MAX_BYTES, no_links=True)  # a read, no parse
    raw, _ = parse_header(data, str(path))
    return validate_header(migrate(raw, [])[0], str(path))


def follower_after(log: SessionLog) -> JournalFollower:
    """A follower of ``log``'s file that starts just past what ``log`` holds (no second parse)."""
    assert log.path is not None, "a follower needs the log's file"
    follower = JournalFollower(log.path)
    follower.header = log.header
    follower.offset = log.end_offset
    follower.last_seq = log.last_seq
    follower.torn = log.torn  # shown at once, not only after the first poll
    follower.unreadable = list(log.unreadable)
    follower.head = log.chain.head  # the chain goes on from the last block read
    follower._chained = log.schema_written >= CHAINED_SCHEMA
    if log.chain.broken_at is not None:
        follower.chain_broken = (log.chain.broken_at, log.chain.why or "")
    signers = trust_for(log.header, log.path).signers_for(log.header)
    if signers is not None:
        follower.signatures = dict(log.signatures or {})
        follower._signers = signers
    return follower
