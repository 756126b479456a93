"""Turning one nvidia-smi value into a Python value, or ``None``.

nvidia-smi writes "not available" in many ways: ``[N/A]``, ``N/A``,
``Not Supported``, ``[Not Supported]``, ``Unknown Error``, ``ERR!`` in the table,
``[Requested functionality has been deprecated]``, or nothing at all. Any
bracketed value is such a placeholder. Units (``MiB``, ``%``, ``W``, ``C``) are
stripped; ``Enabled``/``On``/``Yes`` are booleans.
"""

from __future__ import annotations

import re

_NOT_AVAILABLE = {
    "",
    "n/a",
    "na",
    "not supported",
    "unknown error",
    "unknown",
    "err!",
    "none",
    "not available",
    "insufficient permissions",
    "gpu is lost",
}
_NUMBER = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/]*)\s*$")
_TRUE = {"enabled", "on", "yes", "true", "active"}
_FALSE = {"disabled", "off", "no", "false", "not active"}


def clean(raw: str | None) -> str | None:
    """Strip a value; ``None`` for every spelling of "not available"."""
    if raw is None:
        return None
    value = raw.strip()
    if value.startswith("[") and value.endswith("]"):
        return None
    if value.lower() in _NOT_AVAILABLE:
        return None
    return value


def to_float(raw: str | None) -> float | None:
    """``"70.51 W"`` -> 70.51; placeholders and non-numbers -> ``None``."""
    value = clean(raw)
    if value is None:
        return None
    match = _NUMBER.match(value)
    return float(match.group(1)) if match else None


def to_int(raw: str | None) -> int | None:
    """``"81559 MiB"`` -> 81559, ``"35 %"`` -> 35, ``"27 C"`` -> 27; else ``None``."""
    number = to_float(raw)
    if number is None:
        return None
    return round(number)


def to_bool(raw: str | None) -> bool | None:
    """``Enabled``/``On``/``Yes`` -> True, ``Disabled``/``Off``/``No`` -> False."""
    value = clean(raw)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    return None


def first_line(text: str, limit: int = 120) -> str:
    """The first non-blank line, cut to ``limit`` characters, for error messages."""
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""
