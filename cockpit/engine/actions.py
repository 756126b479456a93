"""What a person can ask the cockpit to do: one model per action kind, the union of
them (:data:`Action`), the verdict, and an action in words.

Each kind carries exactly what it needs: a run-step names its stage and step, an
override its reason, a decision its outcome. A field that holds words a person
types (a reason, a note, a rationale) is required but may be empty in the model:
:func:`cockpit.engine.offers.allowed_actions` lists actions before their words are
written, and :func:`cockpit.engine.rules.check_action` refuses empty words with a
reason in plain language.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cockpit.changelog.events import wave_number
from cockpit.engine.state import ROLLBACK_STAGE
from cockpit.errors import CockpitError
from cockpit.runbook.model import Runbook


class ActionKind(StrEnum):
    RUN_STEP = "run-step"
    RUN_STAGE = "run-stage"  # every step and check of one stage a person need not take, up to its gate
    TICK_ITEM = "tick-item"
    VERIFY_ITEM = "verify-item"
    SIGN_OFF = "sign-off"
    PASS_GATE = "pass-gate"
    OVERRIDE = "override"
    RAISE_TRIGGER = "raise-trigger"
    CLEAR_TRIGGER = "clear-trigger"
    ARM_TRIGGERS = "arm-triggers"
    START_WAVE = "start-wave"
    CHOOSE_PATH = "choose-path"
    START_ROLLBACK = "start-rollback"
    FINISH_ROLLBACK = "finish-rollback"  # end a node's rollback with its result (ok when its items hold)
    RECORD_DECISION = "record-decision"
    NOTE = "note"


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _OnStage(_Action):
    """An action on one stage: of the window, or of the node ``node`` names (None for a window stage)."""

    stage: str
    node: str | None = None


class RunStep(_OnStage):
    """Run one step of a stage."""

    kind: Literal[ActionKind.RUN_STEP] = ActionKind.RUN_STEP
    step: str


class RunStage(_OnStage):
    """Run one stage of one node (or of the window) up to its gate: every step and check
    Next proposes there that needs no person, one after another, as a wave runner takes
    them (:mod:`cockpit.engine.stagerun`). It stops at the gate (a person passes it), at
    the first failure, and at what a person must do (a tick, a sign-off). A stage with a
    destructive step left is confirmed once, by typing the node's name."""

    kind: Literal[ActionKind.RUN_STAGE] = ActionKind.RUN_STAGE


class VerifyItem(_OnStage):
    """Verify a check or command item now."""

    kind: Literal[ActionKind.VERIFY_ITEM] = ActionKind.VERIFY_ITEM
    item: str


class TickItem(_OnStage):
    """Tick a manual item by hand; ``note`` is what the person checked (required by some items)."""

    kind: Literal[ActionKind.TICK_ITEM] = ActionKind.TICK_ITEM
    item: str
    note: str | None = None


class SignOff(_OnStage):
    """A second person signs off an item, or the whole stage when ``item`` is None."""

    kind: Literal[ActionKind.SIGN_OFF] = ActionKind.SIGN_OFF
    item: str | None = None
    note: str | None = None


class PassGate(_OnStage):
    kind: Literal[ActionKind.PASS_GATE] = ActionKind.PASS_GATE


class Override(_OnStage):
    """Leave a stage whose gate is blocked; the reason is recorded and shown in red."""

    kind: Literal[ActionKind.OVERRIDE] = ActionKind.OVERRIDE
    reason: str


class RaiseTrigger(_Action):
    """Fire a manual trigger; ``note`` says what was seen."""

    kind: Literal[ActionKind.RAISE_TRIGGER] = ActionKind.RAISE_TRIGGER
    trigger: str
    note: str
    node: str | None = None


class ClearTrigger(_Action):
    kind: Literal[ActionKind.CLEAR_TRIGGER] = ActionKind.CLEAR_TRIGGER
    trigger: str
    reason: str


class ArmTriggers(_Action):
    kind: Literal[ActionKind.ARM_TRIGGERS] = ActionKind.ARM_TRIGGERS


class StartWave(_Action):
    kind: Literal[ActionKind.START_WAVE] = ActionKind.START_WAVE
    wave: int


class ChoosePath(_Action):
    kind: Literal[ActionKind.CHOOSE_PATH] = ActionKind.CHOOSE_PATH
    path: str
    rationale: str
    owner: str


class StartRollback(_Action):
    kind: Literal[ActionKind.START_ROLLBACK] = ActionKind.START_ROLLBACK
    node: str
    reason: str


class FinishRollback(_Action):
    kind: Literal[ActionKind.FINISH_ROLLBACK] = ActionKind.FINISH_ROLLBACK
    node: str


class RecordDecision(_Action):
    """The window's decision: one of the runbook's outcomes, the answers to its questions
    (question -> answer, in the order asked), and whether it halts the rollout."""

    kind: Literal[ActionKind.RECORD_DECISION] = ActionKind.RECORD_DECISION
    outcome: str
    answers: tuple[tuple[str, str], ...] = ()
    halt_rollout: bool = False


class Note(_Action):
    kind: Literal[ActionKind.NOTE] = ActionKind.NOTE
    text: str
    node: str | None = None


#: Something a person asks the cockpit to do; judged by :func:`cockpit.engine.rules.check_action`.
Action = Annotated[
    RunStep
    | RunStage
    | VerifyItem
    | TickItem
    | SignOff
    | PassGate
    | Override
    | RaiseTrigger
    | ClearTrigger
    | ArmTriggers
    | StartWave
    | ChoosePath
    | StartRollback
    | FinishRollback
    | RecordDecision
    | Note,
    Field(discriminator="kind"),
]

#: Actions that address one stage (of the window, or of a node): the stage pane's actions.
StageAction = RunStep | VerifyItem | TickItem | SignOff | PassGate | Override

_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)


def parse_action(data: Mapping[str, object]) -> Action:
    """An action from plain data (``{"kind": "override", "stage": ..., "reason": ...}``)."""
    return _ADAPTER.validate_python(dict(data))


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    allowed: bool
    reasons: list[str]

    def __bool__(self) -> bool:
        return self.allowed


class ActionRefused(CockpitError):
    """The gate refused an intent; ``reasons`` says why, in words."""

    def __init__(self, action: Action, reasons: Sequence[str]) -> None:
        self.action = action
        self.reasons = list(reasons)
        super().__init__(f"{action.kind} refused: " + "; ".join(self.reasons or ["not allowed now"]))


#: Actions a reviewer (anyone but the operator) may take.
REVIEWER_ACTIONS = frozenset({ActionKind.SIGN_OFF, ActionKind.RAISE_TRIGGER, ActionKind.NOTE})


def is_destructive(runbook: Runbook, action: Action) -> bool:
    """Starting a wave, or running a step marked destructive (rollback steps included)."""
    if isinstance(action, StartWave):
        return True
    if not isinstance(action, RunStep):
        return False
    if action.stage == ROLLBACK_STAGE:
        steps = runbook.rollback.steps if runbook.rollback else []
    else:
        try:
            steps = runbook.stage(action.stage).steps
        except KeyError:
            return False
    return any(s.id == action.step and s.destructive for s in steps)


def describe(action: Action) -> str:
    """An action in words, for the Next line, the palette and notifications."""
    node: str | None = getattr(action, "node", None)  # None for the kinds that name no node
    on = f" on {node}" if node else ""
    match action:
        case RunStep():
            return f"run step {action.stage}/{action.step}{on}"
        case RunStage():
            return f"run stage {action.stage}{on} up to its gate"
        case TickItem():
            return f"tick {action.stage}/{action.item}{on}"
        case VerifyItem():
            return f"verify {action.stage}/{action.item}{on}"
        case SignOff():
            what = f"{action.stage}/{action.item}" if action.item else f"the {action.stage} gate"
            return f"sign off {what}{on}"
        case PassGate():
            return f"pass the {action.stage} gate{on}"
        case Override():
            return f"override the {action.stage} gate{on}"
        case ArmTriggers():
            return "arm the rollback triggers"
        case StartWave():
            return f"start wave {wave_number(action.wave)}"
        case RaiseTrigger():
            return f"raise trigger {action.trigger}{on}"
        case ClearTrigger():
            return f"clear trigger {action.trigger}"
        case ChoosePath():
            return "choose the recovery path" + (f" {action.path}" if action.path else "")
        case StartRollback():
            return f"start the rollback{on}"
        case FinishRollback():
            return f"finish the rollback{on} (its checks decide the result)"
        case RecordDecision():
            return "record the decision"
        case Note():
            return "add a note"
