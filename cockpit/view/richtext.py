"""The view model in Rich: each tone's style, and the Rich text of the pieces that more
than one renderer shows (the Textual widgets in ``screens/`` and the cast's frames)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment as RichSegment
from rich.style import Style
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


def gpu_table(view: GpuTableView) -> GpuGrid | Text:
    if view.empty is not None:
        return line_text(view.empty)
    return GpuGrid(view.rows)


def _gpu_rich_table(rows: Sequence[Sequence[str]]) -> Table:
    # the per-GPU figures come from the live probe; the change log keeps the node's summary
    table = Table(box=None, pad_edge=False, expand=False, header_style="bold", caption=LIVE_NOT_RECORDED)
    for col in GPU_COLUMNS:
        table.add_column(col, no_wrap=True)
    for row in rows:
        table.add_row(*(safe_text(cell) for cell in row))  # a str cell would be read as markup
    return table


class GpuGrid:
    """The per-GPU table: Rich's ``Table`` (no box, no edge padding, bold header, the
    "live, not recorded" caption), drawn line by line when it has its natural width.

    Rich measures every cell and lays the columns out on each render (~6 ms for 8 GPUs,
    and the pane renders it twice when another node is shown: once measured for its height,
    once painted), a key moving down the fleet waiting behind it. Given at least its
    natural width, that table is columns as wide as their widest cell, two spaces between
    them, and the caption centred under them: written here directly. Narrower (its columns
    would be shrunk and cut), or with a cell that is not printable ASCII (whose width Rich
    works out), it is Rich's table itself."""

    def __init__(self, rows: Sequence[Sequence[str]]) -> None:
        self.rows = tuple(tuple(inert(cell) for cell in row) for row in rows)
        self._raw = rows
        plain = all(len(row) == len(GPU_COLUMNS) for row in self.rows) and all(
            cell.isascii() and cell.isprintable() for row in self.rows for cell in row
        )
        self.widths: tuple[int, ...] | None = (
            tuple(max(len(c) for c in column) for column in zip(GPU_COLUMNS, *self.rows, strict=True))
            if plain
            else None
        )
        self._table: Table | None = None

    @property
    def table(self) -> Table:
        """Rich's table of the same rows (for widths or cells drawn by Rich)."""
        if self._table is None:
            self._table = _gpu_rich_table(self._raw)
        return self._table

    @property
    def natural_width(self) -> int | None:
        return None if self.widths is None else sum(self.widths) + 2 * (len(self.widths) - 1)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = self.natural_width
        if self.widths is None or width is None or options.max_width < width:
            yield self.table
            return
        header = console.get_style("bold") + console.get_style("table.header")
        cells = [c.ljust(w) for c, w in zip(GPU_COLUMNS, self.widths, strict=True)]
        yield RichSegment("  ".join(cells), header)
        yield RichSegment.line()
        between = RichSegment("  ", Style.null())
        for row in self.rows:
            for i, (cell, w) in enumerate(zip(row, self.widths, strict=True)):
                if i:
                    yield between
                yield RichSegment(cell.ljust(w))
            yield RichSegment.line()
        caption = console.render_str(LIVE_NOT_RECORDED, style=console.get_style("table.caption"), highlight=False)
        yield from console.render(caption, options.update(width=width, highlight=False, height=None, justify="center"))
