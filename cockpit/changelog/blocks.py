"""The block format of a change log: TOML values, one self-contained block per event, and
the scanner that tells complete blocks from a block torn by a crash.

See :mod:`cockpit.changelog.journal` for the file layout and the durability rules.
"""

from __future__ import annotations

import os
import re
import tomllib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from enum import Enum
from typing import Any

import rtoml
import tomli_w
from pydantic import BaseModel, ValidationError

from cockpit.changelog.events import SCHEMA_VERSION, Event
from cockpit.changelog.header import SessionHeader
from cockpit.errors import BadInput

HEADER_END = b"# end of session header\n"
_TRAILER = re.compile(rb"^# end of event (\d+), crc32 ([0-9a-f]{8})\n", re.MULTILINE)


class JournalCorrupt(BadInput):
    """The file is damaged before its last block, or is not a change log at all."""


@dataclass(frozen=True)
class TornTail:
    """A partial last block left by a crash mid-write: ignored, reported, never acknowledged."""

    offset: int  # byte offset where the partial block starts
    length: int  # its length in bytes

    def describe(self) -> str:
        return f"torn final block ignored: {self.length} bytes at byte {self.offset} (a crash mid-write)"


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
    data = to_toml_value(event.to_toml_dict())
    body = ("\n" + tomli_w.dumps({"events": {seq_key(event.seq): data}})).encode()
    return body + b"# end of event %s, crc32 %08x\n" % (seq_key(event.seq).encode(), zlib.crc32(body))


def _check_schema(raw: dict[str, Any], where: str) -> None:
    version = raw.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise BadInput(f"{where}: written by a newer cockpit (schema {version}); this one reads up to {SCHEMA_VERSION}")


def parse_header(data: bytes, where: str) -> tuple[dict[str, Any], int]:
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


def validate_header(raw: dict[str, Any], where: str) -> SessionHeader:
    try:
        return SessionHeader.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise JournalCorrupt(f"{where}: session.{loc}: {first['msg']}") from None


@dataclass
class BlockScan:
    raw_events: list[dict[str, Any]] = field(default_factory=list)
    end: int = 0  # absolute offset past the last complete block
    torn: TornTail | None = None


def scan_blocks(data: bytes, base: int, expect_seq: int, where: str) -> BlockScan:
    """Split ``data`` (file bytes from absolute offset ``base``) into complete event blocks.

    A block is complete when its trailer is present and its CRC matches. Damage in
    the last block is a torn tail (it was never acknowledged); damage before a
    complete block is corruption and raises :class:`JournalCorrupt`.
    """
    scan = BlockScan(end=base)
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
                table = loads_block(body.decode())["events"]
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


def _read_intact_run(data: bytes, trailers: list[re.Match[bytes]], expect_seq: int, scan: BlockScan) -> int:
    """The fast path of :func:`scan_blocks`: when every block's checksum and trailer hold,
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
        table = loads_block(data[:pos].decode())["events"]
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


def loads_block(text: str) -> dict[str, Any]:
    # rtoml (compiled) reads many times faster than tomllib; a property test holds
    # the two equal on what tomli-w writes and on what both refuse.
    result: dict[str, Any] = rtoml.loads(text)
    return result
