"""Fold handlers for what happens on the nodes: probes, baselines, steps, rollbacks, and the
steps a resumed session finds interrupted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cockpit.changelog.events import (
    BaselineRecordedEvent,
    NodeObservedEvent,
    ProbeEvent,
    RollbackFinishedEvent,
    RollbackStartedEvent,
    SessionResumedEvent,
    StepFinishedEvent,
    StepStartedEvent,
)
from cockpit.engine.fold_base import HandlerGroup, on_node, on_step
from cockpit.engine.state import (
    INTERRUPTED_OUTCOME,
    ROLLBACK_FAILED,
    ROLLBACK_STAGE,
    ROLLED_BACK,
    ROLLING_BACK,
    NodeProgress,
    StageState,
    StepState,
    applicable,
    error_kind_of,
    new_stage_state,
    recorded,
)
from cockpit.fleet.results import ErrorKind
from cockpit.runbook.conditions import WhenValue, names_facts, recorded_facts
from cockpit.runbook.model import Item, Step, Verify


def settle_conditions(
    st: StageState,
    steps: Sequence[Step],
    items: Sequence[Item],
    params: Mapping[str, object],
    facts: Mapping[str, object],
) -> None:
    """Decide the conditions over recorded facts now that the node's baseline is recorded: a
    step or item not yet touched becomes skipped or open as its ``when`` says (again on a new
    baseline); nothing that ran or was ticked changes."""
    skipped_steps = {sid for sid, s in st.steps.items() if s.status == "skipped"}
    for step in steps:
        state = st.steps.get(step.id)
        if state is None or state.attempts or state.status not in ("open", "skipped"):
            continue
        if names_facts(step.when, params):
            holds = applicable(step.when, params, facts)
            state.status = "open" if holds else "skipped"
            (skipped_steps.discard if holds else skipped_steps.add)(step.id)
    for item in items:
        istate = st.items.get(item.id)
        if istate is None or istate.seq is not None or istate.status not in ("open", "needs-signoff", "skipped"):
            continue
        by_step = (
            item.verify is Verify.STEP and item.step is not None and names_facts(_when_of(steps, item.step), params)
        )
        if names_facts(item.when, params) or by_step:
            skip = not applicable(item.when, params, facts) or (
                item.verify is Verify.STEP and item.step in skipped_steps
            )
            istate.status = "skipped" if skip else ("needs-signoff" if item.verify is Verify.SIGNOFF else "open")


def _when_of(steps: Sequence[Step], step_id: str) -> Mapping[str, WhenValue]:
    return next((s.when for s in steps if s.id == step_id), {})


class NodeHandlers(HandlerGroup):
    """Probes, baselines, steps and rollbacks, folded into the nodes' and stages' progress."""

    def session_resumed(self, event: SessionResumedEvent) -> None:
        # A step still "running" when the session stopped has an unknown outcome: it
        # counts as failed until it is run again, so nothing passes on a guess.
        st = self.ctx.state
        st.paused = False
        for stage in st.all_stages():
            for step in stage.steps.values():
                if step.status == "running":
                    step.status = "failed"
                    step.error = INTERRUPTED_OUTCOME
                    step.error_kind = ErrorKind.INTERRUPTED
                    step.exit_status = None
                    step.finished_seq = event.seq
                    step.finished_at = event.ts
                    self.ctx.sync_step_items(stage, step.id, "failed", event)

    @on_node
    def probe(self, event: ProbeEvent, progress: NodeProgress) -> None:
        progress.probe = event.facts
        progress.probe_seq = event.seq
        progress.probe_at = event.ts
        if event.facts.gpus is not None:  # a probe at a step boundary: the per-GPU detail in full
            progress.gpus_detail = progress.probe
            progress.gpus_detail_seq = event.seq
        boot = event.facts.boot_id
        if (
            progress.reboot_started_seq is not None
            and progress.back_seq is None
            and boot
            and boot != progress.boot_id_before_reboot
        ):
            progress.back_seq = event.seq

    @on_node
    def node_observed(self, event: NodeObservedEvent, progress: NodeProgress) -> None:
        # the engine's last word on the node, whatever the engine: the triggers judge it
        # (engine_reported_failure), the node detail shows it; a reboot's return is still
        # the reboot step's end or a new boot id, as over SSH
        progress.observation = event.facts
        progress.observation_seq = event.seq
        progress.observation_at = event.ts

    @on_node
    def baseline(self, event: BaselineRecordedEvent, progress: NodeProgress) -> None:
        progress.baseline = event.facts
        progress.baseline_seq = event.seq
        # conditions over recorded facts are decided now, for the node's stages still ahead
        # (a baseline without the facts a condition names skips it: nothing to match)
        ctx = self.ctx
        facts = recorded_facts(progress.baseline.to_toml())
        for sid, stage in progress.stages.items():
            if not stage.closed:
                spec = ctx.runbook.stage(sid)
                settle_conditions(stage, spec.steps, spec.items, ctx.state.params, facts)

    @on_step
    def step_started(self, event: StepStartedEvent, stage: StageState, step: StepState) -> None:
        ctx = self.ctx
        step.status = "running"
        step.attempts += 1
        step.started_seq = event.seq
        step.started_at = event.ts
        step.exit_status = None
        step.error = None
        step.error_kind = None
        ctx.sync_step_items(stage, step.id, "running", event)
        if stage.node is not None:
            progress = ctx.state.nodes[stage.node]
            if step.destructive:
                progress.destructive_started = True
            if step.reboots:
                progress.reboot_started_seq = event.seq
                progress.reboot_started_at = event.ts
                progress.boot_id_before_reboot = progress.probe.boot_id or progress.baseline.boot_id
                progress.back_seq = None

    @on_step
    def step_finished(self, event: StepFinishedEvent, stage: StageState, step: StepState) -> None:
        ctx = self.ctx
        facts = event.facts
        ok = facts.ok if facts.ok is not None else facts.exit_status == 0
        step.status = "done" if ok else "failed"
        step.exit_status = facts.exit_status
        step.error = None if ok else (facts.error or None)
        step.error_kind = None if ok else error_kind_of(facts.error_kind)
        step.finished_seq = event.seq
        step.finished_at = event.ts
        step.duration_s = facts.duration_s
        ctx.sync_step_items(stage, step.id, step.status, event)
        if ok and step.reboots and stage.node is not None:
            progress = ctx.state.nodes[stage.node]
            if progress.back_seq is None:
                progress.back_seq = event.seq

    @on_node
    def rollback_started(self, event: RollbackStartedEvent, progress: NodeProgress) -> None:
        ctx = self.ctx
        rb = ctx.runbook.rollback
        progress.rollback_from = progress.current
        progress.rollback_reason = event.reason
        progress.rollback_ok = None
        stage = new_stage_state(
            rb.steps if rb else [],
            rb.items if rb else [],
            "rollback",
            progress.node,
            ctx.state.params,
            sid=ROLLBACK_STAGE,
            title=rb.title if rb else "Roll back",
            facts=recorded_facts(progress.baseline.to_toml()) if recorded(progress.baseline) else None,
        )
        stage.enter(event.seq, event.ts)
        progress.rollback = stage
        ctx.set_current(progress, ROLLING_BACK, event.ts)

    @on_node
    def rollback_finished(self, event: RollbackFinishedEvent, progress: NodeProgress) -> None:
        ok = bool(event.facts.ok)
        progress.rollback_ok = ok
        if progress.rollback is not None and ok:
            progress.rollback.status = "passed"
            progress.rollback.passed_seq = event.seq
            progress.rollback.passed_at = event.ts
        self.ctx.set_current(progress, ROLLED_BACK if ok else ROLLBACK_FAILED, event.ts)
