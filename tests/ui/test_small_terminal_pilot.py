"""What an operator sees at 80×24 (a laptop's default terminal, a tmux pane), through
the pilot on an offline session: Ctrl-C's hint, the Next line, and where toasts sit."""

from __future__ import annotations

import asyncio

from textual.widgets._toast import Toast, ToastRack

from screens.app import build_app


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
