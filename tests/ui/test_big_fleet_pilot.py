"""A 2,000-node fleet on the live screen: node-set rows, expanded with ``e`` and folded back,
the canary on its own row, the key offered (footer, help) only where the fleet folds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from offline_session import start_offline
from textual.pilot import Pilot

from cockpit.sim.fleet import node_names
from cockpit.view.fleet import EXPAND_CHUNK
from screens.app import build_app
from screens.keys import FOLD_ACTION
from screens.main import MainScreen
from screens.widgets import FleetTable


@asynccontextmanager
async def big_fleet(directory: Path, nodes: int) -> AsyncIterator[tuple[Pilot[int], MainScreen]]:
    """The live screen (120x40) of an offline session on ``nodes`` nodes, settled; the session
    closed after."""
    session = start_offline(directory, node_names(nodes), change_id="CHG-2000")
    try:
        app = build_app(session, refresh_s=0)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            yield pilot, app.main
    finally:
        await session.close()


def plain_rows(fleet: FleetTable) -> list[str]:
    return [fleet.get_row_at(i)[0].plain for i in range(fleet.row_count)]


async def test_a_2000_node_fleet_shows_node_sets_and_expands_one(tmp_path: Path) -> None:
    async with big_fleet(tmp_path / "sessions", 2000) as (pilot, main):
        fleet = main.query_one(FleetTable)
        assert plain_rows(fleet) == ["gpu0001", "▸ gpu[0002-2000] (1999)"]
        assert fleet.get_row_at(1)[2].plain == "pending"
        assert main.check_action(FOLD_ACTION, ())
        assert "e" in main.active_bindings

        await pilot.press("down")  # onto the node set: the panes show its first node
        assert main.selected_node() == "gpu0002"
        await pilot.press("e")
        rows = plain_rows(fleet)
        assert rows[1] == "▾ gpu[0002-2000] (1999)"
        assert rows[2] == f"  ▸ gpu[0002-{1 + EXPAND_CHUNK:04d}] ({EXPAND_CHUNK})"
        assert len(rows) == 2 + -(-1999 // EXPAND_CHUNK)
        assert fleet.cursor_row == 1  # still on the set

        await pilot.press("down", "e")  # the first chunk shows its nodes
        rows = plain_rows(fleet)
        assert rows[3:6] == ["gpu0002", "gpu0003", "gpu0004"]
        await pilot.press("down", "down")
        assert main.selected_node() == "gpu0003"
        assert str(main.query_one("#node-facts").render()).startswith("gpu0003")

        await pilot.press("e")  # on a node of the chunk: the chunk folds back, the cursor on it
        assert plain_rows(fleet)[2].startswith("  ▸ gpu[0002-")
        assert fleet.cursor_row == 2
        await pilot.press("up", "e")  # the whole set folds back
        assert plain_rows(fleet) == ["gpu0001", "▸ gpu[0002-2000] (1999)"]

        # the canary's row is its own: a node's own row says nothing of folds
        await pilot.press("up", "e")
        assert plain_rows(fleet)[0] == "gpu0001"
        await pilot.press("q")


async def test_a_small_fleet_offers_no_fold_key(tmp_path: Path) -> None:
    async with big_fleet(tmp_path / "sessions", 8) as (pilot, main):
        assert not main.check_action(FOLD_ACTION, ())
        assert "e" not in main.active_bindings or not main.active_bindings["e"].enabled
        await pilot.press("question_mark")
        help_text = str(pilot.app.screen.query_one("Static").render())
        assert "Expand the node set" not in help_text and "Next" in help_text
        await pilot.press("escape", "q")
