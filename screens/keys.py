"""The keys of the cockpit, declared once, and what is generated from them.

``MAIN_KEYS`` are the main screen's bindings: the footer shows each one's short
``description``, the help screen and the command palette its ``tooltip``
(:func:`key_lines`). ``KEY_KINDS`` names the engine's action kind behind each key that
asks the session to act: the screen offers such a key only when the engine would
accept an action of that kind now (:func:`cockpit.engine.offers.offered_kinds`).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding, BindingType

from cockpit.engine.actions import ActionKind

MAIN_KEYS: list[BindingType] = [
    Binding("n", "next", "Next", tooltip="Do the Next action (the cockpit leads you through the runbook)"),
    Binding("enter", "act", "Act", show=False, tooltip="Act on the stage pane's selected row (run, tick, verify)"),
    Binding(
        "S",
        "run_stage",
        "Stage▸",
        show=False,
        tooltip="Run the stage's steps and checks up to its gate (destructive: the node typed once)",
    ),
    Binding("g", "pass_gate", "Gate", tooltip="Pass the current stage's gate (when every item holds)"),
    Binding("o", "override", "Override", tooltip="Override the gate: reason required, recorded, shown in red"),
    Binding(
        "exclamation_mark",
        "raise_trigger",
        "Raise",
        key_display="!",
        tooltip="Raise a manual rollback trigger, saying what you saw",
    ),
    Binding("c", "clear_trigger", "Clear", tooltip="Clear a fired trigger, with a reason"),
    Binding("T", "show_triggers", "Triggers", show=False, tooltip="Every rollback trigger, with its evidence"),
    Binding(
        "b",
        "rollback",
        "Rollback",
        tooltip="Roll back the node a trigger fired on or a step failed on (the cursor picks among several)",
    ),
    Binding("w", "start_wave", "Wave", tooltip="Start the next wave"),
    Binding("W", "run_wave", "Wave▸", tooltip="Start the next wave as one that runs itself (its node set typed once)"),
    Binding("Y", "needs_you", "Needs you", show=False, tooltip="Do the first item the running wave needs you for"),
    Binding("P", "pause_wave", "Pause wave", show=False, tooltip="Pause or resume the running wave"),
    Binding("K", "kill_wave", "Kill wave", show=False, tooltip="Kill the running wave: its steps in flight cancelled"),
    Binding("p", "choose_path", "Path", tooltip="Choose the recovery path"),
    Binding("D", "decision", "Decide", tooltip="Record the decision (its outcome picked from the runbook's list)"),
    Binding("a", "note", "Note", show=False, tooltip="Add a note to the change log"),
    Binding("k", "cancel_steps", "Cancel", tooltip="Cancel the running step(s): recorded as cancelled by the operator"),
    Binding(
        "e",
        "toggle_fold",
        "Expand",
        tooltip="Expand the node set under the cursor into its nodes, or fold them back (big fleets)",
    ),
    Binding("d", "toggle_detail", "Detail", tooltip="Node detail (of the node that needs attention) or stage pane"),
    Binding("t", "toggle_theme", "Theme", show=False, tooltip="Light or dark theme"),
    Binding("question_mark", "help", "Help", key_display="?", tooltip="Help: keys and symbols"),
    Binding(
        "E",
        "end_window",
        "End",
        show=False,
        tooltip="End the window: pick its outcome; the lock is freed",
    ),
    Binding(
        "q",
        "quit_cockpit",
        "Quit",
        tooltip="Quit (the session pauses; while a step, a check or a wave runs it asks first)",
    ),
]

#: The key that expands a node-set row of a big fleet (:mod:`cockpit.view.fleet`), or folds
#: it back: offered, and listed in the help, only where the fleet has node sets.
FOLD_ACTION = "toggle_fold"

#: The engine's action kind behind each key that asks the session to do something: the
#: key is offered only when the engine would accept an action of that kind now.
KEY_KINDS: dict[str, ActionKind] = {
    "run_stage": ActionKind.RUN_STAGE,
    "pass_gate": ActionKind.PASS_GATE,
    "override": ActionKind.OVERRIDE,
    "raise_trigger": ActionKind.RAISE_TRIGGER,
    "clear_trigger": ActionKind.CLEAR_TRIGGER,
    "rollback": ActionKind.START_ROLLBACK,
    "start_wave": ActionKind.START_WAVE,
    "choose_path": ActionKind.CHOOSE_PATH,
    "decision": ActionKind.RECORD_DECISION,
    "note": ActionKind.NOTE,
}


def key_lines(bindings: Iterable[BindingType]) -> list[tuple[str, str, str]]:
    """(action, key as shown, what it does) for each declared key binding, in order.

    The help screen and the command palette are generated from a screen's
    ``BINDINGS``: a key is declared once, with its words in ``tooltip``."""
    lines = []
    for binding in bindings:
        if isinstance(binding, Binding) and binding.tooltip:
            key = binding.key_display or binding.key.split(",")[0]
            lines.append((binding.action, key, binding.tooltip))
    return lines


#: Keys Textual itself provides on every screen (not declared by the cockpit).
TEXTUAL_KEYS: tuple[tuple[str, str], ...] = (
    ("tab", "Move between the fleet table and the stage pane"),
    ("ctrl+p", "Command palette: every key, and every action the gate allows now"),
)

SYMBOLS = """\
  ✓ done  ✗ failed  … running  ○ open  ⚑ needs sign-off  – skipped
  ● active stage   ◉ armed trigger   · trigger not armed yet

The gate checks every action first and a refusal shows its reasons; a key
shows in the footer only when the gate would accept its action now.
A destructive step shows its exact command and wants the node typed.
"""


def help_text(bindings: Iterable[BindingType]) -> Text:
    """The help screen's words: the keys from the bindings, then the symbols."""
    text = Text()
    text.append("Keys\n", style="bold")
    for _, key, words in key_lines(bindings):
        text.append(f"  {key:<7}{words}\n")
    for key, words in TEXTUAL_KEYS:
        text.append(f"  {key:<7}{words}\n")
    text.append("\nSymbols\n", style="bold")
    text.append(SYMBOLS)
    return text
