"""What the reviewer's view and the replay are alike: read-only screens of a change log's
folded state in the operator's panes (:func:`screens.widgets.show_recorded` fills them),
with the log's verification in one line and the stage of the node under the fleet's cursor."""

from __future__ import annotations

from textual import on
from textual.screen import Screen
from textual.widgets import DataTable, Static

from cockpit.engine.state import CockpitState
from cockpit.view.richtext import safe_text
from screens.widgets import show_focused_stage


class RecordedScreen(Screen[None]):
    @property
    def shown_state(self) -> CockpitState:
        """The folded state the panes show now."""
        raise NotImplementedError

    def show_integrity(self, integrity: str) -> None:
        """The ``#integrity`` line: the log's verification, marked broken where it says so."""
        line = self.query_one("#integrity", Static)
        line.update(safe_text(integrity))
        line.set_class("BROKEN" in integrity or "FAILED" in integrity, "broken")

    @on(DataTable.RowHighlighted, "#fleet")
    def _node_highlighted(self) -> None:
        show_focused_stage(self, self.shown_state)
