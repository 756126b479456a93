"""Waiting for an idle cockpit screen in the pilot, for tests that record through the session
directly (no key) and then read the screen."""

from __future__ import annotations

import asyncio

from textual.pilot import Pilot


async def idle(pilot: Pilot[int], rounds: int = 3) -> None:
    """A few passes of the app's loop, then until a paced redraw of what was recorded has
    landed (``MainScreen.redraw_pending``; at most ``REDRAW_EVERY_S`` after the event)."""
    for _ in range(rounds):
        await asyncio.sleep(0.02)
        await pilot.pause()
    main = getattr(pilot.app, "main", None)
    for _ in range(200):
        if main is None or not main.redraw_pending:
            break
        await asyncio.sleep(0.02)
        await pilot.pause()
