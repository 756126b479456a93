"""``cockpit watch``: the runbook's triggers kept armed on the changed nodes after the window.

Faults that follow a driver change often show hours or weeks later (a fabric manager found
down 20 days after a maintenance, NVIDIA/NVSentinel#891); the window's cockpit stops judging
when the window ends. The watch reopens the ended window's change log, probes every node
the window changed at a gentle period (a node that does not answer is asked again later
and later, up to ``max_backoff_s``, and at the period again once it answers), records what
changed as the window's probes are recorded, and judges the window's armed automatic
triggers with the same evaluators (:mod:`cockpit.engine.triggers`). A new firing is a
``watch-finding`` event in the watcher's name (chained, and signed when a key is given, as
the session's own events are), raised as a notification.

The change log is the watch's only memory: ``watch-started`` records until when it watches,
so a restarted watch takes the same watch up (``resumed``) instead of starting a new one; a
finding already recorded is not found again (the fold counts it fired); a finding whose
notification was not delivered (the watch stopped first) is sent by the next. The watch
ends with ``watch-ended`` when its time runs out; stopped before (SIGTERM, a crash) it writes
nothing more, for the next start to go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from cockpit.changelog.events import EventKind, utcnow
from cockpit.changelog.facts import WatchEndedFacts, WatchStartedFacts
from cockpit.changelog.journal import Journal
from cockpit.changelog.sshsig import Signer
from cockpit.engine.state import CockpitState, WatchFindingRecord
from cockpit.errors import BadInput
from cockpit.fleet.transport import Transport
from cockpit.notify.bodies import Notice, NoticeKind
from cockpit.notify.delivery import Notifier
from cockpit.runbook.model import TriggerMode
from cockpit.session.notices import SessionNotices, event_notice
from cockpit.session.opening import reopen
from cockpit.session.probing import Prober
from cockpit.session.recording import Recorder

log = logging.getLogger(__name__)

DEFAULT_PERIOD_S = 300.0  # a probe every five minutes per node: gentle on a fleet at work
DEFAULT_MAX_BACKOFF_S = 3600.0  # a node away is asked again at most this far apart
DEFAULT_DURATION = timedelta(hours=72)
#: the period is cut into this many slots, each node probed in one: a round judges the
#: triggers over the whole state, so a node a round would cost a 2,000-node fleet 2,000 judgings
PERIOD_SLOTS = 10

Sleep = Callable[[float], Awaitable[None]]


def changed_nodes(state: CockpitState) -> list[str]:
    """The nodes the window changed: a destructive step started on them, or a rollback."""
    return [n for n, p in state.nodes.items() if p.destructive_started or p.rollback is not None]


def watched_triggers(state: CockpitState, runbook_triggers: Sequence[tuple[str, TriggerMode]]) -> list[str]:
    """The automatic triggers the window armed (a trigger never armed is not the watch's to arm)."""
    return [
        tid
        for tid, mode in runbook_triggers
        if mode is TriggerMode.AUTO and tid in state.triggers and state.triggers[tid].status != "disarmed"
    ]


def st_watch_ended(state: CockpitState) -> bool:
    return state.watch is not None and state.watch_ended is not None


@dataclass(slots=True)
class NodePace:
    """When a node is probed next, and how long it waits after a probe it did not answer."""

    due: datetime
    wait_s: float
    misses: int = 0


@dataclass
class WatchResult:
    findings: list[WatchFindingRecord] = field(default_factory=list)  # this run's
    ended: bool = False  # its time ran out (watch-ended written, now or by an earlier run)
    until: datetime | None = None
    probes: int = 0
    found_any: bool = False  # the watch (all its runs) has findings


class Watch:
    """One run of the watch over an ended window's change log (see the module's notes)."""

    def __init__(
        self,
        path: Path,
        *,
        operator: str | None = None,
        runbook: Path | None = None,
        transport_factory: Callable[[list[str]], Transport | None],
        duration: timedelta = DEFAULT_DURATION,
        period_s: float = DEFAULT_PERIOD_S,
        max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
        clock: Callable[[], datetime] = utcnow,
        sleep: Sleep = asyncio.sleep,
        signer: Signer | None = None,
        notifier: Notifier | None = None,
        say: Callable[[str], None] = lambda line: None,
        notify_drain_s: float = 10.0,
        again: bool = False,
    ) -> None:
        self.path = Path(path)
        log_read, self.loaded, folder = reopen(self.path, operator=None, runbook=runbook)
        header = log_read.header
        if folder.state.ended_at is None:
            raise BadInput(
                f"session {header.change_id} has not ended: its cockpit watches it (resume it, or end it first)"
            )
        self.actor = operator or header.operator
        self.change_id = header.change_id
        self.period_s = period_s
        self.max_backoff_s = max(max_backoff_s, period_s)
        self.clock = clock
        self._sleep = sleep
        self.say = say
        self.notify_drain_s = notify_drain_s
        #: probes made of each node by this run (a node away is asked less often)
        self.probes: Counter[str] = Counter()
        self.pace: dict[str, NodePace] = {}
        runbook_model = self.loaded.runbook
        state = folder.state
        self.nodes = changed_nodes(state)
        self.triggers = watched_triggers(state, [(t.id, t.mode) for t in runbook_model.triggers])
        if not self.triggers:
            raise BadInput(f"session {header.change_id} never armed its triggers: there is nothing to watch")
        if not self.nodes:
            raise BadInput(f"session {header.change_id} changed no node: there is nothing to watch")
        # the window's own lock: a second watch of the same window is refused, naming this one
        self.journal = Journal.open_for_append(self.path, self.actor, clock=clock, signer=signer, log=log_read)
        self.recorder = Recorder(
            journal=self.journal,
            folder=folder,
            runbook=runbook_model,
            operator=header.operator,
            params=dict(state.params),
            clock=clock,
            finding_kind=EventKind.WATCH_FINDING,
            finding_actor=self.actor,
        )
        try:
            self.transport = transport_factory(list(header.hosts))
        except BaseException:
            self.journal.close()
            raise
        self.prober = Prober(self.recorder, self.transport)
        self.notices: SessionNotices | None = None
        if notifier is not None:
            self.notices = SessionNotices(
                notifier, change_id=self.change_id, state=lambda: self.recorder.state, record=self.recorder.record
            )
            self.recorder.subscribe(self.notices.on_event)
        #: the window's last watch ended and no new one was asked for: ``run`` does nothing (a
        #: service manager restarting a watch that finished must not start a new one)
        self.finished = st_watch_ended(self.state) and not again
        self.until = self._until(duration)

    @property
    def state(self) -> CockpitState:
        return self.recorder.state

    def _in_progress(self) -> bool:
        """A watch started and not ended: a restart takes it up."""
        st = self.state
        return st.watch is not None and st.watch_ended is None

    def current_findings(self) -> list[WatchFindingRecord]:
        """The findings of the watch under way (all its runs), not an earlier watch's."""
        start = self.state.watch.first_seq if self.state.watch is not None else 0
        return [f for f in self.state.watch_findings if f.seq > start]

    def _until(self, duration: timedelta) -> datetime:
        if self._in_progress():
            assert self.state.watch is not None
            return datetime.fromisoformat(str(self.state.watch.facts.until))
        return self.clock() + duration

    def _unsent_findings(self) -> list[Notice]:
        """The findings of this watch the log records whose notification did not reach every sink
        (the last run stopped first); the log is read again only when there is one."""
        if self.notices is None:
            return []
        sinks = [s.name for s in self.notices.notifier.sinks]
        unsent = {
            f.seq
            for f in self.current_findings()  # this watch's: an earlier watch's are its own business
            if any((f"{NoticeKind.WATCH_FINDING}:{f.seq}", sink) not in self.state.notified for sink in sinks)
        }
        if not unsent:
            return []
        from cockpit.changelog.reader import read_session

        events = [e for e in read_session(self.path).events if e.seq in unsent]
        return [n for e in events if (n := event_notice(e, self.change_id)) is not None]

    async def run(self) -> WatchResult:
        """Watch until the recorded time runs out (or the task is cancelled: nothing more written)."""
        result = WatchResult(until=self.until)
        if self.finished:
            ended = self.state.watch_ended
            assert ended is not None  # finished: the watch ended
            self.say(
                f"the watch of {self.change_id} ended (seq {ended.seq}, {ended.facts.findings or 0} "
                "finding(s)); nothing to do (--again starts another)"
            )
            await self.close()
            result.ended, result.found_any = True, bool(ended.facts.findings)
            return result
        resumed = self._in_progress()
        before = len(self.state.watch_findings)
        try:
            self.recorder.record(
                EventKind.WATCH_STARTED,
                actor=self.actor,
                facts=WatchStartedFacts(
                    until=self.until.isoformat(),
                    period_s=self.period_s,
                    nodes=self.nodes,
                    triggers=self.triggers,
                    resumed=resumed or None,
                ),
            )
            self.say(
                f"{'resumed' if resumed else 'watching'} {self.change_id}: {len(self.nodes)} node(s), "
                f"{len(self.triggers)} trigger(s), every {self.period_s:g} s until {self.until.isoformat()}"
            )
            if self.notices is not None:
                for notice in self._unsent_findings():
                    self.notices.notifier.send(notice)  # a finding the last run recorded but could not tell
            # the nodes spread over the period in a few slots: a big fleet is never probed all at once
            start = self.clock()
            slot_s = self.period_s / PERIOD_SLOTS
            pace = self.pace = {
                n: NodePace(due=start + timedelta(seconds=slot_s * (i % PERIOD_SLOTS)), wait_s=self.period_s)
                for i, n in enumerate(self.nodes)
            }
            while (now := self.clock()) < self.until:
                ready = [n for n in self.nodes if pace[n].due <= now]
                if ready:
                    result.findings += await self._round(ready, pace)
                    result.probes += len(ready)
                    continue
                nearest = min(min(p.due for p in pace.values()), self.until)
                await self._sleep(max((nearest - self.clock()).total_seconds(), 0.0))
            found = len(self.state.watch_findings) - before
            self.recorder.record(
                EventKind.WATCH_ENDED,
                actor=self.actor,
                facts=WatchEndedFacts(reason="its time ran out", findings=len(self.current_findings())),
            )
            self.say(f"watch of {self.change_id} ended: {found} finding(s) this run")
            result.ended = True
            result.found_any = bool(self.current_findings())
            return result
        finally:
            await self.close()

    async def _round(self, nodes: list[str], pace: dict[str, NodePace]) -> list[WatchFindingRecord]:
        """Probe ``nodes``, record what changed, judge the triggers; set each node's next probe."""
        self.recorder.absorb_foreign()
        before = len(self.state.watch_findings)
        probed = await asyncio.gather(*(self.prober.probe_one(n) for n in nodes))
        self.probes.update(nodes)
        self.prober.record_accepted_host_keys()  # --accept-new-host-keys: a fact of the log, as in the window
        now = self.clock()
        for name, state in zip(nodes, probed, strict=True):
            self.prober.record_probe(name, state, in_round=True)
            p = pace[name]
            if state.reachable:
                if p.misses:
                    self.say(f"{name}: answering again after {p.misses} missed probe(s)")
                p.misses, p.wait_s = 0, self.period_s
            else:
                p.misses += 1
                p.wait_s = min(p.wait_s * 2, self.max_backoff_s)  # a node away is asked less and less often
            p.due = now + timedelta(seconds=p.wait_s if not state.reachable else self.period_s)
        self.recorder.evaluate_triggers()  # what only the fleet, or the clock, shows
        fired = self.state.watch_findings[before:]  # a probe's own judging may have found some already
        for finding in fired:
            where = finding.node or "the fleet"
            self.say(f"FINDING seq {finding.seq}: trigger {finding.trigger} on {where}: {finding.evidence}")
        return fired

    async def close(self) -> None:
        try:
            if self.notices is not None:
                # what is still trying then: recorded as abandoned, sent by the next run
                await self.notices.notifier.close(self.notify_drain_s)
            if self.transport is not None:
                await self.transport.close()
        finally:
            self.journal.remove_lock_file()  # an ended window keeps no lock file
            self.journal.close()
