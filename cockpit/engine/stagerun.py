"""A stage run: the pure rules of one person action that takes a stage up to its gate.

On the canary and the second node a person decides at every stage, but need not press a
key per step: :class:`~cockpit.engine.actions.RunStage` takes, for one node and one stage
only, what :func:`cockpit.engine.planner.node_plan` proposes there that a wave runner may
take (:func:`cockpit.engine.waverun.runner_may_take`: a step, a check or command item),
and stops at the stage's gate (passing it stays the person's), at the first failure, or
at what needs a person. A stage with a destructive step left is confirmed once, by typing
the node's name (:func:`stage_confirmation`), as each of its steps would be.
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.engine import actions
from cockpit.engine.actions import describe
from cockpit.engine.planner import Plan
from cockpit.engine.state import ROLLBACK_STAGE, CockpitState, StageState
from cockpit.engine.waverun import runner_may_take

#: Runs of one same action in one stage run before it stops (a step cut short again and again).
MAX_REPEATS = 12


@dataclass(frozen=True, slots=True)
class Take:
    """The stage run takes ``action`` next."""

    action: actions.RunStep | actions.VerifyItem


@dataclass(frozen=True, slots=True)
class Wait:
    """Something of the node is in flight elsewhere: look again shortly."""

    what: str


@dataclass(frozen=True, slots=True)
class Stop:
    """The stage run ends here: ``why`` in words (what the person does next)."""

    why: str


def stage_of(state: CockpitState, stage: str, node: str | None) -> StageState | None:
    """The stage a stage run addresses: the window's, or ``node``'s."""
    if node is None:
        return state.window.get(stage)
    progress = state.nodes.get(node)
    if progress is None:
        return None
    return progress.rollback if stage == ROLLBACK_STAGE else progress.stages.get(stage)


def destructive_left(state: CockpitState, stage: str, node: str | None) -> list[str]:
    """The destructive steps of the stage not run yet (open, or failed and to run again)."""
    found = stage_of(state, stage, node)
    if found is None:
        return []
    return [s.id for s in found.steps.values() if s.destructive and s.status in ("open", "failed")]


def stage_confirmation(state: CockpitState, stage: str, node: str | None) -> str | None:
    """What a person types to confirm a stage run (the node's name; a window stage's own
    name), or None when no destructive step is left in it."""
    if not destructive_left(state, stage, node):
        return None
    return node if node is not None else stage


def stage_run_move(planned: Plan, stage: str, node: str | None) -> Take | Wait | Stop:
    """What a stage run of ``stage`` (of ``node``) does with Next's ``planned`` for that node."""
    action = planned.action
    if action is None:
        if planned.waiting_for is not None:
            return Wait(planned.waiting_for)
        return Stop(planned.person_must or "nothing left to run")
    if getattr(action, "stage", None) != stage or getattr(action, "node", None) != node:
        return Stop(f"stage {stage!r} is through to its gate; Next is {describe(action)}")
    if isinstance(action, actions.PassGate):
        return Stop(f"stage {stage!r} is through: its gate is the operator's to pass (g)")
    if not runner_may_take(action) or not isinstance(action, actions.RunStep | actions.VerifyItem):
        return Stop(f"{describe(action)}: the operator's to do")
    return Take(action)


@dataclass(frozen=True, slots=True)
class StageRunResult:
    """What one stage run did: how many actions it took, and why it stopped. ``ok`` is
    False when a step or check it took failed (``error`` names it, with its evidence)."""

    stage: str
    node: str | None
    taken: int
    stopped: str
    ok: bool = True
    error: str | None = None
