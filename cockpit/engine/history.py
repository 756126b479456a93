"""The window's history as the fold keeps it: what a record of the window (the ticket, a
replay's frame) lists beside where things stand now.

:class:`~cockpit.engine.state.CockpitState` says where the window is; :class:`History`
says what happened on the way there: the events of the window's timeline the fold applied
(the validated events themselves, typed and frozen), every trigger firing with its clear,
the waves as started, the steps that failed, the outputs kept as artifacts, the nodes'
reachable probes, and what ``cockpit watch`` saw after the window. Folded by
:mod:`cockpit.engine.fold_history`, one event at a time, like the rest of the state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from cockpit.changelog.events import (
    DecisionEvent,
    Event,
    EventKind,
    PathChosenEvent,
    SessionEndedEvent,
    StepFinishedEvent,
    TriggersArmedEvent,
    WatchStartedEvent,
)

#: Event kinds a history of the window lists (the rest are in the change log).
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


@dataclass(slots=True, frozen=True)
class Cleared:
    """A trigger's clear: who cleared it, when, why."""

    seq: int
    at: datetime
    actor: str
    reason: str | None


@dataclass(slots=True, frozen=True)
class Firing:
    """One ``trigger-fired`` the fold applied, and the clear that ended it (None: not cleared)."""

    seq: int
    at: datetime
    actor: str
    trigger: str
    node: str | None
    evidence: str
    cleared: Cleared | None = None


@dataclass(slots=True, frozen=True)
class WaveStart:
    """A wave as it was started: the nodes the event named."""

    wave: int
    nodes: tuple[str, ...]
    at: datetime
    seq: int


@dataclass(slots=True, frozen=True)
class Artifact:
    """A long output kept beside the log (a step's, or a command item's check)."""

    sha256: str
    seq: int
    node: str | None
    stage: str | None
    step: str | None  # the step, or the item a check verified
    command: str | None
    of_step: bool  # a step's output (else a check's)


@dataclass(slots=True, frozen=True)
class Probed:
    """A node's reachable probes, first and last: an unreachable node's probe records
    gpu_count 0 (nothing was counted), so it says nothing of the GPUs."""

    first_driver: str | None = None
    driver: str | None = None
    gpus: int | None = None


@dataclass(slots=True, frozen=True)
class WatchHeard:
    """A trigger ``cockpit watch`` found after the window, and the sinks told of it."""

    seq: int
    at: datetime
    actor: str
    trigger: str
    node: str | None
    evidence: str
    told: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class WatchRun:
    """The latest ``cockpit watch`` over the window (its restarts counted as runs)."""

    started: WatchStartedEvent  # the first start of this watch: when and by whom
    latest: WatchStartedEvent  # its latest (re)start: until when, how often, which nodes
    last_at: datetime
    runs: int = 1
    ended_at: datetime | None = None  # None: still watching, or stopped before its time ran out
    findings: tuple[WatchHeard, ...] = ()


@dataclass(slots=True)
class History:
    """What happened in the window, in log order (see the module's docstring)."""

    events: int = 0  # every event read, applied or not
    first_at: datetime | None = None
    #: everyone who wrote an event, in the order they first did (refused events included)
    actors: list[str] = field(default_factory=list)
    #: events whose time is well before the one before them, in words
    clock_went_back: list[str] = field(default_factory=list)
    #: the applied events of :data:`TIMELINE_KINDS`
    timeline: list[Event] = field(default_factory=list)
    failed_steps: list[StepFinishedEvent] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    waves: list[WaveStart] = field(default_factory=list)
    firings: list[Firing] = field(default_factory=list)
    armed: TriggersArmedEvent | None = None  # the latest arming
    path: PathChosenEvent | None = None
    decision: DecisionEvent | None = None
    ended: SessionEndedEvent | None = None
    probed: dict[str, Probed] = field(default_factory=dict)
    watch: WatchRun | None = None

    def copy(self) -> History:
        """An independent copy (the records are frozen: shared)."""
        return History(
            events=self.events,
            first_at=self.first_at,
            actors=list(self.actors),
            clock_went_back=list(self.clock_went_back),
            timeline=list(self.timeline),
            failed_steps=list(self.failed_steps),
            artifacts=list(self.artifacts),
            waves=list(self.waves),
            firings=list(self.firings),
            armed=self.armed,
            path=self.path,
            decision=self.decision,
            ended=self.ended,
            probed=dict(self.probed),
            watch=self.watch,
        )
