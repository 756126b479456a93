"""A wave that runs itself: the pure rules a wave runner follows (no clock, no I/O).

The canary and the second node go with a person at each step (the runbook's fixed
``waves.sizes``); a later wave is started by one person action, its destructive steps
confirmed once by typing the wave's node set (:func:`confirmation_text`, the folded
node-set expression). The runner (:mod:`cockpit.session.waves`) then takes, for each
node of the wave, what :func:`cockpit.engine.planner.node_plan` proposes that needs no
person (:func:`runner_may_take`), concurrently up to :func:`admissible` nodes at once:
the wave's ``max_parallel`` and, across the fleet, ``waves.max_unavailable``. What needs a
person queues as a :class:`NeedsYou`. A node stops at its first failure and holds; no new
node starts once a trigger fired or the wave lost more nodes than its failure budget
(:func:`halt_reason`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from cockpit.changelog.events import wave_number
from cockpit.engine import actions
from cockpit.engine.actions import Action
from cockpit.engine.state import (
    DONE,
    FINISHED,
    HELD,
    PENDING,
    ROLLBACK_FAILED,
    ROLLED_BACK,
    ROLLING_BACK,
    CockpitState,
)
from cockpit.errors import BadInput
from cockpit.fleet.nodeset import fold_nodeset
from cockpit.runbook.model import Runbook, Verify
from cockpit.runbook.waves import resolve_int

#: What a runner takes by itself: what Next would do that a person only watches. A
#: manual tick, a sign-off, an override, a rollback, a decision stay a person's.
RUNNER_KINDS: tuple[type[Action], ...] = (actions.RunStep, actions.VerifyItem, actions.PassGate)


def runner_may_take(action: Action) -> bool:
    return isinstance(action, RUNNER_KINDS)


@dataclass(frozen=True, slots=True)
class NeedsYou:
    """One thing a person must do for a running wave: on which node, and why (with evidence);
    ``failed``: the node stopped at a failure (it counts against the wave's failure budget)."""

    node: str
    what: str
    failed: bool = False
    #: the person's action Next proposes for it, when there is one (a manual tick): the screen
    #: offers it, the person writes its words
    action: Action | None = None


def node_failed(state: CockpitState, node: str) -> bool:
    """Whether ``node`` stands at a failure: a step or check of its current stage (or its
    rollback) failed, its rollback did, or a fired trigger names it."""
    progress = state.nodes[node]
    if progress.current == ROLLBACK_FAILED or any(node in t.fired_nodes for t in state.fired()):
        return True
    stage = progress.rollback if progress.current == ROLLING_BACK else progress.stage
    if stage is None:
        return False
    return any(s.status == "failed" for s in stage.steps.values()) or any(
        i.status == "failed" for i in stage.items.values()
    )


def person_action(state: CockpitState, node: str) -> Action | None:
    """The manual item a person ticks next on ``node`` (its words theirs to write), if any."""
    progress = state.nodes.get(node)
    stage = None if progress is None else progress.stage
    if stage is None or progress is None or progress.current in FINISHED:
        return None
    for item in stage.items.values():
        if item.status == "open" and item.verify == Verify.MANUAL:
            return actions.TickItem(stage=stage.id, node=node, item=item.id, note="")
    return None


def first_auto_wave(runbook: Runbook) -> int:
    """The first wave a runner may take: after the fixed first waves (the canary and the
    second node) that a person walks step by step; at least the second wave."""
    return max(1, len(runbook.waves.sizes))


def max_unavailable(runbook: Runbook, params: Mapping[str, object], fleet: int) -> int | None:
    """``waves.max_unavailable``: an int, an int parameter, or ``"N%"`` of the fleet
    (rounded down, at least 1); None (0 or unset) when only ``max_parallel`` bounds a wave."""
    value = runbook.waves.max_unavailable
    named = params.get(value) if isinstance(value, str) else None
    if isinstance(named, str) and named.strip().endswith("%"):
        value = named  # a parameter that gives a share of the fleet
    if isinstance(value, str) and value.strip().endswith("%"):
        text = value.strip()[:-1]
        try:
            share = float(text)
        except ValueError:
            raise BadInput(f"waves.max_unavailable: {value!r} is not a percentage") from None
        if not 0 < share <= 100:
            raise BadInput(f"waves.max_unavailable: {value!r} must be above 0% and at most 100%")
        return max(1, math.floor(fleet * share / 100))
    limit = resolve_int(value, params, "waves.max_unavailable")
    if limit < 0:
        raise BadInput(f"waves.max_unavailable must not be negative, got {limit}")
    return limit or None


def out_of_service(state: CockpitState) -> list[str]:
    """Nodes taken out of service and not given back: touched and not done (drained,
    changing, held at a failure, rolling back) or whose rollback failed. A node of a started
    wave that no step has touched yet (still at its first stage, nothing run) is in service."""
    first = state.node_stage_order[0] if state.node_stage_order else None
    out = []
    for name, progress in state.nodes.items():
        if progress.current in (PENDING, HELD, DONE, ROLLED_BACK):
            continue
        if progress.current == first:
            stage = progress.stage
            if stage is not None and all(s.status in ("open", "skipped") for s in stage.steps.values()):
                continue
        out.append(name)
    return out


def admissible(state: CockpitState, wave: int, active: int, limit: int | None, parallel: int | None = None) -> int:
    """How many more nodes of ``wave`` may start now, with ``active`` of them already out of
    service: at most ``parallel`` (default the wave's ``max_parallel``) at once, and the whole
    fleet's out-of-service nodes at most ``limit``."""
    room = (parallel or state.max_parallel) - active
    if limit is not None:
        room = min(room, limit - len(out_of_service(state)))
    return max(0, room)


def wave_failures(state: CockpitState, wave: int, held: Mapping[str, NeedsYou]) -> list[str]:
    """Nodes of ``wave`` lost to the wave: rolled back, rollback failed, or held at a failure."""
    members = state.waves[wave]
    return [
        n for n in members if state.nodes[n].current in (ROLLED_BACK, ROLLBACK_FAILED) or (n in held and held[n].failed)
    ]


def halt_reason(state: CockpitState, wave: int, held: Mapping[str, NeedsYou]) -> str | None:
    """Why no new node of ``wave`` may start, or None: a trigger fired, a decision halted
    the rollout, the wave lost more nodes than its failure budget, or the session ended."""
    if state.ended_at is not None:
        return "the session has ended"
    fired = state.fired()
    if fired:
        return f"trigger {fired[0].id} fired"
    if state.halted:
        return "a recorded decision halted the rollout"
    failed = wave_failures(state, wave, held)
    if len(failed) > state.failure_budget:
        return f"{len(failed)} node(s) failed ({fold_nodeset(failed)}), failure budget {state.failure_budget}"
    return None


def confirmation_text(state: CockpitState, wave: int) -> str:
    """What a person types to confirm a wave's destructive steps at once: its node set, folded."""
    return fold_nodeset(state.waves[wave])


def stage_counts(state: CockpitState, wave: int) -> list[tuple[str, int]]:
    """The wave's nodes by where they are, in stage order: pending, each node stage, then
    done / rolled back / rollback failed / held (only the places that hold a node)."""
    counts = Counter(state.nodes[n].current for n in state.waves[wave])
    order = [PENDING, *state.node_stage_order, *sorted(FINISHED), HELD]
    known = [(where, counts[where]) for where in order if counts[where]]
    others = [(where, n) for where, n in counts.items() if where not in order]
    return known + others


def progress_words(state: CockpitState, wave: int) -> str:
    """One line: the wave and its nodes by stage, with counts."""
    parts = ", ".join(f"{where} {n}" for where, n in stage_counts(state, wave))
    return f"wave {wave_number(wave)} ({len(state.waves[wave])} nodes): {parts}"
