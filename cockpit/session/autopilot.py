"""The demo's autopilot: takes the planner's next safe action again and again.

Only reachable through ``cockpit demo``: it ticks manual items and signs off as named
demo actors so the log says who did what.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.engine.actions import (
    Action,
    ActionRefused,
    RecordDecision,
    RunStep,
    SignOff,
    VerifyItem,
    describe,
)
from cockpit.engine.planner import (
    DEMO_REVIEWER,
    OUTCOME_ROLLBACK,
    WINDOW_THROUGH,
    plan,
)
from cockpit.engine.state import (
    DONE,
    ROLLBACK_FAILED,
    ROLLBACK_STAGE,
    ROLLED_BACK,
    ROLLING_BACK,
    CockpitState,
    StageState,
)
from cockpit.session.operator import Session

#: Times the autopilot takes one same action (a check verified again, a step run again)
#: before it stops for a person.
MAX_REPEATS = 12

#: The outcome of a window the autopilot handed to a person before any node still in it
#: started a destructive step: the scenario's right end is that person's decision.
STOPPED_BEFORE_CHANGE = "stopped-before-change"


@dataclass
class AutopilotResult:
    actions: int = 0
    outcome: str = "incomplete"
    stuck_on: str | None = None
    log: list[str] = field(default_factory=list)


async def drive(
    session: Session,
    *,
    reviewer: str = DEMO_REVIEWER,
    max_actions: int = 5000,
    refresh_s: float = 1.0,
    wait_s: float = 0.05,
    on_action: Callable[[Action], None] | None = None,
) -> AutopilotResult:
    """Take :func:`plan`'s action until the window ends or a person must act.

    While Next waits for a step in flight (one the screen started), it waits too.
    """
    result = AutopilotResult()
    refused: set[str] = set()
    taken: Counter[str] = Counter()
    failed_as: dict[str, str | None] = {}  # each action's last run: how it failed (None: it did not)
    last_refresh = float("-inf")
    while result.actions < max_actions:
        # a probe round at most every second, as the cockpit's poller would; steps probe their own node
        if session.state.ended_at is None and time.monotonic() - last_refresh >= refresh_s:
            await session.refresh()
            last_refresh = time.monotonic()
        planned = plan(
            session.state,
            session.runbook,
            session.operator,
            reviewer=reviewer,
            autopilot=True,
            flight=session.in_flight(),
        )
        if planned.waiting_for is not None:
            await asyncio.sleep(wait_s)
            continue
        action = planned.action
        if action is None:
            if session.state.ended_at is None and planned.person_must != WINDOW_THROUGH:
                result.stuck_on = planned.person_must
            elif planned.person_must == WINDOW_THROUGH:
                await session.end_window()  # the engine puts back what it changed for the window
            break
        key = action.model_dump_json()
        if taken[key] >= MAX_REPEATS:  # the same action again and again: a person must look
            result.stuck_on = f"{describe(action)} taken {taken[key]} times without getting further"
            if isinstance(action, VerifyItem) and (evidence := _evidence(session, action)):
                result.stuck_on += f": {evidence}"  # what the check kept seeing, as a person's Next says it
            break
        if on_action is not None:
            on_action(action)
        actor = reviewer if isinstance(action, SignOff) else session.operator
        confirmation = None
        if isinstance(action, RunStep):
            confirmation = action.node if action.node is not None else action.stage
        if isinstance(action, VerifyItem) and action.node is not None and _failed(session, action):
            await session.refresh([action.node])  # a check verified again reads a fresh probe
        try:
            if isinstance(action, RecordDecision):  # the demo's answers to the decision's questions
                answers = _demo_answers(action.outcome, session.state)
                action = action.model_copy(update={"answers": tuple(answers.items())})
            await session.perform(action, actor=actor, confirmation=confirmation)
        except ActionRefused as exc:
            if key in refused:
                result.stuck_on = str(exc)
                break
            refused.add(key)
            continue
        taken[key] += 1
        result.actions += 1
        result.log.append(describe(action))
        if (again := _failed_again(session, action, failed_as.get(key))) is not None:
            result.stuck_on = _hand_over(session, reviewer, action, again)
            break
        failed_as[key] = _how_failed(session.state, action)
    st = session.state
    if st.decision is not None:
        result.outcome = str(st.decision.facts.outcome)
    elif result.stuck_on is not None and _nothing_changed_in_flight(st):
        result.outcome = STOPPED_BEFORE_CHANGE
    if st.closing and all(st.window[s].closed for s in st.closing):
        session.end(result.outcome)
    return result


def _how_failed(state: CockpitState, action: Action) -> str | None:
    """How ``action``'s step or check failed on its last run, in words that differ when the
    failure does; None when it passed, or failed without a word about the node (cut short,
    the link lost: running it again is how to learn more)."""
    if not isinstance(action, RunStep | VerifyItem):
        return None
    if action.stage in state.window:
        stage: StageState | None = state.window[action.stage]
    else:
        progress = state.nodes.get(action.node or "")
        stage = None if progress is None else progress.rollback if action.stage == ROLLBACK_STAGE else progress.stage
    if stage is None or stage.id != action.stage:
        return None
    if isinstance(action, RunStep):
        step = stage.steps.get(action.step)
        if step is None or step.status != "failed" or step.no_verdict:
            return None
        return f"{step.failure()} [{step.error_kind or ''}]"
    item = stage.items.get(action.item)
    if item is None or item.status != "failed":
        return None
    return item.evidence or "failed"


def _failed_again(session: Session, action: Action, before: str | None) -> str | None:
    """How ``action`` failed when it failed the same way on its run before (a person looks
    then: a third run would say the same); None otherwise."""
    now = _how_failed(session.state, action)
    return now if now is not None and now == before else None


def _hand_over(session: Session, reviewer: str, action: Action, how: str) -> str:
    """What a person's Next says at this point (who must act, with which keys), or, when it
    would still act, the failure in words."""
    person = plan(session.state, session.runbook, session.operator, reviewer=reviewer, autopilot=False)
    if person.action is None and person.person_must is not None:
        return person.person_must
    return f"{describe(action)} failed twice the same way: {how}"


def _nothing_changed_in_flight(state: CockpitState) -> bool:
    """No node still in the window (not done, not rolled back) started a destructive step."""
    return not any(
        p.destructive_started or p.current in (ROLLING_BACK, ROLLBACK_FAILED)
        for p in state.nodes.values()
        if p.current not in (DONE, ROLLED_BACK)
    )


def _failed(session: Session, action: VerifyItem) -> bool:
    progress = session.state.nodes.get(action.node or "")
    stage = None if progress is None else progress.stage
    item = None if stage is None else stage.items.get(action.item)
    return item is not None and item.status == "failed"


def _evidence(session: Session, action: VerifyItem) -> str | None:
    progress = session.state.nodes.get(action.node or "")
    stage = None if progress is None else progress.stage
    item = None if stage is None else stage.items.get(action.item)
    return None if item is None else item.evidence


def _demo_answers(outcome: str, state: CockpitState) -> dict[str, str]:
    if outcome == OUTCOME_ROLLBACK:
        failed = [n for n, p in state.nodes.items() if p.current == ROLLBACK_FAILED]
        if failed:  # never "restored" about a node whose rollback failed
            return {
                "why": f"a rollback trigger fired during the rollout; the rollback of {', '.join(failed)} failed "
                "and it stays out of service for a person"
            }
        return {"why": "a rollback trigger fired during the rollout; the affected node was restored"}
    return {"why": "every node passed smoke and the baseline workloads"}
