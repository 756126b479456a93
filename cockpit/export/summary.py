"""What an approver needs from a change log, computed straight from its events.

:func:`summarise` reads the events alone (not the gating engine), so a ticket can
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
from cockpit.runbook.loader import LoadedRunbook
from cockpit.view.words import event_text, why_rollback_failed

#: Node stages of a driver change, in order; an outcome names the furthest one passed.
NODE_STAGES: tuple[str, ...] = ("drain", "record", "upgrade", "reboot", "smoke", "expand")
#: The window stage whose items form the closing checklist.
CLOSING_STAGE = "closing"
ROLLBACK_STAGE = "rollback"

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
    last_stage: str | None = None  # the furthest node stage whose gate passed (or was overridden)
    rollback_why: str | None = None  # a failed rollback: why, in plain words (view.words.why_rollback_failed)
    outcome: str = (
        "not started"  # upgraded / rolled back / rollback failed / stopped at ... / in progress / not started
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
    """The export view of a change log.

    ``runbook`` (the loaded runbook file) is used only if its sha256 is the one the
    session recorded: then triggers get their titles and the closing checklist lists
    every item, open ones included. Otherwise only what the events say is shown.
    """
    header = log.header
    events = log.events
    titles: dict[str, str] = {}
    closing_texts: dict[str, str] = {}
    rollback_checks: dict[str, str | None] = {}  # rollback item -> its built-in check
    matched = runbook is not None and runbook.sha256 == header.runbook_sha256
    if runbook is not None and matched:
        titles = {t.id: t.title for t in runbook.runbook.triggers}
        if runbook.runbook.rollback is not None:
            rollback_checks = {i.id: i.check for i in runbook.runbook.rollback.items}
        try:
            closing_texts = {i.id: i.text for i in runbook.runbook.stage(CLOSING_STAGE).items}
        except KeyError:
            closing_texts = {}

    nodes: dict[str, NodeOutcome] = {h: NodeOutcome(node=h) for h in header.hosts}
    passed: dict[str, set[str]] = {h: set() for h in header.hosts}
    # node -> what holds it now, oldest first: a step whose latest run failed ((stage, step) ->
    # "stage/step failed") or a trigger fired on it and not cleared (("trigger", id) -> ...). A
    # step that succeeds on a retry, a stage the node passed, a trigger cleared: no longer holds
    # it, so the outcome says where the node really is, not the first thing that went wrong.
    stopped: dict[str, dict[tuple[str, str], str]] = {}
    reviewers: list[str] = []
    waves: list[WaveRecord] = []
    firings: list[TriggerFiring] = []
    overrides: list[OverrideRecord] = []
    signoffs: list[SignoffRecord] = []
    timeline: list[TimelineEntry] = []
    artifacts: list[ArtifactRecord] = []
    failed_steps: list[TimelineEntry] = []
    closing: dict[str, ChecklistEntry] = {
        iid: ChecklistEntry(item=iid, text=text) for iid, text in closing_texts.items()
    }
    armed: list[str] = []
    armed_at: datetime | None = None
    armed_by: str | None = None
    path = decision = None
    started_at = ended_at = None
    ended_outcome: str | None = None
    rollback: dict[str, bool | None] = {}
    rollback_failed_items: dict[str, dict[str, bool]] = {}  # node -> rollback item -> failed (latest verdict)
    rollback_failed_steps: dict[str, dict[str, str | None]] = {}  # node -> rollback step -> its failure, None: ok

    def node(name: str | None) -> NodeOutcome | None:
        if name is None:
            return None
        if name not in nodes:
            nodes[name] = NodeOutcome(node=name)
            passed[name] = set()
        return nodes[name]

    def closing_item(event: Event) -> ChecklistEntry | None:
        if event.stage != CLOSING_STAGE or event.item is None:
            return None
        return closing.setdefault(event.item, ChecklistEntry(item=event.item, text=closing_texts.get(event.item)))

    for event in events:
        if event.actor not in (header.operator, "cockpit") and event.actor not in reviewers:
            reviewers.append(event.actor)
        if event.kind in TIMELINE_KINDS:
            timeline.append(TimelineEntry.of(event, kind=str(event.kind), text=event_text(event)))
        kind = event.kind
        if kind is EventKind.SESSION_STARTED and started_at is None:
            started_at = event.ts
        elif event.kind is EventKind.SESSION_ENDED:
            ended_at = event.ts
            ended_outcome = event.facts.outcome
        elif event.kind is EventKind.BASELINE_RECORDED and (n := node(event.node)):
            n.driver_before = event.facts.driver_version or n.driver_before
            n.package_before = event.facts.driver_package or n.package_before
            n.gpus_before = event.facts.gpu_count if event.facts.gpu_count is not None else n.gpus_before
        elif event.kind is EventKind.PROBE and (n := node(event.node)) and event.facts.reachable is not False:
            # an unreachable node's probe records gpu_count 0 (nothing was counted): it says
            # nothing about the GPUs, so the last reachable probe's count stands
            if event.facts.driver_version is not None:
                if n.driver_before is None:
                    n.driver_before = event.facts.driver_version
                n.driver_after = event.facts.driver_version
            if event.facts.gpu_count is not None:
                n.gpus_after = event.facts.gpu_count
        elif (
            kind in (EventKind.GATE_PASSED, EventKind.OVERRIDE) and event.node in passed and event.stage in NODE_STAGES
        ):
            passed[event.node].add(event.stage)
            holds = stopped.get(event.node, {})
            for key in [k for k in holds if k[0] == event.stage]:
                del holds[key]  # the node went past the stage: its failures there are behind it
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
            if event.stage == ROLLBACK_STAGE and event.node and event.step:
                failure = None  # as the fold says it (StepState.failure): exit status, else the error
                if event.facts.ok is False:
                    status = event.facts.exit_status
                    failure = f"exit {status}" if status is not None else (event.facts.error or "failed")
                rollback_failed_steps.setdefault(event.node, {})[event.step] = failure
            if event.facts.ok is False:
                failed_steps.append(TimelineEntry.of(event, kind=str(kind), text=event_text(event)))
            if event.node and event.stage and event.step and event.stage != ROLLBACK_STAGE:
                holds = stopped.setdefault(event.node, {})
                holds.pop((event.stage, event.step), None)  # its latest run decides (re-added last)
                if event.facts.ok is False:
                    how = "cancelled" if event.facts.error_kind == "cancelled" else "failed"
                    holds[(event.stage, event.step)] = f"{event.stage}/{event.step} {how}"
        elif event.kind is EventKind.WAVE_STARTED and event.wave is not None:
            members = list(event.facts.nodes or [])
            waves.append(WaveRecord(wave=event.wave, nodes=members, started_at=event.ts, seq=event.seq))
            for member in members:
                if (n := node(member)) and n.wave is None:
                    n.wave = event.wave
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
            if event.node:
                holds = stopped.setdefault(event.node, {})
                holds.pop(("trigger", event.trigger or "?"), None)
                holds[("trigger", event.trigger or "?")] = f"trigger {event.trigger} fired"
        elif kind is EventKind.TRIGGER_CLEARED:
            for firing in firings:
                if firing.trigger == event.trigger and firing.cleared_at is None:
                    firing.cleared_at, firing.cleared_by = event.ts, event.actor
                    firing.cleared_reason, firing.cleared_seq = event.reason, event.seq
            for holds in stopped.values():
                holds.pop(("trigger", event.trigger or "?"), None)
        elif kind is EventKind.SIGNOFF:
            signoffs.append(
                SignoffRecord.of(event, stage=event.stage, item=event.item, node=event.node, note=event.note)
            )
            if entry := closing_item(event):
                entry.state, entry.by, entry.at, entry.note = "signed", event.actor, event.ts, event.note or entry.note
        elif kind is EventKind.ITEM_TICKED:
            if entry := closing_item(event):
                entry.state, entry.by, entry.at, entry.note = "done", event.actor, event.ts, event.note
        elif event.kind is EventKind.ITEM_VERIFIED:
            if event.stage == ROLLBACK_STAGE and event.node and event.item:
                rollback_failed_items.setdefault(event.node, {})[event.item] = event.facts.ok is False
            if entry := closing_item(event):
                entry.state = "verified" if event.facts.ok else "failed"
                entry.by, entry.at = event.actor, event.ts
                entry.note = event.facts.evidence or event.note
        elif event.kind is EventKind.PATH_CHOSEN:
            path = {**event.facts.to_toml(), "actor": event.actor, "at": event.ts, "seq": event.seq}
        elif event.kind is EventKind.DECISION:
            decision = {**event.facts.to_toml(), "actor": event.actor, "at": event.ts, "seq": event.seq}
        elif kind is EventKind.ROLLBACK_STARTED and event.node:
            node(event.node)
            rollback[event.node] = None
            rollback_failed_items[event.node] = {}
            rollback_failed_steps[event.node] = {}
        elif event.kind is EventKind.ROLLBACK_FINISHED and event.node:
            rollback[event.node] = bool(event.facts.ok)
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

    for name, n in nodes.items():
        done = [s for s in NODE_STAGES if s in passed[name]]
        n.last_stage = done[-1] if done else None
        if name in rollback:
            ok = rollback[name]
            n.outcome = "rolled back" if ok else ("rollback in progress" if ok is None else "rollback FAILED")
            if ok is False:
                failed = [i for i, bad in rollback_failed_items.get(name, {}).items() if bad]
                steps = [(st, why) for st, why in rollback_failed_steps.get(name, {}).items() if why is not None]
                n.rollback_why = why_rollback_failed((rollback_checks.get(i) for i in failed), steps)
        elif "expand" in passed[name]:
            n.outcome = "upgraded"
        elif stopped.get(name):
            n.outcome = f"stopped: {list(stopped[name].values())[-1]}"  # the latest thing that holds it
        elif n.wave is not None or done:
            n.outcome = "in progress" if ended_at is None else f"incomplete (last gate: {n.last_stage or 'none'})"

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
        started_at=started_at or first_ts,
        ended_at=ended_at,
        ended_outcome=ended_outcome,
        last_event_at=last_ts,
        events=len(events),
        torn=log.torn,
        integrity=integrity if integrity is not None else log_integrity(log),
        nodes=list(nodes.values()),
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
        closing=list(closing.values()),
        timeline=timeline,
        artifacts=artifacts,
        failed_steps=failed_steps,
        watch=summarise_watch(events, titles),
    )


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
