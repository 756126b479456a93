"""The command palette (ctrl+p): every key action, and every action the gate allows now.

Hits only forward intent to the main screen, which asks the session; nothing here
decides what is allowed (that list comes from :func:`cockpit.engine.rules.allowed_actions`).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from cockpit.engine.rules import allowed_actions
from screens import view

#: Key actions of the main screen, as the palette lists them.
KEY_ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("next", "Next: do the suggested action", "n"),
    ("pass_gate", "Pass the current stage's gate", "g"),
    ("override", "Override the current gate (reason required)", "o"),
    ("sign_off", "Sign off the selected item", "s"),
    ("raise_trigger", "Raise a manual rollback trigger", "!"),
    ("clear_trigger", "Clear a fired trigger (reason required)", "c"),
    ("rollback", "Start the rollback of the selected node", "b"),
    ("start_wave", "Start the next wave", "w"),
    ("choose_path", "Choose the recovery path", "p"),
    ("decision", "Record the decision", "D"),
    ("note", "Add a note to the change log", "a"),
    ("cancel_steps", "Cancel the running step(s)", "k"),
    ("toggle_detail", "Show node detail / stage pane", "d"),
    ("help", "Help: keys and symbols", "?"),
    ("quit_cockpit", "Quit (pause the session)", "q"),
)


class ActionCommands(Provider):
    def _main(self) -> Any:
        return self.app.main  # type: ignore[attr-defined]

    def _entries(self) -> Iterator[tuple[str, Any, str]]:
        main = self._main()
        for name, title, key in KEY_ACTIONS:
            yield f"{title} [{key}]", partial(main.run_action, name), f"key {key}"
        s = main.session
        for action in allowed_actions(s.state, s.runbook, s.operator, s.operator):
            yield f"Do: {view.describe(action)}", partial(main.start, action), "allowed by the gate now"

    async def discover(self) -> Hits:
        for title, callback, help_text in self._entries():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._entries():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, text=title, help=help_text)
