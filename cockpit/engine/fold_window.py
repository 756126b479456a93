"""Fold handlers for the window as a whole: the session's life, the rollback triggers, the
chosen path, notes, and events of a kind this version does not know."""

from __future__ import annotations

from cockpit.changelog.events import (
    NoteEvent,
    NotificationSentEvent,
    PathChosenEvent,
    SessionEndedEvent,
    SessionPausedEvent,
    SessionStartedEvent,
    TriggerClearedEvent,
    TriggerFiredEvent,
    TriggersArmedEvent,
    UnknownEvent,
    WatchEndedEvent,
    WatchFindingEvent,
    WatchStartedEvent,
)
from cockpit.engine.fold_base import HandlerGroup
from cockpit.engine.state import NoteRecord, PathRecord, WatchEndedRecord, WatchFindingRecord, WatchRecord


class WindowHandlers(HandlerGroup):
    """The session's start, pause and end, the triggers, the path, notes."""

    def session_started(self, event: SessionStartedEvent) -> None:
        st = self.ctx.state
        st.started_at = st.started_at or event.ts
        if st.operator is None:
            st.operator = event.facts.operator or event.actor

    def session_paused(self, event: SessionPausedEvent) -> None:
        self.ctx.state.paused = True

    def session_ended(self, event: SessionEndedEvent) -> None:
        self.ctx.state.ended_at = event.ts

    def triggers_armed(self, event: TriggersArmedEvent) -> None:
        st = self.ctx.state
        st.armed = True
        st.armed_seq = event.seq
        named = event.facts.triggers
        for tid, trig in st.triggers.items():
            if named is not None and tid not in named:
                continue
            if trig.status == "disarmed":
                trig.status = "armed"
                trig.seq = event.seq
                trig.at = event.ts

    def trigger_fired(self, event: TriggerFiredEvent | WatchFindingEvent) -> None:
        trig = self.ctx.trigger(event)
        if trig is None:
            return
        evidence = event.facts.evidence or event.note or event.reason or ""
        trig.status = "fired"
        trig.node = event.node
        trig.evidence = evidence
        trig.seq = event.seq
        trig.at = event.ts
        trig.fired_by = event.actor
        trig.fired_nodes[event.node or ""] = evidence
        trig.fire_count += 1
        self.ctx.reviewer(event.actor)

    def trigger_cleared(self, event: TriggerClearedEvent) -> None:
        trig = self.ctx.trigger(event)
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

    def path_chosen(self, event: PathChosenEvent) -> None:
        self.ctx.state.path = PathRecord.of(event, facts=event.facts)

    def note(self, event: NoteEvent) -> None:
        st = self.ctx.state
        st.notes.append(NoteRecord.of(event, node=event.node, text=event.note or ""))
        self.ctx.reviewer(event.actor)

    def notification_sent(self, event: NotificationSentEvent) -> None:
        # nothing of the window changes; a delivery that ended is not made again (one the
        # cockpit abandoned when it stopped is: the next cockpit sends it)
        facts = event.facts
        if facts.subject and facts.sink and not facts.abandoned:
            self.ctx.state.notified.add((facts.subject, facts.sink))

    def watch_started(self, event: WatchStartedEvent) -> None:
        st = self.ctx.state
        # a restart's ``resumed`` start goes on with the watch begun at ``first_seq``
        going_on = event.facts.resumed and st.watch is not None and st.watch_ended is None
        first = st.watch.first_seq if going_on and st.watch is not None else event.seq
        st.watch = WatchRecord.of(event, facts=event.facts, first_seq=first)
        st.watch_ended = None

    def watch_finding(self, event: WatchFindingEvent) -> None:
        # a firing like any other (so the evaluators do not report it again, and a clear
        # re-arms it), and one of the watch's findings for the ticket
        self.trigger_fired(event)
        self.ctx.state.watch_findings.append(
            WatchFindingRecord.of(
                event, trigger=event.trigger or "", node=event.node, evidence=event.facts.evidence or ""
            )
        )

    def watch_ended(self, event: WatchEndedEvent) -> None:
        self.ctx.state.watch_ended = WatchEndedRecord.of(event, facts=event.facts)

    def unknown(self, event: UnknownEvent) -> None:
        # a newer cockpit's event: nothing here knows what it changes, so it changes
        # nothing, and the operator is told it is there
        self.ctx.anomaly(event, "a kind this version does not know (written by a newer cockpit?): ignored")
