"""The block format of a change log: TOML values, one self-contained block per event, and
the scanner that tells complete blocks from a block torn by a crash.

See :mod:`cockpit.changelog.journal` for the file layout and the durability rules.
"""

from __future__ import annotations

import base64
import os
import re
import tomllib
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from enum import Enum
from typing import Any

import rtoml
import tomli_w
from pydantic import BaseModel, ValidationError

from cockpit.changelog.chain import CHAINED_SCHEMA, BlockMeta, digest, take_meta, trailers, unreadable_meta
from cockpit.changelog.events import SCHEMA_VERSION, Event
from cockpit.changelog.header import SessionHeader
from cockpit.errors import BadInput

HEADER_END = b"# end of session header\n"


class JournalCorrupt(BadInput):
    """The file is damaged before its last block, or is not a change log at all."""


class JournalDamaged(JournalCorrupt):
    """An acknowledged block (one with its complete trailer) is damaged or out of place.

    Nothing acknowledged is moved aside by itself: appends stop until a person decides
    (``cockpit verify --repair``).
    """

    exit_status = 1

    def __init__(self, message: str, *, seq: int, offset: int) -> None:
        super().__init__(message)
        self.seq = seq
        self.offset = offset


_SEQ_IN_TAIL = re.compile(rb"^\[events\.(\d+)[\].]", re.MULTILINE)
_CUT_TRAILER = re.compile(rb"# end of event (\d+), crc32 ([0-9a-f]{8})\Z")


@dataclass(frozen=True)
class TornTail:
    """A partial last block left by a crash mid-write (no complete trailer): never acknowledged."""

    offset: int  # byte offset where the partial block starts
    length: int  # its length in bytes
    seq_seen: int = 0  # the highest seq its bytes name (a seq it held is never used again)

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
        return valid_text(str(value))
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


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone surrogate (what a decoder's surrogateescape
    makes of bytes that are not UTF-8, or a stray escape) becomes U+FFFD, the replacement
    character, so the block can be written and read back; everything else is kept as is."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def seq_key(seq: int) -> str:
    """The table key of event ``seq``: zero-padded to 6 digits, more when it needs them."""
    return f"{seq:06d}"


def render_header(header: SessionHeader) -> bytes:
    data = to_toml_value(header.model_dump(mode="python"))
    return tomli_w.dumps({"session": data}).encode() + HEADER_END


def render_event(
    event: Event, *, prev: str | None = None, gap: int = 0, sign: Callable[[bytes], bytes] | None = None
) -> bytes:
    """One self-contained block: a blank line, the event's table, the trailer with its CRC.

    ``prev`` (the chain's link, :mod:`.chain`) and ``gap`` go in the event's table after
    ``seq``. With ``sign``, the bytes so far (the *signed bytes*: from the block's leading
    newline through the last line of the event's tables) are signed and the SSHSIG blob
    follows in ``[events.NNNNNN.sig]``; the CRC covers everything before the trailer.
    """
    data = to_toml_value(event.to_toml_dict())
    key = seq_key(event.seq)
    if prev is not None:
        links = {"prev": prev, "gap": gap or None}
        data = {"seq": data.pop("seq")} | {k: v for k, v in links.items() if v is not None} | data
    body = ("\n" + tomli_w.dumps({"events": {key: data}})).encode()
    if sign is not None:
        blob = base64.b64encode(sign(body)).decode()
        body += b"\n" + tomli_w.dumps({"events": {key: {"sig": {"sshsig": blob}}}}).encode()
    return body + b"# end of event %s, crc32 %08x\n" % (key.encode(), zlib.crc32(body))


def render_log(header: SessionHeader, events: Iterable[Event], *, prev: str | None = None) -> bytes:
    """A whole change log (or, with ``prev``, blocks to append after the block whose hash
    it is): the bytes appending each event in turn writes, chained, unsigned."""
    out = [] if prev is not None else [render_header(header)]
    chained = header.schema_version >= CHAINED_SCHEMA
    link = prev if prev is not None else digest(out[0])
    for event in events:
        block = render_event(event, prev=link) if chained else render_event(event)
        out.append(block)
        link = digest(block)
    return b"".join(out)


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
    blocks: list[BlockMeta] = field(default_factory=list)  # one per raw event: where it lies, its links
    end: int = 0  # absolute offset past the last complete block
    torn: TornTail | None = None
    #: complete blocks (checksum and trailer hold) whose text is not a readable event table:
    #: their meta is in ``blocks`` (the chain goes on through them), no raw event is
    unreadable: list[BlockMeta] = field(default_factory=list)


def scan_blocks(data: bytes, base: int, expect_seq: int, where: str) -> BlockScan:
    """Split ``data`` (file bytes from absolute offset ``base``) into complete event blocks.

    A block is complete when its trailer is present, and then it was acknowledged: a CRC
    that does not match or a seq out of place raises :class:`JournalDamaged` naming it. A
    complete block whose text is not a readable TOML event table (invalid UTF-8, nesting
    past the parser's bound) was written as it is: it is listed in ``unreadable`` and the
    scan goes on (a bad block never stops a window). Only bytes after the last complete
    trailer that do not end in one are a torn tail (a write cut short, never acknowledged).
    """
    scan = BlockScan(end=base)
    pos = 0
    for match in trailers(data):
        body = data[pos : match.start()]
        at = base + pos
        seq_named = int(match.group(1))
        if int(match.group(2), 16) != zlib.crc32(body):
            raise JournalDamaged(
                f"{where}: event {seq_named} (byte {at}) is damaged: its checksum does not match",
                seq=seq_named,
                offset=at,
            )
        span = (at, base + match.start(), base + match.end())
        raw, why = event_table(body)
        if raw is not None and raw.get("\0key") == seq_named and not isinstance(raw.get("seq"), int):
            raw, why = None, "its event table has no seq"  # in its place, but not an event
        if raw is None:
            meta = unreadable_meta(body, span, seq_named, why)
            key: object = seq_named if meta.seq == seq_named else meta.seq
        else:
            key = raw.pop("\0key")
            meta = take_meta(raw, span, data, base)
        want = expect_seq + meta.gap
        if key != want or meta.seq != want or seq_named != want:
            raise JournalDamaged(
                f"{where}: event at byte {at} is out of order (expected seq {expect_seq}, found {key})",
                seq=expect_seq,
                offset=at,
            )
        if raw is None:
            scan.unreadable.append(meta)
        else:
            scan.raw_events.append(raw)
        scan.blocks.append(meta)
        expect_seq = want + 1
        pos = match.end()
    scan.end = base + pos
    tail = data[pos:]
    if tail:
        cut = _CUT_TRAILER.search(tail)
        if cut is not None and int(cut.group(2), 16) == zlib.crc32(tail[: cut.start()]):
            seq = int(cut.group(1))
            raise JournalDamaged(
                f"{where}: event {seq} (byte {base + pos}) is complete but its trailer's last byte is missing "
                "(the file was cut after it was acknowledged)",
                seq=seq,
                offset=base + pos,
            )
        seen = [int(m.group(1)) for m in _SEQ_IN_TAIL.finditer(tail)]
        scan.torn = TornTail(base + pos, len(tail), max(seen, default=0))
    return scan


def event_table(body: bytes) -> tuple[dict[str, Any] | None, str]:
    """The event table of one block (its key under ``"\\0key"``: an int, or the text when
    not a number), or None and why it cannot be read. One parse per block: rtoml's parse
    of many blocks as one document was slower than block by block."""
    try:
        table = loads_block(body.decode())["events"]
    except UnicodeDecodeError:
        return None, "not valid UTF-8"
    except (rtoml.TomlParsingError, KeyError, TypeError, RecursionError) as exc:
        return None, f"not a TOML event table ({str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__})"
    if not isinstance(table, dict) or not table:
        return None, "not an event table"
    if len(table) != 1:  # a block holds one event: more is an insertion, out of place
        return {"\0key": f"{len(table)} event tables"}, ""
    ((key, raw),) = table.items()
    if not isinstance(raw, dict):
        return None, "not an event table"
    raw["\0key"] = int(key) if key.isdigit() else key
    return raw, ""


def loads_block(text: str) -> dict[str, Any]:
    # rtoml (compiled) reads many times faster than tomllib; a property test holds
    # the two equal on what tomli-w writes and on what both refuse.
    result: dict[str, Any] = rtoml.loads(text)
    return result
