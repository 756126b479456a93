"""The hash chain of a change log (schema 2 on): each block names the block before it.

Every event block carries ``prev = "sha256:<hex>"``, the SHA-256 of the exact bytes of
the block before it in the file (its leading blank line through its trailer's newline),
and for the first event the SHA-256 of the header's bytes (from the file's first byte
through ``# end of session header``). ``prev`` sits inside the block, so the block's CRC
and its signature cover it: editing, removing, reordering or inserting a block breaks
the link at a named seq. The *head* is the hash of the last block (the ``prev`` the next
block will carry); an export prints it, so a log cut or rewritten after the ticket was
written no longer reaches the head the ticket names.

A block whose seq skips numbers carries ``gap = N`` (written only by a repair that
moved N seqs aside, so a seq is never used twice). A signed block carries an
``[events.NNNNNN.sig]`` table after its signed bytes (see :mod:`.sshsig`).

A log of schema 1 was written before the chain: it reads, replays and exports as before,
reported as unchained.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from cockpit.changelog.identity import is_system
from cockpit.changelog.sshsig import AllowedSigner, Checker, Verdict

if TYPE_CHECKING:  # the events' models are pydantic's, heavy to import: this module is read
    # before them by ``cockpit verify``'s signature checkers (:mod:`.spread`)
    from cockpit.changelog.events import Event

#: the first schema with the chain
CHAINED_SCHEMA = 2

#: A change log of a long window is tens of megabytes; past this it is not one a person could review.
SESSION_MAX_BYTES = 1024 * 1024 * 1024

# A trailer is found by its literal text and kept only at a line start: the same matches as
# ``^...`` with re.MULTILINE, which scanned every line of a big log (12 times slower).
_TRAILER_TEXT = re.compile(rb"# end of event (\d+), crc32 ([0-9a-f]{8})\n")


def trailers(data: bytes, pos: int = 0) -> Iterator[re.Match[bytes]]:
    """The block trailers of ``data`` from ``pos`` on, in order (the block format is
    :mod:`.blocks`'; here, where the light readers of a log's raw bytes find it)."""
    for match in _TRAILER_TEXT.finditer(data, pos):
        at = match.start()
        if at == 0 or data[at - 1] == 0x0A:
            yield match


def digest(data: bytes | memoryview) -> str:
    """The ``prev`` form of the hash of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


class BlockMeta(NamedTuple):
    """Where one event's block lies in the file and what its integrity fields say (a named
    tuple: one is made per block read, and a frozen dataclass took three times as long)."""

    seq: int
    start: int  # absolute offset of the block's first byte (its leading newline)
    end: int  # absolute offset just past its trailer
    prev: str | None
    gap: int
    sshsig: str | None  # base64 SSHSIG blob, when signed
    signed_end: int  # absolute offset where the signed bytes end (the sig table's blank line, else the trailer)
    #: why a complete block (its checksum holds) is not a readable event, else None
    unreadable: str | None = None


def sig_marker(seq_key: str) -> bytes:
    return b"\n[events.%s.sig]\n" % seq_key.encode()


_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def sig_line_blob(data: bytes, start: int, stop: int) -> bytes | None:
    """The blob of ``data[start:stop]`` when it is exactly the one line the journal writes a
    signature table with, ``sshsig = "BLOB"`` and its newline (BLOB base64's letters only),
    else None. (A regex over the blob's 250 letters took four times as long.)"""
    if stop - start < 13 or not data.startswith(b'sshsig = "', start) or not data.startswith(b'"\n', stop - 2):
        return None
    blob = data[start + 10 : stop - 2]
    return None if blob.translate(None, _BASE64) else blob


def canonical_sig(seq: int, sshsig: str) -> bytes:
    """The bytes from the end of block ``seq``'s signed bytes up to its trailer, as the
    journal writes them with the blob ``sshsig`` (what :mod:`.spread`'s workers check)."""
    return b'\n[events.%06d.sig]\nsshsig = "%s"\n' % (seq, sshsig.encode())


def take_meta(raw: dict[str, Any], span: tuple[int, int, int], data: bytes, base: int) -> BlockMeta:
    """Remove the block-level fields from the event table ``raw`` and return them.

    ``span`` is (block start, trailer start, block end), absolute; ``data`` holds the
    file bytes from absolute offset ``base`` (searched for the signature table only
    in a signed block).
    """
    start, trailer, end = span
    prev = raw.pop("prev", None)
    gap = raw.pop("gap", 0)
    sig = raw.pop("sig", None)
    sshsig = sig.get("sshsig") if isinstance(sig, dict) else None
    seq = raw.get("seq")
    signed_end = trailer
    if sshsig is not None:
        marker = b"\n[events.%06d.sig]\n" % seq if isinstance(seq, int) else b"\n[events.?.sig]\n"
        at = data.find(marker, start - base, trailer - base)
        signed_end = base + at if at >= 0 else start
    # positional, in the fields' order: one is made per block read
    return BlockMeta(
        seq if isinstance(seq, int) else 0,
        start,
        end,
        prev if isinstance(prev, str) else None,
        gap if isinstance(gap, int) and not isinstance(gap, bool) and gap >= 0 else 0,
        sshsig if isinstance(sshsig, str) else None,
        signed_end,
    )


_PREV_LINE = re.compile(rb'^prev = "(sha256:[0-9a-f]{64})"$', re.MULTILINE)
_GAP_LINE = re.compile(rb"^gap = (\d{1,9})$", re.MULTILINE)
_SEQ_LINE = re.compile(rb"^seq = (\d{1,12})$", re.MULTILINE)
_SIG_LINE = re.compile(rb'^sshsig = "([A-Za-z0-9+/=]+)"$', re.MULTILINE)


def unreadable_meta(body: bytes, span: tuple[int, int, int], seq_named: int, why: str) -> BlockMeta:
    """The block-level fields of a complete block whose table cannot be read, taken from
    its lines as the journal writes them (so the chain and its signature are still
    followed through it)."""
    start, trailer, end = span

    def first(pattern: re.Pattern[bytes]) -> bytes | None:
        match = pattern.search(body)
        return match.group(1) if match else None

    prev, gap, seq, sshsig = first(_PREV_LINE), first(_GAP_LINE), first(_SEQ_LINE), first(_SIG_LINE)
    signed_end = trailer
    if sshsig is not None:
        at = body.find(sig_marker(f"{seq_named:06d}"))
        signed_end = start + at if at >= 0 else start
    return BlockMeta(
        seq=int(seq) if seq is not None else seq_named,
        start=start,
        end=end,
        prev=prev.decode() if prev else None,
        gap=int(gap) if gap else 0,
        sshsig=sshsig.decode() if sshsig else None,
        signed_end=signed_end,
        unreadable=why,
    )


class ChainCheck:
    """The chain followed block by block, as a file is read in parts: the head so far, the
    first broken link, the gaps. A read in chunks feeds each chunk's blocks in turn."""

    def __init__(self, before: str, chained: bool, last_seq: int = 0) -> None:
        self.head = before  # the hash of the last block fed (the header's before any)
        self.chained = chained
        self.last_seq = last_seq
        self.broken: tuple[int, str] | None = None
        self.gaps: list[tuple[int, int]] = []

    def feed(self, blocks: Sequence[BlockMeta], data: bytes, base: int) -> None:
        """Follow ``blocks`` (in file order; ``data`` holds the file from offset ``base``)."""
        view = memoryview(data)
        for block in blocks:
            if block.gap:
                self.gaps.append((block.seq - block.gap, block.seq - 1))
            if self.chained and self.broken is None:
                if block.prev is None:
                    self.broken = (block.seq, "the block has no prev hash (inserted or rewritten without the chain)")
                elif block.prev != self.head:
                    what = f"seq {self.last_seq}" if self.last_seq else "the header"
                    self.broken = (
                        block.seq,
                        f"{what} is not the block this one was chained to (edited, removed or reordered)",
                    )
            self.head = digest(view[block.start - base : block.end - base])
            self.last_seq = block.seq

    def report(self) -> ChainReport:
        broken = self.broken
        return ChainReport(
            chained=self.chained,
            head=self.head,
            broken_at=broken[0] if broken else None,
            why=broken[1] if broken else None,
            gaps=tuple(self.gaps),
        )


@dataclass(frozen=True)
class ChainReport:
    """What the chain of a log says."""

    chained: bool  # written with the chain (schema 2 on)
    head: str  # the hash of the last block (of the header when there is none)
    broken_at: int | None = None  # the first seq whose link does not hold
    why: str | None = None
    gaps: tuple[tuple[int, int], ...] = ()  # (first, last) seqs a repair moved aside

    @property
    def ok(self) -> bool:
        return self.chained and self.broken_at is None

    def describe(self) -> str:
        return chain_words(self.chained, None if self.broken_at is None else (self.broken_at, self.why))


def chain_words(chained: bool, broken: tuple[int, str | None] | None) -> str:
    """The chain in words, for a whole read (:class:`ChainReport`) and a live follower alike."""
    if not chained:
        return "chain: unchained: written before the chain"
    if broken is not None:
        return f"chain: BROKEN at seq {broken[0]}: {broken[1]}"
    return "chain: ok"


def check_chain(data: bytes, header_end: int, blocks: list[BlockMeta], chained: bool) -> ChainReport:
    """Follow the links of ``blocks`` (in file order) over the file's bytes ``data``."""
    check = ChainCheck(digest(memoryview(data)[:header_end]), chained)
    check.feed(blocks, data, 0)
    return check.report()


@dataclass
class SignatureTally:
    """What the signatures of a run of blocks say (see :mod:`.verify` for what they cover)."""

    #: seq -> the principal whose allowed key validly signed it (the fold's input for sign-offs)
    valid: dict[int, str] = field(default_factory=dict)
    unsigned: int = 0  # events by a person without a signature
    invalid: int = 0
    failures: list[tuple[int, str]] = field(default_factory=list)

    def add(
        self,
        events: Sequence[Event],
        blocks: Sequence[BlockMeta],
        data: bytes,
        base: int,
        allowed: list[AllowedSigner] | None,
        *,
        require: bool,
        only: frozenset[str] | None = None,
        operator: str | None = None,
        submit: Callable[[list[_Job]], None] | None = None,
        defer: list[tuple[int, int, int, str]] | None = None,
    ) -> None:
        """Check the signature of each of ``blocks`` (``data`` holds the file from offset
        ``base``); with ``only``, just the events of those kinds (the fold needs sign-offs).
        ``submit``: the checks are handed to it instead (offsets absolute in the file, for
        workers that hold the whole file); their results come back through :meth:`take`.
        ``defer``: the blocks whose signature table is as the journal writes it
        (:func:`canonical_sig`) are put there (seq, where the signed bytes start and end in
        the file, the actor), for :mod:`.spread`'s workers' answers; the others are checked
        here."""
        jobs: list[_Job] = []
        # offsets in the file for workers that hold it whole, else in ``data``
        shift = 0 if submit is not None else base
        readable = [b for b in blocks if b.unreadable is None]  # an unreadable block has no event
        for event, block in zip(events, readable, strict=True):
            if only is not None and event.kind not in only:
                continue
            if block.sshsig is None:
                # required, every event is signed: the cockpit's own with the operator's key
                if require or not is_system(event.actor):
                    self.unsigned += 1
                if require:
                    self.failures.append((event.seq, f"unsigned event by {event.actor} (signatures are required)"))
                continue
            if defer is not None and data.startswith(canonical_sig(event.seq, block.sshsig), block.signed_end - base):
                defer.append((event.seq, block.start, block.signed_end, event.actor))
                continue
            jobs.append((event.seq, block.start - shift, block.signed_end - shift, block.sshsig, event.actor))
        if submit is not None:
            submit(jobs)
            return
        if jobs:
            self.take(_check_all(jobs, data, allowed, operator), operator)

    def take(self, results: Sequence[_Result], operator: str | None) -> None:
        """The verdicts of checked signatures, added to the tally."""
        for seq, principal, words in results:
            if self.fails(principal, words, operator):
                self.invalid += principal is None
                self.failures.append((seq, words))
            if principal is not None:
                self.valid[seq] = principal
        self.failures.sort(key=lambda f: f[0])

    @staticmethod
    def fails(principal: str | None, words: str, operator: str | None) -> bool:
        """Whether a verdict is a failure: no principal, or a key listed for the operator on
        an event by someone else (it counts as hers, and is said)."""
        return principal is None or (operator is not None and words.startswith("signed with a key allowed_signers"))


def worker_count() -> int:
    """How many worker processes a big log's reading is spread over: one per core, at most 16."""
    return max(1, min(os.cpu_count() or 1, 16))


#: one signature to check: (seq, where its signed bytes start and end in the data, base64 blob, actor)
_Job = tuple[int, int, int, str, str]

#: past this many signatures, verification is spread over the machine's cores (each is a
#: public-key operation, ~50-150 us: 70,000 of them take seconds on one core)
PARALLEL_FROM = 4096

#: the bytes the jobs point into, for the forked workers (inherited, never pickled: a
#: 100,000-event log's signed bytes sent to them cost more than checking them)
_SHARED: bytes = b""


_Result = Verdict


def _check_chunk(jobs: list[_Job], allowed: list[AllowedSigner] | None, operator: str | None) -> list[_Result]:
    return Checker(allowed, operator).check_many(jobs, memoryview(_SHARED))


def _check_all(
    jobs: list[_Job], data: bytes, allowed: list[AllowedSigner] | None, operator: str | None
) -> list[_Result]:
    global _SHARED
    workers = worker_count()
    if len(jobs) < PARALLEL_FROM or workers < 2:
        return Checker(allowed, operator).check_many(jobs, memoryview(data))
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    size = -(-len(jobs) // (workers * 4))
    chunks = [jobs[i : i + size] for i in range(0, len(jobs), size)]
    _SHARED = data
    try:
        # fork: the workers inherit the loaded modules and the data (a spawn would import
        # asyncssh again in each and need the data sent)
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_gc_off) as pool:
            results = pool.map(_check_chunk, chunks, [allowed] * len(chunks), [operator] * len(chunks))
            return [r for chunk in results for r in chunk]
    finally:
        _SHARED = b""


def _gc_off() -> None:
    """A worker makes no cycles; its collector would only walk the objects it inherited."""
    import gc

    gc.disable()
