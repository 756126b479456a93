"""The session change log: one crash-safe, append-only TOML file per change window.

File layout (``sessions/<change-id>.toml``)::

    [session]                       # SessionHeader, written once, atomically
    schema_version = 2
    change_id = "CHG-1042"
    ...
    [session.parameters]
    target_branch = "580"
    # end of session header

    [events.000001]                 # one self-contained block per event
    seq = 1
    prev = "sha256:..."             # the header's hash; then each block's predecessor's
    ts = 2026-08-05 10:00:00+00:00
    actor = "alice"
    kind = "session-started"

    [events.000001.facts]           # sub-tables nest under the event's own table
    ...                             # ([events.000001.sig] follows when a person signed it)
    # end of event 000001, crc32 1a2b3c4d

Each block is rendered on its own (``{"events": {"000001": {...}}}``), so a list of
tables inside ``facts`` comes out as ``[[events.000001.facts.x]]`` or an inline
array *inside* the block, and blocks appended one after another still form one
TOML document. The trailer comment (ignored by TOML readers) closes a block; with
its CRC it tells a complete block from a torn one. String values never hold a raw newline
(tomli-w escapes them), so a line that starts with ``# end of event`` or
``[events.`` can only be structure.

TOML has no null: ``None`` values are dropped, recursively (a dict key whose value
is ``None`` is left out, as is a ``None`` element of a list); a reader treats a
missing key as ``None``. Datetimes stay TOML datetimes, always in UTC; a naive
datetime is refused rather than guessed.

Durability: an append renders the block, takes an exclusive ``flock`` on the file,
learns the latest seq from the bytes other processes appended since, writes the
block with one ``os.write`` on an ``O_APPEND`` descriptor, ``fsync``s, and only then
returns the :class:`~cockpit.changelog.events.Event`. What has been returned is on disk
(under a group commit, below: once :meth:`Journal.durable` says so).
Each block names the SHA-256 of the one before it (:mod:`.chain`); a person's block is
signed when the journal has their key (:mod:`.sshsig`). A block with its complete trailer
was written whole: damage to it raises :class:`JournalDamaged` and nothing more is
appended until a person decides (:mod:`.repair`). A crash leaves at most a partial last
block without its trailer, a :class:`TornTail`: the next writer moves it aside
(``sessions/<change-id>/torn-<offset>.bin``), records that, and never reuses its seq.

Group commit (:attr:`Journal.group_commit`, the live session's): inside a running event
loop the block is still written at once and in order under the lock (so the chain, the
signatures and every reader see it), but its ``fsync`` is left to one flush task that runs
it in a thread, off the loop, for every block written meanwhile: many appends, one fsync.
Such an event is *written*, not yet *acknowledged*: it is acknowledged once an fsync
covering it returned, and only then is its head anchored and :meth:`Journal.durable` (the
session's ``perform``, a step before its command runs, a notice before it is sent) let go.
A crash of the process loses nothing written (the kernel holds it); a crash of the machine
may lose written, never acknowledged, blocks at the end: the file then ends earlier, or in
a torn tail. An fsync that fails stops the journal: nothing more is appended, every waiter
hears :class:`JournalWriteError`. Outside a running loop (the CLI, a reviewer) an append
still fsyncs before it returns.

The operator's process also holds ``sessions/<change-id>.lock`` (a non-blocking
``flock``) for its lifetime, so a second operator is refused with the holder's
name; reviewers append sign-offs without it.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

# the block format and the reader live in their own modules; their public names are
# imported from here too (the change log's one public import path)
from cockpit.changelog.blocks import (
    HEADER_END,
    JournalCorrupt,
    JournalDamaged,
    TornTail,
    parse_header,
    render_event,
    render_header,
    render_log,
    scan_blocks,
    seq_key,
    to_toml_value,
    valid_text,
)
from cockpit.changelog.chain import CHAINED_SCHEMA
from cockpit.changelog.chain import digest as chain_digest
from cockpit.changelog.events import Event, EventKind, parse_event, utcnow, writer_problem
from cockpit.changelog.facts import Facts
from cockpit.changelog.files import (
    FileLock,
    OperatorLock,
    SessionLocked,
    artifact_path,
    open_own_file,
    read_artifact,
    session_paths,
    write_atomically,
)
from cockpit.changelog.header import CHANGE_ID_PATTERN, SessionHeader, validate_change_id
from cockpit.changelog.identity import SYSTEM_ACTOR
from cockpit.changelog.reader import JournalFollower, SessionLog, gc_paused, migrate, read_session
from cockpit.changelog.sshsig import Signer
from cockpit.changelog.trust import load_site_trust
from cockpit.errors import BadInput, CockpitError

__all__ = [
    "ARTIFACT_THRESHOLD",
    "CHANGE_ID_PATTERN",
    "HEADER_END",
    "Journal",
    "JournalCorrupt",
    "JournalDamaged",
    "JournalFollower",
    "JournalWriteError",
    "SessionHeader",
    "SessionLocked",
    "SessionLog",
    "TornTail",
    "artifact_path",
    "migrate",
    "read_artifact",
    "read_session",
    "render_event",
    "render_header",
    "render_log",
    "seq_key",
    "session_paths",
    "to_toml_value",
    "validate_change_id",
]

#: Step outputs larger than this go to an artifact (the session engine applies it).
ARTIFACT_THRESHOLD = 8 * 1024


class JournalWriteError(CockpitError):
    """The change log could not be written (disk full, I/O error): the event was not recorded."""


class _GroupCommit:
    """The fsyncs of the appends made on one event loop: batched, each in a thread.

    ``written``: the last block written and its head (what the next fsync covers); the
    journal's ``acknowledged_seq``: the last one an fsync covered. Its own copy of the descriptor, so closing
    the journal never pulls the file from under an fsync in flight."""

    def __init__(self, journal: Journal, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self.journal = journal
        self.fd = os.dup(fd)
        self.loop = loop
        self.written: tuple[int, str] | None = None  # seq, head
        self.task: asyncio.Task[None] | None = None
        self.waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.closed = False

    def wrote(self, seq: int, head: str) -> None:
        self.written = (seq, head)
        if self.task is None:
            self.task = self.loop.create_task(self._flush())

    async def _flush(self) -> None:
        try:
            # until an fsync covered the last block written (the journal's acknowledged seq;
            # once it has, the task ends and the next append starts another)
            while self.written is not None and self.written[0] > self.journal.acknowledged_seq and not self.closed:
                seq, head = self.written  # everything written before the fsync starts is covered
                try:
                    await asyncio.to_thread(os.fsync, self.fd)
                except OSError as exc:
                    self.journal._sync_failed(f"could not sync {self.journal.path}: {exc.strerror or exc}")
                    return
                if self.closed:
                    return
                self.journal._synced(seq, head)
        finally:
            self.task = None
            if self.closed:
                self._close_fd()

    def wake(self, upto: int, error: str | None = None) -> None:
        """Let the waiters for seqs up to ``upto`` go (all of them, with ``error``, when it failed)."""
        left = []
        for seq, fut in self.waiters:
            if fut.done():
                continue
            if error is not None:
                fut.set_exception(JournalWriteError(error))
            elif seq <= upto:
                fut.set_result(None)
            else:
                left.append((seq, fut))
        self.waiters = left

    def close(self) -> None:
        self.closed = True
        if self.task is None:
            self._close_fd()

    def _close_fd(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# --------------------------------------------------------------------------- writing


class Journal(AbstractContextManager["Journal"]):
    """An open change log that appends events durably. Use :meth:`create` or :meth:`open_for_append`."""

    def __init__(
        self,
        path: Path,
        fd: int,
        header: SessionHeader,
        actor: str,
        *,
        last_seq: int,
        end_offset: int,
        lock: OperatorLock | None,
        clock: Callable[[], datetime],
        head: str,
        signer: Signer | None = None,
    ) -> None:
        self.path = path
        self.header = header
        self.actor = actor
        self._fd = fd
        self._last_seq = last_seq
        self._end = end_offset
        self._lock = lock
        self._clock = clock
        #: the hash of the last block (the next block's ``prev``); a schema-1 log stays unchained
        self._head = head
        self._chained = header.schema_version >= CHAINED_SCHEMA and bool(head)
        self._gap = 0  # seqs a moved-aside tail named: the next block skips them
        self.signer = signer
        #: where the head goes after each append (the site's anchor sinks; none by default)
        self.anchors = load_site_trust().anchor_sinks()
        #: batch the fsyncs of appends made inside a running event loop (see the module's
        #: "Group commit"); off, every append fsyncs before it returns
        self.group_commit = False
        self._commit: _GroupCommit | None = None
        self._synced_seq = last_seq  # the last of this writer's blocks an fsync covered
        self._failed: str | None = None  # an fsync failed: nothing more is appended
        #: told the seq of each acknowledged batch's last event (after its fsync and its anchor)
        self.acknowledged: list[Callable[[int], None]] = []
        _, self.folder, self.artifacts_dir = session_paths(path)

    # -- opening

    @classmethod
    def create(
        cls,
        directory: str | os.PathLike[str],
        header: SessionHeader,
        *,
        clock: Callable[[], datetime] = utcnow,
        signer: Signer | None = None,
    ) -> Journal:
        """Start a new change log ``directory/<change-id>.toml``; refuses an existing one.

        The creator is the operator: it takes the session lock and keeps it until
        :meth:`close`.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{header.change_id}.toml"
        if path.exists():
            raise BadInput(f"session {header.change_id} already exists at {path}; use 'cockpit resume {path}'")
        lock = OperatorLock(session_paths(path)[0], header.change_id, header.operator)
        header_bytes = render_header(header)
        try:
            try:
                write_atomically(path, header_bytes, replace=False)
            except FileExistsError:
                raise BadInput(f"session {header.change_id} already exists at {path}") from None
            except OSError as exc:
                raise JournalWriteError(f"cannot create {path}: {exc.strerror or exc}") from None
            fd = open_own_file(path, os.O_RDWR | os.O_APPEND, "a change log", owner=os.geteuid())
        except BaseException:
            lock.release()
            raise
        return cls(
            path,
            fd,
            header,
            header.operator,
            last_seq=0,
            end_offset=len(header_bytes),
            lock=lock,
            clock=clock,
            head=chain_digest(header_bytes),
            signer=signer,
        )

    @classmethod
    def open_for_append(
        cls,
        path: str | os.PathLike[str],
        actor: str,
        *,
        exclusive: bool = True,
        clock: Callable[[], datetime] = utcnow,
        log: SessionLog | None = None,
        signer: Signer | None = None,
    ) -> Journal:
        """Reopen an existing change log to append to it as ``actor``.

        ``exclusive=True`` (the operator, e.g. ``cockpit resume``) takes the session
        lock or raises :class:`SessionLocked` naming its holder; a reviewer passes
        ``exclusive=False``. A torn tail is moved aside before anything is appended (and
        the move recorded); a damaged acknowledged block or a broken chain raises
        :class:`JournalDamaged`: nothing is appended until a person decides.
        ``log``: the file as the caller already read it (not parsed again); anything appended
        since is learnt under the lock as always.
        """
        path = Path(path)
        if not path.is_file():
            raise BadInput(f"{path}: no such file (expected a session file)")
        log = log if log is not None else read_session(path)
        if log.chain.broken_at is not None:
            raise JournalDamaged(
                f"{path}: the change log's chain is broken at seq {log.chain.broken_at} ({log.chain.why}); "
                "nothing more is recorded until a person decides: see `cockpit verify`",
                seq=log.chain.broken_at,
                offset=0,
            )
        lock = OperatorLock(session_paths(path)[0], log.header.change_id, actor) if exclusive else None
        try:  # never through a link; the operator's own log is theirs (a reviewer appends to another's)
            fd = open_own_file(path, os.O_RDWR | os.O_APPEND, "a change log", owner=os.geteuid() if exclusive else None)
        except BaseException:
            if lock:
                lock.release()
            raise
        journal = cls(
            path,
            fd,
            log.header,
            actor,
            last_seq=log.last_seq,
            end_offset=log.end_offset,
            lock=lock,
            clock=clock,
            head=log.chain.head if log.chain.chained else "",
            signer=signer,
        )
        # learn the tail (and move a torn block aside) under the file lock, as an append would
        try:
            with journal._locked():
                journal._catch_up()
        except BaseException:
            journal.close()
            raise
        return journal

    # -- appending

    @property
    def last_seq(self) -> int:
        return self._last_seq

    def append(
        self,
        kind: EventKind | str,
        *,
        actor: str | None = None,
        node: str | None = None,
        stage: str | None = None,
        step: str | None = None,
        item: str | None = None,
        trigger: str | None = None,
        wave: int | None = None,
        reason: str | None = None,
        note: str | None = None,
        facts: Facts | Mapping[str, Any] | None = None,
        precondition: Callable[[], None] | None = None,
    ) -> Event:
        """Record one event durably and return it (with its seq and UTC timestamp).

        The event counts as done only once this returns: the block is written with
        one ``write`` under an exclusive lock and ``fsync``'d. Raises
        :class:`JournalWriteError` if it could not be written; then nothing of it
        is acknowledged (a partial block, if any, is rolled back or left as a torn tail).

        ``facts`` is the kind's facts model (:mod:`cockpit.changelog.facts`) or a mapping
        validated into it; facts the kind's model refuses raise :class:`ValueError`
        and write nothing.
        """
        if self._fd < 0:
            raise JournalWriteError(f"{self.path}: the change log is closed")
        if self._failed is not None:
            raise JournalWriteError(f"{self._failed}; nothing more is recorded")
        kind = EventKind(kind)  # a kind this version does not know is never written
        problem = writer_problem(kind, actor or self.actor, self.header.operator)
        if problem is not None:  # the rules refuse it first; this holds for any writer of the file
            raise ValueError(f"not recorded: {problem}")
        raw_facts = facts.to_toml() if isinstance(facts, Facts) else dict(facts or {})
        clean_facts = to_toml_value(raw_facts)
        # no collection lands between the lock and the fsync: in a cockpit holding a big
        # window's state, a full pass of the cyclic collector is the tail of an append's latency
        with gc_paused(), self._locked():
            self._catch_up()
            if precondition is not None:
                # judged again under the lock, after what others appended: raises to write nothing
                precondition()
            return self._write_locked(
                {
                    "ts": self._clock(),
                    "actor": actor or self.actor,
                    "kind": kind,
                    "node": node,
                    "stage": stage,
                    "step": step,
                    "item": item,
                    "trigger": trigger,
                    "wave": wave,
                    "reason": reason,
                    "note": note,
                    "facts": clean_facts,
                }
            )

    def _write_locked(self, fields: dict[str, Any]) -> Event:
        """Under the file lock: render the next block (chained, signed when there is a key,
        whoever the actor), write it with one ``write`` and ``fsync`` it, and anchor the new head."""
        gap = self._gap if self._chained else 0  # an unchained log cannot say it skipped seqs
        # text UTF-8 cannot hold (a lone surrogate) made writable before the event exists, so
        # the event returned is the one the file holds
        fields = {k: valid_text(v) if isinstance(v, str) else v for k, v in fields.items()}
        event = _build_event({"seq": self._last_seq + gap + 1, **fields})
        # the cockpit's own events too: the process acting for the person whose key it holds
        sign = self.signer.sign if self.signer is not None else None
        if self._chained:
            block = render_event(event, prev=self._head, gap=gap, sign=sign)
        else:
            block = render_event(event)  # a log written before the chain stays as it was
        commit = self._committer()
        try:
            written = os.write(self._fd, block)
            while written < len(block):  # a short write (disk filling up): finish it or learn why not
                more = os.write(self._fd, block[written:])
                if more <= 0:
                    raise OSError(errno.EIO, f"short write ({written} of {len(block)} bytes)")
                written += more
            if commit is None:
                os.fsync(self._fd)
        except OSError as exc:
            self._roll_back(self._end)
            raise JournalWriteError(f"could not record {event.kind} in {self.path}: {exc.strerror or exc}") from None
        self._last_seq = event.seq
        self._gap = 0
        self._end += len(block)
        self._head = chain_digest(block)
        if commit is None:
            self._synced(event.seq, self._head)
        else:  # written in order now; acknowledged once the flush task's fsync covers it
            commit.wrote(event.seq, self._head)
        return event

    def _committer(self) -> _GroupCommit | None:
        """The group commit of the running event loop, when appends are batched and one runs."""
        if not self.group_commit:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self._commit is not None and self._commit.loop is not loop:
            self._settle()  # the loop it was made for is gone: what it held is synced here
        if loop is None:
            return None
        if self._commit is None:
            self._commit = _GroupCommit(self, self._fd, loop)
        return self._commit

    def _settle(self) -> None:
        """Sync here what a group commit holds unsynced, and drop it (its loop is gone, or the log closes)."""
        commit, self._commit = self._commit, None
        if commit is None:
            return
        pending = commit.written
        commit.close()
        if pending is not None and pending[0] > self._synced_seq and self._failed is None:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self._failed = f"could not sync {self.path}: {exc.strerror or exc}"
                commit.wake(0, self._failed)
                return
            self._synced(pending[0], pending[1])
        commit.wake(self._synced_seq, self._failed)

    def _synced(self, seq: int, head: str) -> None:
        """An fsync covered this writer's blocks up to ``seq`` (head ``head``): they are
        acknowledged. The head goes to the anchors, then the waiters and listeners are told."""
        if seq <= self._synced_seq:
            return
        self._synced_seq = seq
        if self.anchors:
            self._anchor(seq, head)
        if self._commit is not None:
            self._commit.wake(seq)
        for listener in list(self.acknowledged):
            listener(seq)

    def _sync_failed(self, why: str) -> None:
        """A batch's fsync failed: what it covered is not acknowledged, and nothing more is
        appended (after a failed fsync the kernel may have dropped the pages: retrying could
        report a loss as durable). The blocks stay as the file holds them, never acknowledged."""
        self._failed = why
        if self._commit is not None:
            self._commit.wake(0, why)

    @property
    def acknowledged_seq(self) -> int:
        """The last of this writer's events an fsync covered (what a crash of the machine keeps)."""
        return self._synced_seq

    def is_acknowledged(self, seq: int) -> bool:
        """Whether event ``seq`` is acknowledged: fsync'd by this writer, or another writer's
        (synced by it), or written before a group commit held anything."""
        commit = self._commit
        if seq <= self._synced_seq or commit is None or commit.written is None:
            return True
        return commit.written[0] < seq

    async def durable(self, seq: int | None = None) -> None:
        """Wait until event ``seq`` (default: the last this writer wrote) is acknowledged: an
        fsync covering it returned. Raises :class:`JournalWriteError` if that fsync failed."""
        target = self._last_seq if seq is None else seq
        if self._failed is not None and target > self._synced_seq:
            raise JournalWriteError(self._failed)
        commit = self._commit
        if commit is None or self.is_acknowledged(target):
            return  # outside a group commit every append was fsync'd before it returned
        fut: asyncio.Future[None] = commit.loop.create_future()
        commit.waiters.append((target, fut))
        await fut

    def _anchor(self, seq: int, head: str) -> None:
        """The new head to the anchor sinks; one that cannot be written does not undo the append
        (the event is on disk), it is said on the anchors' ``failure``."""
        try:
            self.anchors.record(self.header.change_id, seq, head)
        except OSError as exc:
            self.anchors.failure = f"anchor file {self.anchors.file}: {exc.strerror or exc}"

    def record_repair(self, note: str, seq_seen: int) -> Event:
        """Record a person's repair of the log (``note`` says what was removed); the seqs
        the removed bytes held, up to ``seq_seen``, are skipped, never used again."""
        with self._locked():
            self._catch_up()
            self._gap = max(0, seq_seen - self._last_seq)
            return self._write_locked({"ts": self._clock(), "actor": self.actor, "kind": EventKind.NOTE, "note": note})

    def _locked(self) -> FileLock:
        return FileLock(self._fd)

    def _catch_up(self) -> None:
        """Under the file lock: account for blocks other processes appended, move a torn tail aside.

        A damaged acknowledged block raises :class:`JournalDamaged` (from the scanner):
        nothing is appended after it.
        """
        size = os.fstat(self._fd).st_size
        if size == self._end:
            return
        if size < self._end:
            raise JournalWriteError(f"{self.path}: the file shrank under the writer (replaced?)")
        data = os.pread(self._fd, size - self._end, self._end)
        if self._end == 0:  # first look: skip the header
            _, header_end = parse_header(data, str(self.path))
            data = data[header_end:]
            self._end = header_end
        base = self._end
        scan = scan_blocks(data, base, self._last_seq + 1, str(self.path))
        if scan.blocks:  # an unreadable block's seq counts too: never used twice
            last = scan.blocks[-1]
            if self._chained and scan.blocks[0].prev != self._head:
                raise JournalDamaged(
                    f"{self.path}: event {scan.blocks[0].seq} was not chained to the block before it",
                    seq=scan.blocks[0].seq,
                    offset=scan.blocks[0].start,
                )
            self._last_seq = last.seq
            self._head = chain_digest(data[last.start - base : last.end - base])
            self._gap = 0
        self._end = scan.end
        if scan.torn is not None:
            self._set_torn_aside(scan.torn)

    def _set_torn_aside(self, torn: TornTail) -> None:
        """Move a torn tail (never acknowledged) to ``torn-<offset>.bin`` and record that in
        the log; a seq the tail named is skipped (``gap``), never used again."""
        try:
            data = os.pread(self._fd, torn.length, torn.offset)
            self.folder.mkdir(exist_ok=True)
            target = self.folder / f"torn-{torn.offset}.bin"
            n = 1
            while target.exists():  # torn twice at the same place: keep both copies
                if target.read_bytes() == data:  # already kept (a writer died after copying it)
                    break
                n += 1
                target = self.folder / f"torn-{torn.offset}-{n}.bin"
            if not target.exists():
                write_atomically(target, data, replace=False)
            os.ftruncate(self._fd, torn.offset)
            os.fsync(self._fd)
        except OSError as exc:
            raise JournalWriteError(f"cannot move the torn tail of {self.path} aside: {exc.strerror or exc}") from None
        self._end = torn.offset
        if not self._chained:
            return  # a log written before the chain is kept as it was
        self._gap = max(0, torn.seq_seen - self._last_seq)
        self._write_locked(
            {
                "ts": self._clock(),
                "actor": SYSTEM_ACTOR,
                "kind": EventKind.NOTE,
                "note": f"log repaired: a torn final block ({torn.length} bytes at byte {torn.offset}, "
                f"never acknowledged) was moved aside to {target.name}"
                + (f"; seq {torn.seq_seen} is not used again" if self._gap else ""),
            }
        )

    def _roll_back(self, size: int) -> None:
        """After a failed write: cut the file back to ``size`` if we can (we hold the lock)."""
        try:
            if os.fstat(self._fd).st_size > size:
                os.ftruncate(self._fd, size)
                os.fsync(self._fd)
        except OSError:
            pass  # the partial block stays; readers treat it as a torn tail

    # -- artifacts

    def store_artifact(self, data: bytes | str) -> str:
        """Store a large output content-addressed; return its sha256 for the event's ``artifact``."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        digest = hashlib.sha256(raw).hexdigest()
        target = self.artifacts_dir / digest
        if target.exists():
            return digest
        try:
            self.artifacts_dir.mkdir(parents=True, exist_ok=True)
            write_atomically(target, raw, replace=True)
        except OSError as exc:
            raise JournalWriteError(f"cannot store artifact {digest[:12]}: {exc.strerror or exc}") from None
        return digest

    def artifact_path(self, digest: str) -> Path:
        return artifact_path(self.path, digest)

    # -- closing

    def remove_lock_file(self) -> None:
        """Delete the operator lock's file, still held until :meth:`close` (an ended window's:
        see :meth:`OperatorLock.remove_file`)."""
        if self._lock is not None:
            self._lock.remove_file()

    def close(self) -> None:
        if self._fd >= 0:
            self._settle()  # what is written but not yet synced is synced before the file closes
            os.close(self._fd)
            self._fd = -1
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __exit__(self, *exc: object) -> None:
        self.close()


def _build_event(fields: dict[str, Any]) -> Event:
    """The event an append writes, validated into its kind's class (``None`` fields left out)."""
    try:
        return parse_event({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"][1:])  # the first part is the kind
        raise ValueError(f"{fields['kind']} event not recorded: {loc}: {first['msg']}") from None
