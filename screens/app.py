"""The cockpit application and the one entry the CLI commands call.

:func:`build_app` is the factory the commands and the tests share (the posting
pattern), so tests drive the same wiring operators get. The app owns no state: it
shows a :class:`cockpit.session.operator.Session` and closes it cleanly on quit.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from textual.app import App, SystemCommand
from textual.screen import Screen

from cockpit.engine.state import INTERRUPTED_OUTCOME
from screens.base_app import CockpitBaseApp
from screens.commands import ActionCommands
from screens.main import MainScreen
from screens.modals import ConfirmQuit

#: how long an exiting cockpit may take to restore the terminal before the process just ends
EXIT_GRACE_S = 10.0

if TYPE_CHECKING:
    from cockpit.session.operator import Session

DARK = "textual-dark"
LIGHT = "textual-light"
THEMES = {"dark": DARK, "light": LIGHT}


class AppOptions(TypedDict, total=False):
    """How the cockpit shows a session; the defaults are :class:`CockpitApp`'s."""

    refresh_s: float  # seconds between probe rounds; 0: no poller
    theme: str | None  # "dark" (the default) or "light", or a Textual theme's name
    reviewer: str | None  # the demo's simulated second person, who signs when Next is a sign-off
    autopilot: bool  # the demo autopilot drives; the screen follows


class CockpitApp(CockpitBaseApp):
    TITLE = "cockpit"
    COMMANDS = App.COMMANDS | {ActionCommands}

    def __init__(
        self,
        session: Session,
        *,
        refresh_s: float = 2.0,
        theme: str | None = None,
        reviewer: str | None = None,
        autopilot: bool = False,
    ) -> None:
        super().__init__()
        self.session = session
        self.refresh_s = refresh_s
        self.reviewer = reviewer
        self.autopilot = autopilot
        self._theme_name = THEMES.get(theme or "dark", theme or DARK)
        self._quitting = False
        self.closed_cleanly = False
        self._owns_process = False  # set by run_async: a real terminal, not the test pilot
        self._exit_watchdog: threading.Timer | None = None

    def on_mount(self) -> None:
        self.theme = self._theme_name
        self.push_screen(
            MainScreen(self.session, refresh_s=self.refresh_s, reviewer=self.reviewer, autopilot=self.autopilot)
        )

    def on_ready(self) -> None:
        # Ready comes with the first layout; the screen paints after it: the probe rounds
        # start when nothing is left to paint
        self.call_after_refresh(self.main.start_poller)

    @property
    def main(self) -> MainScreen:
        return self.mounted(MainScreen, "main")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Toggle light/dark theme",
            "Switch between the light and dark theme",
            lambda: self.main.action_toggle_theme(),
        )

    async def action_quit(self) -> None:
        """Quit (q, ctrl+q); while a step runs, a wave runs itself or a check's command runs,
        ask first, naming each and what the change log will say of it."""
        if self._quitting or isinstance(self.screen, ConfirmQuit):
            return
        running = self.main.running_steps()
        also = self.main.quit_stops()
        if not running and not also:
            await self.quit_now()
            return

        def answered(quit_anyway: object) -> None:
            if quit_anyway:
                self.run_worker(self.quit_now(), group="quit", exit_on_error=False)

        self.push_screen(ConfirmQuit(running, INTERRUPTED_OUTCOME, also), answered)

    async def quit_now(self) -> None:
        """Stop the workers (a running step records "interrupted: outcome unknown"), record
        the pause, close the transport and the log, then exit."""
        if self._quitting:
            return
        self._quitting = True
        await self.main.stop_workers(wave=True)
        try:
            self.session.pause()
        finally:
            await self.session.close()
        self.closed_cleanly = True
        self.exit_for_sure(0)

    async def run_async(self, **kwargs: Any) -> int | None:
        """Run in a terminal (the real program; the test pilot runs the app another way): only
        here may an exit that hangs end the process (see :meth:`exit_for_sure`)."""
        self._owns_process = True
        # The watchdog, once armed, is not cancelled here: Textual's input thread can outlive
        # the app (spinning on a terminal that went away) and hold the interpreter's exit.
        return await super().run_async(**kwargs)

    def exit_for_sure(self, status: int) -> None:
        """Exit with ``status``; if the process has not ended :data:`EXIT_GRACE_S` later (Textual
        can block for ever writing to, or spin reading from, a terminal that vanished mid-exit: a
        tmux server killed, an SSH link dropped), it ends then anyway. The session is paused and
        closed before this is called, so everything is on disk (each event is fsync'd; the lock
        is the kernel's to release)."""
        if self._owns_process and self._exit_watchdog is None:
            self._exit_watchdog = threading.Timer(EXIT_GRACE_S, os._exit, args=(status,))
            self._exit_watchdog.daemon = True  # a normal exit never waits for it
            self._exit_watchdog.start()
        self.exit(status)


def build_app(session: Session, **options: Unpack[AppOptions]) -> CockpitApp:
    """The one factory for the CLI and the tests. The demo's operator gets the demo's
    simulated reviewer, who signs off when a sign-off is the Next action."""
    if options.get("reviewer") is None:
        from cockpit.engine.planner import (
            DEMO_OPERATOR,
            DEMO_REVIEWER,
        )

        options["reviewer"] = DEMO_REVIEWER if session.operator == DEMO_OPERATOR else None
    return CockpitApp(session, **options)


async def run_app_async(session: Session, **options: Unpack[AppOptions]) -> int:
    """Run the cockpit on ``session`` in the running event loop (the session's transport
    lives there) until the operator quits; returns the exit status. The session is
    paused and closed on the way out (both idempotent, so a caller's own close is fine)."""
    app = build_app(session, **options)
    result = await app.run_async()
    if not app.closed_cleanly:  # ended without q (e.g. a signal): still close the log cleanly
        try:
            session.pause()
        finally:
            await session.close()
    return 0 if result is None else int(result)


#: The name the issue gives the entry; it is a coroutine function (the loop is the session's).
run_app = run_app_async
