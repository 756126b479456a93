"""What the three cockpit apps (live, review, replay) share: the stylesheet, ctrl+q, and
finding the one screen each of them shows."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen

from cockpit.view.inert import inert

_S = TypeVar("_S", bound=Screen[Any])


class CockpitBaseApp(App[int]):
    CSS_PATH = "cockpit.tcss"
    BINDINGS: ClassVar[list[Any]] = [Binding("ctrl+q", "quit", "Quit", show=False, priority=True)]

    def mounted(self, kind: type[_S], name: str) -> _S:
        """The app's ``kind`` screen (``name`` says it in the error), wherever it is in the stack."""
        for screen in self.screen_stack:
            if isinstance(screen, kind):
                return screen
        raise LookupError(f"the {name} screen is not mounted")

    def action_help_quit(self) -> None:
        """Ctrl-C says how to quit. Textual's own says it with ``[b]…[/b]`` markup, which
        :meth:`notify` (never markup) would show literally: the same words, plain."""
        for key, active in self.active_bindings.items():
            if active.binding.action in ("quit", "app.quit"):
                self.notify(f"Press {key} to quit the app", title="Do you want to quit?")
                return

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every toast says words that may carry a node's or a person's text: made inert,
        never read as markup (whatever a caller asks)."""
        super().notify(inert(message), title=inert(title), severity=severity, timeout=timeout, markup=False)
