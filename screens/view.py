"""The screens' door to the view model (:mod:`cockpit.view.model`): the builders the
screens call, and the one piece they extend in Rich (the Next line, to which the main
screen adds what is running). Every word is decided in ``cockpit/view/``; nothing here
decides one.
"""

from __future__ import annotations

from rich.text import Text

from cockpit.engine.actions import describe
from cockpit.engine.planner import Plan
from cockpit.engine.state import CockpitState
from cockpit.view import model
from cockpit.view.model import header_view, progress_segments
from cockpit.view.panes import focus_stage, target_node
from cockpit.view.richtext import line_text

__all__ = ["describe", "focus_stage", "header_view", "next_line", "progress_segments", "target_node"]


def next_line(plan: Plan, state: CockpitState, width: int | None = None, *, keys: str = model.NEXT_KEY) -> Text:
    """The Next line in Rich, for the main screen to append to (``width``: its columns)."""
    return line_text(model.next_line(plan, state, width, keys=keys))
