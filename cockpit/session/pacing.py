"""Bookkeeping in turns, so that a key is answered between two of them.

The cockpit's steps, probes and screen share one event loop, and asyncio runs every
callback that is ready in one pass, first in, first out. When 200 nodes of a wave finish
their commands together, each one's bookkeeping (recording the step, the closing probe, the
triggers judged) is ready at once: one pass of the loop did them all, hundreds of
milliseconds, while a key pressed meanwhile waited for the pass to end, and again at each
of the three hops it takes through the screen (app, table, screen).

A :class:`Pacer` hands out turns: a task about to do a piece of bookkeeping awaits
:meth:`Pacer.turn` first. While no one waits, a turn is given at once, as long as the pass
of the loop has spent less than ``slice_s`` on turns; past that, or behind others waiting,
the task queues, and the queue is served one turn per pass of the loop. What a key needs
to be answered then waits behind at most one slice of bookkeeping per hop.

Only *when* each piece runs changes, never what it does: the turns are taken before a
piece starts (a step's start, its closing record, a probe's record), each piece still
checks the gate, appends, folds and judges as one synchronous whole, and the queue is
first come, first served, so a node's own events keep their order.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

#: Seconds of bookkeeping one pass of the event loop may begin before the rest waits for
#: the next pass (a piece of bookkeeping, one recorded event, is ~2-10 ms of CPU).
SLICE_S = 0.004


class Pacer:
    """Turns for bookkeeping on one event loop (see the module notes)."""

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self.slice_s = slice_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opened: float | None = None  # when this pass's first turn was given
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.queued = 0  # turns that waited for a later pass (for tests and the benchmark)

    async def turn(self) -> None:
        """Return when this task may do its next piece of bookkeeping."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a session closed from another loop: nothing carries over
            self._loop, self._opened, self._waiters = loop, None, deque()
        if not self._waiters:
            if self._opened is None:
                self._opened = time.perf_counter()
                loop.call_soon(self._next_pass)
                return
            if time.perf_counter() - self._opened < self.slice_s:
                return
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        self.queued += 1
        await waiter

    async def turn_to_record(self) -> bool:
        """:meth:`turn`, for a piece whose outcome is already known (a step's command came
        back): a cancellation while it waits is held, not raised, so the caller records what
        it knows first; True when one came (the caller raises it once recorded)."""
        try:
            await self.turn()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return True
        return False

    def _next_pass(self) -> None:
        """Called once per pass while turns are given: the slice opened in the pass before
        is over; the first task waiting (if any) gets the next, in the pass after this one."""
        self._opened = None
        while self._waiters:
            waiter = self._waiters.popleft()
            if waiter.done():  # its task was cancelled while it waited
                continue
            waiter.set_result(None)
            self._opened = time.perf_counter()
            assert self._loop is not None
            self._loop.call_soon(self._next_pass)
            return
