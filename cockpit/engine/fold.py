"""The fold: events, one at a time, into a :class:`~cockpit.engine.state.CockpitState`.

Pure: values in, values out. No I/O and no clock reads; everything the gate decides
is recomputed from the events alone, so the live session, the reviewer's view and
replay agree by construction. :class:`Folder` applies one event at a time (cheap per
event); :func:`fold` does a whole sequence.

The handlers come in groups, one object each over a shared
:class:`~cockpit.engine.fold_base.FoldContext`: the nodes (:mod:`.fold_nodes`), the
gates (:mod:`.fold_gates`) and the window (:mod:`.fold_window`). :meth:`Folder.apply`
picks the handler by the event's class, and mypy checks that every kind has one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import assert_never

from cockpit.changelog.events import (
    BaselineRecordedEvent,
    DecisionEvent,
    Event,
    GatePassedEvent,
    ItemTickedEvent,
    ItemVerifiedEvent,
    NodeObservedEvent,
    NoteEvent,
    NotificationSentEvent,
    OverrideEvent,
    PathChosenEvent,
    ProbeEvent,
    RollbackFinishedEvent,
    RollbackStartedEvent,
    SessionEndedEvent,
    SessionPausedEvent,
    SessionResumedEvent,
    SessionStartedEvent,
    SignoffEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TriggerClearedEvent,
    TriggerFiredEvent,
    TriggersArmedEvent,
    UnknownEvent,
    WatchEndedEvent,
    WatchFindingEvent,
    WatchStartedEvent,
    WaveDoneEvent,
    WaveHaltedEvent,
    WaveStartedEvent,
    clock_went_back,
    writer_problem,
)
from cockpit.changelog.reader import gc_paused
from cockpit.engine.fold_base import FoldContext, initial_state
from cockpit.engine.fold_gates import GateHandlers
from cockpit.engine.fold_history import applied, seen
from cockpit.engine.fold_nodes import NodeHandlers
from cockpit.engine.fold_window import WindowHandlers
from cockpit.engine.judge import rule_problem
from cockpit.engine.judge import signature_problem as judge_signature
from cockpit.engine.state import CockpitState
from cockpit.runbook.model import Runbook
from cockpit.runbook.placeholders import ParamValue

#: Who may write what is a pure function of (kind, actor, operator), and a log has a handful
#: of actors: judged once each instead of once per event (comparing two names normalises both,
#: half of the fold's time at 100,000 events).
_writer_problem = lru_cache(maxsize=4096)(writer_problem)


class Folder:
    """Folds events, one at a time, into a :class:`CockpitState`."""

    def __init__(
        self,
        runbook: Runbook,
        params: Mapping[str, ParamValue],
        hosts: Sequence[str],
        *,
        operator: str | None = None,
        signatures: Mapping[int, str] | None = None,
        judge: bool = True,
        _state: CockpitState | None = None,
        _finished: int = 0,
    ) -> None:
        """``signatures``: when signatures are required, seq -> the principal whose allowed
        key validly signed that event (verified before the fold, which stays pure; a live
        reader fills it as events arrive); None when they are not.

        ``judge``: every event is judged by the window's rules before it is applied
        (:mod:`cockpit.engine.judge`), signed or not: the live session asked the same rules
        before writing it, so a log it wrote passes, and one written by hand counts only
        as far as the rules allow. False only to show what a log says unjudged (a test)."""
        self.runbook = runbook
        self.signatures = signatures
        self.judge = judge
        fresh = _state is None
        state = initial_state(runbook, params, hosts, operator) if _state is None else _state
        self._ctx = FoldContext(runbook, state, _finished)
        self._ctx.signatures = signatures
        self._nodes = NodeHandlers(self._ctx)
        self._gates = GateHandlers(self._ctx)
        self._window = WindowHandlers(self._ctx)
        if fresh:
            self._ctx.maybe_open_closing()

    @property
    def state(self) -> CockpitState:
        return self._ctx.state

    def copy(self) -> Folder:
        """An independent folder at the same position (for replay checkpoints)."""
        return Folder(
            self.runbook,
            {},
            [],
            signatures=self.signatures,
            judge=self.judge,
            _state=self.state.copy(),
            _finished=self._ctx.finished,
        )

    snapshot = copy

    def apply_all(self, events: Iterable[Event]) -> CockpitState:
        for event in events:
            self.apply(event)
        return self.state

    def apply(self, event: Event) -> None:
        st = self.state
        back = clock_went_back(st.last_at, event.ts)
        if back is not None:  # said, never fatal: the times of the window around it are not to be trusted
            self._ctx.anomaly(event, f"its time is {back} before seq {st.last_seq}'s: a clock went back")
        seen(st.history, event, back, st.last_seq)
        st.last_seq = event.seq
        st.last_at = event.ts
        if self._written_by_someone_not_allowed(event):
            return
        if not isinstance(event, SignoffEvent) and (why := self._refusal(event)) is not None:
            self._ctx.refuse(event, why)
            return
        match event:
            case SessionStartedEvent():
                self._window.session_started(event)
            case SessionResumedEvent():
                self._nodes.session_resumed(event)
            case SessionPausedEvent():
                self._window.session_paused(event)
            case SessionEndedEvent():
                self._window.session_ended(event)
            case ProbeEvent():
                self._nodes.probe(event)
            case BaselineRecordedEvent():
                self._nodes.baseline(event)
            case StepStartedEvent():
                self._nodes.step_started(event)
            case StepFinishedEvent():
                self._nodes.step_finished(event)
            case ItemTickedEvent():
                self._gates.item_ticked(event)
            case ItemVerifiedEvent():
                self._gates.item_verified(event)
            case SignoffEvent():
                self._gates.signoff(event, self._rules(event))
            case GatePassedEvent():
                self._gates.gate_passed(event)
            case OverrideEvent():
                self._gates.override(event)
            case TriggersArmedEvent():
                self._window.triggers_armed(event)
            case TriggerFiredEvent():
                self._window.trigger_fired(event)
            case TriggerClearedEvent():
                self._window.trigger_cleared(event)
            case WaveStartedEvent():
                self._gates.wave_started(event)
            case WaveHaltedEvent() | WaveDoneEvent():
                self._gates.wave_ended(event)
            case PathChosenEvent():
                self._window.path_chosen(event)
            case DecisionEvent():
                self._gates.decision(event)
            case RollbackStartedEvent():
                self._nodes.rollback_started(event)
            case RollbackFinishedEvent():
                self._nodes.rollback_finished(event)
            case NoteEvent():
                self._window.note(event)
            case NodeObservedEvent():
                self._nodes.node_observed(event)
            case NotificationSentEvent():
                self._window.notification_sent(event)
            case WatchStartedEvent():
                self._window.watch_started(event)
            case WatchFindingEvent():
                self._window.watch_finding(event)
            case WatchEndedEvent():
                self._window.watch_ended(event)
            case UnknownEvent():
                self._window.unknown(event)
            case _:
                assert_never(event)
        applied(st.history, event)

    def _written_by_someone_not_allowed(self, event: Event) -> bool:
        """An event its actor may not write (a reviewer's gate pass, the cockpit's sign-off)
        is refused and left out; a sign-off goes on to be recorded as not counting."""
        operator = self.state.operator
        if operator is None or isinstance(event, UnknownEvent | SignoffEvent):
            return False
        problem = _writer_problem(event.kind, event.actor, operator)
        if problem is None:
            return False
        self._ctx.refuse(event, f"{problem}; left out")
        return True

    def _refusal(self, event: Event) -> str | None:
        """Why ``event`` counts for nothing: unsigned when the site requires signatures, or
        refused by the window's rules at this point (:mod:`cockpit.engine.judge`)."""
        if isinstance(event, UnknownEvent):
            return None
        unsigned = judge_signature(event, self.state.operator, self.signatures)
        return unsigned if unsigned is not None else self._rules(event)

    def _rules(self, event: Event) -> str | None:
        operator = self.state.operator
        if operator is None or not self.judge:
            return None  # a fold with no operator (a runbook's dry run) judges nobody
        return rule_problem(self.state, self.runbook, event, operator)


def fold(
    runbook: Runbook,
    params: Mapping[str, ParamValue],
    hosts: Sequence[str],
    events: Iterable[Event],
    *,
    operator: str | None = None,
    signatures: Mapping[int, str] | None = None,
    judge: bool = True,
) -> CockpitState:
    """The state after ``events``, folded from scratch (``judge``: see :class:`Folder`)."""
    # a fold makes many objects and no garbage: the cyclic collector's passes over a
    # 2,000-node state cost more than the fold itself
    with gc_paused():
        folder = Folder(runbook, params, hosts, operator=operator, signatures=signatures, judge=judge)
        return folder.apply_all(events)
