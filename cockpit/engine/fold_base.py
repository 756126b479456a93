"""What every group of fold handlers shares: the state being folded and the means to find
and move things in it (a stage, an item, a node's current stage), and the state a fold
starts from.

Pure, as the whole fold is: values in, values out, no I/O, no clock reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import wraps
from typing import TypeVar

from cockpit.changelog.events import Event, EventBase
from cockpit.changelog.identity import is_system, same_person
from cockpit.changelog.reader import gc_paused
from cockpit.engine.state import (
    DONE,
    FINISHED,
    ROLLBACK_STAGE,
    CockpitState,
    ItemState,
    ItemStatus,
    NodeProgress,
    RefusedEvent,
    StageState,
    StageStatus,
    StepState,
    StepStatus,
    TriggerState,
    new_stage_state,
    non_negative,
    stage_roles,
)
from cockpit.runbook.backends import BACKEND_CONDITION, with_backend
from cockpit.runbook.model import Item, Runbook, Step, Verify
from cockpit.runbook.placeholders import ParamValue
from cockpit.runbook.waves import plan_waves, resolve_int

_Part = TypeVar("_Part", StepState, ItemState)


def _backend_of(params: Mapping[str, object]) -> str | None:
    value = params.get(BACKEND_CONDITION)
    return str(value) if value else None


def initial_state(
    runbook: Runbook, params: Mapping[str, ParamValue], hosts: Sequence[str], operator: str | None
) -> CockpitState:
    """The state before the first event: every stage locked or open as the runbook says, waves planned."""
    # the chosen backend reads as a parameter (``when = {backend = "slurm"}``); ssh when none was recorded
    given: dict[str, ParamValue] = {**runbook.defaults(), **params}
    merged = with_backend(given, _backend_of(params))
    waves = plan_waves(hosts, runbook.waves, merged) if hosts else []
    opening = [s.id for s in runbook.opening_stages]
    closing = [s.id for s in runbook.closing_stages]
    window = {}
    for sid in opening + closing:
        s = runbook.stage(sid)
        window[sid] = new_stage_state(
            s.steps, s.items, "window", None, merged, sid=s.id, title=s.title, arms=s.arms_triggers
        )
    # every node's stages start alike (no facts yet: the same steps and items skipped), so
    # each is a copy of one template per stage, made when the node's stages are first read:
    # judging every ``when`` once per node, then copying them all up front, made the state of
    # a 2,000-node fleet cost seconds before its first event
    templates = tuple(
        new_stage_state(s.steps, s.items, "node", None, merged, sid=s.id, title=s.title, arms=s.arms_triggers)
        for s in runbook.node_stages
    )
    nodes: dict[str, NodeProgress] = {}
    with gc_paused():  # hundreds of thousands of objects and no garbage: no collector passes over them
        for w, members in enumerate(waves):
            for host in members:
                nodes[host] = NodeProgress(node=host, wave=w, _templates=templates)
    triggers = {
        t.id: TriggerState(id=t.id, title=t.title, mode=t.mode, evaluator=t.evaluator) for t in runbook.triggers
    }
    state = CockpitState(
        runbook_id=runbook.id,
        operator=operator,
        hosts=list(hosts),
        params=merged,
        window=window,
        opening=opening,
        closing=closing,
        node_stage_order=[s.id for s in runbook.node_stages],
        nodes=nodes,
        waves=waves,
        triggers=triggers,
        roles=stage_roles(runbook),
        max_parallel=max(1, resolve_int(runbook.waves.max_parallel, merged, "waves.max_parallel")),
        failure_budget=non_negative(
            resolve_int(runbook.waves.failure_budget, merged, "waves.failure_budget"), "waves.failure_budget"
        ),
    )
    if opening:
        window[opening[0]].status = "active"
    return state


#: What an item verified by a step shows while that step runs, after it, or when it failed.
_ITEM_STATUS_OF_STEP: dict[StepStatus, ItemStatus] = {"running": "running", "done": "done", "failed": "failed"}


class FoldContext:
    """The state being folded, the runbook's index, and the moves the handler groups share."""

    def __init__(self, runbook: Runbook, state: CockpitState, finished: int = 0) -> None:
        self.runbook = runbook
        self.state = state
        self.finished = finished  # nodes in a FINISHED position (the closing stages wait for all)
        #: see :class:`~cockpit.engine.fold.Folder`: None when signatures are not required
        self.signatures: Mapping[int, str] | None = None
        self.steps: dict[tuple[str, str], Step] = {}
        self.step_items: dict[str, dict[str, list[str]]] = {}
        for stage in runbook.stages:
            self._index(stage.id, stage.steps, stage.items)
        if runbook.rollback is not None:
            self._index(ROLLBACK_STAGE, runbook.rollback.steps, runbook.rollback.items)

    def _index(self, sid: str, steps: Sequence[Step], items: Sequence[Item]) -> None:
        by_step: dict[str, list[str]] = {}
        for step in steps:
            self.steps[(sid, step.id)] = step
        for item in items:
            if item.verify is Verify.STEP and item.step:
                by_step.setdefault(item.step, []).append(item.id)
        self.step_items[sid] = by_step

    # -- finding things

    def anomaly(self, event: EventBase, what: str) -> None:
        kind = getattr(event, "raw_kind", None) or getattr(event, "kind", "?")
        self.state.anomalies.append(f"seq {event.seq} ({kind}): {what}")

    def refuse(self, event: EventBase, why: str) -> None:
        """``event`` is refused (:mod:`cockpit.engine.judge`): flagged, listed, not applied."""
        kind = str(getattr(event, "raw_kind", None) or getattr(event, "kind", "?"))
        self.state.refused.append(RefusedEvent(event.seq, kind, event.actor, why))
        self.anomaly(event, f"REFUSED: {why}")

    def stage_of(self, event: Event) -> StageState | None:
        st = self.state
        sid = event.stage
        if sid is None:
            self.anomaly(event, "no stage named")
            return None
        if sid in st.window:
            return st.window[sid]
        if event.node is None:
            self.anomaly(event, f"stage {sid!r} is not a window stage and no node is named")
            return None
        progress = st.nodes.get(event.node)
        if progress is None:
            self.anomaly(event, f"unknown node {event.node!r}")
            return None
        if sid == ROLLBACK_STAGE:
            if progress.rollback is None:
                self.anomaly(event, f"{event.node} is not rolling back")
            return progress.rollback
        stage = progress.stages.get(sid)
        if stage is None:
            self.anomaly(event, f"unknown stage {sid!r}")
        return stage

    def node(self, event: Event) -> NodeProgress | None:
        progress = self.state.nodes.get(event.node or "")
        if progress is None:
            self.anomaly(event, f"unknown node {event.node!r}")
        return progress

    def item(self, event: Event) -> tuple[StageState, ItemState] | None:
        return self._in_stage(event, "item", event.item, lambda stage: stage.items)

    def step(self, event: Event) -> tuple[StageState, StepState] | None:
        return self._in_stage(event, "step", event.step, lambda stage: stage.steps)

    def _in_stage(
        self, event: Event, what: str, key: str | None, table: Callable[[StageState], Mapping[str, _Part]]
    ) -> tuple[StageState, _Part] | None:
        """The event's stage and its step or item ``key`` (``table`` picks which), or None
        when either is not found (an anomaly says which)."""
        stage = self.stage_of(event)
        if stage is None:
            return None
        part = table(stage).get(key or "")
        if part is None:
            self.anomaly(event, f"unknown {what} {key!r} in stage {stage.id!r}")
            return None
        return stage, part

    def trigger(self, event: Event) -> TriggerState | None:
        trig = self.state.triggers.get(event.trigger or "")
        if trig is None:
            self.anomaly(event, f"unknown trigger {event.trigger!r}")
        return trig

    def reviewer(self, actor: str) -> None:
        st = self.state
        if is_system(actor) or same_person(actor, st.operator):
            return
        if not any(same_person(actor, known) for known in st.reviewers):
            st.reviewers.append(actor)

    # -- moving things

    def set_current(self, progress: NodeProgress, value: str, at: datetime) -> None:
        was = progress.current in FINISHED
        progress.current = value
        progress.entered_at = at
        now = value in FINISHED
        if now and not was:
            self.finished += 1
            self.maybe_open_closing()
        elif was and not now:
            self.finished -= 1

    def maybe_open_closing(self) -> None:
        st = self.state
        if st.closing_open or not st.closing or not st.opening_done:
            return
        if self.finished < len(st.nodes) and not st.halted:
            return
        st.closing_open = True
        first = st.window[st.closing[0]]
        if first.status == "locked":
            first.enter(st.last_seq, st.last_at)

    def sync_step_items(self, stage: StageState, step_id: str, status: StepStatus, event: Event) -> None:
        item_status = _ITEM_STATUS_OF_STEP.get(status, "open")
        for iid in self.step_items.get(stage.id, {}).get(step_id, []):
            item = stage.items[iid]
            if item.status == "skipped":
                continue
            self.settle_item(item, item_status, event)

    def settle_item(self, item: ItemState, status: ItemStatus, event: Event) -> None:
        """Record that ``event`` moved ``item`` to ``status``: who, when, at which seq."""
        item.status = status
        item.by = event.actor
        item.seq = event.seq
        item.at = event.ts

    def pass_stage(self, event: Event, status: StageStatus) -> None:
        """Close the event's stage (passed or overridden) and open what comes after it."""
        stage = self.stage_of(event)
        if stage is None:
            return
        if stage.closed:
            return  # a repeated pass changes nothing
        if stage.status != "active":
            self.anomaly(event, f"stage {stage.id!r} passed while {stage.status}")
        stage.status = status
        stage.passed_seq = event.seq
        stage.passed_at = event.ts
        stage.passed_by = event.actor
        st = self.state
        if stage.scope == "rollback":
            return
        if stage.scope == "window":
            order = st.opening if stage.id in st.opening else st.closing
            pos = order.index(stage.id)
            if pos + 1 < len(order):
                nxt = st.window[order[pos + 1]]
                if nxt.status == "locked":
                    nxt.enter(event.seq, event.ts)
            self.maybe_open_closing()
            return
        progress = st.nodes[stage.node or ""]
        if progress.current != stage.id:
            return
        pos = st.node_stage_order.index(stage.id)
        if pos + 1 < len(st.node_stage_order):
            nxt = progress.stages[st.node_stage_order[pos + 1]]
            nxt.enter(event.seq, event.ts)
            self.set_current(progress, nxt.id, event.ts)
        else:
            self.set_current(progress, DONE, event.ts)


class HandlerGroup:
    """A group of fold handlers, all moving the one state their context holds."""

    def __init__(self, ctx: FoldContext) -> None:
        self.ctx = ctx


_Handlers = TypeVar("_Handlers", bound=HandlerGroup)
_Event = TypeVar("_Event", bound=Event)


def on_node(
    handler: Callable[[_Handlers, _Event, NodeProgress], None],
) -> Callable[[_Handlers, _Event], None]:
    """A handler of an event about a node, handed the node's progress; an event naming a
    node the window does not have is an anomaly (:meth:`FoldContext.node`) and moves nothing."""

    @wraps(handler)
    def handle(self: _Handlers, event: _Event) -> None:
        progress = self.ctx.node(event)
        if progress is not None:
            handler(self, event, progress)

    return handle


def on_step(
    handler: Callable[[_Handlers, _Event, StageState, StepState], None],
) -> Callable[[_Handlers, _Event], None]:
    """A handler of an event about a step, handed its stage and the step (see :func:`on_node`)."""

    @wraps(handler)
    def handle(self: _Handlers, event: _Event) -> None:
        found = self.ctx.step(event)
        if found is not None:
            handler(self, event, *found)

    return handle


def on_item(
    handler: Callable[[_Handlers, _Event, ItemState], None],
) -> Callable[[_Handlers, _Event], None]:
    """A handler of an event about an item, handed the item (see :func:`on_node`)."""

    @wraps(handler)
    def handle(self: _Handlers, event: _Event) -> None:
        found = self.ctx.item(event)
        if found is not None:
            handler(self, event, found[1])

    return handle
