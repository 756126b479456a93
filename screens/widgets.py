"""The cockpit's panes as Textual widgets. Each is render-only: it takes the view model's
values (:mod:`cockpit.view.model`, :mod:`cockpit.view.detail`) and shows them in Rich
(:mod:`cockpit.view.richtext`); none reads the network, a file, decides a rule or a word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from itertools import chain
from typing import Any, TypeVar

from rich.cells import cell_len
from rich.console import Group
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._segment_tools import line_crop
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.coordinate import Coordinate
from textual.geometry import Size
from textual.reactive import Reactive
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import DataTable, Log, Static
from textual.widgets.data_table import ColumnKey, RowKey

from cockpit.engine.actions import Action
from cockpit.engine.state import (
    CockpitState,
    NodeProgress,
    StageState,
)
from cockpit.fleet.executor import RebootProgress, StepOutcome
from cockpit.gpu.nodestate import NodeState
from cockpit.view import detail, fleet, panes, richtext
from cockpit.view import model as view

_Shown = TypeVar("_Shown")


class Pane(Static):
    """A Static that shows a view-model value: rendered, and laid out again, only when the
    value changed. (``Static.update`` lays the whole screen out each time; every event
    repaints the panes, and most of them say what they said before.)"""

    _shown: object = None

    def __init__(self, *, fixed_height: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        #: its CSS gives it a fixed height, so new words never need the screen laid out again
        self.fixed_height = fixed_height

    def show(self, value: _Shown, render: Callable[[_Shown], Any]) -> None:
        if self._shown is None or value != self._shown:
            self._shown = value
            self.update(render(value), layout=False)
            if not self.fixed_height and self._height_changed():
                self.refresh(layout=True)

    def _height_changed(self) -> bool:
        """Whether the new content needs another height than the pane has now, measured as
        the layout would measure it. Only then is the screen laid out again: a layout measures
        and paints every widget (a key moving to another node changed the node detail's
        words, and the paint after it cost tens of ms, a key pressed next waiting behind it)."""
        width, height = self.content_size
        if not self.is_mounted or not width or not self.display:
            return True
        self.clear_cached_dimensions()
        return self.get_content_height(self.size, self.app.size, width) != height


def cursor_row_key(table: DataTable[Text]) -> str | None:
    """The key of the row under the table's cursor (None when empty or not yet laid out)."""
    if not table.row_count:
        return None
    try:
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
    except Exception:
        return None
    return None if key.value is None else str(key.value)


def cockpit_body(*under_fleet: Widget) -> Horizontal:
    """The body every cockpit screen shares: the fleet, with what the screen shows under
    it, on the left; the focused stage on the right."""
    return Horizontal(Vertical(FleetTable(id="fleet"), *under_fleet, id="left"), StagePane(id="stage"), id="body")


class CockpitHeader(Static):
    """Change id, runbook, operator, reviewers, elapsed time, wave; red when a trigger fired."""

    def __init__(self, **kw: Any) -> None:  # id, classes and the like, passed through
        super().__init__(**kw)
        self._view: view.HeaderView | None = None

    def show_view(self, header: view.HeaderView) -> None:
        if header != self._view:
            self._view = header
            self.set_class(header.alarm, "alarm")
            self.refresh()

    def render(self) -> Text:
        if self._view is None:
            return Text("")
        return richtext.safe_text(self._view.fit(max(self.size.width - 2, 20)), no_wrap=True, overflow="ellipsis")


class ProgressStrip(Static):
    """Window stages, node stages with counts (``smoke 1/8``), closing stages; fitted to width."""

    def __init__(self, **kw: Any) -> None:  # id, classes and the like, passed through
        super().__init__(**kw)
        self._segments: list[view.Segment] = []

    def show_segments(self, segments: list[view.Segment]) -> None:
        if segments != self._segments:
            self._segments = segments
            self.refresh()

    def render(self) -> Text:
        return richtext.strip_text(self._segments, max(self.size.width, 20))


class NextBar(Static):
    """The "Next:" line that leads the operator, plus the state of a running step."""

    _text: Text | None = None
    #: the action the line shows now (None: it shows none): what `n` does, compared with a
    #: fresh plan at the key press (screens.key_actions.KeyActions.action_next)
    shown: Action | None = None

    def show_text(self, text: Text) -> None:
        """Lay the screen out again only when the line changed (every event re-renders it)."""
        if text != self._text:
            self._text = text
            self.update(text, layout=False)  # one line high (cockpit.tcss): a new text keeps its size


class KeysFooter(Widget):
    """The keys the screen offers now, on one line: each key and what it does.

    One widget rendering one line of text, repainted when the keys changed. (Textual's
    ``Footer`` mounts a widget per key and recomposes them on every change of focus or
    bindings: each dialog's close, each cursor move; at 80 columns its equal-width cells
    also cut keys off. Mounting them was a fifth of the cost of a key press.) Keys are
    read from the screen's ``active_bindings``, as the footer reads them, so help, the
    palette and this line agree (:mod:`screens.keys`)."""

    DEFAULT_CSS = """
    KeysFooter {
        dock: bottom;
        height: 1;
        background: $footer-background;
    }
    KeysFooter > .keys-footer--key {
        color: $footer-key-foreground;
        background: $footer-key-background;
        text-style: bold;
    }
    KeysFooter > .keys-footer--description {
        color: $footer-description-foreground;
    }
    """
    COMPONENT_CLASSES = {"keys-footer--key", "keys-footer--description"}  # noqa: RUF012 - Textual's own declaration

    def __init__(self, **kw: Any) -> None:  # id, classes and the like, passed through
        super().__init__(**kw)
        self._keys: tuple[tuple[str, str, bool], ...] = ()

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[Any]) -> None:
        if screen is not self.screen:
            return
        seen: set[str] = set()
        keys: list[tuple[str, str, bool]] = []
        also: frozenset[str] = getattr(screen, "footer_also", frozenset())  # shown now, though not always
        for _node, binding, enabled, _tooltip in screen.active_bindings.values():
            if (binding.show or binding.action in also) and binding.action not in seen:  # one entry per action
                seen.add(binding.action)
                keys.append((self.app.get_key_display(binding), binding.description, enabled))
        if tuple(keys) != self._keys:
            self._keys = tuple(keys)
            self.refresh()

    @property
    def plain(self) -> str:
        """What the line says, for tests and captures."""
        return "  ".join(f"{key} {description}" for key, description, _ in self._keys)

    def render(self) -> Text:
        key_style = self.get_component_rich_style("keys-footer--key")
        words_style = self.get_component_rich_style("keys-footer--description")
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        for key, description, enabled in self._keys:
            line.append(f" {key} ", style=key_style if enabled else key_style + Style(dim=True))
            line.append(f"{description} ", style=words_style)
        return line


def _text_width(text: Text) -> int:
    """The columns a cell takes (its widest line), as the table measures a cell."""
    return max(cell_len(line) for line in text.plain.split("\n"))


class CellsInPlace(DataTable[Text]):
    """A table whose cells change in place and are rendered again alone. Textual's
    ``update_cell`` keys every render cache by one count of updates: one cell changed, and
    the next frame rendered every visible cell again (the fleet's and the stage's rows, tens
    of ms in one callback, several times a second while a wave runs, each key waiting
    behind it). Here the other cells' renders are kept; the rows and lines, cheap to put
    together again from them, are assembled anew."""

    def _update_cells(self, changed: Sequence[tuple[str, str, Text]]) -> None:
        """Put new values in cells (row key, column key, value), and forget only their renders."""
        if not changed:
            return
        stale: set[tuple[str | None, str | None]] = set()
        for row_key, column_key, value in changed:
            self._data[RowKey(row_key)][ColumnKey(column_key)] = value
            stale.add((row_key, column_key))
        self._forget_renders(cells=stale)

    def _forget_renders(
        self, *, cells: set[tuple[str | None, str | None]] | None = None, columns: set[str | None] | None = None
    ) -> None:
        """Forget the renders of ``cells`` (row key, column key) or of whole ``columns`` (the
        cell render cache is keyed by row, column, style, cursor, hover...; the table's width
        is not in it), and the rows and lines assembled from them (a resized column: every
        row's, its width being in each line); then paint again. Keys are compared by their
        words (what a key's equality compares; its own hash is a Python call, and the cache
        holds thousands of renders)."""
        renders = self._cell_render_cache
        cached = renders.keys()  # (an LRU cache: not iterable itself)
        if cells is not None:
            gone = [k for k in cached if (k[0].value, k[1].value) in cells]
        else:
            gone = [k for k in cached if k[1].value in (columns or ())]
        for key in gone:
            renders.discard(key)
        self._forget_rows(None if cells is None else {row for row, _ in cells})
        self.refresh()

    def _forget_rows(self, rows: set[str | None] | None) -> None:
        """Forget the assembled rows and lines of ``rows`` (None: of every row)."""
        self._row_renderable_cache.clear()  # keyed by row index: cheap (the cells' values)
        if rows is None:
            self._row_render_cache.clear()
            self._line_cache.clear()
            return
        assembled = self._row_render_cache
        assembled_keys = assembled.keys()  # (LRU caches: not iterable themselves)
        for row_render in [k for k in assembled_keys if k[0].value in rows]:
            assembled.discard(row_render)
        lines = self._line_cache
        line_keys = lines.keys()
        for line in list(line_keys):
            try:
                row_key: RowKey | None = self._get_offsets(line[0])[0]
            except LookupError:
                row_key = None
            if row_key is None or row_key.value in rows:
                lines.discard(line)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """Textual's ``DataTable._render_line`` (textual 8), with the line and row caches keyed
        by what a row cursor changes in this row (whether the cursor or the hover is on it)
        instead of the cursor's position: Textual's key made every line a miss once the
        cursor moved, and each key that scrolled the table assembled every visible row
        again. A row's render reads the cursor only as "on this row or not" (cursor type
        "row": ``_should_highlight`` and the row's fill compare rows alone)."""
        if self.cursor_type != "row":
            return super()._render_line(y, x1, x2, base_style)
        width = self.size.width
        try:
            row_key, y_offset_in_row = self._get_offsets(y)
        except LookupError:
            return Strip.blank(width, base_style)
        found = None if row_key is self._header_row_key else self._row_locations.get(row_key)
        row_index = -1 if found is None else found
        cursor = _on_row(self.cursor_coordinate, row_index)
        hover = _on_row(self.hover_coordinate, row_index)
        cache_key = (
            y,
            x1,
            x2,
            width,
            cursor,
            hover,
            base_style,
            self.cursor_type,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        if cache_key in self._line_cache:
            return self._line_cache[cache_key]
        fixed, scrollable = self._render_line_in_row(
            row_key, y_offset_in_row, base_style, cursor_location=cursor, hover_location=hover
        )
        fixed_width = sum(column.get_render_width(self) for column in self.ordered_columns[: self.fixed_columns])
        fixed_line: list[Segment] = list(chain.from_iterable(fixed)) if fixed else []
        scrollable_line: list[Segment] = list(chain.from_iterable(scrollable))
        segments = fixed_line + line_crop(scrollable_line, x1 + fixed_width, x2, width)
        strip = Strip(segments).adjust_cell_length(width, base_style).simplify()
        self._line_cache[cache_key] = strip
        return strip


_OFF_ROW = Coordinate(-2, 0)  # no row has it (the header's index is -1)


def _on_row(at: Coordinate, row_index: int) -> Coordinate:
    """A row cursor (or hover) as one row's render sees it: on this row, or on none."""
    return Coordinate(row_index, 0) if at.row == row_index else _OFF_ROW


class FleetTable(CellsInPlace):
    """One row per node, or per node set on a big fleet (:mod:`cockpit.view.fleet`). Rows are
    updated cell by cell; the table is laid out anew only when its rows themselves change
    (a node joins or leaves a node set, a set is expanded or folded), the cursor staying on
    the node it was on."""

    def __init__(self, **kw: Any) -> None:  # id, classes and the like, passed through
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self._rows: dict[str, view.FleetRow] = {}  # by row key, in table order
        self.cell_updates = 0  # counted for the benchmark: rows change in place
        self.rebuilds = 0  # the times the rows changed (a fold moved), for tests and the benchmark
        self._fleet_rows = fleet.FleetRows()  # the rows remembered between frames
        self._widths: dict[str, list[int]] = {}  # by row key: each cell's width as shown
        #: told at once when the cursor goes to another row: the screen shows that row's node
        #: in the same callback as the key, instead of when RowHighlighted has bubbled up to it
        #: (a message posted to each container on the way, each waiting a pass of an event
        #: loop busy with a wave's steps: tens of ms per key while 200 nodes run)
        self.on_cursor_row: Callable[[], None] | None = None

    def watch_cursor_coordinate(self, old_coordinate: Coordinate, new_coordinate: Coordinate) -> None:
        super().watch_cursor_coordinate(old_coordinate, new_coordinate)
        if old_coordinate.row != new_coordinate.row and self.on_cursor_row is not None:
            self.on_cursor_row()

    def on_mount(self) -> None:
        for key, label in view.FLEET_COLUMNS:
            # a Text, not a str: a str label is parsed as markup, whose first use loads
            # rich's emoji table (~0.5 s before the first frame); the labels hold no markup
            self.add_column(Text(label), key=key)

    @staticmethod
    def _cell(value: str, tone: str) -> Text:
        return richtext.safe_text(value, style=richtext.style(tone))

    def sync(
        self,
        state: CockpitState,
        live: Mapping[str, NodeState],
        now: datetime,
        *,
        narrow: bool = False,
        expanded: frozenset[str] = frozenset(),
    ) -> None:
        """``narrow``: the screen is at its narrow breakpoint (health as a short word);
        ``expanded``: the node sets shown with their nodes."""
        self.show_rows(self._fleet_rows.rows(state, live, now, narrow=narrow, expanded=expanded))

    def show_rows(self, rows: Sequence[view.FleetRow]) -> None:
        keys = [k for k, _ in view.FLEET_COLUMNS]
        shown = list(self._rows)
        wanted = [row.key for row in rows]
        if wanted[: len(shown)] != shown:  # not only rows added at the end: lay the rows out anew
            self._rebuild(rows)
            return
        resized: set[int] = set()  # the columns a changed cell's text may have widened or narrowed
        changed: list[tuple[str, str, Text]] = []
        for row in rows:
            old = self._rows.get(row.key)
            if old is None:
                self._add(row)
            elif row.cells == old.cells and row.tones == old.tones:
                pass  # the row as shown (most rows of a big fleet between two events): one comparison
            else:
                widths = self._widths[row.key]
                for i, (key, new, prev) in enumerate(zip(keys, row.cells, old.cells, strict=True)):
                    if new != prev or row.tone(i) != old.tone(i):
                        cell = self._cell(new, row.tone(i))
                        changed.append((row.key, key, cell))
                        width = _text_width(cell)
                        if width != widths[i]:
                            widths[i] = width
                            resized.add(i)
            self._rows[row.key] = row
        self._update_cells(changed)
        self.cell_updates += len(changed)
        self._size_columns(resized)

    def _add(self, row: view.FleetRow) -> None:
        cells = [self._cell(v, row.tone(i)) for i, v in enumerate(row.cells)]
        self.add_row(*cells, key=row.key)  # the table sizes its columns to a new row itself
        self._widths[row.key] = [_text_width(c) for c in cells]

    def _size_columns(self, changed: set[int]) -> None:
        """Each changed column sized to its content, measured once per column and frame.
        (Textual's ``update_width`` measures the whole column again for every cell that got
        narrower: with a wave's rows changing at once, seconds per frame at 200 nodes.)"""
        if not changed:
            return
        columns = list(self.columns.values())
        resized: set[ColumnKey] = set()
        for i in changed:
            column = columns[i]
            width = max([_text_width(column.label), *(w[i] for w in self._widths.values())])
            if width != column.content_width:
                column.content_width = width
                resized.add(column.key)
        if resized:
            # that column's cells were rendered at the old width; the scrollable size is
            # worked out again when idle (the table's own size does not follow its content:
            # no layout of the screen, which would paint every widget again)
            self._forget_renders(columns={key.value for key in resized})
            self._require_update_dimensions = True

    def _rebuild(self, rows: Sequence[view.FleetRow]) -> None:
        before = self.selected_row
        self.rebuilds += 1
        self.clear()
        self._rows = {}
        self._widths = {}
        for row in rows:
            self._add(row)
            self._rows[row.key] = row
        if before is not None:
            # the same row when it is still there, else the row that shows its node now
            now = self._rows.get(before.key) or view.row_for(rows, before.node)
            if now is not None:
                self.move_cursor(row=self.get_row_index(now.key), animate=False)

    @property
    def selected_row(self) -> view.FleetRow | None:
        """The row under the cursor: a node's, or a node set's."""
        key = cursor_row_key(self)
        return None if key is None else self._rows.get(key)

    @property
    def selected_node(self) -> str | None:
        """The node under the cursor; on a node-set row, its first node (they are alike)."""
        row = self.selected_row
        return None if row is None else row.node

    @property
    def folds(self) -> bool:
        """Whether the table shows node sets (folded or expanded)."""
        return any(row.fold is not None for row in self._rows.values())

    def row_index_of(self, node: str) -> int | None:
        """The index of the row that shows ``node`` (its own, or its node set's)."""
        row = view.row_for(list(self._rows.values()), node)
        return None if row is None else self.get_row_index(row.key)


class StageTable(CellsInPlace):
    """The focused stage's steps and items; the cursor picks what Enter acts on."""

    COLUMNS = ("symbol", "label", "detail")

    def __init__(self, **kw: Any) -> None:  # id, classes and the like, passed through
        super().__init__(cursor_type="row", show_header=False, **kw)
        self._shown: list[panes.StageRow] = []
        self._stage_key: tuple[str, str | None] | None = None
        self._shown_widths: tuple[int, int] = (0, 0)

    def on_mount(self) -> None:
        for key, label in zip(self.COLUMNS, ("s", "what", "detail"), strict=True):
            self.add_column(label, key=key, width=2 if key == "symbol" else None)

    def _widths(self) -> tuple[int, int]:
        width = self.size.width or 80
        usable = max(width - 8, 24)  # symbol column, cell padding, scrollbar
        label = max(16, int(usable * 0.75))
        return label, max(usable - label, 6)

    def _cells(self, row: panes.StageRow) -> tuple[Text, Text, Text]:
        lw, dw = self._widths()
        label = richtext.safe_text(row.label, no_wrap=True)
        label.truncate(lw, overflow="ellipsis")
        detail = richtext.safe_text(row.detail, style="dim", no_wrap=True)
        detail.truncate(dw, overflow="ellipsis")
        return Text(row.symbol, style=richtext.style(row.status)), label, detail

    def on_resize(self) -> None:
        if self._widths() != self._shown_widths:
            rows, key = self._shown, self._stage_key
            self._stage_key = ("", "resize")  # forces a rebuild at the new width
            self.show_rows(key, rows, keep_cursor=True)

    def show_rows(
        self, stage_key: tuple[str, str | None] | None, rows: Sequence[panes.StageRow], *, keep_cursor: bool = False
    ) -> None:
        rows = list(rows)
        if stage_key == self._stage_key and rows == self._shown:
            return
        # the same steps and items (the same stage of another node, or of this one later) at
        # the same widths: only what differs is written, and rendered again
        same_rows = [r.key for r in rows] == [r.key for r in self._shown] and self.row_count == len(rows)
        if same_rows and self._widths() == self._shown_widths:
            changed: list[tuple[str, str, Text]] = []
            for new, old in zip(rows, self._shown, strict=True):
                if new != old:
                    cells = zip(self.COLUMNS, self._cells(new), strict=True)
                    changed.extend((new.key, col, cell) for col, cell in cells)
            self._update_cells(changed)
            if stage_key != self._stage_key and rows and not keep_cursor:
                self.move_cursor(row=self._first_open(rows))
        else:
            cursor = self.cursor_row
            self.clear()
            for row in rows:
                self.add_row(*self._cells(row), key=row.key)
            if rows:
                self.move_cursor(row=min(cursor, len(rows) - 1) if keep_cursor else self._first_open(rows))
        self._shown = rows
        self._stage_key = stage_key
        self._shown_widths = self._widths()

    @staticmethod
    def _first_open(rows: Sequence[panes.StageRow]) -> int:
        return next((i for i, r in enumerate(rows) if r.status in ("open", "failed", "needs-signoff")), 0)

    @property
    def selected_key(self) -> str | None:
        return cursor_row_key(self)


class StagePane(Vertical):
    """Title, rows and the gate in words for whichever stage is current."""

    def compose(self) -> ComposeResult:
        yield Pane(id="stage-title", fixed_height=True)  # height 1 in cockpit.tcss
        yield StageTable(id="stage-table")
        yield Pane(id="gate-line")

    def show_stage(self, state: CockpitState, stage: StageState | None, node: str | None) -> None:
        """Show the stage :func:`cockpit.view.model.focus_stage` chose."""
        pane = panes.stage_pane(state, stage, node)
        self.query_one("#stage-title", Pane).show(
            pane.title, lambda title: richtext.safe_text(title, style="bold", no_wrap=True, overflow="ellipsis")
        )
        self.query_one(StageTable).show_rows(pane.key, pane.rows)
        self.query_one("#gate-line", Pane).show(pane.gate, richtext.line_text)


#: The key that shows every trigger when the panel had to fold some into "+N more".
TRIGGERS_KEY = "T"


class TriggerPanel(Static):
    """Every rollback trigger, always on screen; red when one has fired."""

    plain = ""
    full_text = ""
    _shown: tuple[object, ...] | None = None

    def show_triggers(self, state: CockpitState, *, compact: bool = False, room: int | None = None) -> None:
        """``compact`` (short terminals): each line cut to one screen line; ``room``: at most
        that many lines, the rest said as "+N more" with the key that shows them all."""
        panel = panes.trigger_panel(state)
        self.full_text = panel.text  # every trigger, for the key that shows them all
        if room is not None:
            panel = panel.fit(room, key=TRIGGERS_KEY)
        if (panel, compact) == self._shown:
            return  # what it says already: no new layout of the screen
        self._shown = (panel, compact)
        out = [
            richtext.safe_text(panel.summary, style="bold", no_wrap=compact, overflow="ellipsis"),
            *(richtext.line_text(line, no_wrap=compact) for line in panel.lines),
        ]
        self.plain = panel.text  # what the panel says, for tests and captures
        self.update(Group(*out))
        self.set_class(panel.alarm, "fired")


class OutputLog(Log):
    """The node's output. Textual lays the whole screen out whenever a widget's virtual size
    changes (right for a widget sized by its content); this log's size is its CSS's (1fr), so
    its lines only move its own scrollbars: each output line, and each key that shows another
    node's output, laid out and painted every widget. A scrollbar that appears or goes still
    lays the screen out (its own reactive asks for it)."""

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        self._refresh_scrollbars()
        # what the screen's arrangement gives the scrollbars, given here
        if self.show_vertical_scrollbar:
            self.vertical_scrollbar.window_virtual_size = size.height
        if self.show_horizontal_scrollbar:
            self.horizontal_scrollbar.window_virtual_size = size.width


class NodeDetail(Vertical):
    """The selected node: facts, per-GPU table, the last command and its output."""

    def compose(self) -> ComposeResult:
        yield Pane(id="node-facts")
        yield Pane(id="node-gpus")
        yield Pane(id="node-last")
        yield OutputLog(id="node-log", max_lines=400, auto_scroll=True)

    def on_mount(self) -> None:
        self._log_source: tuple[str, int, str | None] | None = None  # (what, lines written, last line)

    def show_node(
        self,
        node: str | None,
        progress: NodeProgress | None,
        live: NodeState | None,
        outcome: StepOutcome | None,
        running: str | None,
        lines: Sequence[str],
        tick: RebootProgress | None,
        source: str,
    ) -> None:
        facts = self.query_one("#node-facts", Pane)
        if node is None:
            facts.show("no node selected", lambda words: Text(words, style="dim"))
            return
        facts.show(detail.node_facts(node, progress, live), richtext.lines_text)
        self.query_one("#node-gpus", Pane).show(detail.gpu_table(live), richtext.gpu_table)
        self.query_one("#node-last", Pane).show(detail.outcome_lines(outcome, running, tick), richtext.lines_text)
        self.show_lines(source, lines)

    def show_lines(self, source: str, lines: Sequence[str]) -> None:
        """Append only what is new while the same output grows; rewrite when it was trimmed."""
        log = self.query_one(Log)
        shown = self._log_source
        last = lines[-1] if lines else None
        if shown is not None and shown[0] == source and shown[1] == len(lines) and shown[2] == last:
            return
        if shown is not None and shown[0] == source and 0 < shown[1] < len(lines) and lines[shown[1] - 1] == shown[2]:
            new = list(lines[shown[1] :])
        else:
            log.clear()
            new = list(lines)
        if new:
            log.write_lines(new)
        self._log_source = (source, len(lines), last)


def show_recorded(screen: Screen[Any], state: CockpitState, header: view.HeaderView, now: datetime) -> None:
    """Show a folded state in the panes every screen has (header, progress strip, fleet,
    focused stage, triggers), with no live probe detail: the reviewer's view and replay."""
    screen.query_one(CockpitHeader).show_view(header)
    screen.query_one(ProgressStrip).show_segments(view.progress_segments(state))
    screen.query_one(FleetTable).sync(state, {}, now)
    show_focused_stage(screen, state)
    screen.query_one(TriggerPanel).show_triggers(state)


def show_focused_stage(screen: Screen[Any], state: CockpitState) -> None:
    """The stage pane shows the stage of the node under the fleet's cursor."""
    stage, node = panes.focus_stage(state, screen.query_one(FleetTable).selected_node)
    screen.query_one(StagePane).show_stage(state, stage, node)
