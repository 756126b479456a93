"""How each simulator scenario ends when Next alone walks it: one table for the headless
walk (tests/core/test_next_walks.py) and the Textual pilot's (tests/ui/test_next_walk_pilot.py).

The scenario list is :data:`cockpit.sim.scenarios.SCENARIOS`, so a new scenario joins both
walks; its window's outcome is the demo's :data:`cockpit.commands.demo.EXPECTED_OUTCOME`,
and what its nodes end as follows from that unless :data:`SPECIAL` says otherwise (a
scenario that ends otherwise, or that Next alone cannot finish, is written there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from cockpit.changelog.events import Event, EventKind
from cockpit.changelog.identity import SYSTEM_ACTOR
from cockpit.changelog.journal import read_session
from cockpit.commands.demo import EXPECTED_OUTCOME, STOPPED_BY
from cockpit.engine.planner import OUTCOME_ROLLBACK
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.demo import demo_session
from cockpit.sim.scenarios import SCENARIOS

#: Every scenario, in a stable order (pytest ids).
WALK_SCENARIOS = sorted(SCENARIOS)

#: The walks the inner loop (``pytest -m "not slow"``) takes: one for each way a window
#: ends (clean; rolled back after a fault a trigger sees; a node that never comes back; a
#: link that drops mid-command; a smoke test that would pass falsely). The full suite walks
#: every scenario.
INNER_LOOP_WALKS = frozenset({"happy", "gpu-missing", "no-return", "flaky-link", "smoke-false-pass"})


def walk_cases(scenarios: Sequence[str] = WALK_SCENARIOS) -> list[object]:
    """``scenarios`` as pytest parameters, those outside :data:`INNER_LOOP_WALKS` marked slow."""
    return [pytest.param(s, marks=() if s in INNER_LOOP_WALKS else pytest.mark.slow) for s in scenarios]


#: The walks' fleet: the canary and the second node, where every fault lands.
WALK_NODES = 2

#: Fast: a no-return reboot is given up on after 5 s (the simulated reboot takes 0.04 s at
#: this speed; 5 s leaves room for the SSH handshakes of the polls on a loaded machine).
WALK_SPEED = 100.0
#: The walks on the in-process transport (tests/core/test_next_walks.py): thirty times
#: faster, with no handshakes to leave room for (a simulated reboot takes 1.3 ms). The runbook's
#: timeouts scale alike (rounded up, at least a second: never less patient than real), and
#: the reboot and drain timeouts are IN_PROCESS_WALK_PARAMS' own. Every walk ends as it does at 100.
IN_PROCESS_WALK_SPEED = 3000.0
WALK_PARAMS: dict[str, ParamValue] = {"reboot_timeout_s": 5, "drain_timeout_s": 3}
#: In process there are no handshakes for the reboot polls to wait on: a no-return reboot is
#: given up on after 1 s, the runbook's 600 s scaled to IN_PROCESS_WALK_SPEED and rounded up
#: to a whole second (3,000 simulated seconds: never less patient than real; a simulated
#: reboot takes 1.3 ms, its polls 0.7 ms apart).
IN_PROCESS_WALK_PARAMS: dict[str, ParamValue] = {**WALK_PARAMS, "reboot_timeout_s": 1}


@dataclass(frozen=True)
class WalkEnd:
    """What the change log holds once Next has nothing more to do."""

    outcome: str  # the decision's outcome
    nodes: dict[str, str]  # each node's final state (NodeProgress.current)
    stuck_on: str | None = None  # words of the person Next hands over to; None: the window ends
    #: Where Next pressed by a person (the pilot; no autopilot re-runs) may hand over instead:
    #: words its hand-over holds. The autopilot runs a step cut short again; a person's Next
    #: never re-runs a destructive step whose outcome is unknown, nor re-verifies a failed check.
    by_hand: str | None = None
    #: Plain words the screen (the stage pane) and the ticket (the export) both hold at the end.
    says: str | None = None


#: Scenarios whose nodes end otherwise than the outcome alone says.
SPECIAL: dict[str, WalkEnd] = {
    # The GPU that fell off the bus (Xid 79) stays off through the rollback's warm reboot,
    # as on a real node until a power cycle: the rollback's gpus-visible check fails.
    "gpu-missing": WalkEnd(
        OUTCOME_ROLLBACK,
        {"gpu01": "done", "gpu02": "rollback-failed"},
        says="a GPU missing before the rollback is still missing after it",
    ),
    # The same GPU lost without an Xid: still lost after the rollback's warm reboot.
    "gpu-missing-no-xid": WalkEnd(
        OUTCOME_ROLLBACK,
        {"gpu01": "done", "gpu02": "rollback-failed"},
        says="a GPU missing before the rollback is still missing after it",
    ),
    # The link drops a third of the target's commands mid-output: a destructive step or a
    # check hit by a drop is the operator's to look at (which command the drop hits varies).
    "flaky-link": WalkEnd(
        EXPECTED_OUTCOME["flaky-link"], {"gpu01": "done", "gpu02": "done"}, by_hand="the operator decides"
    ),
    # The node that never came back cannot be rolled back either: once the control host has
    # drained it, the rollback's first step on the node (releasing holds) cannot connect. The
    # autopilot ends that rollback failed; a person's Next hands it over.
    "no-return": WalkEnd(
        OUTCOME_ROLLBACK,
        {"gpu01": "done", "gpu02": "rollback-failed"},
        by_hand="rollback/unhold on gpu02 failed",
        says="its unhold step failed",
    ),
}


# sudo wants a password on every node: the first step that needs root (the evidence freeze's
# docker image inspect, on the canary) is refused before any node changed; a person takes over.
SPECIAL["sudo-password"] = WalkEnd(
    EXPECTED_OUTCOME["sudo-password"],
    {"gpu01": "pending", "gpu02": "pending"},
    stuck_on=STOPPED_BY["sudo-password"],
)


def expected_end(scenario: str) -> WalkEnd:
    if scenario in SPECIAL:
        return SPECIAL[scenario]
    if scenario in STOPPED_BY:  # a failed pre-change step on the second node: a person decides
        return WalkEnd(EXPECTED_OUTCOME[scenario], {"gpu01": "done"}, stuck_on=STOPPED_BY[scenario])
    outcome = EXPECTED_OUTCOME.get(scenario)
    assert outcome is not None, (
        f"scenario {scenario!r} has no expected outcome: add it to cockpit.commands.demo.EXPECTED_OUTCOME "
        "(or to tests/walk_expectations.py's SPECIAL when Next alone cannot end it)"
    )
    if outcome == OUTCOME_ROLLBACK:  # the fault hits the second node, which is rolled back
        return WalkEnd(outcome, {"gpu01": "done", "gpu02": "rolled-back"})
    return WalkEnd(outcome, {f"gpu{i:02d}": "done" for i in range(1, WALK_NODES + 1)})


#: One event of a walk as both walks must agree on it: what was done, where, and whether
#: it held (the words a person types, times and the cockpit's own probes aside).
WalkEvent = tuple[str, str | None, str | None, str | None, str | None, object]


def walk_sequence(events: Sequence[Event]) -> list[WalkEvent]:
    """The person's events of a walk, in order (:data:`WalkEvent`): the cockpit's own
    (probes, trigger evaluations) come with the timing of its rounds, not with the walk."""
    out: list[WalkEvent] = []
    for e in events:
        if e.actor == SYSTEM_ACTOR or e.kind in (EventKind.PROBE, EventKind.SESSION_STARTED):
            continue
        facts = getattr(e, "facts", None)
        held = getattr(facts, "ok", None)
        out.append((str(e.kind), e.node, e.stage, e.step, e.item, held))
    return out


async def headless_person_walk(scenario: str, sessions_dir: Path, reviewer: str) -> list[WalkEvent]:
    """Next taken headless as a person's `n` takes it (no autopilot re-runs, the demo reviewer
    signing), until Next has no action: the walk the pilot's must match event for event."""
    from gating_scenarios import perform_as_demo

    async with demo_session(
        nodes=WALK_NODES, scenario=scenario, sessions_dir=sessions_dir, speed=WALK_SPEED, params=WALK_PARAMS
    ) as (session, _fleet):
        for _ in range(2000):
            action = session.next_plan(reviewer).action
            if action is None:
                break
            await perform_as_demo(session, action)
        return walk_sequence(read_session(session.path).events)
