"""What the session tells people beyond its screen, and the record of what it told.

After each event is folded (its own or another process's), :class:`SessionNotices` turns
what happened into :class:`~cockpit.notify.bodies.Notice` s: a trigger fired (in the window
or found by ``cockpit watch``), a step failed, a gate now waits only for a second person's
sign-off, a wave is done, the window ended. The :class:`~cockpit.notify.delivery.Notifier`
delivers them in the background; each delivery's end is recorded as a
``notification-sent`` event (the sink's name, the status, the tries; never the URL).

Each notice has a subject unique within its window (the event's seq, or the wave, or the
gate and the seq it was entered at); a subject the log already records as sent is not sent
again, and what was already true when the session opened (a wave done before a resume) is
not news.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from cockpit.changelog.events import Event, EventKind, wave_number
from cockpit.changelog.facts import NotificationSentFacts
from cockpit.engine.gates import gate_blockers
from cockpit.engine.state import FINISHED, SYSTEM_ACTOR, CockpitState, StageState
from cockpit.notify.bodies import Notice, NoticeKind
from cockpit.notify.delivery import Delivery, Notifier
from cockpit.runbook.model import Verify
from cockpit.view.inert import inert
from cockpit.view.words import event_text

#: Events after which a gate may have come to wait for a sign-off, or a wave be done.
_GATE_KINDS = frozenset(
    {
        EventKind.ITEM_TICKED,
        EventKind.ITEM_VERIFIED,
        EventKind.STEP_FINISHED,
        EventKind.GATE_PASSED,
        EventKind.OVERRIDE,
        EventKind.WAVE_STARTED,
        EventKind.ROLLBACK_FINISHED,
        EventKind.SIGNOFF,
    }
)


def event_notice(event: Event, change_id: str) -> Notice | None:
    """The notice an event is, on its own (None: not one people are told of)."""
    text = inert(event_text(event))
    node = event.node
    if event.kind is EventKind.TRIGGER_FIRED:
        title = f"{change_id}: trigger {event.trigger} fired" + (f" on {node}" if node else "")
        kind = NoticeKind.TRIGGER_FIRED
    elif event.kind is EventKind.WATCH_FINDING:
        title = f"{change_id}: after the window, trigger {event.trigger} fired" + (f" on {node}" if node else "")
        kind = NoticeKind.WATCH_FINDING
    elif event.kind is EventKind.STEP_FINISHED:
        if event.facts.ok is not False or event.facts.error_kind == "cancelled":
            return None  # a person's own cancel is no news to them
        title = f"{change_id}: step {event.stage}/{event.step} failed" + (f" on {node}" if node else "")
        kind = NoticeKind.STEP_FAILED
    elif event.kind is EventKind.SESSION_ENDED:
        title = f"{change_id}: the change window ended" + (f" ({event.facts.outcome})" if event.facts.outcome else "")
        kind = NoticeKind.WINDOW_ENDED
    else:
        return None
    return Notice(
        kind=kind,
        change_id=change_id,
        subject=f"{kind}:{event.seq}",
        title=inert(title),
        text=text,
        at=event.ts,
        seq=event.seq,
        node=node,
    )


def _waits_for_signoff(stage: StageState) -> list[str]:
    """The items an active stage's gate waits on when a second person's sign-off is all it
    waits on (else empty)."""
    if stage.status != "active":
        return []
    blockers = gate_blockers(stage)
    waiting = [i.id for i in stage.items.values() if i.verify == Verify.SIGNOFF and i.status == "needs-signoff"]
    return waiting if waiting and len(blockers) == len(waiting) else []


def state_notices(
    state: CockpitState, change_id: str, at: datetime, nodes: Iterable[str] | None = None
) -> list[Notice]:
    """What the folded state now says that people wait on: gates waiting only for a second
    person's sign-off (the window's, and ``nodes``' current stages; None: every node's) and
    the waves whose every node is through."""
    out: list[Notice] = []
    stages: list[StageState] = list(state.window.values())
    names = state.nodes if nodes is None else [n for n in nodes if n in state.nodes]
    for name in names:
        progress = state.nodes[name]
        stage = progress.stages.get(progress.current)
        if stage is not None:
            stages.append(stage)
    for stage in stages:
        items = _waits_for_signoff(stage)
        if not items:
            continue
        where = f" on {stage.node}" if stage.node else ""
        texts = "; ".join(stage.items[i].text for i in items)
        out.append(
            Notice(
                kind=NoticeKind.SIGNOFF_WAITING,
                change_id=change_id,
                subject=f"signoff-waiting:{stage.id}:{stage.node or ''}:{stage.entered_seq}",
                title=inert(f"{change_id}: the gate of {stage.id}{where} waits for a second person's sign-off"),
                text=inert(f"{texts} (not the operator, {state.operator}: a second person signs it)"),
                at=at,
                seq=state.last_seq,
                node=stage.node,
            )
        )
    for wave in sorted(state.wave_started_seq):
        members = state.waves[wave] if 0 <= wave < len(state.waves) else []
        if not members or any(state.nodes[n].current not in FINISHED for n in members if n in state.nodes):
            continue
        outcomes: dict[str, int] = {}
        for n in members:
            outcomes[state.nodes[n].current] = outcomes.get(state.nodes[n].current, 0) + 1
        said = ", ".join(f"{count} {what}" for what, count in sorted(outcomes.items()))
        out.append(
            Notice(
                kind=NoticeKind.WAVE_DONE,
                change_id=change_id,
                subject=f"wave-done:{wave}",
                title=f"{change_id}: wave {wave_number(wave)} done",
                text=inert(f"wave {wave_number(wave)} ({len(members)} node(s)): {said}"),
                at=at,
                seq=state.last_seq,
            )
        )
    return out


class SessionNotices:
    """Feeds a session's events to a :class:`Notifier` and records each delivery.

    ``record`` appends a ``notification-sent`` event (the recorder's, in the cockpit's name);
    ``state`` is the folded state after each event."""

    def __init__(
        self,
        notifier: Notifier,
        *,
        change_id: str,
        state: Callable[[], CockpitState],
        record: Callable[..., Event],
        acknowledged: Callable[[int], bool] | None = None,
    ) -> None:
        self.notifier = notifier
        #: whether an event is acknowledged (fsync'd): a notice about one that is not yet waits
        #: for :meth:`synced` (nothing leaves the cockpit about an event a crash could still lose)
        self._acknowledged = acknowledged
        self._held: list[tuple[int, Notice]] = []
        self.change_id = change_id
        self._state = state
        self._record = record
        notifier.on_result = self.recorded
        current = state()
        for subject, sink_name in current.notified:  # what the log records as delivered (or given up)
            notifier.mark_sent(subject, sink_name)
        # what is already true when the session opens is not news (nor sent again after a resume)
        for notice in state_notices(current, change_id, current.last_at or datetime.now(UTC)):
            for sink in notifier.sinks:
                notifier.mark_sent(notice.subject, sink.name)

    def on_event(self, event: Event) -> None:
        """After ``event`` is folded: send what it is, and what the state now waits on."""
        if not self.notifier.sinks or event.kind is EventKind.NOTIFICATION_SENT:
            return
        found = [] if (notice := event_notice(event, self.change_id)) is None else [notice]
        if event.kind in _GATE_KINDS:  # what the state waits on now, read now
            found += state_notices(self._state(), self.change_id, event.ts, [event.node] if event.node else [])
        if self._acknowledged is not None and not self._acknowledged(event.seq):
            self._held += [(event.seq, n) for n in found]
            return
        for n in found:
            self.notifier.send(n)

    def synced(self, seq: int) -> None:
        """The change log acknowledged its events up to ``seq``: their notices go out, in order."""
        ready = [n for s, n in self._held if s <= seq]
        self._held = [(s, n) for s, n in self._held if s > seq]
        for n in ready:
            self.notifier.send(n)

    def recorded(self, delivery: Delivery) -> None:
        """Record how a delivery went: what, to which sink, the status and the tries."""
        notice = delivery.notice
        sink = next((s for s in self.notifier.sinks if s.name == delivery.sink), None)
        self._record(
            EventKind.NOTIFICATION_SENT,
            actor=SYSTEM_ACTOR,
            node=notice.node,
            facts=NotificationSentFacts(
                notice=str(notice.kind),
                subject=notice.subject,
                about_seq=notice.seq,
                sink=delivery.sink,
                format=sink.settings.format if sink is not None else None,
                status=delivery.status,
                attempts=delivery.attempts,
                ok=delivery.ok,
                abandoned=delivery.abandoned or None,
            ),
        )
