"""The fold: events, one at a time, into a :class:`~cockpit.engine.state.CockpitState`.

Pure: values in, values out. No I/O and no clock reads; everything the gate decides
is recomputed from the events alone, so the live session, the reviewer's view and
replay agree by construction. :class:`Folder` applies one event at a time (cheap per
event); :func:`fold` does a whole sequence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from cockpit.changelog.events import Event, EventKind
from cockpit.engine.state import (
    DONE,
    FINISHED,
    HELD,
    PENDING,
    ROLLBACK_FAILED,
    ROLLBACK_STAGE,
    ROLLED_BACK,
    ROLLING_BACK,
    SYSTEM_ACTOR,
    CockpitState,
    ItemState,
    ItemStatus,
    NodeProgress,
    NoteRecord,
    OverrideRecord,
    SignoffRecord,
    StageState,
    StageStatus,
    StepStatus,
    TriggerState,
    new_stage_state,
    non_negative,
    stage_roles,
)
from cockpit.runbook.model import Item, Runbook, Step, StepKind, Verify
from cockpit.runbook.waves import plan_waves, resolve_int


class Folder:
    """Folds events, one at a time, into a :class:`CockpitState`."""

    def __init__(
        self,
        runbook: Runbook,
        params: Mapping[str, object],
        hosts: Sequence[str],
        *,
        operator: str | None = None,
        _state: CockpitState | None = None,
    ) -> None:
        self.runbook = runbook
        self._steps: dict[tuple[str, str], Step] = {}
        self._step_items: dict[str, dict[str, list[str]]] = {}
        for stage in runbook.stages:
            self._index(stage.id, stage.steps, stage.items)
        if runbook.rollback is not None:
            self._index(ROLLBACK_STAGE, runbook.rollback.steps, runbook.rollback.items)
        if _state is not None:
            self._state = _state
            return
        merged: dict[str, Any] = {**runbook.defaults(), **params}
        waves = plan_waves(hosts, runbook.waves, merged) if hosts else []
        opening = [s.id for s in runbook.opening_stages]
        closing = [s.id for s in runbook.closing_stages]
        window = {}
        for sid in opening + closing:
            s = runbook.stage(sid)
            window[sid] = new_stage_state(
                s.steps, s.items, "window", None, merged, sid=s.id, title=s.title, arms=s.arms_triggers
            )
        nodes: dict[str, NodeProgress] = {}
        for w, members in enumerate(waves):
            for host in members:
                progress = NodeProgress(node=host, wave=w)
                for s in runbook.node_stages:
                    progress.stages[s.id] = new_stage_state(
                        s.steps, s.items, "node", host, merged, sid=s.id, title=s.title, arms=s.arms_triggers
                    )
                nodes[host] = progress
        triggers = {
            t.id: TriggerState(id=t.id, title=t.title, mode=str(t.mode), evaluator=t.evaluator)
            for t in runbook.triggers
        }
        self._state = CockpitState(
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
        self._finished = 0
        self._maybe_open_closing()

    def _index(self, sid: str, steps: Sequence[Step], items: Sequence[Item]) -> None:
        by_step: dict[str, list[str]] = {}
        for step in steps:
            self._steps[(sid, step.id)] = step
        for item in items:
            if item.verify is Verify.STEP and item.step:
                by_step.setdefault(item.step, []).append(item.id)
        self._step_items[sid] = by_step

    @property
    def state(self) -> CockpitState:
        return self._state

    def copy(self) -> Folder:
        """An independent folder at the same position (for replay checkpoints)."""
        clone = Folder(self.runbook, {}, [], _state=self._state.copy())
        clone._finished = self._finished
        return clone

    snapshot = copy

    def apply_all(self, events: Iterable[Event]) -> CockpitState:
        for event in events:
            self.apply(event)
        return self._state

    # -- dispatch

    def apply(self, event: Event) -> None:
        st = self._state
        st.last_seq = event.seq
        st.last_at = event.ts
        handler = _HANDLERS.get(event.kind)
        if handler is not None:
            handler(self, event)

    def _anomaly(self, event: Event, what: str) -> None:
        self._state.anomalies.append(f"seq {event.seq} ({event.kind}): {what}")

    def _stage_of(self, event: Event) -> StageState | None:
        st = self._state
        sid = event.stage
        if sid is None:
            self._anomaly(event, "no stage named")
            return None
        if sid in st.window:
            return st.window[sid]
        if event.node is None:
            self._anomaly(event, f"stage {sid!r} is not a window stage and no node is named")
            return None
        progress = st.nodes.get(event.node)
        if progress is None:
            self._anomaly(event, f"unknown node {event.node!r}")
            return None
        if sid == ROLLBACK_STAGE:
            if progress.rollback is None:
                self._anomaly(event, f"{event.node} is not rolling back")
            return progress.rollback
        stage = progress.stages.get(sid)
        if stage is None:
            self._anomaly(event, f"unknown stage {sid!r}")
        return stage

    def _reviewer(self, actor: str) -> None:
        st = self._state
        if actor != st.operator and actor != SYSTEM_ACTOR and actor not in st.reviewers:
            st.reviewers.append(actor)

    def _set_current(self, progress: NodeProgress, value: str, at: datetime) -> None:
        was = progress.current in FINISHED
        progress.current = value
        progress.entered_at = at
        now = value in FINISHED
        if now and not was:
            self._finished += 1
            self._maybe_open_closing()
        elif was and not now:
            self._finished -= 1

    def _maybe_open_closing(self) -> None:
        st = self._state
        if st.closing_open or not st.closing or not st.opening_done:
            return
        if self._finished < len(st.nodes) and not st.halted:
            return
        st.closing_open = True
        first = st.window[st.closing[0]]
        if first.status == "locked":
            first.status = "active"
            first.entered_seq = st.last_seq
            first.entered_at = st.last_at

    def _sync_step_items(self, stage: StageState, step_id: str, status: StepStatus, event: Event) -> None:
        item_status: ItemStatus = {"running": "running", "done": "done", "failed": "failed"}.get(status, "open")  # type: ignore[assignment]
        for iid in self._step_items.get(stage.id, {}).get(step_id, []):
            item = stage.items[iid]
            if item.status == "skipped":
                continue
            item.status = item_status
            item.seq = event.seq
            item.at = event.ts
            item.by = event.actor

    # -- handlers

    def _session_started(self, event: Event) -> None:
        st = self._state
        st.started_at = st.started_at or event.ts
        if st.operator is None:
            st.operator = str(event.facts.get("operator") or event.actor)

    def _session_paused(self, event: Event) -> None:
        self._state.paused = True

    def _session_resumed(self, event: Event) -> None:
        # A step still "running" when the session stopped has an unknown outcome: it
        # counts as failed until it is run again, so nothing passes on a guess.
        st = self._state
        st.paused = False
        stages = list(st.window.values())
        for progress in st.nodes.values():
            stages.extend(progress.stages.values())
            if progress.rollback is not None:
                stages.append(progress.rollback)
        for stage in stages:
            for step in stage.steps.values():
                if step.status == "running":
                    step.status = "failed"
                    step.error = "interrupted: outcome unknown"
                    step.exit_status = None
                    step.finished_seq = event.seq
                    step.finished_at = event.ts
                    self._sync_step_items(stage, step.id, "failed", event)

    def _session_ended(self, event: Event) -> None:
        self._state.ended_at = event.ts

    def _probe(self, event: Event) -> None:
        progress = self._node(event)
        if progress is None:
            return
        progress.probe = dict(event.facts)
        progress.probe_seq = event.seq
        progress.probe_at = event.ts
        boot = event.facts.get("boot_id")
        if (
            progress.reboot_started_seq is not None
            and progress.back_seq is None
            and boot
            and boot != progress.boot_id_before_reboot
        ):
            progress.back_seq = event.seq

    def _baseline(self, event: Event) -> None:
        progress = self._node(event)
        if progress is None:
            return
        progress.baseline = dict(event.facts)
        progress.baseline_seq = event.seq

    def _node(self, event: Event) -> NodeProgress | None:
        progress = self._state.nodes.get(event.node or "")
        if progress is None:
            self._anomaly(event, f"unknown node {event.node!r}")
        return progress

    def _step_started(self, event: Event) -> None:
        stage = self._stage_of(event)
        if stage is None:
            return
        step = stage.steps.get(event.step or "")
        if step is None:
            self._anomaly(event, f"unknown step {event.step!r} in stage {stage.id!r}")
            return
        step.status = "running"
        step.attempts += 1
        step.started_seq = event.seq
        step.started_at = event.ts
        step.exit_status = None
        step.error = None
        self._sync_step_items(stage, step.id, "running", event)
        if stage.node is not None:
            progress = self._state.nodes[stage.node]
            if step.destructive:
                progress.destructive_started = True
            if step.kind == StepKind.REBOOT:
                progress.reboot_started_seq = event.seq
                progress.reboot_started_at = event.ts
                progress.boot_id_before_reboot = progress.probe.get("boot_id") or progress.baseline.get("boot_id")
                progress.back_seq = None

    def _step_finished(self, event: Event) -> None:
        stage = self._stage_of(event)
        if stage is None:
            return
        step = stage.steps.get(event.step or "")
        if step is None:
            self._anomaly(event, f"unknown step {event.step!r} in stage {stage.id!r}")
            return
        facts = event.facts
        exit_status = facts.get("exit_status")
        ok = facts.get("ok")
        if ok is None:
            ok = exit_status == 0
        step.status = "done" if ok else "failed"
        step.exit_status = exit_status if isinstance(exit_status, int) else None
        step.error = None if ok else (str(facts["error"]) if facts.get("error") else None)
        step.finished_seq = event.seq
        step.finished_at = event.ts
        duration = facts.get("duration_s")
        step.duration_s = float(duration) if isinstance(duration, int | float) else None
        self._sync_step_items(stage, step.id, step.status, event)
        if ok and step.kind == StepKind.REBOOT and stage.node is not None:
            progress = self._state.nodes[stage.node]
            if progress.back_seq is None:
                progress.back_seq = event.seq

    def _item(self, event: Event) -> tuple[StageState, ItemState] | None:
        stage = self._stage_of(event)
        if stage is None:
            return None
        item = stage.items.get(event.item or "")
        if item is None:
            self._anomaly(event, f"unknown item {event.item!r} in stage {stage.id!r}")
            return None
        return stage, item

    def _item_ticked(self, event: Event) -> None:
        found = self._item(event)
        if found is None:
            return
        _, item = found
        if item.verify != Verify.MANUAL:
            self._anomaly(event, f"item {item.id!r} is verified by {item.verify}, not ticked")
            return
        item.status = "done"
        item.note = event.note
        item.by = event.actor
        item.seq = event.seq
        item.at = event.ts

    def _item_verified(self, event: Event) -> None:
        found = self._item(event)
        if found is None:
            return
        _, item = found
        item.status = "done" if event.facts.get("ok") else "failed"
        ev = event.facts.get("evidence")
        item.evidence = None if ev is None else str(ev)
        item.by = event.actor
        item.seq = event.seq
        item.at = event.ts

    def _signoff(self, event: Event) -> None:
        st = self._state
        counted = event.actor != st.operator
        st.signoffs.append(
            SignoffRecord(
                seq=event.seq,
                at=event.ts,
                actor=event.actor,
                stage=event.stage,
                item=event.item,
                node=event.node,
                note=event.note,
                counted=counted,
            )
        )
        self._reviewer(event.actor)
        if not counted:
            self._anomaly(event, f"sign-off by the operator {event.actor!r} does not count")
        stage = self._stage_of(event)
        if stage is None:
            return
        if event.item is None:
            stage.signoffs.append(event.actor)
            targets = [i for i in stage.items.values() if i.verify == Verify.SIGNOFF]
        else:
            item = stage.items.get(event.item)
            if item is None:
                self._anomaly(event, f"unknown item {event.item!r} in stage {stage.id!r}")
                return
            targets = [item]
        for item in targets:
            item.signers.append(event.actor)
            if counted and item.verify == Verify.SIGNOFF and item.status != "skipped":
                item.status = "done"
                item.by = event.actor
                item.note = event.note
                item.seq = event.seq
                item.at = event.ts

    def _pass(self, event: Event, status: StageStatus) -> None:
        stage = self._stage_of(event)
        if stage is None:
            return
        if stage.closed:
            return  # a repeated pass changes nothing
        if stage.status != "active":
            self._anomaly(event, f"stage {stage.id!r} passed while {stage.status}")
        stage.status = status
        stage.passed_seq = event.seq
        stage.passed_at = event.ts
        stage.passed_by = event.actor
        st = self._state
        if stage.scope == "rollback":
            return
        if stage.scope == "window":
            order = st.opening if stage.id in st.opening else st.closing
            pos = order.index(stage.id)
            if pos + 1 < len(order):
                nxt = st.window[order[pos + 1]]
                if nxt.status == "locked":
                    nxt.status = "active"
                    nxt.entered_seq = event.seq
                    nxt.entered_at = event.ts
            self._maybe_open_closing()
            return
        progress = st.nodes[stage.node or ""]
        if progress.current != stage.id:
            return
        pos = st.node_stage_order.index(stage.id)
        if pos + 1 < len(st.node_stage_order):
            nxt = progress.stages[st.node_stage_order[pos + 1]]
            nxt.status = "active"
            nxt.entered_seq = event.seq
            nxt.entered_at = event.ts
            self._set_current(progress, nxt.id, event.ts)
        else:
            self._set_current(progress, DONE, event.ts)

    def _gate_passed(self, event: Event) -> None:
        self._pass(event, "passed")

    def _override(self, event: Event) -> None:
        st = self._state
        blocked = event.facts.get("blocked_by") or []
        if isinstance(blocked, str):
            blocked = [blocked]
        st.overrides.append(
            OverrideRecord(
                seq=event.seq,
                at=event.ts,
                actor=event.actor,
                stage=event.stage or "",
                node=event.node,
                reason=event.reason or "",
                blocked_by=tuple(str(b) for b in blocked),
            )
        )
        stage = self._stage_of(event)
        if stage is not None and not stage.closed:
            stage.override_reason = event.reason
            stage.overridden_blockers = [str(b) for b in blocked]
        self._pass(event, "overridden")

    def _triggers_armed(self, event: Event) -> None:
        st = self._state
        st.armed = True
        st.armed_seq = event.seq
        named = event.facts.get("triggers")
        for tid, trig in st.triggers.items():
            if named is not None and tid not in named:
                continue
            if trig.status == "disarmed":
                trig.status = "armed"
                trig.seq = event.seq
                trig.at = event.ts

    def _trigger(self, event: Event) -> TriggerState | None:
        trig = self._state.triggers.get(event.trigger or "")
        if trig is None:
            self._anomaly(event, f"unknown trigger {event.trigger!r}")
        return trig

    def _trigger_fired(self, event: Event) -> None:
        trig = self._trigger(event)
        if trig is None:
            return
        evidence = str(event.facts.get("evidence") or event.note or event.reason or "")
        trig.status = "fired"
        trig.node = event.node
        trig.evidence = evidence
        trig.seq = event.seq
        trig.at = event.ts
        trig.fired_by = event.actor
        trig.fired_nodes[event.node or ""] = evidence
        trig.fire_count += 1
        self._reviewer(event.actor)

    def _trigger_cleared(self, event: Event) -> None:
        trig = self._trigger(event)
        if trig is None:
            return
        trig.status = "cleared"
        trig.fired_nodes = {}
        trig.cleared_by = event.actor
        trig.clear_reason = event.reason
        trig.cleared_seq = event.seq
        trig.cleared_at = event.ts
        trig.seq = event.seq
        trig.at = event.ts

    def _wave_started(self, event: Event) -> None:
        st = self._state
        wave = event.wave
        if wave is None or not 0 <= wave < len(st.waves):
            self._anomaly(event, f"no wave {wave!r} in the plan")
            return
        st.current_wave = wave
        st.wave_started_seq[wave] = event.seq
        members = event.facts.get("nodes") or st.waves[wave]
        first = st.node_stage_order[0] if st.node_stage_order else None
        for host in members:
            progress = st.nodes.get(host)
            if progress is None:
                self._anomaly(event, f"unknown node {host!r}")
                continue
            if progress.current != PENDING:
                continue
            if first is None:
                self._set_current(progress, DONE, event.ts)
                continue
            stage = progress.stages[first]
            stage.status = "active"
            stage.entered_seq = event.seq
            stage.entered_at = event.ts
            self._set_current(progress, first, event.ts)

    def _path_chosen(self, event: Event) -> None:
        self._state.path = {**event.facts, "actor": event.actor, "seq": event.seq}

    def _decision(self, event: Event) -> None:
        st = self._state
        st.decision = {**event.facts, "actor": event.actor, "seq": event.seq}
        if event.facts.get("halt_rollout"):
            # The rollout stops here: nodes not started stay as they are (HELD), no
            # further wave starts, and the closing stages open even though not every
            # node went through (the closing checklist then says which did not).
            st.halted = True
            for progress in st.nodes.values():
                if progress.current == PENDING:
                    progress.current = HELD
                    progress.entered_at = event.ts
            self._maybe_open_closing()

    def _rollback_started(self, event: Event) -> None:
        progress = self._node(event)
        if progress is None:
            return
        rb = self.runbook.rollback
        progress.rollback_from = progress.current
        progress.rollback_reason = event.reason
        progress.rollback_ok = None
        stage = new_stage_state(
            rb.steps if rb else [],
            rb.items if rb else [],
            "rollback",
            progress.node,
            self._state.params,
            sid=ROLLBACK_STAGE,
            title=rb.title if rb else "Roll back",
        )
        stage.status = "active"
        stage.entered_seq = event.seq
        stage.entered_at = event.ts
        progress.rollback = stage
        self._set_current(progress, ROLLING_BACK, event.ts)

    def _rollback_finished(self, event: Event) -> None:
        progress = self._node(event)
        if progress is None:
            return
        ok = bool(event.facts.get("ok"))
        progress.rollback_ok = ok
        if progress.rollback is not None and ok:
            progress.rollback.status = "passed"
            progress.rollback.passed_seq = event.seq
            progress.rollback.passed_at = event.ts
        self._set_current(progress, ROLLED_BACK if ok else ROLLBACK_FAILED, event.ts)

    def _note(self, event: Event) -> None:
        st = self._state
        st.notes.append(
            NoteRecord(seq=event.seq, at=event.ts, actor=event.actor, node=event.node, text=event.note or "")
        )
        self._reviewer(event.actor)


_HANDLERS: dict[EventKind, Any] = {
    EventKind.SESSION_STARTED: Folder._session_started,
    EventKind.SESSION_RESUMED: Folder._session_resumed,
    EventKind.SESSION_PAUSED: Folder._session_paused,
    EventKind.SESSION_ENDED: Folder._session_ended,
    EventKind.PROBE: Folder._probe,
    EventKind.BASELINE_RECORDED: Folder._baseline,
    EventKind.STEP_STARTED: Folder._step_started,
    EventKind.STEP_FINISHED: Folder._step_finished,
    EventKind.ITEM_TICKED: Folder._item_ticked,
    EventKind.ITEM_VERIFIED: Folder._item_verified,
    EventKind.SIGNOFF: Folder._signoff,
    EventKind.GATE_PASSED: Folder._gate_passed,
    EventKind.OVERRIDE: Folder._override,
    EventKind.TRIGGERS_ARMED: Folder._triggers_armed,
    EventKind.TRIGGER_FIRED: Folder._trigger_fired,
    EventKind.TRIGGER_CLEARED: Folder._trigger_cleared,
    EventKind.WAVE_STARTED: Folder._wave_started,
    EventKind.PATH_CHOSEN: Folder._path_chosen,
    EventKind.DECISION: Folder._decision,
    EventKind.ROLLBACK_STARTED: Folder._rollback_started,
    EventKind.ROLLBACK_FINISHED: Folder._rollback_finished,
    EventKind.NOTE: Folder._note,
}


def fold(
    runbook: Runbook,
    params: Mapping[str, object],
    hosts: Sequence[str],
    events: Iterable[Event],
    *,
    operator: str | None = None,
) -> CockpitState:
    """The state after ``events``, folded from scratch."""
    folder = Folder(runbook, params, hosts, operator=operator)
    return folder.apply_all(events)
