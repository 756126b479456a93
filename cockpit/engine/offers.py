"""What an actor may do now, built on the rules (:func:`cockpit.engine.rules.check_action`).

:func:`allowed_actions` lists every action the rules would accept (the command
palette, the reviewer's list, the property tests); :func:`offered_kinds` says which
kinds a screen focused on one stage and node may offer, so a key is shown only when
the engine would accept some action of its kind.
"""

from __future__ import annotations

from collections.abc import Iterable

from cockpit.engine import actions
from cockpit.engine.actions import Action, ActionKind
from cockpit.engine.rules import reasons_against
from cockpit.engine.state import HELD, PENDING, ROLLBACK_STAGE, ROLLED_BACK, ROLLING_BACK, CockpitState, StageState
from cockpit.runbook.model import Runbook, TriggerMode, Verify


def _stage_candidates(stage: StageState, node: str | None) -> Iterable[Action]:
    sid = ROLLBACK_STAGE if stage.scope == "rollback" else stage.id
    if stage.scope != "rollback":
        yield actions.RunStage(stage=sid, node=node)
    for step in stage.steps.values():
        yield actions.RunStep(stage=sid, node=node, step=step.id)
    for item in stage.items.values():
        verify = Verify(item.verify)
        if verify is Verify.MANUAL:
            yield actions.TickItem(stage=sid, node=node, item=item.id)
        elif verify is Verify.SIGNOFF:
            yield actions.SignOff(stage=sid, node=node, item=item.id)
        else:
            yield actions.VerifyItem(stage=sid, node=node, item=item.id)
    if stage.scope != "rollback":
        yield actions.PassGate(stage=sid, node=node)
        yield actions.Override(stage=sid, node=node, reason="")
    elif node is not None:
        yield actions.FinishRollback(node=node)


def _global_candidates(state: CockpitState) -> Iterable[Action]:
    """The actions that address no stage: waves, triggers, the path, the decision, a note."""
    yield actions.Note(text="")
    nxt = 0 if state.current_wave is None else state.current_wave + 1
    yield actions.StartWave(wave=nxt)
    yield actions.ArmTriggers()
    for trig in state.triggers.values():
        if trig.mode == TriggerMode.MANUAL:
            yield actions.RaiseTrigger(trigger=trig.id, note="")
        if trig.status == "fired":
            yield actions.ClearTrigger(trigger=trig.id, reason="")
    yield actions.ChoosePath(path="", rationale="", owner="")
    yield actions.RecordDecision(outcome="")


def _can_roll_back(state: CockpitState, node: str) -> bool:
    """Cheap pre-filter: a node that has not started, is held or is already rolling back is never a candidate."""
    return state.nodes[node].current not in (PENDING, HELD, ROLLING_BACK, ROLLED_BACK)


def allowed_actions(state: CockpitState, runbook: Runbook, actor: str, operator: str) -> list[Action]:
    """What ``actor`` may do now. Actions that need words (a reason, a note, a path) are
    listed with them empty when they would be allowed once the words are given."""
    cands: list[Action] = []
    cur = state.window_current
    if cur is not None:
        cands.extend(_stage_candidates(state.window[cur], None))
    for name, progress in state.nodes.items():
        stage = progress.stage
        if stage is not None:
            cands.extend(_stage_candidates(stage, name))
        if _can_roll_back(state, name):
            cands.append(actions.StartRollback(node=name, reason=""))
    cands.extend(_global_candidates(state))
    return [a for a in cands if not reasons_against(state, runbook, a, actor, operator, need_text=False)]


def offered_kinds(
    state: CockpitState,
    runbook: Runbook,
    actor: str,
    *,
    operator: str,
    stage: StageState | None = None,
    stage_node: str | None = None,
    node: str | None = None,
) -> frozenset[ActionKind]:
    """The kinds of action a screen may offer ``actor`` now: a kind is in when the rules
    allow some action of it (once its words are given).

    ``stage`` (of ``stage_node``; None for a window stage) is the stage the screen shows:
    stage actions count on it only. ``node`` is the selected node: a rollback counts
    for it only. Waves, triggers, the path, the decision and notes count anywhere.
    """
    cands: list[Action] = list(_global_candidates(state))
    if stage is not None:
        cands.extend(_stage_candidates(stage, stage_node))
    if node is not None and node in state.nodes:
        cands.append(actions.StartRollback(node=node, reason=""))
    return frozenset(a.kind for a in cands if not reasons_against(state, runbook, a, actor, operator, need_text=False))
