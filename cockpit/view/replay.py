"""Replay: the state of a change window at any event or any moment, as it unfolded.

A :class:`Replay` folds a :class:`~cockpit.changelog.journal.SessionLog` once, keeping a copy
of the folded state every ``every`` events (a checkpoint). The state at any seq is
then a copy of the nearest checkpoint at or before it plus at most ``every - 1``
events, so scrubbing back and forth through a long window costs the same anywhere.

It works with any folder that has ``apply(event)`` and ``copy()`` (returning an
independent folder at the same position) and exposes ``state``: the gating
engine's :class:`~cockpit.engine.fold.Folder` is the one the cockpit uses
(:meth:`Replay.for_session`). Pure: the events come in, states go out.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, Self

from cockpit.changelog.events import Event, EventKind
from cockpit.changelog.journal import SessionLog
from cockpit.engine.state import CockpitState
from cockpit.runbook.model import Runbook
from cockpit.view.words import Form, event_text, is_failure


class FolderLike(Protocol):
    """What replay needs of a folder."""

    @property
    def state(self) -> CockpitState: ...

    def apply(self, event: Event) -> None: ...

    def copy(self) -> Self: ...


#: Pseudo-kind for :meth:`Replay.events_of_interest`: a failed step, check or rollback.
FAILURE = "failure"

#: What "next event of interest" jumps to by default.
DEFAULT_INTEREST: frozenset[str] = frozenset(
    {EventKind.TRIGGER_FIRED, EventKind.TRIGGER_CLEARED, EventKind.OVERRIDE, EventKind.SIGNOFF, FAILURE}
)


@dataclass(frozen=True)
class Marker:
    """A boundary on the replay's timeline: a wave, a stage gate, a session milestone."""

    seq: int
    at: datetime
    kind: str  # "session", "wave", "stage", "triggers", "rollback", "path", "decision"
    label: str  # the event's short words, where included ("expand passed on gpu01")
    node: str | None = None


class Replay:
    """Random access to the folded state of a change log."""

    def __init__(self, log: SessionLog, folder_factory: Callable[[], FolderLike], *, every: int = 512) -> None:
        if every < 1:
            raise ValueError("checkpoint interval must be at least 1")
        self.log = log
        self.events: list[Event] = list(log.events)
        self.every = every
        self._times = [e.ts for e in self.events]
        # the latest time seen up to each event: a clock that stepped back (two hosts
        # appending) must not break the bisection
        self._max_times: list[datetime] = []
        latest: datetime | None = None
        for ts in self._times:
            latest = ts if latest is None or ts > latest else latest
            self._max_times.append(latest)
        folder = folder_factory()
        self._checkpoints: list[FolderLike] = [folder.copy()]  # [i] = state after i * every events
        for index, event in enumerate(self.events, start=1):
            folder.apply(event)
            if index % every == 0:
                self._checkpoints.append(folder.copy())
        self._final = folder
        self._cursor: FolderLike | None = None  # see view_at
        self._cursor_seq = 0

    @classmethod
    def for_session(cls, log: SessionLog, runbook: Runbook, *, every: int = 512) -> Replay:
        """Replay with the gating engine's folder over ``runbook`` (a :class:`~cockpit.runbook.model.Runbook`)."""
        from cockpit.engine.fold import Folder

        header = log.header

        def factory() -> Folder:
            return Folder(
                runbook, header.window_parameters(), header.hosts, operator=header.operator, signatures=log.signatures
            )

        return cls(log, factory, every=every)

    # -- positions

    @property
    def last_seq(self) -> int:
        return len(self.events)

    def folder_at(self, seq: int) -> FolderLike:
        """An independent folder positioned just after event ``seq`` (0 = before the first)."""
        seq = max(0, min(seq, self.last_seq))
        if seq == self.last_seq:
            return self._final.copy()
        base = seq // self.every
        folder = self._checkpoints[base].copy()
        for event in self.events[base * self.every : seq]:
            folder.apply(event)
        return folder

    def state_at(self, seq: int) -> CockpitState:
        """The folded state just after event ``seq``: an independent copy, the caller's to keep."""
        return self.folder_at(seq).state

    def view_at(self, seq: int) -> CockpitState:
        """The state just after event ``seq``, read-only and valid until the next ``view_at``.

        For players and scrub bars: it moves one private cursor, so stepping or playing
        forward costs only the events in between (no copy at all), and a jump back or
        far ahead costs one checkpoint copy, like :meth:`state_at`. Do not change the
        returned state, and do not keep it across calls.
        """
        seq = max(0, min(seq, self.last_seq))
        base = seq // self.every
        cursor = self._cursor
        if cursor is None or self._cursor_seq > seq or self._cursor_seq < base * self.every:
            cursor = self._checkpoints[base].copy()
            self._cursor_seq = base * self.every
        for event in self.events[self._cursor_seq : seq]:
            cursor.apply(event)
        self._cursor, self._cursor_seq = cursor, seq
        return cursor.state

    def seq_at(self, when: datetime) -> int:
        """The last event recorded at or before ``when`` (0 if none)."""
        return bisect.bisect_right(self._max_times, when)

    def state_at_time(self, when: datetime) -> CockpitState:
        return self.state_at(self.seq_at(when))

    @property
    def final(self) -> CockpitState:
        """The state after every event (not a copy: do not change it)."""
        return self._final.state

    # -- navigation

    def events_of_interest(self, kinds: Iterable[str] = DEFAULT_INTEREST) -> list[Event]:
        """Events of the given kinds in order; the pseudo-kind ``"failure"`` adds failed steps and checks."""
        wanted = {str(k) for k in kinds}
        failures = FAILURE in wanted
        return [e for e in self.events if str(e.kind) in wanted or (failures and is_failure(e))]

    def next_of_interest(self, after_seq: int, kinds: Iterable[str] = DEFAULT_INTEREST) -> Event | None:
        return next((e for e in self.events_of_interest(kinds) if e.seq > after_seq), None)

    def previous_of_interest(self, before_seq: int, kinds: Iterable[str] = DEFAULT_INTEREST) -> Event | None:
        found = [e for e in self.events_of_interest(kinds) if e.seq < before_seq]
        return found[-1] if found else None

    def timeline(self) -> list[Marker]:
        """Stage and wave boundaries, with their seq, for a scrub bar."""
        return timeline(self.events)


#: The marker kind of each event kind that marks the timeline.
MARKER_KINDS: dict[str, str] = {  # keyed by kind (an unknown kind marks nothing)
    EventKind.SESSION_STARTED: "session",
    EventKind.SESSION_RESUMED: "session",
    EventKind.SESSION_PAUSED: "session",
    EventKind.SESSION_ENDED: "session",
    EventKind.WAVE_STARTED: "wave",
    EventKind.WAVE_HALTED: "wave",
    EventKind.WAVE_DONE: "wave",
    EventKind.GATE_PASSED: "stage",
    EventKind.OVERRIDE: "stage",
    EventKind.TRIGGERS_ARMED: "triggers",
    EventKind.ROLLBACK_STARTED: "rollback",
    EventKind.ROLLBACK_FINISHED: "rollback",
    EventKind.PATH_CHOSEN: "path",
    EventKind.DECISION: "decision",
}


def timeline(events: Sequence[Event]) -> list[Marker]:
    """The boundaries among ``events``, each labelled with its short words (:func:`event_text`)."""
    return [
        Marker(e.seq, e.ts, MARKER_KINDS[e.kind], event_text(e, Form.SHORT), e.node)
        for e in events
        if e.kind in MARKER_KINDS
    ]
