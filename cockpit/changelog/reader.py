"""Reading a change log: the whole file (:func:`read_session`), or a live one as it grows
(:class:`JournalFollower`). Every event is validated into its kind's class as it is read;
an older schema goes through :func:`migrate` first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

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


def _events_from_raw(raw_events: list[dict[str, Any]], where: str) -> list[Event]:
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
    return _parse_session(data, str(path), path)


def _parse_session(data: bytes, where: str, path: Path | None) -> SessionLog:
    raw_header, header_end = parse_header(data, where)
    scan = scan_blocks(data[header_end:], header_end, 1, where)
    raw_header, raw_events = migrate(raw_header, scan.raw_events)
    header = validate_header(raw_header, where)
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
        scan = scan_blocks(data, base, self.last_seq + 1, where)
        events = _events_from_raw(scan.raw_events, where)
        self.offset = scan.end
        self.torn = scan.torn
        if events:
            self.last_seq = events[-1].seq
        return events

    def __iter__(self) -> Iterator[Event]:
        return iter(self.poll())
