"""What an approver needs from a change log: a projection of the one folded state.

:func:`summarise` folds the events with the gating engine's :class:`~cockpit.engine.fold.Folder`
(the fold every screen and replay use) over the runbook's stages, and reads the nodes'
outcomes and the closing checklist from that state; the ticket's history (timeline,
firings, overrides, sign-offs, artifacts) is the events themselves, listed. A ticket can
be written for any change log, complete or not. With the runbook the session used
(checked by its sha256), it also gives trigger titles and the closing checklist's
full item list, including items nobody touched.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from cockpit.changelog.events import Event, EventKind, clock_went_back
from cockpit.changelog.journal import SessionLog, TornTail
from cockpit.changelog.verify import log_integrity
from cockpit.engine.fold import fold
from cockpit.engine.state import PENDING, CockpitState, ItemState, NodeProgress, StageState
from cockpit.errors import BadInput
from cockpit.runbook.loader import LoadedRunbook, load_runbook, shipped_runbooks
from cockpit.runbook.model import Runbook, RunbookHeader
from cockpit.view.words import event_text, why_rollback_failed

#: Event kinds shown in the ticket's timeline (the rest are in the change log).
TIMELINE_KINDS: frozenset[EventKind] = frozenset(
    {
        EventKind.SESSION_STARTED,
        EventKind.SESSION_RESUMED,
        EventKind.SESSION_PAUSED,
        EventKind.SESSION_ENDED,
        EventKind.PATH_CHOSEN,
        EventKind.TRIGGERS_ARMED,
        EventKind.WAVE_STARTED,
        EventKind.WAVE_HALTED,
        EventKind.WAVE_DONE,
        EventKind.TRIGGER_FIRED,
        EventKind.TRIGGER_CLEARED,
        EventKind.OVERRIDE,
        EventKind.ROLLBACK_STARTED,
        EventKind.ROLLBACK_FINISHED,
        EventKind.DECISION,
        EventKind.SIGNOFF,
        # notes: the reviewers' words and the host keys accepted during the window are what a
        # change board asks for
        EventKind.NOTE,
    }
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeOutcome(_Model):
    node: str
    wave: int | None = None
    driver_before: str | None = None
    driver_after: str | None = None
    package_before: str | None = None
    gpus_before: int | None = None
    gpus_after: int | None = None
    last_stage: str | None = None  # the runbook's furthest node stage whose gate passed (or was overridden)
    rollback_why: str | None = None  # a failed rollback: why, in plain words (view.words.why_rollback_failed)
    outcome: str = (
        "not started"  # upgraded / rolled back / rollback FAILED / stopped: ... / in progress / not judged / ...
    )


class WaveRecord(_Model):
    wave: int
    nodes: list[str]
    started_at: datetime
    seq: int


class _Recorded(_Model):
    """Something one event recorded: its seq, its time and who acted, first in every such record."""

    seq: int
    at: datetime
    actor: str

    @classmethod
    def of(cls, event: Event, **fields: Any) -> Self:
        """The record of ``event``, with the fields the subclass adds."""
        return cls(seq=event.seq, at=event.ts, actor=event.actor, **fields)


class TriggerFiring(_Recorded):
    trigger: str
    title: str | None = None
    node: str | None = None
    evidence: str = ""
    cleared_at: datetime | None = None
    cleared_by: str | None = None
    cleared_reason: str | None = None
    cleared_seq: int | None = None


class OverrideRecord(_Recorded):
    stage: str | None = None
    node: str | None = None
    reason: str = ""
    blocked_by: list[str] = Field(default_factory=list)


class SignoffRecord(_Recorded):
    stage: str | None = None
    item: str | None = None  # None: the whole gate
    node: str | None = None
    note: str | None = None


class TimelineEntry(_Recorded):
    kind: str
    text: str


class ArtifactRecord(_Model):
    sha256: str
    seq: int
    node: str | None = None
    stage: str | None = None
    step: str | None = None
    what: str = ""


class ChecklistEntry(_Model):
    item: str
    text: str | None = None
    state: str = "open"  # open / done / verified / failed / signed
    by: str | None = None
    at: datetime | None = None
    note: str | None = None


class WatchFinding(_Recorded):
    trigger: str
    title: str | None = None
    node: str | None = None
    evidence: str = ""
    told: list[str] = Field(default_factory=list)  # the sinks that received it


class WatchSummary(_Model):
    """What ``cockpit watch`` saw after the window (the latest watch; its restarts counted)."""

    started_at: datetime
    started_by: str
    until: str | None = None
    period_s: float | None = None
    nodes: list[str] = Field(default_factory=list)
    runs: int = 1  # 1 + the restarts that took it up
    ended_at: datetime | None = None  # None: still watching, or stopped before its time ran out
    last_at: datetime
    findings: list[WatchFinding] = Field(default_factory=list)


class ChangeSummary(_Model):
    change_id: str
    runbook_id: str
    runbook_sha256: str
    runbook_path: str
    runbook_matched: bool  # the runbook given had the recorded sha256 (titles and open items shown)
    operator: str
    reviewers: list[str]
    hosts: list[str]
    parameters: dict[str, Any]
    tool_version: str
    created_at: datetime
    started_at: datetime
    ended_at: datetime | None  # None: the session has not ended (still open or interrupted)
    ended_outcome: str | None = None  # the outcome given when the window was ended (session-ended)
    last_event_at: datetime
    events: int
    torn: TornTail | None = None
    #: the chain, the signatures and the head in one line (:func:`~cockpit.changelog.verify.log_integrity`)
    integrity: str = ""
    nodes: list[NodeOutcome]
    waves: list[WaveRecord]
    triggers_armed: list[str]
    triggers_armed_at: datetime | None = None
    triggers_armed_by: str | None = None
    trigger_titles: dict[str, str]
    firings: list[TriggerFiring]
    overrides: list[OverrideRecord]
    signoffs: list[SignoffRecord]
    path: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    closing: list[ChecklistEntry]
    timeline: list[TimelineEntry]
    artifacts: list[ArtifactRecord]
    failed_steps: list[TimelineEntry]
    watch: WatchSummary | None = None  # after the window (cockpit watch)
    #: events whose time is well before the one before them (a skewed clock, a hand-written time)
    clock_went_back: list[str] = Field(default_factory=list)

    @property
    def duration(self) -> timedelta:
        return (self.ended_at or self.last_event_at) - self.started_at

    @property
    def outcome(self) -> str:
        """One line for the ticket's title: the decision's outcome, else what the nodes show."""
        if self.decision and self.decision.get("outcome"):
            return str(self.decision["outcome"])
        if self.ended_outcome:  # the outcome the person who ended the window gave
            return self.ended_outcome
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.outcome] = counts.get(node.outcome, 0) + 1
        return ", ".join(f"{n} {what}" for what, n in counts.items()) or "no nodes"


def summarise(log: SessionLog, runbook: LoadedRunbook | None = None, integrity: str | None = None) -> ChangeSummary:
    """The export view of a change log: a projection of the folded state, and its history.

    The nodes' outcomes are read from the state the one fold (:class:`~cockpit.engine.fold.Folder`,
    as replay folds it) makes of the events over the runbook's stages: a node is upgraded
    when it passed every node stage of the runbook, whatever the stages are called. The
    runbook folded over is ``runbook``, else the shipped runbook of the recorded id, else
    none (no stages: no node can have passed one). ``runbook`` gives titles and the
    closing checklist's full item list only if its sha256 is the one the session recorded;
    otherwise only what the events say is shown.
    """
    header = log.header
    events = log.events
    structure = runbook if runbook is not None else _shipped(header.runbook_id)
    matched = runbook is not None and runbook.sha256 == header.runbook_sha256
    book = structure.runbook if structure is not None else _NO_RUNBOOK
    state = _fold(log, book)
    titles: dict[str, str] = {t.id: t.title for t in book.triggers} if matched else {}
    closing_stage = book.closing_stages[-1].id if book.closing_stages else None

    reviewers: list[str] = []
    waves: list[WaveRecord] = []
    firings: list[TriggerFiring] = []
    overrides: list[OverrideRecord] = []
    signoffs: list[SignoffRecord] = []
    timeline: list[TimelineEntry] = []
    artifacts: list[ArtifactRecord] = []
    failed_steps: list[TimelineEntry] = []
    armed: list[str] = []
    armed_at: datetime | None = None
    armed_by: str | None = None
    path = decision = None
    ended_outcome: str | None = None

    for event in events:
        if event.actor not in (header.operator, "cockpit") and event.actor not in reviewers:
            reviewers.append(event.actor)
        if event.kind in TIMELINE_KINDS:
            timeline.append(TimelineEntry.of(event, kind=str(event.kind), text=event_text(event)))
        kind = event.kind
        if event.kind is EventKind.SESSION_ENDED:
            ended_outcome = event.facts.outcome
        elif event.kind is EventKind.ITEM_VERIFIED and event.facts.artifact:  # a command item's long output
            artifacts.append(
                ArtifactRecord(
                    sha256=event.facts.artifact,
                    seq=event.seq,
                    node=event.node,
                    stage=event.stage,
                    step=event.item,
                    what=event.facts.command or "check output",
                )
            )
        elif event.kind is EventKind.STEP_FINISHED:
            if event.facts.artifact:
                artifacts.append(
                    ArtifactRecord(
                        sha256=event.facts.artifact,
                        seq=event.seq,
                        node=event.node,
                        stage=event.stage,
                        step=event.step,
                        what=event.facts.command or "step output",
                    )
                )
            if event.facts.ok is False:
                failed_steps.append(TimelineEntry.of(event, kind=str(kind), text=event_text(event)))
        elif event.kind is EventKind.WAVE_STARTED and event.wave is not None:
            members = list(event.facts.nodes or [])
            waves.append(WaveRecord(wave=event.wave, nodes=members, started_at=event.ts, seq=event.seq))
        elif event.kind is EventKind.TRIGGERS_ARMED:
            armed = list(event.facts.triggers or []) or sorted(titles)
            armed_at, armed_by = event.ts, event.actor
        elif event.kind is EventKind.TRIGGER_FIRED:
            firings.append(
                TriggerFiring.of(
                    event,
                    trigger=event.trigger or "?",
                    title=titles.get(event.trigger or ""),
                    node=event.node,
                    evidence=event.facts.evidence or event.note or "",
                )
            )
        elif kind is EventKind.TRIGGER_CLEARED:
            for firing in firings:
                if firing.trigger == event.trigger and firing.cleared_at is None:
                    firing.cleared_at, firing.cleared_by = event.ts, event.actor
                    firing.cleared_reason, firing.cleared_seq = event.reason, event.seq
        elif kind is EventKind.SIGNOFF:
            signoffs.append(
                SignoffRecord.of(event, stage=event.stage, item=event.item, node=event.node, note=event.note)
            )
        elif event.kind is EventKind.PATH_CHOSEN:
            path = {**event.facts.to_toml(), "actor": event.actor, "at": event.ts, "seq": event.seq}
        elif event.kind is EventKind.DECISION:
            decision = {**event.facts.to_toml(), "actor": event.actor, "at": event.ts, "seq": event.seq}
        if event.kind is EventKind.OVERRIDE:
            blocked = event.facts.blocked_by or []
            overrides.append(
                OverrideRecord.of(
                    event,
                    stage=event.stage,
                    node=event.node,
                    reason=event.reason or "",
                    blocked_by=[blocked] if isinstance(blocked, str) else [str(b) for b in blocked],
                )
            )

    probed = _probed(events)
    first_wave = {member: w.wave for w in reversed(waves) for member in w.nodes}
    ended = state.ended_at is not None
    nodes = [
        node_outcome(progress, state, probed.get(name), first_wave.get(name), ended=ended)
        for name, progress in state.nodes.items()
    ]
    first_ts = events[0].ts if events else header.created_at
    last_ts = events[-1].ts if events else header.created_at
    clock = [
        f"seq {e.seq} is {back} before seq {before.seq}"
        for before, e in itertools.pairwise(events)
        if (back := clock_went_back(before.ts, e.ts)) is not None
    ]
    return ChangeSummary(
        clock_went_back=clock,
        change_id=header.change_id,
        runbook_id=header.runbook_id,
        runbook_sha256=header.runbook_sha256,
        runbook_path=header.runbook_path,
        runbook_matched=matched,
        operator=header.operator,
        reviewers=reviewers,
        hosts=list(header.hosts),
        parameters=dict(header.parameters),
        tool_version=header.tool_version,
        created_at=header.created_at,
        started_at=state.started_at or first_ts,
        ended_at=state.ended_at,
        ended_outcome=ended_outcome,
        last_event_at=last_ts,
        events=len(events),
        torn=log.torn,
        integrity=integrity if integrity is not None else log_integrity(log),
        nodes=nodes,
        waves=waves,
        triggers_armed=armed,
        triggers_armed_at=armed_at,
        triggers_armed_by=armed_by,
        trigger_titles=titles,
        firings=firings,
        overrides=overrides,
        signoffs=signoffs,
        path=path,
        decision=decision,
        closing=closing_checklist(state.window.get(closing_stage) if closing_stage else None, matched=matched),
        timeline=timeline,
        artifacts=artifacts,
        failed_steps=failed_steps,
        watch=summarise_watch(events, titles),
    )


#: What a log whose runbook is nowhere to be found is folded over: no stages, no triggers
#: (its nodes' probes, baselines and rollbacks are still folded; no stage can be passed).
_NO_RUNBOOK = Runbook(runbook=RunbookHeader(id="unknown-runbook", title="the runbook was not found"), stages=[])


#: A started node's outcome when no runbook was found: its stages are not known.
NOT_JUDGED = "not judged: the runbook was not found"


def _shipped(runbook_id: str) -> LoadedRunbook | None:
    """The shipped runbook of that id, if there is one (a log written by hand names one)."""
    shipped = shipped_runbooks().get(runbook_id)
    try:
        return load_runbook(shipped) if shipped is not None else None
    except BadInput:
        return None


def _fold(log: SessionLog, runbook: Runbook) -> CockpitState:
    """The state the session's events fold into, as replay folds them (the same Folder)."""
    header = log.header
    return fold(
        runbook,
        header.window_parameters(),
        header.hosts,
        log.events,
        operator=header.operator,
        signatures=log.signatures,
    )


class _Probed(_Model):
    """What a node's reachable probes said, first and last (the state keeps only the latest probe)."""

    first_driver: str | None = None
    driver: str | None = None
    gpus: int | None = None


def _probed(events: Sequence[Event]) -> dict[str, _Probed]:
    """Each node's reachable probes: an unreachable node's probe records gpu_count 0 (nothing was
    counted), so it says nothing about the GPUs and the last reachable probe's count stands."""
    probed: dict[str, _Probed] = {}
    for event in events:
        if event.kind is EventKind.PROBE and event.node and event.facts.reachable is not False:
            seen = probed.setdefault(event.node, _Probed())
            if event.facts.driver_version is not None:
                seen.first_driver = seen.first_driver or event.facts.driver_version
                seen.driver = event.facts.driver_version
            if event.facts.gpu_count is not None:
                seen.gpus = event.facts.gpu_count
    return probed


def node_outcome(
    progress: NodeProgress, state: CockpitState, probed: _Probed | None, wave: int | None, *, ended: bool
) -> NodeOutcome:
    """One node's line in the ticket, read from its folded progress over the runbook's node stages."""
    baseline = progress.baseline
    probed = probed or _Probed()
    gpus_before = baseline.gpu_count
    out = NodeOutcome(
        node=progress.node,
        wave=wave,
        driver_before=baseline.driver_version or probed.first_driver,
        driver_after=probed.driver,
        package_before=baseline.driver_package,
        gpus_before=gpus_before if isinstance(gpus_before, int) else None,
        gpus_after=probed.gpus,
    )
    passed = [sid for sid in state.node_stage_order if progress.stages[sid].closed]
    out.last_stage = passed[-1] if passed else None
    holds = _holds(progress, state)
    if progress.rollback is not None:
        ok = progress.rollback_ok
        out.outcome = "rolled back" if ok else ("rollback in progress" if ok is None else "rollback FAILED")
        if ok is False:
            stage = progress.rollback
            failed = [i.check for i in stage.items.values() if i.status == "failed"]
            steps = [(s.id, s.failure()) for s in stage.steps.values() if s.status == "failed"]
            out.rollback_why = why_rollback_failed(failed, steps)
    elif state.node_stage_order and len(passed) == len(state.node_stage_order):
        out.outcome = "upgraded"  # every node stage of the runbook passed (or overridden)
    elif holds:
        out.outcome = f"stopped: {max(holds)[1]}"  # the latest thing that holds it
    elif not state.node_stage_order and (wave is not None or progress.current != PENDING):
        out.outcome = NOT_JUDGED  # no runbook at hand: no stage to say how far the node went
    elif wave is not None or passed:
        out.outcome = "in progress" if not ended else f"incomplete (last gate: {out.last_stage or 'none'})"
    return out


def _holds(progress: NodeProgress, state: CockpitState) -> list[tuple[int, str]]:
    """What holds the node now, each with the seq that made it so: a step of a stage it has not
    passed whose latest run failed, or a trigger fired on it and not cleared. A step that
    succeeded on a retry, a stage passed, a trigger cleared: no longer hold it."""
    holds = [
        (step.finished_seq or 0, f"{stage.id}/{step.id} {'cancelled' if step.error_kind == 'cancelled' else 'failed'}")
        for stage in progress.stages.values()
        if not stage.closed
        for step in stage.steps.values()
        if step.status == "failed"
    ]
    holds += [
        (trigger.seq or 0, f"trigger {trigger.id} fired")
        for trigger in state.triggers.values()
        if trigger.status == "fired" and progress.node in trigger.fired_nodes
    ]
    return holds


def closing_checklist(stage: StageState | None, *, matched: bool) -> list[ChecklistEntry]:
    """The runbook's closing stage (its last window stage) as the fold left it: every item when the
    runbook is the one recorded, else only those the events touched (and no texts)."""
    if stage is None:
        return []
    entries = []
    for item in stage.items.values():
        if item.seq is None and not matched:
            continue
        entries.append(
            ChecklistEntry(
                item=item.id,
                text=item.text if matched else None,
                state=_checklist_state(item),
                by=item.by,
                at=item.at,
                note=item.evidence if item.evidence is not None and item.verify != "manual" else item.note,
            )
        )
    return entries


def _checklist_state(item: ItemState) -> str:
    """open / done / verified / failed / signed, as the ticket says an item's state."""
    if item.status == "failed":
        return "failed"
    if item.status != "done":
        return "open"
    return {"manual": "done", "signoff": "signed"}.get(item.verify, "verified")


def summarise_watch(events: Sequence[Event], titles: Mapping[str, str]) -> WatchSummary | None:
    """The latest ``cockpit watch`` over the window, its findings and who was told of them."""
    watch: WatchSummary | None = None
    by_seq: dict[int, WatchFinding] = {}
    for event in events:
        if event.kind is EventKind.WATCH_STARTED:
            if watch is None or not event.facts.resumed or watch.ended_at is not None:
                watch = WatchSummary(started_at=event.ts, started_by=event.actor, last_at=event.ts)
                by_seq = {}
            else:
                watch.runs += 1
            watch.until, watch.period_s = event.facts.until, event.facts.period_s
            watch.nodes = list(event.facts.nodes or [])
        elif watch is None:
            continue
        elif event.kind is EventKind.WATCH_FINDING:
            found = WatchFinding.of(
                event,
                trigger=event.trigger or "?",
                title=titles.get(event.trigger or ""),
                node=event.node,
                evidence=event.facts.evidence or "",
            )
            watch.findings.append(found)
            by_seq[event.seq] = found
        elif event.kind is EventKind.NOTIFICATION_SENT and event.facts.ok:
            about = by_seq.get(event.facts.about_seq or 0)
            if about is not None and event.facts.sink and event.facts.sink not in about.told:
                about.told.append(event.facts.sink)
        elif event.kind is EventKind.WATCH_ENDED:
            watch.ended_at = event.ts
        if watch is not None:
            watch.last_at = event.ts
    return watch
