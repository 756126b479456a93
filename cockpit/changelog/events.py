"""Events: every fact of a change window, in the order it happened.

The change log is a sequence of :data:`Event`. The session engine appends them
(to disk first, then shows them); the gating engine, the trigger evaluators, the
reviewer's view, replay and export all fold the same sequence. An event is
immutable once written.

:data:`Event` is a union with one class per :class:`EventKind`, told apart by
``kind``; each class types its ``facts`` with the kind's model from
:mod:`cockpit.changelog.facts`. So ``if event.kind is EventKind.PROBE:`` narrows
``event`` to :class:`ProbeEvent` and ``event.facts`` to
:class:`~cockpit.changelog.facts.ProbeFacts` (or use ``isinstance``/``match``).

A kind this version does not know (a log from a newer cockpit) reads as an
:class:`UnknownEvent` that keeps the kind and the facts as written; the fold notes
it as an anomaly and goes on.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, model_validator

from cockpit.changelog.facts import (
    BaselineFacts,
    DecisionFacts,
    Facts,
    ItemVerifiedFacts,
    NodeObservedFacts,
    NoFacts,
    NotificationSentFacts,
    OverrideFacts,
    PathChosenFacts,
    ProbeFacts,
    RollbackFinishedFacts,
    SessionEndedFacts,
    SessionResumedFacts,
    SessionStartedFacts,
    StepFinishedFacts,
    StepStartedFacts,
    TriggerFiredFacts,
    TriggersArmedFacts,
    WatchEndedFacts,
    WatchFindingFacts,
    WatchStartedFacts,
    WaveEndedFacts,
    WaveStartedFacts,
)
from cockpit.changelog.identity import is_system, same_person

SCHEMA_VERSION = 2  # 2: the hash chain and signatures (changelog.chain)


class EventKind(StrEnum):
    SESSION_STARTED = "session-started"
    SESSION_RESUMED = "session-resumed"
    SESSION_PAUSED = "session-paused"
    SESSION_ENDED = "session-ended"
    PROBE = "probe"  # node; only recorded when the summary changed
    BASELINE_RECORDED = "baseline-recorded"  # node
    STEP_STARTED = "step-started"  # stage, step, node
    STEP_FINISHED = "step-finished"  # stage, step, node
    ITEM_TICKED = "item-ticked"  # stage, item, node; note (manual tick by a person)
    ITEM_VERIFIED = "item-verified"  # stage, item, node
    SIGNOFF = "signoff"  # stage, item (None = the whole gate), node; actor is the reviewer
    GATE_PASSED = "gate-passed"  # stage, node
    OVERRIDE = "override"  # stage, node, reason
    TRIGGERS_ARMED = "triggers-armed"
    TRIGGER_FIRED = "trigger-fired"  # trigger, node
    TRIGGER_CLEARED = "trigger-cleared"  # trigger, reason
    WAVE_STARTED = "wave-started"  # wave (0-based as stored; shown as wave_number(wave), from 1)
    WAVE_HALTED = "wave-halted"  # wave; a wave that ran itself stopped starting nodes (reason)
    WAVE_DONE = "wave-done"  # wave; a wave that ran itself ended with every node through
    PATH_CHOSEN = "path-chosen"
    DECISION = "decision"
    ROLLBACK_STARTED = "rollback-started"  # node, reason
    ROLLBACK_FINISHED = "rollback-finished"  # node
    NOTE = "note"  # note
    NODE_OBSERVED = "node-observed"  # node (stage, step while a step runs): what an engine reported of it
    NOTIFICATION_SENT = "notification-sent"  # what a webhook was told, and how it went
    WATCH_STARTED = "watch-started"  # cockpit watch took the triggers over after the window
    WATCH_FINDING = "watch-finding"  # trigger, node: a trigger fired while the watch kept it armed
    WATCH_ENDED = "watch-ended"


#: What someone other than the operator may write: a reviewer's sign-off, a manual
#: trigger raised, a note. Everything else moves the window and is the operator's alone.
REVIEWER_KINDS: frozenset[EventKind] = frozenset({EventKind.SIGNOFF, EventKind.TRIGGER_FIRED, EventKind.NOTE})
#: What the cockpit itself writes in its own name: probes, automatic triggers, items its
#: built-in checks verified, host keys it accepted (a note). Never a sign-off: the system
#: is not a second person.
SYSTEM_KINDS: frozenset[EventKind] = frozenset(
    {
        EventKind.PROBE,
        EventKind.TRIGGER_FIRED,
        EventKind.ITEM_VERIFIED,
        EventKind.NOTE,
        EventKind.NODE_OBSERVED,
        EventKind.NOTIFICATION_SENT,
    }
)


def writer_problem(kind: EventKind, actor: str, operator: str | None) -> str | None:
    """Why ``actor`` may not have written an event of ``kind`` in ``operator``'s session, or None.

    People are compared by :func:`~cockpit.changelog.identity.same_person`, so no
    spelling of the operator's name passes for a reviewer.
    """
    if is_system(actor):
        return None if kind in SYSTEM_KINDS else f"{kind} written in the cockpit's own name ({actor!r})"
    if same_person(actor, operator):
        if kind is EventKind.SIGNOFF:
            return f"sign-off by {actor!r}, the operator ({operator}): a sign-off needs a second person"
        return None
    if kind not in REVIEWER_KINDS:
        return f"{kind} by {actor!r}, who is not the operator ({operator}): only the operator may write it"
    return None


#: The ``kind`` of an :class:`UnknownEvent` (its kind as written is in ``raw_kind``).
UNKNOWN_KIND: Literal["unknown"] = "unknown"


def wave_number(wave: int) -> int:
    """The wave as a person reads it (the canary is wave 1) for a wave index as the change log
    stores it (``wave = 0`` for the canary).

    One convention everywhere: the change log, the plan and the engine count waves from 0 (the
    log's format is a contract, and every log already written says ``wave = 0`` for the canary);
    every human-facing place (the screen, the Next line, event text, refusals, the ticket, the
    demo's output) counts from 1 and goes through this function, so the two never mix."""
    return wave + 1


#: The times a change log may hold: none of its windows ran before 2000, and none will after
#: 2100. Outside them an event is not valid (named, left out, never a crash): 9999-12-31T23:59:59
#: at -23:59 is past what Python's datetime holds in UTC, and took every reader down with an
#: OverflowError. A clock that merely went back is the fold's to flag (:data:`CLOCK_BACK_TOLERANCE`).
TS_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
TS_LATEST = datetime(2100, 1, 1, tzinfo=UTC)
#: how far an event's time may go back from the latest one before it before the fold says so
#: (two hosts' clocks, an NTP step): beyond it the window's times are not to be trusted
CLOCK_BACK_TOLERANCE = timedelta(minutes=5)


def clock_went_back(previous: datetime | None, ts: datetime) -> str | None:
    """How far ``ts`` is before ``previous`` (the event before it), in words, when that is past
    :data:`CLOCK_BACK_TOLERANCE`; else None. The fold and the ticket both say it so."""
    if previous is None or ts >= previous - CLOCK_BACK_TOLERANCE:
        return None
    return str(previous - ts).split(".")[0]


def _as_utc(ts: datetime) -> datetime:
    if ts.tzinfo is None:
        raise ValueError("timestamp must carry a UTC offset")
    try:
        utc = ts.astimezone(UTC)
    except OverflowError:  # a ValueError pydantic names per event, where an OverflowError crashed
        raise ValueError("timestamp outside what a date in UTC can hold") from None
    if not TS_EARLIEST <= utc < TS_LATEST:
        raise ValueError(f"timestamp {utc.isoformat()} outside 2000..2099 (UTC)")
    return utc


#: A timestamp of the change log: it must carry an offset, and is kept in UTC.
UtcDatetime = Annotated[datetime, AfterValidator(_as_utc)]


def utcnow() -> datetime:
    return datetime.now(UTC)


class EventBase(BaseModel):
    """What every event has. ``seq`` is dense and starts at 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int = Field(ge=1)
    ts: UtcDatetime
    actor: str
    node: str | None = None
    stage: str | None = None
    step: str | None = None
    item: str | None = None
    trigger: str | None = None
    wave: int | None = None
    reason: str | None = None  # overrides, clears, rollbacks: why
    note: str | None = None  # ticks, sign-offs, notes: what the person wrote

    def facts_as_written(self) -> dict[str, Any]:
        """The facts as the change log holds them, whatever the kind (for search and raw views)."""
        facts = getattr(self, "facts", None)
        if isinstance(facts, Facts):
            return facts.to_toml()
        return dict(facts or {})

    def to_toml_dict(self) -> dict[str, Any]:
        """The event as written: ``None`` fields dropped (TOML has no null), no empty ``facts``."""
        data = self.model_dump(mode="python", exclude_none=True)
        if not data.get("facts"):
            data.pop("facts", None)
        # the order the change log has always had: seq, ts, actor, kind, then the rest
        head = {key: data.pop(key) for key in ("seq", "ts", "actor", "kind") if key in data}
        return head | data


class SessionStartedEvent(EventBase):
    kind: Literal[EventKind.SESSION_STARTED] = EventKind.SESSION_STARTED
    facts: SessionStartedFacts = Field(default_factory=SessionStartedFacts)


class SessionResumedEvent(EventBase):
    kind: Literal[EventKind.SESSION_RESUMED] = EventKind.SESSION_RESUMED
    facts: SessionResumedFacts = Field(default_factory=SessionResumedFacts)


class SessionPausedEvent(EventBase):
    kind: Literal[EventKind.SESSION_PAUSED] = EventKind.SESSION_PAUSED
    facts: NoFacts = Field(default_factory=NoFacts)


class SessionEndedEvent(EventBase):
    kind: Literal[EventKind.SESSION_ENDED] = EventKind.SESSION_ENDED
    facts: SessionEndedFacts = Field(default_factory=SessionEndedFacts)


class ProbeEvent(EventBase):
    kind: Literal[EventKind.PROBE] = EventKind.PROBE
    facts: ProbeFacts = Field(default_factory=ProbeFacts)


class BaselineRecordedEvent(EventBase):
    kind: Literal[EventKind.BASELINE_RECORDED] = EventKind.BASELINE_RECORDED
    facts: BaselineFacts = Field(default_factory=BaselineFacts)


class StepStartedEvent(EventBase):
    kind: Literal[EventKind.STEP_STARTED] = EventKind.STEP_STARTED
    facts: StepStartedFacts = Field(default_factory=StepStartedFacts)


class StepFinishedEvent(EventBase):
    kind: Literal[EventKind.STEP_FINISHED] = EventKind.STEP_FINISHED
    facts: StepFinishedFacts = Field(default_factory=StepFinishedFacts)


class ItemTickedEvent(EventBase):
    kind: Literal[EventKind.ITEM_TICKED] = EventKind.ITEM_TICKED
    facts: NoFacts = Field(default_factory=NoFacts)


class ItemVerifiedEvent(EventBase):
    kind: Literal[EventKind.ITEM_VERIFIED] = EventKind.ITEM_VERIFIED
    facts: ItemVerifiedFacts = Field(default_factory=ItemVerifiedFacts)


class SignoffEvent(EventBase):
    kind: Literal[EventKind.SIGNOFF] = EventKind.SIGNOFF
    facts: NoFacts = Field(default_factory=NoFacts)


class GatePassedEvent(EventBase):
    kind: Literal[EventKind.GATE_PASSED] = EventKind.GATE_PASSED
    facts: NoFacts = Field(default_factory=NoFacts)


class OverrideEvent(EventBase):
    kind: Literal[EventKind.OVERRIDE] = EventKind.OVERRIDE
    facts: OverrideFacts = Field(default_factory=OverrideFacts)


class TriggersArmedEvent(EventBase):
    kind: Literal[EventKind.TRIGGERS_ARMED] = EventKind.TRIGGERS_ARMED
    facts: TriggersArmedFacts = Field(default_factory=TriggersArmedFacts)


class TriggerFiredEvent(EventBase):
    kind: Literal[EventKind.TRIGGER_FIRED] = EventKind.TRIGGER_FIRED
    facts: TriggerFiredFacts = Field(default_factory=TriggerFiredFacts)


class TriggerClearedEvent(EventBase):
    kind: Literal[EventKind.TRIGGER_CLEARED] = EventKind.TRIGGER_CLEARED
    facts: NoFacts = Field(default_factory=NoFacts)


class WaveStartedEvent(EventBase):
    kind: Literal[EventKind.WAVE_STARTED] = EventKind.WAVE_STARTED
    facts: WaveStartedFacts = Field(default_factory=WaveStartedFacts)


class WaveHaltedEvent(EventBase):
    kind: Literal[EventKind.WAVE_HALTED] = EventKind.WAVE_HALTED
    facts: WaveEndedFacts = Field(default_factory=WaveEndedFacts)


class WaveDoneEvent(EventBase):
    kind: Literal[EventKind.WAVE_DONE] = EventKind.WAVE_DONE
    facts: WaveEndedFacts = Field(default_factory=WaveEndedFacts)


class PathChosenEvent(EventBase):
    kind: Literal[EventKind.PATH_CHOSEN] = EventKind.PATH_CHOSEN
    facts: PathChosenFacts = Field(default_factory=PathChosenFacts)


class DecisionEvent(EventBase):
    kind: Literal[EventKind.DECISION] = EventKind.DECISION
    facts: DecisionFacts = Field(default_factory=DecisionFacts)


class RollbackStartedEvent(EventBase):
    kind: Literal[EventKind.ROLLBACK_STARTED] = EventKind.ROLLBACK_STARTED
    facts: NoFacts = Field(default_factory=NoFacts)


class RollbackFinishedEvent(EventBase):
    kind: Literal[EventKind.ROLLBACK_FINISHED] = EventKind.ROLLBACK_FINISHED
    facts: RollbackFinishedFacts = Field(default_factory=RollbackFinishedFacts)


class NoteEvent(EventBase):
    kind: Literal[EventKind.NOTE] = EventKind.NOTE
    facts: NoFacts = Field(default_factory=NoFacts)


class NodeObservedEvent(EventBase):
    kind: Literal[EventKind.NODE_OBSERVED] = EventKind.NODE_OBSERVED
    facts: NodeObservedFacts = Field(default_factory=NodeObservedFacts)


class NotificationSentEvent(EventBase):
    kind: Literal[EventKind.NOTIFICATION_SENT] = EventKind.NOTIFICATION_SENT
    facts: NotificationSentFacts = Field(default_factory=NotificationSentFacts)


class WatchStartedEvent(EventBase):
    kind: Literal[EventKind.WATCH_STARTED] = EventKind.WATCH_STARTED
    facts: WatchStartedFacts = Field(default_factory=WatchStartedFacts)


class WatchFindingEvent(EventBase):
    kind: Literal[EventKind.WATCH_FINDING] = EventKind.WATCH_FINDING
    facts: WatchFindingFacts = Field(default_factory=WatchFindingFacts)


class WatchEndedEvent(EventBase):
    kind: Literal[EventKind.WATCH_ENDED] = EventKind.WATCH_ENDED
    facts: WatchEndedFacts = Field(default_factory=WatchEndedFacts)


class UnknownEvent(EventBase):
    """An event of a kind this version does not know, kept as written.

    Open on purpose: a newer cockpit may also have given it fields this one lacks.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: Literal["unknown"] = UNKNOWN_KIND
    raw_kind: str  # the kind as written
    facts: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _keep_raw_kind(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "raw_kind" not in data:
            return {**data, "raw_kind": str(data.get("kind")), "kind": UNKNOWN_KIND}
        return data

    def to_toml_dict(self) -> dict[str, Any]:
        data = super().to_toml_dict()
        data["kind"] = data.pop("raw_kind")
        return data


_KNOWN = frozenset(k.value for k in EventKind)


def _event_tag(data: Any) -> str | None:
    """Which class of :data:`Event` ``data`` is: its kind when known, else ``unknown``."""
    kind = data.get("kind") if isinstance(data, Mapping) else getattr(data, "kind", None)
    if not isinstance(kind, str):
        return None  # no kind at all: refused, not guessed
    if isinstance(data, UnknownEvent):
        return UNKNOWN_KIND
    return str(kind) if kind in _KNOWN else UNKNOWN_KIND


Event = Annotated[
    Annotated[SessionStartedEvent, Tag(EventKind.SESSION_STARTED.value)]
    | Annotated[SessionResumedEvent, Tag(EventKind.SESSION_RESUMED.value)]
    | Annotated[SessionPausedEvent, Tag(EventKind.SESSION_PAUSED.value)]
    | Annotated[SessionEndedEvent, Tag(EventKind.SESSION_ENDED.value)]
    | Annotated[ProbeEvent, Tag(EventKind.PROBE.value)]
    | Annotated[BaselineRecordedEvent, Tag(EventKind.BASELINE_RECORDED.value)]
    | Annotated[StepStartedEvent, Tag(EventKind.STEP_STARTED.value)]
    | Annotated[StepFinishedEvent, Tag(EventKind.STEP_FINISHED.value)]
    | Annotated[ItemTickedEvent, Tag(EventKind.ITEM_TICKED.value)]
    | Annotated[ItemVerifiedEvent, Tag(EventKind.ITEM_VERIFIED.value)]
    | Annotated[SignoffEvent, Tag(EventKind.SIGNOFF.value)]
    | Annotated[GatePassedEvent, Tag(EventKind.GATE_PASSED.value)]
    | Annotated[OverrideEvent, Tag(EventKind.OVERRIDE.value)]
    | Annotated[TriggersArmedEvent, Tag(EventKind.TRIGGERS_ARMED.value)]
    | Annotated[TriggerFiredEvent, Tag(EventKind.TRIGGER_FIRED.value)]
    | Annotated[TriggerClearedEvent, Tag(EventKind.TRIGGER_CLEARED.value)]
    | Annotated[WaveStartedEvent, Tag(EventKind.WAVE_STARTED.value)]
    | Annotated[WaveHaltedEvent, Tag(EventKind.WAVE_HALTED.value)]
    | Annotated[WaveDoneEvent, Tag(EventKind.WAVE_DONE.value)]
    | Annotated[PathChosenEvent, Tag(EventKind.PATH_CHOSEN.value)]
    | Annotated[DecisionEvent, Tag(EventKind.DECISION.value)]
    | Annotated[RollbackStartedEvent, Tag(EventKind.ROLLBACK_STARTED.value)]
    | Annotated[RollbackFinishedEvent, Tag(EventKind.ROLLBACK_FINISHED.value)]
    | Annotated[NoteEvent, Tag(EventKind.NOTE.value)]
    | Annotated[NodeObservedEvent, Tag(EventKind.NODE_OBSERVED.value)]
    | Annotated[NotificationSentEvent, Tag(EventKind.NOTIFICATION_SENT.value)]
    | Annotated[WatchStartedEvent, Tag(EventKind.WATCH_STARTED.value)]
    | Annotated[WatchFindingEvent, Tag(EventKind.WATCH_FINDING.value)]
    | Annotated[WatchEndedEvent, Tag(EventKind.WATCH_ENDED.value)]
    | Annotated[UnknownEvent, Tag(UNKNOWN_KIND)],
    Discriminator(_event_tag),
]
"""One event of the change log: the class of its kind (see the module's docstring)."""

_EVENT = TypeAdapter[Event](Event)

# A log of known kinds only (the common case) validates in one call, with the kind read
# as a plain string discriminator inside pydantic-core: no Python call per event. The
# classes are the ones of :data:`Event` less the unknown kind, taken from it.
_KNOWN_CLASSES = tuple(get_args(member)[0] for member in get_args(get_args(Event)[0]))[:-1]
_KNOWN_UNION: Any = functools.reduce(operator.or_, _KNOWN_CLASSES)  # built at run time: typed Any
_KNOWN_EVENTS: TypeAdapter[list[Any]] = TypeAdapter(list[Annotated[_KNOWN_UNION, Field(discriminator="kind")]])


def parse_event(data: Mapping[str, Any]) -> Event:
    """Validate one event's table (as read, or as a writer builds it) into its kind's class.

    Raises :class:`pydantic.ValidationError` when the fields or facts do not fit the kind.
    """
    return _EVENT.validate_python(data)


def parse_events(data: Sequence[Mapping[str, Any]]) -> list[Event]:
    """:func:`parse_event` over a whole log: one validation call when every kind is known.

    Raises :class:`pydantic.ValidationError` like :func:`parse_event`; a caller that wants
    to name the bad event validates one by one after a failure.
    """
    if all(raw.get("kind") in _KNOWN for raw in data):
        return list(_KNOWN_EVENTS.validate_python(data))
    return [parse_event(raw) for raw in data]


def event_class(kind: EventKind) -> type[EventBase]:
    """The class of events of ``kind``."""
    return _CLASSES[kind]


_CLASSES: dict[EventKind, type[EventBase]] = {
    cls.model_fields["kind"].default: cls for cls in EventBase.__subclasses__() if cls is not UnknownEvent
}
