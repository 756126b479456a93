"""The demo's autopilot: takes the planner's next safe action again and again.

Only reachable through ``cockpit demo``: it ticks manual items and signs off as named
demo actors so the log says who did what.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.engine.actions import (
    Action,
    ActionRefused,
    RecordDecision,
    RunStep,
    SignOff,
    describe,
)
from cockpit.engine.planner import (
    DEMO_REVIEWER,
    OUTCOME_ROLLBACK,
    plan,
)
from cockpit.session.operator import Session


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
    on_action: Callable[[Action], None] | None = None,
) -> AutopilotResult:
    """Take :func:`plan`'s action until the window ends or nothing safe is left."""
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
        actor = reviewer if isinstance(action, SignOff) else session.operator
        confirmation = None
        if isinstance(action, RunStep):
            confirmation = action.node if action.node is not None else action.stage
        try:
            if isinstance(action, RecordDecision):  # the demo's answers to the decision's questions
                action = action.model_copy(update={"answers": tuple(_demo_answers(action.outcome).items())})
            await session.perform(action, actor=actor, confirmation=confirmation)
        except ActionRefused as exc:
            if key in refused:
                result.stuck_on = str(exc)
                break
            refused.add(key)
            continue
        result.actions += 1
        result.log.append(describe(action))
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
