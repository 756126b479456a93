"""Fold handlers for the gates: items ticked, verified and signed off, gates passed or
overridden, waves started, and the decision that may halt the rollout."""

from __future__ import annotations

from collections.abc import Mapping

from cockpit.changelog.events import (
    DecisionEvent,
    GatePassedEvent,
    ItemTickedEvent,
    ItemVerifiedEvent,
    OverrideEvent,
    SignoffEvent,
    WaveDoneEvent,
    WaveHaltedEvent,
    WaveStartedEvent,
    writer_problem,
)
from cockpit.changelog.identity import same_person
from cockpit.engine.fold_base import HandlerGroup, on_item
from cockpit.engine.state import DONE, HELD, PENDING, DecisionRecord, ItemState, OverrideRecord, SignoffRecord
from cockpit.runbook.model import ItemScope, Verify


def signature_problem(event: SignoffEvent, operator: str | None, signatures: Mapping[int, str] | None) -> str | None:
    """Why a sign-off does not count for want of a signature (the session requires them), or None."""
    if signatures is None:
        return None
    principal = signatures.get(event.seq)
    if principal is None:
        return f"sign-off by {event.actor!r} has no valid signature from an allowed key (signatures are required)"
    if same_person(principal, operator):
        return f"sign-off signed with the operator's own key ({principal}): a sign-off needs a second person"
    return None


class GateHandlers(HandlerGroup):
    """What moves a stage towards its exit gate, and what moves the nodes through the waves."""

    @on_item
    def item_ticked(self, event: ItemTickedEvent, item: ItemState) -> None:
        if item.verify != Verify.MANUAL:
            self.ctx.anomaly(event, f"item {item.id!r} is verified by {item.verify}, not ticked")
            return
        item.note = event.note
        self.ctx.settle_item(item, "done", event)
        if item.scope != ItemScope.NODE and event.node is not None and event.stage is not None:
            self._cover(event, item.scope, event.stage, event.node)

    def _cover(self, event: ItemTickedEvent, scope: str, stage_id: str, node: str) -> None:
        """A per-wave or per-window item ticked on one node holds for the other nodes of its
        wave (or of the window) too: the same tick, its note naming the nodes sampled."""
        st = self.ctx.state
        progress = st.nodes.get(node)
        if progress is None:
            return
        others = st.waves[progress.wave] if scope == "wave" and progress.wave < len(st.waves) else list(st.nodes)
        for other in others:
            stage = st.nodes[other].stages.get(stage_id) if other != node else None
            item = None if stage is None else stage.items.get(event.item or "")
            if item is not None and item.status == "open":
                item.note = f"per {scope}, ticked on {node}: {event.note or ''}".rstrip(": ")
                self.ctx.settle_item(item, "done", event)

    @on_item
    def item_verified(self, event: ItemVerifiedEvent, item: ItemState) -> None:
        item.evidence = event.facts.evidence
        if event.facts.duration_s is not None:  # a run that never reached its command keeps the last one's
            item.duration_s = event.facts.duration_s
        self.ctx.settle_item(item, "done" if event.facts.ok else "failed", event)

    def signoff(self, event: SignoffEvent, refused: str | None = None) -> None:
        """``refused``: why the rules refuse it (:mod:`cockpit.engine.judge`); it is recorded, not counted."""
        ctx = self.ctx
        st = ctx.state
        problem = (
            writer_problem(event.kind, event.actor, st.operator)
            or signature_problem(event, st.operator, ctx.signatures)
            or refused
        )
        counted = problem is None
        st.signoffs.append(
            SignoffRecord.of(
                event, stage=event.stage, item=event.item, node=event.node, note=event.note, counted=counted
            )
        )
        ctx.reviewer(event.actor)
        if problem is not None:
            ctx.refuse(event, f"{problem}; it does not count")
            if problem is refused:
                return  # the rules refuse it: it names no signer either
        if event.item is None:
            stage = ctx.stage_of(event)
            if stage is None:
                return
            stage.signoffs.append(event.actor)
            targets = [i for i in stage.items.values() if i.verify == Verify.SIGNOFF]
        else:
            found = ctx.item(event)
            if found is None:
                return
            targets = [found[1]]
        for item in targets:
            item.signers.append(event.actor)
            if counted and item.verify == Verify.SIGNOFF and item.status != "skipped":
                item.note = event.note
                ctx.settle_item(item, "done", event)

    def gate_passed(self, event: GatePassedEvent) -> None:
        self.ctx.pass_stage(event, "passed")

    def override(self, event: OverrideEvent) -> None:
        ctx = self.ctx
        blocked = list(event.facts.blocked_by or [])
        ctx.state.overrides.append(
            OverrideRecord.of(
                event,
                stage=event.stage or "",
                node=event.node,
                reason=event.reason or "",
                blocked_by=tuple(blocked),
            )
        )
        stage = ctx.stage_of(event)
        if stage is not None and not stage.closed:
            stage.override_reason = event.reason
            stage.overridden_blockers = blocked
        ctx.pass_stage(event, "overridden")

    def wave_started(self, event: WaveStartedEvent) -> None:
        ctx = self.ctx
        st = ctx.state
        wave = event.wave
        if wave is None or not 0 <= wave < len(st.waves):
            ctx.anomaly(event, f"no wave index {wave!r} in the plan (the log counts waves from 0)")
            return
        st.current_wave = wave
        st.wave_started_seq[wave] = event.seq
        members = event.facts.nodes or st.waves[wave]
        first = st.node_stage_order[0] if st.node_stage_order else None
        for host in members:
            progress = st.nodes.get(host)
            if progress is None:
                ctx.anomaly(event, f"unknown node {host!r}")
                continue
            if progress.current != PENDING:
                continue
            if first is None:
                ctx.set_current(progress, DONE, event.ts)
                continue
            stage = progress.stages[first]
            stage.enter(event.seq, event.ts)
            ctx.set_current(progress, first, event.ts)

    def wave_ended(self, event: WaveHaltedEvent | WaveDoneEvent) -> None:
        """A wave that ran itself ended: what the screens and the ticket say of it (the nodes'
        own progress is their steps' and gates' events)."""
        st = self.ctx.state
        wave = event.wave
        if wave is None or wave not in st.wave_started_seq:
            self.ctx.anomaly(event, f"{event.kind} for wave index {wave!r}, which has not started")
            return
        reason = event.facts.reason
        st.wave_ended[wave] = "done" if isinstance(event, WaveDoneEvent) else f"halted: {reason or '?'}"

    def decision(self, event: DecisionEvent) -> None:
        st = self.ctx.state
        st.decision = DecisionRecord.of(event, facts=event.facts)
        if event.facts.halt_rollout:
            # The rollout stops here: nodes not started stay as they are (HELD), no
            # further wave starts, and the closing stages open even though not every
            # node went through (the closing checklist then says which did not).
            st.halted = True
            for progress in st.nodes.values():
                if progress.current == PENDING:
                    progress.current = HELD
                    progress.entered_at = event.ts
            self.ctx.maybe_open_closing()
