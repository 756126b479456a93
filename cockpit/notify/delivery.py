"""Delivering notices in the background, with retries and backoff.

:meth:`Notifier.send` returns at once: each (notice, sink) is posted by its own asyncio
task, so a slow or dead webhook never holds up a step, a gate or the screen. A try that
fails for a reason that may pass (no connection, a timeout, HTTP 408, 429 or 5xx) is
retried after ``backoff_s``, doubled after each try up to ``max_backoff_s`` (a 429's
``Retry-After`` is honoured within the same cap), at most ``max_attempts`` times; any other
4xx is the receiver refusing the body, which trying again cannot change. Each delivery's
end (sent, given up, or abandoned when the cockpit stops) is reported once to
``on_result``, which the session records; the URL and token never leave the
:class:`~.settings.Sink`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cockpit.notify.bodies import Notice, body
from cockpit.notify.settings import Sink

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)

#: Posts in flight at once: more wait their turn (cheaply), so a burst of notices (a wave's
#: nodes failing together) never takes the event loop in one go from the window it shares.
MAX_IN_FLIGHT = 64

#: HTTP statuses worth trying again: the receiver was busy or broken, not the body wrong.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Delivery:
    """How one notice went to one sink: ``status`` in words (``HTTP 200``, ``timeout``, the
    connection error's kind; never the URL), the tries made, and whether it arrived."""

    notice: Notice
    sink: str
    status: str
    attempts: int
    ok: bool
    abandoned: bool = False  # the cockpit stopped before the delivery ended


Sleep = Callable[[float], Awaitable[None]]


class Notifier:
    """Posts notices to sinks in background tasks and reports each delivery's end."""

    def __init__(
        self,
        sinks: Iterable[Sink],
        on_result: Callable[[Delivery], None] | None = None,
        *,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.sinks = list(sinks)
        self.on_result = on_result
        self._sleep = sleep
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiting: list[tuple[Notice, Sink]] = []  # sent before an event loop ran
        self._done: set[tuple[str, str]] = set()  # (subject, sink) delivered or under way
        self._http: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None
        if self.sinks:
            # imported now, before the window runs: imported at the first delivery it held the
            # event loop the window shares for a third of a second
            import aiohttp  # noqa: F401  (loaded here, before the window: see above)

    def mark_sent(self, subject: str, sink: str) -> None:
        """A delivery the change log already records: never sent again."""
        self._done.add((subject, sink))

    def sent(self, subject: str, sink: str) -> bool:
        return (subject, sink) in self._done

    def send(self, notice: Notice) -> int:
        """Start delivering ``notice`` to every sink that wants its kind; returns how many."""
        started = 0
        for sink in self.sinks:
            key = (notice.subject, sink.name)
            if not sink.settings.wants(notice.kind) or key in self._done:
                continue
            self._done.add(key)
            self._waiting.append((notice, sink))
            started += 1
        self._start_waiting()
        return started

    def _start_waiting(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: they start with the next send or drain
        waiting, self._waiting = self._waiting, []
        for notice, sink in waiting:
            task = loop.create_task(self._deliver(notice, sink), name=f"notify {sink.name} {notice.subject}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @property
    def pending(self) -> int:
        return len(self._tasks) + len(self._waiting)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for the deliveries under way (at most ``timeout`` seconds); those still
        trying then are abandoned, and reported so."""
        self._start_waiting()
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=timeout)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)

    async def close(self, timeout: float | None = 0) -> None:
        await self.drain(timeout)
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def _client(self) -> aiohttp.ClientSession:
        if self._http is None:
            import aiohttp  # only a cockpit with a sink pays for it (imported by __init__)

            self._http = aiohttp.ClientSession()
        return self._http

    async def _deliver(self, notice: Notice, sink: Sink) -> None:
        settings = sink.settings
        payload = json.dumps(body(notice, settings.format)).encode()
        headers = {"Content-Type": "application/json"}
        if sink.token:
            headers["Authorization"] = f"Bearer {sink.token}"
        attempts, status = 0, "not tried"
        delay = settings.backoff_s
        try:
            while attempts < settings.max_attempts:
                attempts += 1
                status = "no answer"  # what a cancel during the try leaves
                status, retry, wait = await self._post(sink, payload, headers)
                if status.startswith("HTTP 2"):
                    self._report(Delivery(notice, sink.name, status, attempts, ok=True))
                    return
                if not retry or attempts >= settings.max_attempts:
                    break
                await self._sleep(min(max(delay, wait or 0.0), settings.max_backoff_s))
                delay = min(delay * 2, settings.max_backoff_s)
        except asyncio.CancelledError:
            stopped = f"abandoned when the cockpit stopped ({status})"
            self._report(Delivery(notice, sink.name, stopped, attempts, ok=False, abandoned=True))
            raise
        self._report(Delivery(notice, sink.name, status, attempts, ok=False))

    async def _post(self, sink: Sink, payload: bytes, headers: dict[str, str]) -> tuple[str, bool, float | None]:
        """One try: (status in words, worth retrying, the wait the receiver asked for)."""
        import aiohttp

        if self._slots is None:
            self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        async with self._slots:
            return await self._post_now(sink, payload, headers, aiohttp)

    async def _post_now(
        self, sink: Sink, payload: bytes, headers: dict[str, str], aiohttp: Any
    ) -> tuple[str, bool, float | None]:
        http = await self._client()
        try:
            timeout = aiohttp.ClientTimeout(total=sink.settings.timeout_s)
            async with http.post(sink.url, data=payload, headers=headers, timeout=timeout) as response:
                await response.read()
                code = response.status
                wait = _retry_after(response.headers.get("Retry-After"))
        except TimeoutError:
            return "timeout", True, None
        except aiohttp.ClientError as exc:
            # the exception's kind only: its text names the URL, which may hold the secret
            return f"connection failed ({type(exc).__name__})", True, None
        return f"HTTP {code}", code in RETRY_STATUSES, wait

    def _report(self, delivery: Delivery) -> None:
        if self.on_result is None:
            return
        try:
            self.on_result(delivery)
        except Exception as exc:  # recording it failed (the log closed): the delivery itself stands
            log.warning("delivery to %s not recorded: %s", delivery.sink, exc)


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` in seconds (RFC 9110 10.2.3); the HTTP-date form is ignored."""
    if value is None or not value.strip().isdigit():
        return None
    return float(value.strip())
