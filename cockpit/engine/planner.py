"""The next safe action: what a careful operator would do next, from the folded state.

:func:`plan` is pure. It finishes the current window stage, arms the triggers, starts
the next wave, walks each node of the wave through its stages, and when a trigger
fires, rolls the node back and stops the rollout. The cockpit shows it as "Next:"; the
demo's autopilot (:mod:`cockpit.session.autopilot`) performs it.
"""

from __future__ import annotations

from cockpit.engine import actions
from cockpit.engine.actions import Action
from cockpit.engine.gates import (
    gate_open,
    wave_through,
)
from cockpit.engine.rules import check_action
from cockpit.engine.state import (
    DONE,
    FINISHED,
    PENDING,
    ROLLING_BACK,
    CockpitState,
    StageState,
)
from cockpit.runbook.model import Runbook

#: Names the demo's autopilot acts under; never used outside ``cockpit demo``.
DEMO_OPERATOR = "demo-operator"
DEMO_REVIEWER = "demo-reviewer"
DEMO_NOTE = "demo autopilot: simulated fleet, ticked without a person"

#: Decision outcomes as recorded in the change log.
OUTCOME_KEEP_UPGRADE = "keep-upgraded-path"
OUTCOME_ROLLBACK = "roll-back"
#: How the gating engine marks a step that was running when the writer died.
INTERRUPTED = "interrupted"


def _stage_move(stage: StageState, node: str | None, reviewer: str, rerun: bool = False) -> Action | None:
    """The next thing to do inside one stage, or None when only its gate is left.

    A step cut short by a crash has an unknown outcome. It is suggested again only when
    it is not destructive, or when ``rerun`` says so (the demo's autopilot, whose
    simulated steps are idempotent); otherwise a person checks the node and decides.
    """
    sid = stage.id
    for step in stage.steps.values():
        interrupted = step.status == "failed" and (step.error or "").startswith(INTERRUPTED)
        if step.status == "open" or (interrupted and (rerun or not step.destructive)):
            return actions.RunStep(stage=sid, node=node, step=step.id)
        if interrupted:
            return None
    for item in stage.items.values():
        if item.status in ("open", "failed") and item.verify in ("check", "command"):
            if item.status == "failed":
                continue  # a failed check is not retried blindly: a trigger or a person decides
            return actions.VerifyItem(stage=sid, node=node, item=item.id)
    for item in stage.items.values():
        if item.status == "open" and item.verify == "manual":
            return actions.TickItem(stage=sid, node=node, item=item.id, note=DEMO_NOTE)
        if item.status == "needs-signoff":
            return actions.SignOff(stage=sid, node=node, item=item.id, note=f"signed off by {reviewer} (demo)")
    return None


def _gate_move(stage: StageState, node: str | None) -> Action | None:
    if gate_open(stage):
        return actions.PassGate(stage=stage.id, node=node)
    return None


def plan(
    state: CockpitState,
    runbook: Runbook,
    operator: str | None,
    *,
    reviewer: str = DEMO_REVIEWER,
    rerun_interrupted: bool = False,
) -> Action | None:
    """The next safe action, or None when the window is over or a person must decide."""
    if state.ended_at is not None:
        return None
    fired = state.fired()
    # 1. a fired trigger: roll back the nodes it names, then stop the rollout
    if fired:
        for trig in fired:
            for node in trig.fired_nodes:
                progress = state.nodes.get(node)
                if progress is not None and progress.current not in FINISHED and progress.current != ROLLING_BACK:
                    return actions.StartRollback(node=node, reason=f"trigger {trig.id}: {trig.fired_nodes[node]}")
    for progress in state.nodes.values():
        if progress.current == ROLLING_BACK and progress.rollback is not None and progress.rollback_ok is None:
            move = _stage_move(progress.rollback, progress.node, reviewer, rerun_interrupted)
            if move is not None:
                return move
            # nothing left to do: the rollback ends with its result (the session judges it)
            return actions.FinishRollback(node=progress.node)
    if fired and state.decision is None:
        return actions.RecordDecision(outcome=OUTCOME_ROLLBACK, halt_rollout=True)
    # 2. the window stage in front of us
    current = state.window_current
    if current is not None:
        stage = state.window[current]
        if current == "path" and state.path is None:
            return actions.ChoosePath(
                path="upgrade-driver",
                rationale="cu130 image on an r575 host: the driver is the blocker",
                owner=operator or "",
            )
        move = _stage_move(stage, None, reviewer, rerun_interrupted)
        if move is not None:
            return move
        if stage.arms_triggers and not state.armed:
            return actions.ArmTriggers()
        if current == "decision" and state.decision is None:
            return actions.RecordDecision(outcome=OUTCOME_KEEP_UPGRADE)
        return _gate_move(stage, None)
    if not state.opening_done:
        return None
    # 3. the waves
    wave = state.current_wave
    if wave is None or (wave_through(state, wave) and wave + 1 < len(state.waves)):
        if state.decision is not None and state.decision.get("halt_rollout"):
            return None
        nxt = 0 if wave is None else wave + 1
        return actions.StartWave(wave=nxt)
    for node in state.waves[wave]:
        progress = state.nodes[node]
        if progress.current in (PENDING, DONE) or progress.current in FINISHED:
            continue
        node_stage = progress.stage
        if node_stage is None:
            continue
        move = _stage_move(node_stage, node, reviewer, rerun_interrupted) or _gate_move(node_stage, node)
        if move is None:
            continue
        if check_action(
            state,
            runbook,
            move,
            reviewer if isinstance(move, actions.SignOff) else (operator or ""),
            operator=operator or "",
        ).allowed:
            return move
    return None
