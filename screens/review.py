"""The reviewer's view (``cockpit review SESSION --as NAME``): the operator's panes, read-only,
refreshed from the change log, plus what waits for the reviewer's sign-off.

Render only: a :class:`~cockpit.session.review.ReviewerSession` follows the file and judges
and appends the reviewer's intents; this screen polls it every 0.3 s, shows its
state with the operator's widgets, and turns keys into its calls. No key here can
run a step, pass a gate or override: the reviewer's engine has no such call, and
the gate refuses them anyway.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from cockpit.changelog.events import Event
from cockpit.engine.actions import SignOff
from cockpit.engine.state import CockpitState
from cockpit.errors import CockpitError
from cockpit.runbook.model import TriggerMode
from cockpit.session.review import ReviewerSession
from cockpit.view.inert import inert
from cockpit.view.model import log_line
from cockpit.view.richtext import line_text, safe_text
from screens import view
from screens.base_app import CockpitBaseApp
from screens.modals import PickPrompt, TextPrompt
from screens.recorded import RecordedScreen
from screens.widgets import CockpitHeader, KeysFooter, ProgressStrip, TriggerPanel, cockpit_body, show_recorded

#: How often the view polls the change log (seconds).
POLL_S = 0.3
#: Recent events listed under the sign-offs before the pane knows its height.
RECENT_EVENTS = 20

REVIEW_CSS = """
ReviewScreen { layout: vertical; }
ReviewScreen #body { height: 1fr; layout: horizontal; }
ReviewScreen #left { width: 1fr; }
ReviewScreen #fleet { height: 1fr; min-height: 4; }
ReviewScreen #signoffs-title { height: 1; padding: 0 1; background: $panel; text-style: bold; }
ReviewScreen #signoffs { height: auto; max-height: 10; min-height: 2; }
ReviewScreen #recent { height: 1fr; min-height: 3; padding: 0 1; border-top: solid $primary;
    text-wrap: nowrap; text-overflow: ellipsis; }
ReviewScreen #stage { width: 45%; border-left: solid $primary; }
ReviewScreen #integrity { height: auto; padding: 0 1; background: $panel; }
ReviewScreen #integrity.broken { background: $error 40%; text-style: bold; }
ReviewScreen #review-bar { height: 1; padding: 0 1; background: $panel; }
ReviewScreen #review-bar.warn { background: $warning 40%; }
"""


class SignoffTable(DataTable[Text]):
    """The sign-offs the reviewer can give now; Enter or ``s`` signs the highlighted one."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", show_header=False, **kw)
        self._shown: list[SignOff] = []

    def on_mount(self) -> None:
        self.add_column("what", key="what")

    def show_actions(self, actions: list[SignOff], texts: dict[str, str]) -> None:
        if actions == self._shown:
            return
        keep = self.selected
        self.clear()
        for action in actions:
            key = action_key(action)
            self.add_row(
                Text.assemble(("⚑ ", "magenta"), view.describe(action), (f"  {texts.get(key, '')}", "dim")), key=key
            )
        self._shown = list(actions)
        if keep is not None and keep in actions:
            self.move_cursor(row=actions.index(keep))

    @property
    def selected(self) -> SignOff | None:
        if not self._shown or not 0 <= self.cursor_row < len(self._shown):
            return None
        return self._shown[self.cursor_row]


def action_key(action: SignOff) -> str:
    return f"{action.stage}/{action.item or '*'}/{action.node or '-'}"


class ReviewScreen(RecordedScreen):
    DEFAULT_CSS = REVIEW_CSS
    BINDINGS: ClassVar[list[Any]] = [
        Binding("s", "sign_off", "Sign off"),
        Binding("exclamation_mark", "raise_trigger", "Raise trigger", key_display="!"),
        Binding("a", "note", "Note"),
        Binding("tab", "app.focus_next", "Next pane", show=False),
        Binding("q", "quit_review", "Quit"),
    ]

    def __init__(self, review: ReviewerSession, *, poll_s: float = POLL_S) -> None:
        super().__init__()
        self.review = review
        self.poll_s = poll_s
        self.polls = 0
        self._error: str | None = None
        #: what is being appended in the worker thread (None: nothing)
        self.pending: str | None = None

    def compose(self) -> ComposeResult:
        yield CockpitHeader(id="header")
        yield Static(id="integrity")
        yield ProgressStrip(id="strip")
        yield cockpit_body(Static(id="signoffs-title"), SignoffTable(id="signoffs"), Static(id="recent"))
        yield TriggerPanel(id="triggers")
        yield Static(id="review-bar")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.render_all()
        self.query_one(SignoffTable).focus()
        self.set_interval(self.poll_s, self.poll, name="follow")

    # ------------------------------------------------------------------ log -> screen

    def poll(self) -> None:
        """Fold what the operator (or anyone) appended; re-render only when something came."""
        if self.pending is not None:  # the append's thread folds too: one reader at a time
            return
        self.polls += 1
        try:
            new = self.review.poll()
            error = None
        except CockpitError as exc:  # the file was replaced or damaged: say so, keep what we have
            new, error = [], str(exc)
        if new or error != self._error:
            self._error = error
            self.render_all()

    def render_all(self) -> None:
        rev = self.review
        state = rev.state
        now = state.last_at or rev.clock()
        header = view.header_view(
            state, change_id=rev.change_id, runbook_id=rev.runbook.id, operator=rev.operator, now=now
        )
        show_recorded(self, state, header, now)
        pending = rev.pending_signoffs()
        texts = {action_key(a): self._item_text(a) for a in pending}
        self.query_one("#signoffs-title", Static).update(
            f"Waiting for your sign-off ({len(pending)})" if pending else "Nothing waits for your sign-off now"
        )
        self.query_one(SignoffTable).show_actions(pending, texts)
        recent = self.query_one("#recent", Static)
        rows = recent.size.height or RECENT_EVENTS  # the newest at the bottom, none cut off
        recent.update(
            Text("\n", no_wrap=True, overflow="ellipsis").join(
                line_text(log_line(e), no_wrap=True) for e in list(rev.events)[-rows:]
            )
        )
        self._render_bar()

    def _item_text(self, action: SignOff) -> str:
        state = self.review.state
        stage = state.window.get(action.stage)
        if stage is None and action.node in state.nodes:
            stage = state.nodes[action.node or ""].stage
        item = stage.items.get(action.item or "") if stage is not None else None
        return item.text if item is not None else ""

    def _render_bar(self) -> None:
        rev = self.review
        self.show_integrity(rev.integrity())
        bar = self.query_one("#review-bar", Static)
        text = Text.assemble(
            ("reviewing as ", "dim"),
            (rev.reviewer, "bold"),
            ("  ·  operator ", "dim"),
            rev.operator,
            ("  ·  ", "dim"),
            (f"event {rev.state.last_seq}", ""),
            ("  ·  following ", "dim"),
            inert(str(rev.path)),
        )
        warn = False
        if self.pending is not None:
            text.append(f"  ·  writing: {self.pending} …", style="bold")
        if self._error:
            text = safe_text(f"⚠ {self._error}", style="bold")
            warn = True
        elif rev.torn is not None:
            text.append(f"  ·  ⚠ {inert(rev.torn.describe())}", style="bold")
            warn = True
        bar.update(text)
        bar.set_class(warn, "warn")

    @property
    def shown_state(self) -> CockpitState:
        return self.review.state

    @on(DataTable.RowSelected, "#signoffs")
    def _signoff_selected(self) -> None:
        self.action_sign_off()

    # ------------------------------------------------------------------ reviewer intents

    def _do(self, what: str, call: Callable[[], Event]) -> None:
        """Append off the UI thread: on a big log or a slow disk the write (lock, fsync) must
        not freeze the screen. The bar says it is pending; polls wait until it is written."""
        if self.pending is not None:
            self.notify(f"still writing: {self.pending}; try again when it is in the log", severity="warning")
            return
        self.pending = what
        self._render_bar()
        self.run_worker(self._append(what, call), name="append", group="append")

    async def _append(self, what: str, call: Callable[[], Event]) -> None:
        try:
            event = await asyncio.to_thread(call)
        except CockpitError as exc:
            self.notify(str(exc), severity="error", timeout=8)  # the app makes it inert
        except OSError as exc:  # the file became unwritable mid-review: one line, the view goes on
            why = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            self.notify(f"not written: {why} ({self.review.path})", severity="error", timeout=8)
        else:
            self.notify(f"{what} (event {event.seq})", timeout=4)
        finally:
            self.pending = None
        self.render_all()

    def action_sign_off(self) -> None:
        action = self.query_one(SignoffTable).selected
        if action is None:
            self.notify("nothing waits for your sign-off now", severity="warning")
            return

        def done(note: object) -> None:
            if note is None:
                return
            self._do(
                f"signed off {view.describe(action).removeprefix('sign off ')}",
                lambda: self.review.sign_off(action.stage, action.item, action.node, note=str(note) or None),
            )

        self.app.push_screen(
            TextPrompt(
                title=view.describe(action).capitalize(),
                required=False,
                label="Note (optional): what you checked",
                explanation=self._item_text(action),
            ),
            done,
        )

    def action_raise_trigger(self) -> None:
        state = self.review.state
        manual = [t for t in self.review.runbook.triggers if t.mode is TriggerMode.MANUAL]
        if not manual:
            self.notify("this runbook has no manual triggers", severity="warning")
            return

        def picked_trigger(trigger: object) -> None:
            if trigger is None:
                return
            nodes = [("", "the whole window")] + [(n, n) for n in state.nodes]
            self.app.push_screen(
                PickPrompt(title=f"Where was {trigger} seen?", choices=nodes),
                lambda node: picked_node(str(trigger), node),
            )

        def picked_node(trigger: str, node: object) -> None:
            if node is None:
                return
            where = str(node) or None

            def noted(note: object) -> None:
                if note is None:
                    return
                self._do(f"raised {trigger}", lambda: self.review.raise_trigger(trigger, where, note=str(note)))

            self.app.push_screen(
                TextPrompt(
                    title=f"Raise {trigger}" + (f" on {where}" if where else ""), label="What did you see?", danger=True
                ),
                noted,
            )

        self.app.push_screen(
            PickPrompt(title="Raise a manual rollback trigger", choices=[(t.id, f"{t.id}: {t.title}") for t in manual]),
            picked_trigger,
        )

    def action_note(self) -> None:
        def noted(text: object) -> None:
            if text:
                self._do("note added", lambda: self.review.note(str(text)))

        self.app.push_screen(TextPrompt(title="Add a note to the change log", label="Note"), noted)

    def action_quit_review(self) -> None:
        self.app.exit(0)


class ReviewApp(CockpitBaseApp):
    TITLE = "cockpit review"

    def __init__(self, review: ReviewerSession, *, poll_s: float = POLL_S) -> None:
        super().__init__()
        self.review = review
        self.poll_s = poll_s

    def on_mount(self) -> None:
        self.push_screen(ReviewScreen(self.review, poll_s=self.poll_s))

    @property
    def view(self) -> ReviewScreen:
        return self.mounted(ReviewScreen, "review")


def run_review(review: ReviewerSession) -> int:
    """Run the reviewer's view until they quit; the reviewer's journal is closed on the way out."""
    try:
        result = ReviewApp(review).run()
    finally:
        review.close()
    return 0 if result is None else int(result)
