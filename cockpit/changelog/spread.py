"""The signatures of a big change log checked by forked processes from the file's raw bytes,
started before anything is parsed (``cockpit verify``: its start-up, the reader's imports
and the header, then overlaps the checks).

A worker walks its share of the blocks by their trailers, takes each signed block's signed
bytes and blob from where the journal writes them (the one line of its
``[events.NNNNNN.sig]`` table, just before the trailer) and checks the signature: which
key made it, or why it does not hold. Whose key that is (allowed_signers, its options,
the actor the event names) is decided in the reader, from the key
(:meth:`~cockpit.changelog.sshsig.Checker.verdict`), as a check there would. The reader
parses every block as it always does, and takes a worker's answer for a block only when
its own reading of the block finds the same signed bytes and the same blob in that
canonical place (:func:`.chain.canonical_sig`); any other signed block it checks itself. So
what is accepted, and what is said, is what one process checking every signature says.

This module imports nothing heavy (no pydantic, no event models): the workers are forked
from it as soon as the file is read, and carry only it, :mod:`.sshsig` and libsodium.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from types import TracebackType

from cockpit.changelog.chain import (
    SESSION_MAX_BYTES,
    SignatureTally,
    canonical_sig,
    sig_line_blob,
    trailers,
    worker_count,
)
from cockpit.changelog.sshsig import AllowedSigner, Checker, Verdict
from cockpit.errors import read_user_file

#: past this many bytes of blocks, verify's signatures are checked by forked workers (one per
#: core): each is a public-key operation, ~50 us, so a 100,000-event log's take 5 s of CPU
SPREAD_FROM_BYTES = 4 * 1024 * 1024

#: what ends a change log's header (:data:`.blocks.HEADER_END`, which imports the models)
_HEADER_END = b"# end of session header\n"

#: a block a worker checked: (seq, where the block starts, where its signed bytes end, the
#: index of the key that made its valid signature in the worker's list, or -1 and why not)
Row = tuple[int, int, int, int, str]

#: the file's bytes, for the forked workers (inherited, never sent)
_DATA: bytes = b""
#: a worker's checker, kept from one share to the next (the keys it has seen)
_CHECKER: Checker | None = None


def read_log_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the change log at ``path``, as every reader of it reads them."""
    from pathlib import Path

    return read_user_file(Path(path), "a session file", max_bytes=SESSION_MAX_BYTES, no_links=True)


class SpreadChecks:
    """The checks of a log's signatures under way in forked workers: started with the
    log's bytes (:meth:`start`), their answers taken once the log is read (:meth:`settle`).
    A context manager: leaving it stops the workers, the checks not started dropped."""

    def __init__(self, data: bytes, header_end: int, workers: int) -> None:
        global _DATA
        self.data = data
        self._shares = _shares(data, header_end, workers)
        _DATA = data  # inherited by the workers when they are forked, below
        try:
            context = multiprocessing.get_context("fork")
            self._pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_in_worker)
            self._parts: list[Future[tuple[list[bytes], list[Row]]]] = [
                self._pool.submit(_check_range, start, stop) for start, stop in self._shares
            ]
        finally:
            _DATA = b""  # the workers hold it now; this process has its own reference

    @classmethod
    def start(cls, data: bytes, workers: int | None = None) -> SpreadChecks | None:
        """The checks of ``data``'s signatures started in ``workers`` processes (one per
        core), or None when the log is too small for it to pay, or there is one core."""
        workers = worker_count() if workers is None else workers
        end = data.find(_HEADER_END)
        if workers < 2 or end < 0 or len(data) - end < SPREAD_FROM_BYTES:
            return None
        return cls(data, end + len(_HEADER_END), workers)

    def settle(
        self,
        deferred: Sequence[tuple[int, int, int, str]],
        allowed: list[AllowedSigner] | None,
        operator: str | None,
        tally: SignatureTally,
    ) -> None:
        """The verdicts on ``deferred`` (in file order: seq, where its signed bytes start
        and end, the actor; each block's signature table canonical,
        :func:`.chain.canonical_sig`) into ``tally``: from the workers' rows, judged here,
        each share's as soon as it is in (the last ones are still being checked meanwhile);
        a block they did not check as this read sees it is checked here."""
        checker = Checker(allowed, operator)
        own: list[tuple[int, int, int, str, str]] = []
        valid, fails = tally.valid, tally.fails
        at, count = 0, len(deferred)
        for (_start, stop), part in zip(self._shares, self._parts, strict=True):
            if at == count:
                break
            keys, rows = part.result()
            found: dict[int, Row] | None = None  # by seq, once a row is not where it is expected
            out: list[Verdict] = []
            first = at
            while at < count and deferred[at][1] < stop:  # the blocks that start in this share
                seq, start, end, actor = deferred[at]
                row = rows[at - first] if at - first < len(rows) else None
                at += 1
                if row is None or row[0] != seq:  # the rows and the blocks in step, else by seq
                    found = found if found is not None else {r[0]: r for r in rows}
                    row = found.get(seq)
                if row is None or row[1] != start or row[2] != end:
                    own.append((seq, start, end, self._blob(seq, end), actor))
                elif row[3] < 0:
                    out.append((seq, None, row[4]))
                else:
                    principal, words = checker.verdict(keys[row[3]], actor)
                    if principal is None or fails(principal, words, operator):
                        out.append((seq, principal, words))
                    else:
                        valid[seq] = principal  # what take does with a verdict that holds
            tally.take(out, operator)
        # none left, unless the shares missed a block: checked here all the same
        own += [(seq, start, end, self._blob(seq, end), actor) for seq, start, end, actor in deferred[at:]]
        if own:
            tally.take(checker.check_many(own, memoryview(self.data)), operator)

    def _blob(self, seq: int, signed_end: int) -> str:
        """The blob of block ``seq``'s signature table, canonical (checked as it was read)."""
        start = signed_end + len(canonical_sig(seq, "")) - 2  # past its opening quote
        return self.data[start : self.data.index(b'"', start)].decode()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> SpreadChecks:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def _shares(data: bytes, header_end: int, workers: int) -> list[tuple[int, int]]:
    """The blocks after the header in ranges, each ending just past a trailer: many more
    than the workers (a few tens of milliseconds of checks each), so none is left with a
    long one at the end while the others wait."""
    size = max(64 * 1024, (len(data) - header_end) // (workers * 64))
    out: list[tuple[int, int]] = []
    start = header_end
    while start < len(data):
        match = next(trailers(data, min(start + size, len(data))), None)
        stop = match.end() if match is not None else len(data)
        out.append((start, stop))
        start = stop
    return out


#: how far a checker stands back for the reader (``nice``): the reader's parse, chain and fold
#: are the part no other process can take. With a checker per core all started at once, an
#: equal share (two thirds of a core each, on two cores) left the reader last, finishing
#: alone on one core while the other stood idle; standing back, the checkers take every
#: cycle the reader leaves and the cores stay busy to the end
WORKER_NICENESS = 10


def _in_worker() -> None:
    """A forked checker: no collector walking what it inherited (it makes no cycles), and it
    yields to the reader (:data:`WORKER_NICENESS`)."""
    global _CHECKER
    gc.disable()
    _CHECKER = Checker(None)
    with contextlib.suppress(OSError):  # a niceness refused (a sandbox): checks go on at the reader's
        os.nice(WORKER_NICENESS)


def _check_range(start: int, stop: int) -> tuple[list[bytes], list[Row]]:
    """The signatures of the blocks in ``_DATA[start:stop]`` (``start`` where a block
    starts, ``stop`` just past a trailer), each in its canonical place; the keys that made
    the valid ones, and a row per block (:data:`Row`)."""
    data, checker = _DATA, _CHECKER
    assert checker is not None
    view = memoryview(data)
    keys: dict[bytes, int] = {}
    rows: list[Row] = []
    key_of = checker.key_of_text
    pos = start
    for match in trailers(data, start):
        at = match.start()
        if at >= stop:
            break
        seq = int(match.group(1))
        marker = b"\n[events.%06d.sig]\n" % seq
        signed_end = data.find(marker, pos, at)
        text = sig_line_blob(data, signed_end + len(marker), at) if signed_end >= 0 else None
        if text is not None:
            key, why = key_of(view[pos:signed_end], text)
            rows.append((seq, pos, signed_end, -1 if key is None else keys.setdefault(key, len(keys)), why))
        pos = match.end()
    return list(keys), rows
