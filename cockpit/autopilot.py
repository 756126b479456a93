"""The next safe action, and the demo's autopilot that takes it again and again.

:func:`plan` is pure: from the folded state it picks what a careful operator would
do next (finish the current window stage, arm the triggers, start the next wave,
walk each node of the wave through its stages, and when a trigger fires, roll the
node back and stop the rollout). The cockpit shows it as "Next:"; the autopilot
(:func:`drive`, only reachable through ``cockpit demo``) performs it, ticking
manual items and signing off as named demo actors so the log says who did what.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.gating import (
    DONE,
    FINISHED,
    PENDING,
    ROLLING_BACK,
    Action,
    ActionKind,
    CockpitState,
    StageState,
    check_action,
    gate_open,
    wave_through,
)
from cockpit.runbook import Runbook

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
            return Action(kind=ActionKind.RUN_STEP, stage=sid, node=node, step=step.id)
        if interrupted:
            return None
    for item in stage.items.values():
        if item.status in ("open", "failed") and item.verify in ("check", "command"):
            if item.status == "failed":
                continue  # a failed check is not retried blindly: a trigger or a person decides
            return Action(kind=ActionKind.VERIFY_ITEM, stage=sid, node=node, item=item.id)
    for item in stage.items.values():
        if item.status == "open" and item.verify == "manual":
            return Action(kind=ActionKind.TICK_ITEM, stage=sid, node=node, item=item.id, note=DEMO_NOTE)
        if item.status == "needs-signoff":
            return Action(kind=ActionKind.SIGN_OFF, stage=sid, node=node, item=item.id,
                          note=f"signed off by {reviewer} (demo)")
    return None


def _gate_move(stage: StageState, node: str | None) -> Action | None:
    if gate_open(stage):
        return Action(kind=ActionKind.PASS_GATE, stage=stage.id, node=node)
    return None


def plan(state: CockpitState, runbook: Runbook, operator: str | None, *, reviewer: str = DEMO_REVIEWER,
         rerun_interrupted: bool = False) -> Action | None:
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
                    return Action(kind=ActionKind.START_ROLLBACK, node=node,
                                  reason=f"trigger {trig.id}: {trig.fired_nodes[node]}")
    for progress in state.nodes.values():
        if progress.current == ROLLING_BACK and progress.rollback is not None and progress.rollback_ok is None:
            move = _stage_move(progress.rollback, progress.node, reviewer, rerun_interrupted)
            if move is not None:
                return move
            # nothing left to do: the rollback ends with its result (the session judges it)
            return Action(kind=ActionKind.FINISH_ROLLBACK, node=progress.node)
    if fired and state.decision is None:
        return Action(kind=ActionKind.RECORD_DECISION, note=OUTCOME_ROLLBACK)
    # 2. the window stage in front of us
    current = state.window_current
    if current is not None:
        stage = state.window[current]
        if current == "path" and state.path is None:
            return Action(kind=ActionKind.CHOOSE_PATH, path="upgrade-driver",
                          reason="cu130 image on an r575 host: the driver is the blocker", note=operator)
        move = _stage_move(stage, None, reviewer, rerun_interrupted)
        if move is not None:
            return move
        if stage.arms_triggers and not state.armed:
            return Action(kind=ActionKind.ARM_TRIGGERS)
        if current == "decision" and state.decision is None:
            return Action(kind=ActionKind.RECORD_DECISION, note=OUTCOME_KEEP_UPGRADE)
        return _gate_move(stage, None)
    if not state.opening_done:
        return None
    # 3. the waves
    wave = state.current_wave
    if wave is None or (wave_through(state, wave) and wave + 1 < len(state.waves)):
        if state.decision is not None and state.decision.get("halt_rollout"):
            return None
        nxt = 0 if wave is None else wave + 1
        return Action(kind=ActionKind.START_WAVE, wave=nxt)
    for node in state.waves[wave]:
        progress = state.nodes[node]
        if progress.current in (PENDING, DONE) or progress.current in FINISHED:
            continue
        stage = progress.stage
        if stage is None:
            continue
        move = _stage_move(stage, node, reviewer, rerun_interrupted) or _gate_move(stage, node)
        if move is None:
            continue
        if check_action(state, runbook, move, reviewer if move.kind is ActionKind.SIGN_OFF else (operator or ""),
                        operator=operator or "").allowed:
            return move
    return None


@dataclass
class AutopilotResult:
    actions: int = 0
    outcome: str = "incomplete"
    stuck_on: str | None = None
    log: list[str] = field(default_factory=list)


async def drive(session: object, *, reviewer: str = DEMO_REVIEWER, max_actions: int = 5000,
                refresh_s: float = 1.0, on_action: Callable[[Action], None] | None = None) -> AutopilotResult:
    """Take :func:`plan`'s action until the window ends or nothing safe is left."""
    from cockpit.session import ActionRefused, Session

    assert isinstance(session, Session)
    result = AutopilotResult()
    refused: set[str] = set()
    last_refresh = float("-inf")
    while result.actions < max_actions:
        # a probe round at most every second, as the cockpit's poller would; steps probe their own node
        if session.state.ended_at is None and time.monotonic() - last_refresh >= refresh_s:
            await session.refresh()
            last_refresh = time.monotonic()
        action = plan(session.state, session.runbook, session.operator, reviewer=reviewer, rerun_interrupted=True)
        if action is None:
            break
        key = action.model_dump_json()
        if on_action is not None:
            on_action(action)
        actor = reviewer if action.kind is ActionKind.SIGN_OFF else session.operator
        confirmation = None
        if action.kind is ActionKind.RUN_STEP:
            confirmation = action.node if action.node is not None else action.stage
        try:
            if action.kind is ActionKind.RECORD_DECISION:
                halt = action.note == OUTCOME_ROLLBACK
                session.record_decision(action.note or "", halt_rollout=halt,
                                        answers=_demo_answers(action.note or ""))
            else:
                await session.perform(action, actor=actor, confirmation=confirmation)
        except ActionRefused as exc:
            if key in refused:
                result.stuck_on = str(exc)
                break
            refused.add(key)
            continue
        result.actions += 1
        result.log.append(f"{action.kind} {action.stage or ''} {action.step or action.item or ''} {action.node or ''}")
    st = session.state
    if st.decision is not None:
        result.outcome = str(st.decision.get("outcome"))
    if st.closing and all(st.window[s].closed for s in st.closing):
        session.end(result.outcome)
    return result


def _demo_answers(outcome: str) -> dict[str, str]:
    if outcome == OUTCOME_ROLLBACK:
        return {"why": "a rollback trigger fired during the rollout; the affected node was restored"}
    return {"why": "every node passed smoke and the baseline workloads"}
