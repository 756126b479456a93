"""What an operator sees at 80×24 (a laptop's default terminal, a tmux pane), through
the pilot on an offline session: Ctrl-C's hint, the Next line, and where toasts sit."""

from __future__ import annotations

import asyncio

from textual.widgets._toast import Toast, ToastRack

from screens.app import build_app
from screens.widgets import NextBar


async def _idle(pilot, rounds: int = 3) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0.02)
        await pilot.pause()


def _toasts(app) -> list[Toast]:
    """The toasts on the current screen (Textual keeps them in a rack of its own)."""
    return list(app.screen.get_child_by_type(ToastRack).query(Toast))


async def test_ctrl_c_says_how_to_quit_in_plain_words(offline) -> None:
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await _idle(pilot)
        await pilot.press("ctrl+c")
        await _idle(pilot)
        shown = [toast.render().plain for toast in _toasts(app)]
        assert shown == ["Do you want to quit?\nPress ctrl+q to quit the app"]
        assert app.is_running  # Ctrl-C only says how; it quits nothing


async def test_the_next_line_keeps_its_instruction_at_80_by_24(offline) -> None:
    for stage in ("freeze", "compat", "path", "preflight"):
        offline.override(stage, reason=f"{stage} done on paper before the window (test fixture)")
    # the arm stage waits for a second person: a line of some 160 characters
    assert len(offline.next_plan().text) > 120
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await _idle(pilot)
        bar = app.main.query_one(NextBar)
        shown = str(bar.render())
        assert len(shown) <= bar.content_size.width == 78
        assert shown.startswith("Next: a second person signs off '") and "…" in shown
        assert shown.endswith("; s in `cockpit review`")  # the key, whole
        # wider, the line is the planner's words again, whole
        await pilot.resize_terminal(200, 50)
        await _idle(pilot)
        assert str(bar.render()) == f"Next: {offline.next_plan().text}"
