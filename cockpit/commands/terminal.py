"""What the commands share about the process they run in (not a subcommand): a terminal where
one is needed, and SIGTERM and SIGHUP turned into a clean pause of the session."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from cockpit.errors import BadInput

if TYPE_CHECKING:
    from cockpit.session.operator import Session

#: The signals that pause a session: a polite stop (systemd, kill) and a lost terminal.
PAUSE_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def require_terminal(command: str, *headless: tuple[str, str]) -> None:
    """Refuse (one line, exit 2) unless stdin and stdout are both a terminal: a full-screen UI
    would paint escape codes into a pipe, or spin reading a stdin that is not a keyboard.
    ``headless``: what to run instead, each a command line (quoted whole in the refusal) and
    what it gives (may be empty)."""
    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)) if not _isatty(stream)]
    if not missing:
        return
    # one quoted command per alternative, its note outside the quotes: the line reads as the
    # other refusals do (error_line leads it with "cockpit:")
    ways = " or ".join(f"'{line}'" + (f" ({what})" if what else "") for line, what in headless)
    hint = f"; without one, use {ways}" if ways else ""
    which = "stdin and stdout are not terminals" if len(missing) == 2 else f"{missing[0]} is not a terminal"
    raise BadInput(f"{command} needs a terminal ({which}){hint}")


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


@contextlib.contextmanager
def pause_on_signals(session: Session, stop: Callable[[int], object]) -> Iterator[list[int]]:
    """While inside, SIGTERM or SIGHUP pauses ``session`` at once (a step in flight recorded as
    interrupted, then session-paused), then calls ``stop(signum)`` to end the program's loop;
    the caller closes the session (which releases the operator lock). Yields the signals received.

    The pause is written from the handler itself, on the event loop between two awaits, so it
    lands before anything the shutdown cancels could write."""
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def handle(signum: int) -> None:
        received.append(signum)
        if len(received) > 1:
            return  # already pausing: one pause, one stop
        session.pause(f"{signal.Signals(signum).name} received: paused")
        stop(signum)

    for sig in PAUSE_SIGNALS:
        loop.add_signal_handler(sig, handle, int(sig))
    try:
        yield received
    finally:
        for sig in PAUSE_SIGNALS:
            loop.remove_signal_handler(sig)


def paused_by_signal(session: Session, signum: int) -> int:
    """Say how the session stopped (stderr may be a terminal already gone) and the exit status."""
    with contextlib.suppress(OSError):
        print(
            f"cockpit: {signal.Signals(signum).name}: session {session.change_id} paused; "
            f"resume it with 'cockpit resume {session.path}'",
            file=sys.stderr,
            flush=True,
        )
    return 128 + signum
