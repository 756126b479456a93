"""Fold handlers for the window's history (:class:`~cockpit.engine.history.History`):
every event read is counted and its actor and time noted; what the fold applied is kept
as the records a ticket or a replay lists."""

from __future__ import annotations

from dataclasses import replace

from cockpit.changelog.events import (
    DecisionEvent,
    Event,
    EventKind,
    ItemVerifiedEvent,
    NotificationSentEvent,
    PathChosenEvent,
    ProbeEvent,
    SessionEndedEvent,
    StepFinishedEvent,
    TriggerClearedEvent,
    TriggerFiredEvent,
    TriggersArmedEvent,
    WatchEndedEvent,
    WatchFindingEvent,
    WatchStartedEvent,
    WaveStartedEvent,
)
from cockpit.engine.history import (
    TIMELINE_KINDS,
    Artifact,
    Cleared,
    Firing,
    History,
    Probed,
    WatchHeard,
    WatchRun,
    WaveStart,
)


def seen(history: History, event: Event, back: str | None, before_seq: int) -> None:
    """Every event read, applied or refused: counted, its actor and time noted (``back``:
    how far its time is before that of the event before it, seq ``before_seq``)."""
    history.events += 1
    if history.first_at is None:
        history.first_at = event.ts
    if event.actor not in history.actors:
        history.actors.append(event.actor)
    if back is not None:
        history.clock_went_back.append(f"seq {event.seq} is {back} before seq {before_seq}")
    if history.watch is not None:
        history.watch = replace(history.watch, last_at=event.ts)


#: The kinds the history keeps something of besides the timeline's (the rest: nothing to do).
_KEPT: frozenset[EventKind] = TIMELINE_KINDS | {
    EventKind.STEP_FINISHED,
    EventKind.ITEM_VERIFIED,
    EventKind.PROBE,
    EventKind.WATCH_STARTED,
    EventKind.WATCH_FINDING,
    EventKind.WATCH_ENDED,
    EventKind.NOTIFICATION_SENT,
}


def applied(history: History, event: Event) -> None:
    """An event the fold applied: what the window's history keeps of it."""
    kind = event.kind
    if kind not in _KEPT:  # most of a long log (checks, steps started, ticks): one set lookup
        return
    if kind in TIMELINE_KINDS:
        history.timeline.append(event)
    match event:
        case StepFinishedEvent():
            facts = event.facts
            if facts.artifact:
                history.artifacts.append(
                    Artifact(facts.artifact, event.seq, event.node, event.stage, event.step, facts.command, True)
                )
            if facts.ok is False:
                history.failed_steps.append(event)
        case ItemVerifiedEvent() if event.facts.artifact:  # a command item's long output
            history.artifacts.append(
                Artifact(
                    event.facts.artifact, event.seq, event.node, event.stage, event.item, event.facts.command, False
                )
            )
        case ProbeEvent() if event.node and event.facts.reachable is not False:
            _probed(history, event.node, event)
        case WaveStartedEvent() if event.wave is not None:
            history.waves.append(WaveStart(event.wave, tuple(event.facts.nodes or ()), event.ts, event.seq))
        case TriggersArmedEvent():
            history.armed = event
        case TriggerFiredEvent():
            evidence = event.facts.evidence or event.note or ""
            history.firings.append(Firing(event.seq, event.ts, event.actor, event.trigger or "?", event.node, evidence))
        case TriggerClearedEvent():
            clear = Cleared(event.seq, event.ts, event.actor, event.reason)
            history.firings = [
                replace(f, cleared=clear) if f.trigger == event.trigger and f.cleared is None else f
                for f in history.firings
            ]
        case PathChosenEvent():
            history.path = event
        case DecisionEvent():
            history.decision = event
        case SessionEndedEvent():
            history.ended = event
        case WatchStartedEvent():
            _watch_started(history, event)
        case WatchFindingEvent() if history.watch is not None:
            heard = WatchHeard(
                event.seq, event.ts, event.actor, event.trigger or "?", event.node, event.facts.evidence or ""
            )
            history.watch = replace(history.watch, findings=(*history.watch.findings, heard))
        case NotificationSentEvent() if history.watch is not None and event.facts.ok:
            _told(history, event)
        case WatchEndedEvent() if history.watch is not None:
            history.watch = replace(history.watch, ended_at=event.ts)
        case _:
            pass


def _probed(history: History, node: str, event: ProbeEvent) -> None:
    was = history.probed.get(node)
    driver, gpus = event.facts.driver_version, event.facts.gpu_count
    if was is not None and was.first_driver is not None and (driver, gpus) == (was.driver, was.gpus):
        return  # the same as the last reachable probe said (most probes of a long window)
    was = was or Probed()
    history.probed[node] = Probed(
        first_driver=was.first_driver or driver,
        driver=driver if driver is not None else was.driver,
        gpus=gpus if gpus is not None else was.gpus,
    )


def _watch_started(history: History, event: WatchStartedEvent) -> None:
    """A watch begins; a restart's ``resumed`` start goes on with the watch not yet ended."""
    watch = history.watch
    if watch is None or not event.facts.resumed or watch.ended_at is not None:
        history.watch = WatchRun(started=event, latest=event, last_at=event.ts)
    else:
        history.watch = replace(watch, latest=event, runs=watch.runs + 1, last_at=event.ts)


def _told(history: History, event: NotificationSentEvent) -> None:
    """A finding's notification delivered: its sink told (once)."""
    watch = history.watch
    sink, about = event.facts.sink, event.facts.about_seq or 0
    if watch is None or not sink:
        return
    findings = tuple(
        replace(f, told=(*f.told, sink)) if f.seq == about and sink not in f.told else f for f in watch.findings
    )
    history.watch = replace(watch, findings=findings)
