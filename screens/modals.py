"""Modal dialogs: the typed confirmation of a destructive step, the question before quitting
while a step runs, prompts for the words an action needs (a note, a reason, a path), a
picker, and the help screen.

Each dismisses with the operator's answer (``None`` when cancelled); the caller hands
the answer to the session, which decides whether it is enough.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from cockpit.view.inert import inert
from cockpit.view.richtext import safe_text
from screens.keys import help_text

#: Seconds before a dialog's first field takes keys. The key that opened the dialog,
#: pressed twice, repeating, or typed ahead while the dialog was coming up, is dropped
#: by the dialog screen instead of becoming the first letter of a note ("n").
KEY_SETTLE_S = 0.3


class Dialog(ModalScreen[object]):
    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = ""  # the first field is focused on mount, or after ``settle_s``
    _answered = False
    #: seconds before the first field takes keys; the main screen's action dialogs set
    #: KEY_SETTLE_S (their opening key may repeat), other dialogs take keys at once
    settle_s = 0.0

    def __init__(self, title: str = "", explanation: str = "") -> None:
        super().__init__()
        self._title = title
        self._explanation = explanation

    def heading(self) -> ComposeResult:
        """The dialog's title in bold, and what it is for when it says."""
        yield Label(safe_text(self._title, style="bold"))
        if self._explanation:
            yield Static(safe_text(self._explanation, newlines=True), classes="field")

    def on_mount(self) -> None:
        if self.settle_s > 0:
            self.set_timer(self.settle_s, self._focus_first_field)
        else:
            self._focus_first_field()

    def _focus_first_field(self) -> None:
        if self.focused is None:  # a test (or a click) may have focused one already
            for widget in self.query("Input, OptionList, VerticalScroll"):
                if widget.focusable:
                    widget.focus()
                    return

    def answer(self, value: object) -> None:
        """Dismiss once: a second Enter arriving while the dialog closes must not pop the
        screen below it."""
        if not self._answered and self.is_current:
            self._answered = True
            self.dismiss(value)

    def action_cancel(self) -> None:
        self.answer(None)

    def submit(self) -> None:
        """What the dialog's OK button does; a dialog without one has nothing to submit."""

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self.submit()
        else:
            self.answer(None)


class ConfirmDestructive(Dialog):
    """Shows the exact command and where it runs; OK only once the target name is typed."""

    def __init__(
        self, *, title: str, target: str, command: str, expected: str, warning: str = "", kind: str = "Destructive step"
    ) -> None:
        super().__init__(title)
        self._kind = kind  # "Destructive step", or "Service change" (drain, uncordon)
        self._target = target
        self._command = command
        self.expected = expected
        self._warning = warning

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="danger"):
            yield Label(safe_text(f"⚠ {self._kind}: {self._title}", style="bold"))
            yield Static(Text.assemble(("runs on: ", "bold"), inert(self._target)), classes="field")
            yield Static(
                Text.assemble(("command: ", "bold"), inert(self._command)), id="confirm-command", classes="field"
            )
            if self._warning:
                yield Static(safe_text(self._warning, style="yellow"), classes="field")
            yield Label(safe_text(f"Type {self.expected!r} to confirm:"))
            yield Input(placeholder=self.expected, id="confirm-input")
            with Horizontal(classes="buttons"):
                yield Button("Run it", id="ok", variant="error", disabled=True)
                yield Button("Cancel", id="cancel")

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#ok", Button).disabled = event.value != self.expected

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value == self.expected:
            self.answer(event.value)
        else:
            self.notify(f"type exactly {self.expected!r}", severity="warning")

    def submit(self) -> None:
        self.answer(self.query_one("#confirm-input", Input).value)


class ConfirmQuit(Dialog):
    """Quitting while work is under way: names each step running and what the change log will
    say of it, and the other work the quit stops (``also``: a wave running itself, a check's
    command), each with what becomes of it."""

    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape", "cancel", "Stay"),
        Binding("n", "cancel", "Stay", show=False),
        Binding("y", "quit_anyway", "Quit anyway", show=False),
    ]

    def __init__(self, running: Sequence[str], outcome: str, also: Sequence[str] = ()) -> None:
        super().__init__()
        self.running = list(running)  # "stage/step on node", one per running step
        self.also = list(also)  # the other work a quit stops, each with what becomes of it
        self._outcome = outcome

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="danger"):
            yield Label(Text("⚠ A step is still running" if self.running else "⚠ Work is under way", style="bold"))
            if self.running:
                yield Static(
                    Text("\n".join(f"  {what}" for what in self.running), style="bold"),
                    id="quit-running",
                    classes="field",
                )
                yield Static(
                    Text(
                        f"Quitting stops it: the change log records it as {self._outcome!r}. "
                        "Check the node before you run it again. k cancels a step instead.",
                        style="yellow",
                    ),
                    classes="field",
                )
            if self.also:
                yield Static(
                    safe_text("\n".join(f"  {what}" for what in self.also), style="yellow", newlines=True),
                    id="quit-also",
                    classes="field",
                )
            with Horizontal(classes="buttons"):
                yield Button("Stay (esc)", id="cancel", variant="primary")
                yield Button("Quit anyway (y)", id="ok", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def submit(self) -> None:
        self.answer(True)

    def action_quit_anyway(self) -> None:
        self.submit()


class TextPrompt(Dialog):
    """Asks for one line of text (a note, a reason). ``danger`` paints it red (overrides)."""

    def __init__(
        self,
        *,
        title: str,
        label: str,
        value: str = "",
        required: bool = True,
        danger: bool = False,
        explanation: str = "",
        check: Callable[[str], str | None] | None = None,
    ) -> None:
        super().__init__(title, explanation)
        self._label = label
        self._value = value
        self._required = required
        self._danger = danger
        self._check = check  # the gate's own rule for the words (cockpit.engine.rules.note_problem)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="danger" if self._danger else ""):
            yield from self.heading()
            yield Label(safe_text(self._label))
            yield Input(value=self._value, id="prompt-input")
            with Horizontal(classes="buttons"):
                yield Button("OK", id="ok", variant="error" if self._danger else "primary")
                yield Button("Cancel", id="cancel")

    def _submit(self, value: str) -> None:
        if self._required and not value.strip():
            self.notify("this needs some text", severity="warning")
            return
        problem = self._check(value) if self._check is not None and value.strip() else None
        if problem:
            self.notify(problem, severity="warning")  # the dialog stays open with what was typed
            return
        self.answer(value.strip())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit(event.value)

    def submit(self) -> None:
        self._submit(self.query_one("#prompt-input", Input).value)


class FormPrompt(Dialog):
    """Several labelled lines at once (path: name, rationale, owner; decision: outcome, why)."""

    def __init__(self, *, title: str, fields: Sequence[tuple[str, str, str]], explanation: str = "") -> None:
        super().__init__(title, explanation)
        self._fields = list(fields)  # (key, label, initial value)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield from self.heading()
            for key, label, value in self._fields:
                yield Label(safe_text(label))
                yield Input(value=value, id=f"form-{key}")
            with Horizontal(classes="buttons"):
                yield Button("OK", id="ok", variant="primary")
                yield Button("Cancel", id="cancel")

    def _values(self) -> dict[str, str] | None:
        values = {key: self.query_one(f"#form-{key}", Input).value.strip() for key, _, _ in self._fields}
        missing = [label for key, label, _ in self._fields if not values[key]]
        if missing:
            self.notify(f"fill in: {missing[0]}", severity="warning")
            return None
        return values

    def on_input_submitted(self, event: Input.Submitted) -> None:
        inputs = list(self.query(Input))
        idx = inputs.index(event.input)
        if idx + 1 < len(inputs):
            inputs[idx + 1].focus()
            return
        self.submit()

    def submit(self) -> None:
        values = self._values()
        if values is not None:
            self.answer(values)


class PickPrompt(Dialog):
    """Pick one of several choices (a trigger to raise or clear, a decision's outcome)."""

    def __init__(self, *, title: str, choices: Sequence[tuple[str, str]], explanation: str = "") -> None:
        super().__init__(title, explanation)
        self._choices = list(choices)  # (id, shown text)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield from self.heading()
            yield OptionList(*(Option(safe_text(text), id=cid) for cid, text in self._choices), id="pick")

    def on_mount(self) -> None:
        self.query_one(OptionList).highlighted = 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.answer(event.option.id)


class HelpScreen(Dialog):
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape", "cancel", "Close"),
        Binding("question_mark", "cancel", "Close"),
        Binding("q", "cancel", "Close"),
    ]

    def __init__(self, bindings: Iterable[BindingType]) -> None:
        super().__init__()
        self._text = help_text(bindings)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="help"):
            yield Static(self._text)  # the keys' own help: Rich text the cockpit built


class TextScreen(Dialog):
    """A page of words to read (every trigger with its evidence); any of esc, q closes it."""

    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "cancel", "Close"), Binding("q", "cancel", "Close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__(title)
        self._text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="help"):
            yield from self.heading()
            yield Static(safe_text(self._text, newlines=True))
