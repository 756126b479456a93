"""What a person can ask the cockpit to do: the action kinds, the action, the verdict."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from cockpit.engine.state import ROLLBACK_STAGE
from cockpit.errors import CockpitError
from cockpit.runbook.model import Runbook


class ActionKind(StrEnum):
    RUN_STEP = "run-step"
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


class Action(BaseModel):
    """Something a person asks the cockpit to do; judged by :func:`check_action`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ActionKind
    stage: str | None = None
    node: str | None = None
    step: str | None = None
    item: str | None = None
    trigger: str | None = None
    wave: int | None = None
    reason: str | None = None  # override, clear-trigger, start-rollback: why
    note: str | None = None  # tick, sign-off, raise-trigger, note: what the person wrote
    # choose-path
    path: str | None = None
    rationale: str | None = None
    owner: str | None = None
    # record-decision
    outcome: str | None = None
    answers: tuple[tuple[str, str], ...] = ()  # question -> answer, in the order asked
    halt_rollout: bool = False


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
    if action.kind is ActionKind.START_WAVE:
        return True
    if action.kind is not ActionKind.RUN_STEP:
        return False
    if action.stage == ROLLBACK_STAGE:
        steps = runbook.rollback.steps if runbook.rollback else []
    else:
        try:
            steps = runbook.stage(action.stage or "").steps
        except KeyError:
            return False
    return any(s.id == action.step and s.destructive for s in steps)
