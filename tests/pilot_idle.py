"""Waiting in the pilot: for an idle cockpit screen, for tests that record through the session
directly (no key) and then read the screen; and until something holds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

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


async def until(predicate: Callable[[], bool], what: str, timeout: float = 20) -> None:
    """Until ``predicate`` holds, checked every 20 ms; an AssertionError naming ``what`` after ``timeout`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
