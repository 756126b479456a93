"""The command palette (ctrl+p): the main screen's keys that apply now, and every action
the gate allows now.

The key entries are generated from ``MainScreen.BINDINGS`` (a key is declared once).
Hits only forward intent to the main screen, which asks the session; nothing here
decides what is allowed (that comes from :mod:`cockpit.engine.offers`).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from cockpit.engine.offers import allowed_actions
from screens import view
from screens.keys import key_lines
from screens.main import MainScreen


class ActionCommands(Provider):
    def _main(self) -> MainScreen:
        main = getattr(self.app, "main", None)  # the cockpit app's main screen (the palette serves no other app)
        assert isinstance(main, MainScreen)
        return main

    def _entries(self) -> Iterator[tuple[str, Any, str]]:
        main = self._main()
        for name, key, words in key_lines(main.BINDINGS):
            if main.check_action(name, ()):  # the keys the footer would offer now
                yield f"{words} [{key}]", partial(main.run_action, name), f"key {key}"
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
