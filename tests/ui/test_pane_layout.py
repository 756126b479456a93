"""A pane whose new words take as many lines as the old ones is painted again without laying
the screen out (a layout measures and paints every widget, and a key that moves to another
node changes the node detail's words); new words that need more or fewer lines lay it out,
and what is under the pane moves."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.strip import Strip
from textual.widgets import Static

from screens.widgets import OutputLog, Pane


class _Panes(App[None]):
    CSS = "Pane { height: auto; padding: 0 1; }"

    def compose(self) -> ComposeResult:
        yield Vertical(Pane(id="pane"), Static("below", id="below"))


async def test_a_pane_is_laid_out_again_only_when_its_height_changes() -> None:
    app = _Panes()
    async with app.run_test(size=(40, 12)) as pilot:
        pane = app.query_one(Pane)
        below = app.query_one("#below", Static)
        pane.show("one line", Text)
        await pilot.pause()
        assert below.region.y == 1

        pane.show("other words, one line", Text)
        assert not pane._layout_required  # painted again in place
        await pilot.pause()
        assert "other words" in pane.render_line(0).text and below.region.y == 1

        # wrapped at the pane's width (40 columns less the padding): two lines
        pane.show("a line long enough to wrap twice over at this pane's narrow width of forty", Text)
        assert pane._layout_required
        await pilot.pause()
        assert below.region.y == 2

        pane.show("one\nline\nper\nword", Text)
        await pilot.pause()
        assert below.region.y == 4
        pane.show("short", Text)
        await pilot.pause()
        assert below.region.y == 1 and "short" in pane.render_line(0).text


class _Output(App[None]):
    CSS = "#above { height: 2; } OutputLog { height: 6; }"

    def compose(self) -> ComposeResult:
        yield Vertical(Static("above", id="above"), OutputLog(id="log"), Static("below", id="below"))


async def test_the_output_log_grows_without_laying_the_screen_out() -> None:
    # its size is its CSS's: lines move only its own scrollbar
    app = _Output()
    async with app.run_test(size=(40, 12)) as pilot:
        log = app.query_one(OutputLog)
        log.write_lines(["one", "two"])
        assert not log._layout_required
        await pilot.pause()
        assert "two" in log.render_line(1).text

        log.write_lines([f"line {i}" for i in range(10)])  # 12 lines in 6 rows
        assert not log._layout_required
        await pilot.pause()
        assert log.show_vertical_scrollbar
        assert log.vertical_scrollbar.window_virtual_size == 12
        shown = [log.render_line(y).text for y in range(log.scrollable_content_region.height)]
        assert "line 9" in shown[-1] and log.scroll_y == log.max_scroll_y  # scrolled to its end
        assert app.query_one("#below", Static).region.y == 8

        log.write_lines([f"more {i}" for i in range(8)])
        assert not log._layout_required
        await pilot.pause()
        assert log.vertical_scrollbar.window_virtual_size == 20
        shown = [log.render_line(y).text for y in range(log.scrollable_content_region.height)]
        assert "more 7" in shown[-1] and log.scroll_y == log.max_scroll_y


async def test_the_gpu_grid_paints_in_a_pane_as_richs_table_does() -> None:
    # the node detail's per-GPU table, drawn line by line, through Textual's own paint (its
    # styles combined with the pane's), at a wide pane and one narrower than the table
    from cockpit.view.richtext import GpuGrid, _gpu_rich_table

    rows = tuple(
        (str(i), "NVIDIA H100 80GB HBM3", f"{i}/81559", f"{i}%", f"{40 + i}C", f"{300 + i}/700", "0") for i in range(8)
    )
    for size in ((120, 14), (50, 14)):
        painted = []
        for renderable in (GpuGrid(rows), _gpu_rich_table(rows)):
            app = _Panes()
            async with app.run_test(size=size) as pilot:
                pane = app.query_one(Pane)
                pane.show(renderable, lambda r: r)
                await pilot.pause()
                painted.append(([_cells(pane.render_line(y)) for y in range(pane.size.height)], pane.size))
        assert painted[0] == painted[1], f"at {size}"
        assert any("live, not recorded" in "".join(text for text, _ in line) for line in painted[0][0])


def _cells(strip: Strip) -> list[tuple[str, Style | None]]:
    """A painted line as runs of text under one style (however Rich cut it in segments)."""
    return [(seg.text, seg.style) for seg in Segment.simplify(strip)]
