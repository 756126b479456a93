"""The fleet table sizes each column to its widest cell as rows change in place (a cell
wider, then every wide cell narrower again), the width measured per column and frame rather
than by Textual's ``update_width`` (which measures the column again for each narrower cell)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from cockpit.view.fleet import FLEET_COLUMNS, FleetRow
from screens.widgets import FleetTable


class _Table(App[None]):
    def compose(self) -> ComposeResult:
        yield FleetTable()


def _row(node: str, stage: str) -> FleetRow:
    cells = [node, "1", stage, "580.1/580.1", "13.0", "8", "ok", "1m"]
    assert len(cells) == len(FLEET_COLUMNS)
    return FleetRow(node=node, cells=tuple(cells))


def _widths(table: FleetTable) -> list[int]:
    return [c.content_width for c in table.columns.values()]


async def test_columns_follow_their_widest_cell_as_rows_change() -> None:
    app = _Table()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(FleetTable)
        nodes = [f"gpu{i:02d}" for i in range(30)]
        table.show_rows([_row(n, "drain") for n in nodes])
        await pilot.pause()
        stage = [k for k, _ in FLEET_COLUMNS].index("stage")
        assert _widths(table)[stage] == len("Stage")  # the label is wider than "drain"

        table.show_rows([_row(n, "upgrade-driver-and-reboot" if n == "gpu07" else "drain") for n in nodes])
        await pilot.pause()
        assert _widths(table)[stage] == len("upgrade-driver-and-reboot")
        before = table.rebuilds

        # every wide cell narrower again: the column shrinks to the widest left
        table.show_rows([_row(n, "smoke" if n in ("gpu07", "gpu08") else "drain") for n in nodes])
        await pilot.pause()
        assert _widths(table)[stage] == len("Stage")
        table.show_rows([_row(n, "smoke-test" if n == "gpu29" else "drain") for n in nodes])
        await pilot.pause()
        assert _widths(table)[stage] == len("smoke-test")
        assert table.rebuilds == before  # all in place: no row laid out anew
        assert table.get_row_at(29)[[k for k, _ in FLEET_COLUMNS].index("stage")].plain == "smoke-test"
        # the others as the table measured them when it added the rows
        assert _widths(table)[0] == len("gpu00") and _widths(table)[3] == len("Driver kmod/user")


async def test_a_changed_cell_is_painted_anew_and_no_other_cell_is_rendered_again() -> None:
    # (each new word as wide as the old: no column resized) Textual's update_cell keys its
    # renders by one count of updates, so every visible cell was rendered again at the next
    # frame; the table forgets the changed cells' renders only
    app = _Table()
    async with app.run_test(size=(160, 34)) as pilot:
        table = app.query_one(FleetTable)
        nodes = [f"gpu{i:02d}" for i in range(30)]
        table.show_rows([_row(n, "drain") for n in nodes])
        await pilot.pause()
        # a first change in place: a frame painted after the table's own start-up renders
        table.show_rows([_row(n, "smoke" if n == "gpu07" else "drain") for n in nodes])
        await pilot.pause()
        line = table.render_line(8).text  # the header, then gpu00..: gpu07's row
        assert "gpu07" in line and "smoke" in line

        console = app.console
        rendered: list[object] = []
        original = console.render_lines

        def counting(*args: object, **kwargs: object) -> object:
            rendered.append(args[0])
            return original(*args, **kwargs)  # type: ignore[arg-type]

        console.render_lines = counting  # type: ignore[method-assign,assignment]
        try:
            table.show_rows([_row(n, "smoke" if n in ("gpu07", "gpu08") else "drain") for n in nodes])
            await pilot.pause()
            lines = [table.render_line(y).text for y in range(1, 31)]
        finally:
            del console.render_lines
        assert all(
            ("smoke" in text) == (i in (7, 8)) and ("drain" in text) != (i in (7, 8)) for i, text in enumerate(lines)
        )
        assert 1 <= len(rendered) <= 2, f"{len(rendered)} cells rendered for one changed cell"


async def test_a_table_changed_in_place_paints_as_one_built_afresh() -> None:
    # cells changed wider, then narrower again: what is painted is what a table given the
    # last rows at once paints (no cell left at an old width or an old word)
    nodes = [f"gpu{i:02d}" for i in range(30)]
    rounds = [
        {"gpu07": "upgrade-driver-and-reboot"},
        {"gpu07": "upgrade-driver-and-reboot", "gpu12": "smoke"},
        {"gpu12": "cordon"},
        {"gpu03": "rollback"},
    ]

    async def painted(rows_rounds: list[dict[str, str]]) -> list[str]:
        app = _Table()
        async with app.run_test(size=(160, 34)) as pilot:
            table = app.query_one(FleetTable)
            for changes in rows_rounds:
                table.show_rows([_row(n, changes.get(n, "drain")) for n in nodes])
                await pilot.pause()
                await pilot.pause()
            return [table.render_line(y).text for y in range(31)]

    in_place = await painted(rounds)
    afresh = await painted(rounds[-1:])
    assert in_place == afresh
    assert "rollback" in in_place[4] and "upgrade" not in "".join(in_place)


def _painted(table: FleetTable) -> list[list[tuple[str, object]]]:
    """Every visible line of the table with its styles (the cursor's highlight included)."""
    return [[(seg.text, seg.style) for seg in table.render_line(y)] for y in range(table.size.height)]


async def test_a_cursor_move_assembles_only_the_rows_it_leaves_and_enters() -> None:
    # Textual keys its row and line caches by the cursor's position: every line was a miss
    # once the cursor moved, and a move that scrolled assembled every visible row again
    app = _Table()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(FleetTable)
        nodes = [f"gpu{i:02d}" for i in range(60)]
        table.show_rows([_row(n, "drain") for n in nodes])
        await pilot.pause()
        _painted(table)
        assembled: list[object] = []
        original = table._render_line_in_row

        def counting(row_key: object, *args: object, **kwargs: object) -> object:
            assembled.append(row_key)
            return original(row_key, *args, **kwargs)  # type: ignore[arg-type]

        table._render_line_in_row = counting  # type: ignore[method-assign,assignment]
        try:
            await pilot.press("down")
            await pilot.pause()
            _painted(table)
            assert table.cursor_row == 1
            assert len(assembled) == 2, f"{len(assembled)} rows assembled for one move"
            assembled.clear()
            for _ in range(25):  # down past the bottom: the table scrolls
                await pilot.press("down")
            await pilot.pause()
            _painted(table)
            assembled.clear()
            for _ in range(25):  # back up over rows assembled before
                await pilot.press("up")
            await pilot.pause()
            _painted(table)
            assert len(assembled) <= 4, f"{len(assembled)} rows assembled scrolling back over cached rows"
        finally:
            del table._render_line_in_row


async def test_cursor_moves_and_changes_in_place_paint_as_a_table_built_afresh() -> None:
    # lines kept for rows the cursor did not touch, and rows forgotten one by one when their
    # cells change, must paint exactly what a new table with the same rows and cursor paints
    nodes = [f"gpu{i:02d}" for i in range(60)]
    last = {"gpu41": "smoke", "gpu44": "cordon"}

    async def painted(steps: list[tuple[dict[str, str], int]]) -> tuple[list[list[tuple[str, object]]], object]:
        app = _Table()
        async with app.run_test(size=(160, 20)) as pilot:
            table = app.query_one(FleetTable)
            for changes, row in steps:
                table.show_rows([_row(n, changes.get(n, "drain")) for n in nodes])
                await pilot.pause()
                table.move_cursor(row=row)
                await pilot.pause()
                _painted(table)
            await pilot.pause()
            return _painted(table), table.scroll_offset

    moved = await painted([({}, 3), ({"gpu02": "smoke"}, 2), ({"gpu41": "smoke"}, 40), (last, 42), (last, 41)])
    afresh = await painted([({}, 0), (last, 42), (last, 41)])  # (the same scroll: 42 at the bottom)
    assert moved == afresh
    assert any("smoke" in "".join(t for t, _ in line) for line in moved[0])
