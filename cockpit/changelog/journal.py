"""The session change log: one crash-safe, append-only TOML file per change window.

File layout (``sessions/<change-id>.toml``)::

    [session]                       # SessionHeader, written once, atomically
    schema_version = 1
    change_id = "CHG-1042"
    ...
    [session.parameters]
    target_branch = "580"
    # end of session header

    [events.000001]                 # one self-contained block per event
    seq = 1
    ts = 2026-08-05 10:00:00+00:00
    actor = "alice"
    kind = "session-started"

    [events.000001.facts]           # sub-tables nest under the event's own table
    ...
    # end of event 000001, crc32 1a2b3c4d

Each block is rendered on its own (``{"events": {"000001": {...}}}``), so a list of
tables inside ``facts`` comes out as ``[[events.000001.facts.x]]`` or an inline
array *inside* the block, and blocks appended one after another still form one
TOML document. The trailer comment closes a block: TOML readers ignore it, and
this module uses it (with the CRC of the block's bytes) to tell a complete block
from one torn by a crash mid-write. String values never hold a raw newline
(tomli-w escapes them), so a line that starts with ``# end of event`` or
``[events.`` can only be structure.

TOML has no null: ``None`` values are dropped, recursively (a dict key whose value
is ``None`` is left out, as is a ``None`` element of a list); a reader treats a
missing key as ``None``. Datetimes stay TOML datetimes, always in UTC; a naive
datetime is refused rather than guessed.

Durability: an append renders the block, takes an exclusive ``flock`` on the file,
learns the latest seq from the bytes other processes appended since, writes the
block with one ``os.write`` on an ``O_APPEND`` descriptor, ``fsync``s, and only then
returns the :class:`~cockpit.changelog.events.Event`. What has been returned is on disk. A
crash can leave at most one partial block at the end; readers report it as a
:class:`TornTail` and ignore it, and the next writer moves it aside (a copy in
``sessions/<change-id>/torn-<offset>.bin``) before appending.

The operator's process also holds ``sessions/<change-id>.lock`` (a non-blocking
``flock``) for its lifetime, so a second operator is refused with the holder's
name; reviewers append sign-offs without it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import tempfile
import tomllib
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any

import rtoml
import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cockpit import __version__
from cockpit.changelog.events import SCHEMA_VERSION, Event, EventKind, utcnow
from cockpit.errors import BadInput, CockpitError

CHANGE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_CHANGE_ID = re.compile(CHANGE_ID_PATTERN)

HEADER_END = b"# end of session header\n"
_TRAILER = re.compile(rb"^# end of event (\d+), crc32 ([0-9a-f]{8})\n", re.MULTILINE)

#: Step outputs larger than this go to an artifact (the session engine applies it).
ARTIFACT_THRESHOLD = 8 * 1024


class JournalWriteError(CockpitError):
    """The change log could not be written (disk full, I/O error): the event was not recorded."""


class SessionLocked(CockpitError):
    """Another operator process holds the session."""


class JournalCorrupt(BadInput):
    """The file is damaged before its last block, or is not a change log at all."""


def validate_change_id(change_id: str) -> str:
    """Return ``change_id`` if it is safe as a file name, else raise :class:`BadInput`."""
    if not _CHANGE_ID.match(change_id):
        raise BadInput(
            f"bad change id {change_id!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return change_id


class SessionHeader(BaseModel):
    """The ``[session]`` table: what this change window is, written once at creation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = SCHEMA_VERSION
    change_id: str
    runbook_id: str
    runbook_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    runbook_path: str = ""
    operator: str = Field(min_length=1)
    hosts: list[str] = Field(default_factory=list)
    #: how each host was reached (name, address, port, user from the inventory), so a resume
    #: connects to the same machines; absent in logs written before it existed
    targets: list[dict[str, Any]] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)
    tool_version: str = __version__
    created_at: datetime = Field(default_factory=utcnow)

    @field_validator("change_id")
    @classmethod
    def _change_id(cls, value: str) -> str:
        if not _CHANGE_ID.match(value):
            raise ValueError("1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return value

    @field_validator("created_at")
    @classmethod
    def _utc(cls, ts: datetime) -> datetime:
        if ts.tzinfo is None:
            raise ValueError("timestamp must carry a UTC offset")
        return ts.astimezone(UTC)


@dataclass(frozen=True)
class TornTail:
    """A partial last block left by a crash mid-write: ignored, reported, never acknowledged."""

    offset: int  # byte offset where the partial block starts
    length: int  # its length in bytes

    def describe(self) -> str:
        return f"torn final block ignored: {self.length} bytes at byte {self.offset} (a crash mid-write)"


@dataclass(frozen=True)
class SessionLog:
    """A change log as read from disk: header, the complete events in order, a torn tail if any."""

    header: SessionHeader
    events: list[Event]
    torn: TornTail | None = None
    path: Path | None = None
    #: byte offset just past the last complete block (where the next block goes)
    end_offset: int = 0

    @property
    def last_seq(self) -> int:
        return self.events[-1].seq if self.events else 0


# --------------------------------------------------------------------------- values


def to_toml_value(value: Any) -> Any:
    """``value`` as TOML-able data: ``None`` dropped recursively, datetimes in UTC.

    Mappings get string keys, tuples and sets become lists (sets sorted), enums
    their value, pydantic models their dump. Bytes are refused: store them as an
    artifact and record its sha256.
    """
    if isinstance(value, bool | int | float | Decimal):
        return value
    if isinstance(value, Enum):
        return to_toml_value(value.value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value.isoformat()} in the change log: give it a UTC offset")
        return value.astimezone(UTC)
    if isinstance(value, date | time):
        return value
    if isinstance(value, BaseModel):
        return to_toml_value(value.model_dump(mode="python"))
    if isinstance(value, Mapping):
        return {str(k): to_toml_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, set | frozenset):
        items = [v for v in value if v is not None]
        try:
            items.sort()
        except TypeError:
            items.sort(key=repr)
        return [to_toml_value(v) for v in items]
    if isinstance(value, list | tuple):
        return [to_toml_value(v) for v in value if v is not None]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, bytes | bytearray):
        raise ValueError("bytes cannot go in the change log: store them with store_artifact()")
    raise ValueError(f"{type(value).__name__} is not a TOML value")


def seq_key(seq: int) -> str:
    """The table key of event ``seq``: zero-padded to 6 digits, more when it needs them."""
    return f"{seq:06d}"


def render_header(header: SessionHeader) -> bytes:
    data = to_toml_value(header.model_dump(mode="python"))
    return tomli_w.dumps({"session": data}).encode() + HEADER_END


def render_event(event: Event) -> bytes:
    """One self-contained block: a blank line, the event's table, the trailer with its CRC."""
    data = to_toml_value(event.model_dump(mode="python", exclude_none=True))
    if not data.get("facts"):
        data.pop("facts", None)
    body = ("\n" + tomli_w.dumps({"events": {seq_key(event.seq): data}})).encode()
    return body + b"# end of event %s, crc32 %08x\n" % (seq_key(event.seq).encode(), zlib.crc32(body))


# --------------------------------------------------------------------------- reading


def migrate(header: dict[str, Any], events: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Bring a change log written by an older schema up to :data:`SCHEMA_VERSION`.

    Works on the raw TOML tables, before validation, one version step at a time.
    Migration notes:

    - schema 1: the first schema (this one). Nothing to migrate.

    When schema 2 comes, add a ``_from_1(header, events)`` step here that rewrites
    what changed (renamed keys, new required fields with their old meaning), sets
    ``schema_version`` to 2, and note it above. Files are never rewritten in place:
    the migration happens on every read.
    """
    version = header.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise JournalCorrupt(f"unknown change-log schema {version!r}")
    steps: dict[int, Callable[[dict[str, Any], list[dict[str, Any]]], tuple[dict[str, Any], list[dict[str, Any]]]]] = {}
    while version < SCHEMA_VERSION:
        header, events = steps[version](header, events)
        version = header["schema_version"]
    return header, events


def _check_schema(raw: dict[str, Any], where: str) -> None:
    version = raw.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise BadInput(f"{where}: written by a newer cockpit (schema {version}); this one reads up to {SCHEMA_VERSION}")


def _parse_header(data: bytes, where: str) -> tuple[dict[str, Any], int]:
    """Raw ``[session]`` table and the offset just past the header."""
    end = data.find(HEADER_END)
    if end < 0:
        raise JournalCorrupt(f"{where}: not a cockpit change log (no complete [session] header)")
    end += len(HEADER_END)
    try:
        raw = tomllib.loads(data[:end].decode())["session"]
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, KeyError) as exc:
        raise JournalCorrupt(f"{where}: the [session] header is not valid: {exc}") from None
    _check_schema(raw, where)
    return raw, end


def _validate_header(raw: dict[str, Any], where: str) -> SessionHeader:
    try:
        return SessionHeader.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise JournalCorrupt(f"{where}: session.{loc}: {first['msg']}") from None


@dataclass
class _Scan:
    raw_events: list[dict[str, Any]] = field(default_factory=list)
    end: int = 0  # absolute offset past the last complete block
    torn: TornTail | None = None


def _scan_blocks(data: bytes, base: int, expect_seq: int, where: str) -> _Scan:
    """Split ``data`` (file bytes from absolute offset ``base``) into complete event blocks.

    A block is complete when its trailer is present and its CRC matches. Damage in
    the last block is a torn tail (it was never acknowledged); damage before a
    complete block is corruption and raises :class:`JournalCorrupt`.
    """
    scan = _Scan(end=base)
    trailers = list(_TRAILER.finditer(data))
    pos = _read_intact_run(data, trailers, expect_seq, scan)
    if pos == len(data):
        scan.end = base + pos
        return scan
    done = len(scan.raw_events)
    expect_seq += done
    scan.end = base + pos
    pending_damage: int | None = None  # offset of a damaged block, fatal if a good one follows
    for match in trailers[done:]:
        body = data[pos : match.start()]
        ok = int(match.group(2), 16) == zlib.crc32(body)
        if ok and pending_damage is None:
            try:
                table = _loads_block(body.decode())["events"]
                (key, raw), *rest = table.items()
            except (rtoml.TomlParsingError, UnicodeDecodeError, KeyError, ValueError):
                ok = False
            else:
                if rest or int(key) != expect_seq or raw.get("seq") != expect_seq or int(match.group(1)) != expect_seq:
                    raise JournalCorrupt(
                        f"{where}: event at byte {base + pos} is out of order (expected seq {expect_seq}, found {key})"
                    )
                scan.raw_events.append(raw)
                expect_seq += 1
                pos = match.end()
                scan.end = base + pos
                continue
        if pending_damage is not None:
            raise JournalCorrupt(f"{where}: event block at byte {pending_damage} is damaged (checksum mismatch)")
        pending_damage = base + pos
        pos = match.end()
    if pending_damage is not None:
        scan.torn = TornTail(pending_damage, base + len(data) - pending_damage)
    elif pos < len(data):
        scan.torn = TornTail(base + pos, len(data) - pos)
    return scan


def _read_intact_run(data: bytes, trailers: list[re.Match[bytes]], expect_seq: int, scan: _Scan) -> int:
    """The fast path of :func:`_scan_blocks`: when every block's checksum and trailer hold,
    parse them as one TOML document (one parser call instead of one per block) and fill
    ``scan``; return how far that got, 0 when anything is off (the caller then goes block
    by block and says precisely what is wrong)."""
    pos = 0
    for offset, match in enumerate(trailers):
        if int(match.group(1)) != expect_seq + offset or int(match.group(2), 16) != zlib.crc32(
            data[pos : match.start()]
        ):
            return 0
        pos = match.end()
    if not trailers or data[pos:].strip():
        return 0  # a torn tail or stray bytes: let the careful path describe them
    try:
        table = _loads_block(data[:pos].decode())["events"]
    except (rtoml.TomlParsingError, UnicodeDecodeError, KeyError):
        return 0
    raws = list(table.values()) if isinstance(table, dict) else []
    keys = list(table) if isinstance(table, dict) else []
    if len(raws) != len(trailers) or any(
        not key.isdigit() or int(key) != expect_seq + i or not isinstance(raw, dict) or raw.get("seq") != expect_seq + i
        for i, (key, raw) in enumerate(zip(keys, raws, strict=True))
    ):
        return 0
    scan.raw_events.extend(raws)
    return pos


def _loads_block(text: str) -> dict[str, Any]:
    # rtoml (compiled) reads many times faster than tomllib; a property test holds
    # the two equal on what tomli-w writes and on what both refuse.
    result: dict[str, Any] = rtoml.loads(text)
    return result


def _events_from_raw(raw_events: list[dict[str, Any]], where: str) -> list[Event]:
    events = []
    for raw in raw_events:
        try:
            events.append(Event.model_validate(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise JournalCorrupt(f"{where}: event {raw.get('seq')}: {loc}: {first['msg']}") from None
    return events


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"no session file at {path}") from None
    except IsADirectoryError:
        raise BadInput(f"{path} is a directory, not a session file") from None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None


def read_session(path: str | os.PathLike[str]) -> SessionLog:
    """Read a change log: its header, every complete event, and a torn tail if there is one."""
    path = Path(path)
    data = _read_bytes(path)
    return _parse_session(data, str(path), path)


def _parse_session(data: bytes, where: str, path: Path | None) -> SessionLog:
    raw_header, header_end = _parse_header(data, where)
    scan = _scan_blocks(data[header_end:], header_end, 1, where)
    raw_header, raw_events = migrate(raw_header, scan.raw_events)
    header = _validate_header(raw_header, where)
    events = _events_from_raw(raw_events, where)
    return SessionLog(header=header, events=events, torn=scan.torn, path=path, end_offset=scan.end)


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

    def poll(self) -> list[Event]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            raise BadInput(f"no session file at {self.path}") from None
        if size < self.offset:
            raise JournalCorrupt(f"{self.path}: the file shrank below its last complete event (replaced?)")
        if self.header is not None and size == self.offset:
            self.torn = None
            return []
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read(size - self.offset)
        where = str(self.path)
        base = self.offset
        if self.header is None:
            raw_header, header_end = _parse_header(data, where)
            migrate(raw_header, [])
            self.header = _validate_header(raw_header, where)
            data = data[header_end:]
            base = header_end
            self.offset = header_end
        scan = _scan_blocks(data, base, self.last_seq + 1, where)
        events = _events_from_raw(scan.raw_events, where)
        self.offset = scan.end
        self.torn = scan.torn
        if events:
            self.last_seq = events[-1].seq
        return events

    def __iter__(self) -> Iterator[Event]:
        return iter(self.poll())


# --------------------------------------------------------------------------- writing


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(target: Path, data: bytes, *, replace: bool) -> None:
    """temp file + fsync + rename (or a no-clobber link) + directory fsync."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; a reviewer's view reads these files too
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        if replace:
            os.replace(tmp, target)
        else:
            os.link(tmp, target)  # fails with FileExistsError rather than clobbering
            os.unlink(tmp)
        tmp = ""
        _fsync_dir(target.parent)
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def session_paths(path: Path) -> tuple[Path, Path, Path]:
    """(lock file, per-session folder, artifacts folder) of the change log at ``path``."""
    folder = path.with_suffix("")
    return path.with_suffix(".lock"), folder, folder / "artifacts"


class _OperatorLock:
    """``sessions/<id>.lock``: held with a non-blocking flock for the operator's lifetime."""

    def __init__(self, lock_path: Path, change_id: str, who: str) -> None:
        self.path = lock_path
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(os.pread(fd, 4096, 0))
            os.close(fd)
            raise SessionLocked(
                f"session {change_id} is already open by {holder}; join it as a reviewer, or wait until it closes"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        info = {"who": who, "pid": os.getpid(), "host": socket.gethostname(), "since": utcnow().isoformat()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock; the file stays (unlinking a lock file races)
            self.fd = -1


def _describe_holder(raw: bytes) -> str:
    try:
        info = json.loads(raw.decode())
        return f"{info['who']} (pid {info['pid']} on {info['host']} since {info['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


class Journal:
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
        lock: _OperatorLock | None,
        clock: Callable[[], datetime],
    ) -> None:
        self.path = path
        self.header = header
        self.actor = actor
        self._fd = fd
        self._last_seq = last_seq
        self._end = end_offset
        self._lock = lock
        self._clock = clock
        _, self.folder, self.artifacts_dir = session_paths(path)

    # -- opening

    @classmethod
    def create(
        cls, directory: str | os.PathLike[str], header: SessionHeader, *, clock: Callable[[], datetime] = utcnow
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
        lock = _OperatorLock(session_paths(path)[0], header.change_id, header.operator)
        try:
            try:
                _write_atomically(path, render_header(header), replace=False)
            except FileExistsError:
                raise BadInput(f"session {header.change_id} already exists at {path}") from None
            except OSError as exc:
                raise JournalWriteError(f"cannot create {path}: {exc.strerror or exc}") from None
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except BaseException:
            lock.release()
            raise
        return cls(
            path, fd, header, header.operator, last_seq=0, end_offset=os.fstat(fd).st_size, lock=lock, clock=clock
        )

    @classmethod
    def open_for_append(
        cls,
        path: str | os.PathLike[str],
        actor: str,
        *,
        exclusive: bool = True,
        clock: Callable[[], datetime] = utcnow,
    ) -> Journal:
        """Reopen an existing change log to append to it as ``actor``.

        ``exclusive=True`` (the operator, e.g. ``cockpit resume``) takes the session
        lock or raises :class:`SessionLocked` naming its holder; a reviewer passes
        ``exclusive=False``. A torn tail is moved aside before anything is appended.
        """
        path = Path(path)
        if not path.is_file():
            raise BadInput(f"no session file at {path}")
        log = read_session(path)
        lock = _OperatorLock(session_paths(path)[0], log.header.change_id, actor) if exclusive else None
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except BaseException:
            if lock:
                lock.release()
            raise
        journal = cls(
            path, fd, log.header, actor, last_seq=log.last_seq, end_offset=log.end_offset, lock=lock, clock=clock
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
        facts: Mapping[str, Any] | None = None,
        precondition: Callable[[], None] | None = None,
    ) -> Event:
        """Record one event durably and return it (with its seq and UTC timestamp).

        The event counts as done only once this returns: the block is written with
        one ``write`` under an exclusive lock and ``fsync``'d. Raises
        :class:`JournalWriteError` if it could not be written; then nothing of it
        is acknowledged (a partial block, if any, is rolled back or left as a torn tail).
        """
        if self._fd < 0:
            raise JournalWriteError(f"{self.path}: the change log is closed")
        clean_facts = to_toml_value(dict(facts or {}))
        with self._locked():
            self._catch_up()
            if precondition is not None:
                # judged again under the lock, after what others appended: raises to write nothing
                precondition()
            event = Event(
                seq=self._last_seq + 1,
                ts=self._clock(),
                actor=actor or self.actor,
                kind=EventKind(kind),
                node=node,
                stage=stage,
                step=step,
                item=item,
                trigger=trigger,
                wave=wave,
                reason=reason,
                note=note,
                facts=clean_facts,
            )
            block = render_event(event)
            try:
                written = os.write(self._fd, block)
                while written < len(block):  # a short write (disk filling up): finish it or learn why not
                    more = os.write(self._fd, block[written:])
                    if more <= 0:
                        raise OSError(errno.EIO, f"short write ({written} of {len(block)} bytes)")
                    written += more
                os.fsync(self._fd)
            except OSError as exc:
                self._roll_back(self._end)
                raise JournalWriteError(
                    f"could not record {event.kind} in {self.path}: {exc.strerror or exc}"
                ) from None
            self._last_seq = event.seq
            self._end += len(block)
        return event

    def _locked(self) -> _FileLock:
        return _FileLock(self._fd)

    def _catch_up(self) -> None:
        """Under the file lock: account for blocks other processes appended, move a torn tail aside."""
        size = os.fstat(self._fd).st_size
        if size == self._end:
            return
        if size < self._end:
            raise JournalWriteError(f"{self.path}: the file shrank under the writer (replaced?)")
        data = os.pread(self._fd, size - self._end, self._end)
        if self._end == 0:  # first look: skip the header
            _, header_end = _parse_header(data, str(self.path))
            data = data[header_end:]
            self._end = header_end
        scan = _scan_blocks(data, self._end, self._last_seq + 1, str(self.path))
        if scan.raw_events:
            self._last_seq = int(scan.raw_events[-1]["seq"])
        self._end = scan.end
        if scan.torn is not None:
            self._set_torn_aside(scan.torn)

    def _set_torn_aside(self, torn: TornTail) -> None:
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
                _write_atomically(target, data, replace=False)
            os.ftruncate(self._fd, torn.offset)
            os.fsync(self._fd)
        except OSError as exc:
            raise JournalWriteError(f"cannot move the torn tail of {self.path} aside: {exc.strerror or exc}") from None

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
            _write_atomically(target, raw, replace=True)
        except OSError as exc:
            raise JournalWriteError(f"cannot store artifact {digest[:12]}: {exc.strerror or exc}") from None
        return digest

    def artifact_path(self, digest: str) -> Path:
        return artifact_path(self.path, digest)

    # -- closing

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _FileLock:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


def artifact_path(session_path: str | os.PathLike[str], digest: str) -> Path:
    """Where the artifact ``digest`` of the change log at ``session_path`` lives."""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise BadInput(f"bad artifact reference {digest!r}: expected a sha256")
    return session_paths(Path(session_path))[2] / digest


def read_artifact(session_path: str | os.PathLike[str], digest: str) -> bytes:
    """An artifact's bytes, checked against its sha256."""
    target = artifact_path(session_path, digest)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"artifact {digest[:12]} is missing ({target})") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise JournalCorrupt(f"artifact {digest[:12]} does not match its sha256 ({target})")
    return data
