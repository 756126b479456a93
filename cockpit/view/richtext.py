"""The view model in Rich: each tone's style, and the Rich text of the pieces that more
than one renderer shows (the Textual widgets in ``screens/`` and the cast's frames)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from cockpit.view.detail import GPU_COLUMNS, LIVE_NOT_RECORDED, GpuTableView
from cockpit.view.inert import inert
from cockpit.view.lines import Line
from cockpit.view.model import STRIP_LEVELS, Segment, strip_runs
from cockpit.view.panes import StageRow

#: The Rich style of each tone: step, item and stage statuses, then the view's own tones.
STYLE: dict[str, str] = {
    "done": "green",
    "passed": "green",
    "overridden": "bold red",
    "failed": "bold red",
    "running": "yellow",
    "open": "",
    "active": "bold reverse",
    "locked": "dim",
    "needs-signoff": "magenta",
    "skipped": "dim",
    "current": "bold reverse",
    "bold": "bold",
    "dim": "dim",
    "ok": "green",
    "go": "bold green",
    "warning": "yellow",
    "alarm": "bold red",
    "signoff": "magenta",
    "actor": "cyan",
}


def style(tone: str) -> str:
    return STYLE.get(tone, "")


def safe_text(words: str, style: str = "", *, newlines: bool = False, **kw: Any) -> Text:
    """Rich text of words that may have come from outside: made inert, never markup;
    ``newlines`` where the place holds several lines."""
    return Text(inert(words, newlines=newlines), style=style, **kw)


def line_text(line: Line, *, no_wrap: bool = False) -> Text:
    """One line of the view model, each run in its tone's style."""
    text = Text(style=style(line.tone), no_wrap=True, overflow="ellipsis") if no_wrap else Text(style=style(line.tone))
    for words, tone in line.runs:
        text.append(inert(words), style=style(tone))
    return text


def lines_text(lines: Iterable[Line]) -> Text:
    return Text("\n").join(line_text(line) for line in lines)


def strip_text(segments: Sequence[Segment], width: int) -> Text:
    """The progress strip, folded until it fits ``width`` cells (then cut with an ellipsis)."""
    text = Text()
    for level in range(STRIP_LEVELS):
        text = Text(no_wrap=True, overflow="ellipsis")
        for words, tone in strip_runs(segments, level):
            text.append(inert(words), style=style(tone))
        if text.cell_len <= width:
            return text
    text.truncate(width, overflow="ellipsis")
    return text


def stage_row_text(row: StageRow) -> Text:
    """A stage row on one line: its symbol in its status's style, the label, the detail dimmed."""
    text = Text(f"{row.symbol} ", style=style(row.status), no_wrap=True, overflow="ellipsis")
    text.append(inert(row.label))
    if row.detail:
        text.append(f"  {inert(row.detail)}", style="dim")
    return text


def gpu_table(view: GpuTableView) -> Table | Text:
    if view.empty is not None:
        return line_text(view.empty)
    # the per-GPU figures come from the live probe; the change log keeps the node's summary
    table = Table(box=None, pad_edge=False, expand=False, header_style="bold", caption=LIVE_NOT_RECORDED)
    for col in GPU_COLUMNS:
        table.add_column(col, no_wrap=True)
    for row in view.rows:
        table.add_row(*(safe_text(cell) for cell in row))  # a str cell would be read as markup
    return table
