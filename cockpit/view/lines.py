"""The view model's building blocks: a line of words in tones, fitting rows into a room,
and durations as a cockpit says them. No Rich, no Textual (see :mod:`cockpit.view.model`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from cockpit.engine.state import STATUS_GLYPH

SYMBOL = STATUS_GLYPH

T = TypeVar("T")

#: A piece of text and its tone.
Run = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Line:
    """One line of words, in runs that each carry a tone, over the whole line's tone."""

    runs: tuple[Run, ...]
    tone: str = ""

    @classmethod
    def of(cls, text: str, tone: str = "") -> Line:
        return cls(((text, ""),), tone)

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.runs)


def fit_rows(rows: Sequence[T], room: int) -> tuple[list[T], int]:
    """At most ``room`` entries of ``rows``: all when they fit, else ``room - 1`` of them
    and how many were left out (the last place is the "+N more" line)."""
    if len(rows) <= room:
        return list(rows), 0
    keep = max(room - 1, 0)
    return list(rows[:keep]), len(rows) - keep


def more_text(hidden: int) -> str:
    return f"+{hidden} more"


def duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``1h02m``: short enough for a table cell."""
    if seconds is None or seconds < 0:
        return "N/A"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def since(at: datetime | None, now: datetime) -> str:
    return "N/A" if at is None else duration((now - at).total_seconds())
