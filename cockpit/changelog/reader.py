"""Reading a change log: the whole file (:func:`read_session`), or a live one as it grows
(:class:`JournalFollower`). Every event is validated into its kind's class as it is read;
an older schema goes through :func:`migrate` first.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cockpit.changelog.blocks import _TRAILER as TRAILER  # read-only: where one block ends
from cockpit.changelog.blocks import JournalCorrupt, TornTail, parse_header, scan_blocks, validate_header
from cockpit.changelog.events import SCHEMA_VERSION, Event, parse_event, parse_events
from cockpit.changelog.header import SessionHeader
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

    @property
    def last_seq(self) -> int:
        return self.events[-1].seq if self.events else 0


def migrate(header: dict[str, Any], events: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Bring a change log written by an older schema up to :data:`SCHEMA_VERSION`.

    Works on the raw TOML tables, before validation, one version step at a time.
    Migration notes:

    - schema 1: the first schema (this one). Nothing to migrate.

    When schema 2 comes, add a ``_from_1(header, events)`` step here that rewrites
    what changed (renamed keys, new required fields with their old meaning), sets
    ``schema_version`` to 2, and note it above. Files are never rewritten in place:
    the migration happens on every read. A big log is read in chunks: a step is given the
    original header with each chunk's events, so it must work event by event.
    """
    version = header.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise JournalCorrupt(f"unknown change-log schema {version!r}")
    steps: dict[int, Callable[[dict[str, Any], list[dict[str, Any]]], tuple[dict[str, Any], list[dict[str, Any]]]]] = {}
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


def _events_from_raw(raw_events: list[dict[str, Any]], where: str) -> list[Event]:
    """The events of ``raw_events``, validated; consumes the list (emptied as it goes)."""
    events: list[Event] = []
    while raw_events:
        chunk = raw_events[:VALIDATE_CHUNK]
        del raw_events[:VALIDATE_CHUNK]  # the raw tables go as soon as their events exist
        events += _validated(chunk, where)
    return events


def _validated(raw_events: list[dict[str, Any]], where: str) -> list[Event]:
    try:
        return parse_events(raw_events)
    except ValidationError:
        pass  # find and name the first bad event, one by one
    events = []
    for raw in raw_events:
        try:
            events.append(parse_event(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            if first["type"] == "union_tag_not_found":
                raise JournalCorrupt(f"{where}: event {raw.get('seq')}: kind: missing or not a string") from None
            # the first part of the location is the kind the union chose: the rest is the field
            loc = ".".join(str(p) for p in first["loc"][1:])
            raise JournalCorrupt(f"{where}: event {raw.get('seq')}: {loc}: {first['msg']}") from None
    return events


#: A change log of a long window is tens of megabytes; past this it is not one a person could review.
SESSION_MAX_BYTES = 1024 * 1024 * 1024


def read_session(path: str | os.PathLike[str]) -> SessionLog:
    """Read a change log: its header, every complete event, and a torn tail if there is one."""
    path = Path(path)
    data = read_user_file(path, "a session file", max_bytes=SESSION_MAX_BYTES)
    with gc_paused():
        return _parse_session(data, str(path), path)


def read_session_folding(
    path: str | os.PathLike[str], consume: Callable[[SessionHeader, list[Event]], None]
) -> SessionLog:
    """:func:`read_session` for a log that need not be held whole (``resume`` folds it as it
    reads): each chunk of events goes to ``consume`` with the header as soon as it is read,
    and the log returned keeps only the last event (its ``last_seq`` holds)."""
    path = Path(path)
    data = read_user_file(path, "a session file", max_bytes=SESSION_MAX_BYTES)
    with gc_paused():
        return _parse_session(data, str(path), path, consume)


def _parse_session(
    data: bytes, where: str, path: Path | None, consume: Callable[[SessionHeader, list[Event]], None] | None = None
) -> SessionLog:
    raw_header, header_end = parse_header(data, where)
    header = validate_header(migrate(dict(raw_header), [])[0], where)
    events: list[Event] = []
    pos, end, torn = header_end, header_end, None
    while pos < len(data):
        cut = _chunk_end(data, pos)
        expect = events[-1].seq + 1 if events else 1
        scan = scan_blocks(data[pos:cut], pos, expect, where)
        if scan.torn is not None and cut < len(data):
            # damage with blocks after it: scan the rest in one go, which tells corruption from a torn tail
            scan = scan_blocks(data[pos:], pos, expect, where)
            cut = len(data)
        chunk = _events_from_raw(migrate(dict(raw_header), scan.raw_events)[1], where)
        if consume is None:
            events += chunk
        elif chunk:
            consume(header, chunk)
            events = chunk[-1:]
        end, torn = scan.end, scan.torn
        pos = cut
    return SessionLog(header=header, events=events, torn=torn, path=path, end_offset=end)


#: blocks handed to the scanner at a time, in bytes: its TOML parse of a whole 100,000-event
#: log at once held a parsed copy several times the file's size besides the events
SCAN_CHUNK_BYTES = 2 * 1024 * 1024


def _chunk_end(data: bytes, pos: int) -> int:
    """Just past the first block trailer at or after ``pos + SCAN_CHUNK_BYTES`` (the end of the data if none)."""
    if pos + SCAN_CHUNK_BYTES >= len(data):
        return len(data)
    match = TRAILER.search(data, pos + SCAN_CHUNK_BYTES)
    return match.end() if match else len(data)


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
            raise BadInput(f"{self.path}: no such file") from None
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
            raw_header, header_end = parse_header(data, where)
            migrate(raw_header, [])
            self.header = validate_header(raw_header, where)
            data = data[header_end:]
            base = header_end
            self.offset = header_end
        with gc_paused():
            scan = scan_blocks(data, base, self.last_seq + 1, where)
            events = _events_from_raw(scan.raw_events, where)
        self.offset = scan.end
        self.torn = scan.torn
        if events:
            self.last_seq = events[-1].seq
        return events

    def __iter__(self) -> Iterator[Event]:
        return iter(self.poll())


def follower_after(log: SessionLog) -> JournalFollower:
    """A follower of ``log``'s file that starts just past what ``log`` holds (no second parse)."""
    assert log.path is not None, "a follower needs the log's file"
    follower = JournalFollower(log.path)
    follower.header = log.header
    follower.offset = log.end_offset
    follower.last_seq = log.last_seq
    follower.torn = log.torn  # shown at once, not only after the first poll
    return follower
