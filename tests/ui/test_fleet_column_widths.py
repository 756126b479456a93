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
