"""What an approver needs from a change log: a projection of the one folded state.

:func:`summarise` folds the events with the gating engine's :class:`~cockpit.engine.fold.Folder`
(the fold every screen and replay use) over the runbook's stages; :func:`project` reads the
whole ticket from that state: the nodes' outcomes and the closing checklist from where the
state stands, the timeline, firings, overrides, sign-offs, waves, artifacts and refused
events from what it kept on the way (:class:`~cockpit.engine.history.History`); it reads no
event. A ticket can be written for any change log, complete or not. With the runbook the
session used (checked by its sha256), it also gives trigger titles and the closing
checklist's full item list, including items nobody touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cockpit.changelog.events import DecisionEvent, Event, PathChosenEvent
from cockpit.changelog.header import SessionHeader
from cockpit.changelog.journal import SessionLog, TornTail
from cockpit.changelog.verify import log_integrity
from cockpit.engine.fold import fold
from cockpit.engine.history import Firing, Probed, WatchRun
from cockpit.engine.judge import refused_words
from cockpit.engine.state import PENDING, CockpitState, ItemState, NodeProgress, StageState
from cockpit.errors import BadInput
from cockpit.runbook.loader import LoadedRunbook, load_runbook, shipped_runbooks
from cockpit.runbook.model import Runbook, RunbookHeader
from cockpit.view.words import event_text, why_rollback_failed


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: A node on which nothing ran for the window (its wave may have started): nothing of it changed.
NOT_STARTED = "not started"


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
        NOT_STARTED  # upgraded / rolled back / rollback FAILED / stopped: ... / in progress / not judged / ...
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


class RefusedRecord(_Model):
    """An event in the log the fold refused (the window's rules, or a signature the site
    requires): it stays in the log and counts for nothing."""

    seq: int
    kind: str
    actor: str
    why: str


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
    #: the events were judged by the rules of the runbook the session ran (False: it was not at hand)
    judged: bool = True
    #: events the fold refused, in log order (none counted: the rest of the ticket leaves them out)
    refused: list[RefusedRecord] = Field(default_factory=list)
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


class _LogsOwn:
    """The signatures the log's reader kept (:attr:`SessionLog.signatures`)."""


#: :func:`summarise`'s default: the sign-offs' signatures as the log's reader found them
LOGS_OWN = _LogsOwn()


def summarise(
    log: SessionLog,
    runbook: LoadedRunbook | None = None,
    integrity: str | None = None,
    *,
    signatures: Mapping[int, str] | _LogsOwn | None = LOGS_OWN,
) -> ChangeSummary:
    """The export view of a change log: its events folded by the one fold, then projected.

    The events are folded by :class:`~cockpit.engine.fold.Folder` (as replay folds them)
    over ``runbook``, else the shipped runbook of the recorded id, else none (no stages: no
    node can have passed one), judged by the rules only when that runbook is the one the
    session recorded; :func:`project` then reads the ticket from that state alone.
    ``signatures``: seq -> the principal whose allowed key signed it, as the verification
    found them, when the site requires signatures (None when it does not); by default the
    log's own (:attr:`SessionLog.signatures`).
    ``runbook`` gives titles and the closing checklist's full item list only if its sha256
    is the one the session recorded; otherwise only what the events say is shown.
    """
    header = log.header
    structure = runbook if runbook is not None else _shipped(header.runbook_id)
    book = structure.runbook if structure is not None else _NO_RUNBOOK
    # judged by the rules of the runbook the session ran, never by another's (as replay and
    # the first line's judged_integrity): a runbook edited since would refuse what it never saw
    judge = structure is not None and structure.sha256 == header.runbook_sha256
    return project(
        header,
        _fold(log, book, judge=judge, signatures=log.signatures if isinstance(signatures, _LogsOwn) else signatures),
        book,
        matched=runbook is not None and runbook.sha256 == header.runbook_sha256,
        torn=log.torn,
        integrity=integrity if integrity is not None else log_integrity(log),
        judged=judge,
    )


def project(
    header: SessionHeader,
    state: CockpitState,
    book: Runbook,
    *,
    matched: bool,
    torn: TornTail | None = None,
    integrity: str = "",
    judged: bool = True,
) -> ChangeSummary:
    """The ticket's content as a projection of a folded state: values in, values out.

    ``state`` is what the one fold made of the log's events over ``book`` (its nodes, gates
    and triggers where they stand, and :attr:`~cockpit.engine.state.CockpitState.history`,
    what happened on the way); ``matched``: ``book`` is the runbook the session recorded
    (its trigger titles and untouched closing items are then shown); ``integrity``: the
    verification's line, to which the refused events' words are added (the ticket's first
    line says them, as every screen's header does). Nothing here reads an
    event the fold did not keep: a refused event is listed as refused, and counts for
    nothing else (no override, firing or timeline line of its own). ``judged``: the fold
    judged the events by the rules of the runbook the session ran (else it had not that runbook).
    """
    history = state.history
    titles: dict[str, str] = {t.id: t.title for t in book.triggers} if matched else {}
    closing_stage = book.closing_stages[-1].id if book.closing_stages else None
    waves = [WaveRecord(wave=w.wave, nodes=list(w.nodes), started_at=w.at, seq=w.seq) for w in history.waves]
    first_wave = {member: w.wave for w in reversed(waves) for member in w.nodes}
    ended = state.ended_at is not None
    nodes = [
        node_outcome(progress, state, history.probed.get(name), first_wave.get(name), ended=ended)
        for name, progress in state.nodes.items()
    ]
    armed = history.armed
    ended_event = history.ended
    return ChangeSummary(
        clock_went_back=list(history.clock_went_back),
        change_id=header.change_id,
        runbook_id=header.runbook_id,
        runbook_sha256=header.runbook_sha256,
        runbook_path=header.runbook_path,
        runbook_matched=matched,
        operator=header.operator,
        reviewers=[a for a in history.actors if a not in (header.operator, "cockpit")],
        hosts=list(header.hosts),
        parameters=dict(header.parameters),
        tool_version=header.tool_version,
        created_at=header.created_at,
        started_at=state.started_at or history.first_at or header.created_at,
        ended_at=state.ended_at,
        ended_outcome=ended_event.facts.outcome if ended_event is not None else None,
        last_event_at=state.last_at or header.created_at,
        events=history.events,
        torn=torn,
        integrity="; ".join(x for x in (integrity, refused_words(state.refused)) if x),
        judged=judged,
        refused=[RefusedRecord(seq=r.seq, kind=r.kind, actor=r.actor, why=r.why) for r in state.refused],
        nodes=nodes,
        waves=waves,
        triggers_armed=(list(armed.facts.triggers or []) or sorted(titles)) if armed is not None else [],
        triggers_armed_at=armed.ts if armed is not None else None,
        triggers_armed_by=armed.actor if armed is not None else None,
        trigger_titles=titles,
        firings=[_firing(f, titles) for f in history.firings],
        overrides=[
            OverrideRecord(
                seq=o.seq,
                at=o.at,
                actor=o.actor,
                stage=o.stage or None,
                node=o.node,
                reason=o.reason,
                blocked_by=list(o.blocked_by),
            )
            for o in state.overrides
        ],
        signoffs=[
            SignoffRecord(seq=x.seq, at=x.at, actor=x.actor, stage=x.stage, item=x.item, node=x.node, note=x.note)
            for x in state.signoffs
        ],
        path=_recorded(history.path),
        decision=_recorded(history.decision),
        closing=closing_checklist(state.window.get(closing_stage) if closing_stage else None, matched=matched),
        timeline=[_entry(e) for e in history.timeline],
        artifacts=[
            ArtifactRecord(
                sha256=a.sha256,
                seq=a.seq,
                node=a.node,
                stage=a.stage,
                step=a.step,
                what=a.command or ("step output" if a.of_step else "check output"),
            )
            for a in history.artifacts
        ],
        failed_steps=[_entry(e) for e in history.failed_steps],
        watch=_watch(history.watch, titles),
    )


def _entry(event: Event) -> TimelineEntry:
    """An event of the window's history, in the view's words."""
    return TimelineEntry(seq=event.seq, at=event.ts, actor=event.actor, kind=str(event.kind), text=event_text(event))


def _recorded(event: PathChosenEvent | DecisionEvent | None) -> dict[str, Any] | None:
    """A path or decision as the ticket shows it: its facts, who recorded it, when, at which seq."""
    if event is None:
        return None
    return {**event.facts.to_toml(), "actor": event.actor, "at": event.ts, "seq": event.seq}


def _firing(firing: Firing, titles: Mapping[str, str]) -> TriggerFiring:
    clear = firing.cleared
    return TriggerFiring(
        seq=firing.seq,
        at=firing.at,
        actor=firing.actor,
        trigger=firing.trigger,
        title=titles.get(firing.trigger),
        node=firing.node,
        evidence=firing.evidence,
        cleared_at=clear.at if clear else None,
        cleared_by=clear.actor if clear else None,
        cleared_reason=clear.reason if clear else None,
        cleared_seq=clear.seq if clear else None,
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


def _fold(log: SessionLog, runbook: Runbook, *, judge: bool, signatures: Mapping[int, str] | None) -> CockpitState:
    """The state the session's events fold into, as replay folds them (the same Folder)."""
    header = log.header
    return fold(
        runbook,
        header.window_parameters(),
        header.hosts,
        log.events,
        operator=header.operator,
        signatures=signatures,
        judge=judge,
    )


def node_outcome(
    progress: NodeProgress, state: CockpitState, probed: Probed | None, wave: int | None, *, ended: bool
) -> NodeOutcome:
    """One node's line in the ticket, read from its folded progress over the runbook's node stages."""
    baseline = progress.baseline
    probed = probed or Probed()
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
    if not state.node_stage_order and (wave is not None or progress.current != PENDING or progress.rollback):
        out.outcome = NOT_JUDGED  # no runbook at hand: no stage, no rollback check to say how far the node went
    elif progress.rollback is not None:
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
    elif not _begun(progress, state):
        pass  # its wave may have started, but nothing ran on it: not started, whatever the window did
    elif wave is not None or passed:
        where = f"stopped in {progress.current}, " if progress.current in state.node_stage_order else ""
        out.outcome = "in progress" if not ended else f"incomplete ({where}last gate: {out.last_stage or 'none'})"
    return out


#: The outcomes of a node the window leaves as it should: changed through, put back, or untouched.
SETTLED = frozenset({"upgraded", "rolled back", NOT_STARTED})


def left_mid_change(state: CockpitState) -> list[str]:
    """One line per node a window ended now would leave mid-change (begun, not through its
    stages nor rolled back), in the words its ticket will use: what ``cockpit end`` and the
    screen's end dialog say before the window is ended."""
    first_wave = {member: w.wave for w in reversed(state.history.waves) for member in w.nodes}
    lines = []
    for name, progress in state.nodes.items():
        said = node_outcome(progress, state, None, first_wave.get(name), ended=True).outcome
        if said not in SETTLED and _begun(progress, state):
            lines.append(f"{name} left mid-change: {said}")
    return lines


def _begun(progress: NodeProgress, state: CockpitState) -> bool:
    """Whether the window did anything with the node (:attr:`NodeProgress.begun`), or a trigger
    fired on it (cleared since, or it would hold the node): both say it was in the change."""
    return progress.begun or any(f.node == progress.node for f in state.history.firings)


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
    """open / done / verified / failed / signed / not applicable, as the ticket says an item's state."""
    if item.status == "failed":
        return "failed"
    if item.status == "skipped":
        return "not applicable"  # its condition left it out of this window: never open
    if item.status != "done":
        return "open"
    return {"manual": "done", "signoff": "signed"}.get(item.verify, "verified")


def _watch(run: WatchRun | None, titles: Mapping[str, str]) -> WatchSummary | None:
    """The latest ``cockpit watch`` over the window, its findings and who was told of them."""
    if run is None:
        return None
    latest = run.latest.facts
    return WatchSummary(
        started_at=run.started.ts,
        started_by=run.started.actor,
        until=latest.until,
        period_s=latest.period_s,
        nodes=list(latest.nodes or []),
        runs=run.runs,
        ended_at=run.ended_at,
        last_at=run.last_at,
        findings=[
            WatchFinding(
                seq=f.seq,
                at=f.at,
                actor=f.actor,
                trigger=f.trigger,
                title=titles.get(f.trigger),
                node=f.node,
                evidence=f.evidence,
                told=list(f.told),
            )
            for f in run.findings
        ],
    )
