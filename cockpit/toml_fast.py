"""A fast reader for the plain TOML subset that tomli-w writes for change-log events.

:mod:`tomllib` reads about 2.5 MB/s, which makes a 10,000-event change log take
well over a second to load. Almost every event block uses only table headers
with bare keys, ``key = scalar`` lines and arrays of scalars, so this module reads
exactly that subset, and raises :class:`NotFast` on anything else (arrays of
tables, inline tables, nested arrays, literal or multi-line strings, quoted keys,
unusual escapes, non-UTC datetimes, ...). The caller then uses :mod:`tomllib`
for that block, so the result is always what tomllib would give: the fast path
either agrees with it (a property test holds them together) or steps aside.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any


class NotFast(Exception):
    """The text uses TOML outside the fast subset: parse it with tomllib."""


_HEADER = re.compile(r"\[([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\]")
_KEY_VALUE = re.compile(r"([A-Za-z0-9_-]+) = (.+)")
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:e[+-]?[0-9]+)?|e[+-]?[0-9]+)")
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?\+00:00")
# raw control characters TOML forbids in a basic string (tab is allowed)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# escapes read left to right; a lone backslash left over is one JSON knows but TOML
# does not (\/), or a \u that would decode to a lone surrogate
_ESCAPE = re.compile(r'\\(?:[btnfr"\\]|u(?![dD][89abAB])[0-9a-fA-F]{4})?')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON = json.JSONDecoder(strict=False)  # tab is legal raw in a TOML basic string


def _scalar(text: str) -> Any:
    if text[0] == '"':
        if not _STRING.fullmatch(text) or _CONTROL.search(text):
            raise NotFast(text)
        if "\\" not in text:
            return text[1:-1]
        if any(len(m.group()) == 1 for m in _ESCAPE.finditer(text)):
            raise NotFast(text)
        return _JSON.decode(text)
    if text == "true":
        return True
    if text == "false":
        return False
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if _DATETIME.fullmatch(text):
        return datetime.fromisoformat(text)
    raise NotFast(text)


def loads(text: str) -> dict[str, Any]:
    """Parse ``text`` if it is in the fast subset, else raise :class:`NotFast`."""
    root: dict[str, Any] = {}
    table = root
    defined: set[tuple[str, ...]] = set()
    lines = text.split("\n")
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        i += 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            match = _HEADER.fullmatch(line)
            if not match:
                raise NotFast(line)
            path = tuple(match.group(1).split("."))
            if path in defined:
                raise NotFast(line)
            defined.add(path)
            table = root
            for part in path:
                nxt = table.setdefault(part, {})
                if not isinstance(nxt, dict):
                    raise NotFast(line)
                table = nxt
            if table:  # a table that already holds keys is being reopened
                raise NotFast(line)
            continue
        match = _KEY_VALUE.fullmatch(line)
        if not match:
            raise NotFast(line)
        key, value = match.groups()
        if key in table:
            raise NotFast(line)
        if value == "[]":
            table[key] = []
        elif value == "[":
            items = []
            while True:
                if i >= n:
                    raise NotFast("unterminated array")
                item = lines[i]
                i += 1
                if item == "]":
                    break
                if not (item.startswith("    ") and item.endswith(",")):
                    raise NotFast(item)
                inner = item[4:-1]
                if inner.startswith(("[", "{", " ")):
                    raise NotFast(item)
                items.append(_scalar(inner))
            table[key] = items
        else:
            table[key] = _scalar(value)
    return root
