"""Messages the cockpit's workers and session callbacks post to the main screen.

Each carries no state of its own beyond keys: the handler reads the session, so a
newer message of the same kind makes a queued one useless. ``can_replace`` lets
Textual drop the stale one, and a fast producer (streamed output, a refresh round
over hundreds of nodes) never floods the screen (the toolong pattern).
"""

from __future__ import annotations

from textual.message import Message

from cockpit.engine.actions import Action
from cockpit.fleet.executor import RebootProgress


class FlightChanged(Message):
    """An action started or ended being performed (no event yet): Next is drawn again."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FlightChanged)


class SessionChanged(Message):
    """An event was appended and folded: re-render from ``session.state``."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SessionChanged)


class RefreshDone(Message):
    """A probe round finished (live facts changed even when no event was written)."""

    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RefreshDone)


class StepOutput(Message):
    """New output lines for the running step ``key`` (the lines live in ``session.running``)."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StepOutput) and message.key == self.key


class RebootTick(Message):
    """A reboot wait moved on."""

    def __init__(self, key: str, progress: RebootProgress) -> None:
        super().__init__()
        self.key = key
        self.progress = progress

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RebootTick) and message.key == self.key


class ActionDone(Message):
    """An action finished: ``ok`` false carries the refusal or failure in ``text``."""

    def __init__(self, action: Action, ok: bool, text: str) -> None:
        super().__init__()
        self.action = action
        self.ok = ok
        self.text = text
