"""A wave that runs itself, under the gate: one person action starts it, the runner walks
its nodes as Next would, and what needs a person queues in "needs you".

Who acts: every action the runner takes is the person's who started the wave, acting
through it. The events carry that person as their actor (the change log's rule: only the
operator moves the window); the wave-started event names the node set they typed to
confirm the wave's destructive steps, and the wave-done or wave-halted event closes the
span, so a reader knows which actions a person took one by one and which the wave took
in their name. A destructive step of a node in the wave is confirmed by that typed set
(the node's own name is what the gate's confirmation wants; the runner passes it).

The runner never takes a person's part (:func:`cockpit.engine.waverun.runner_may_take`):
a manual tick, a sign-off, a failed step or check, a fired trigger, a decision wait in
:attr:`WaveRunner.needs_you` with the node and the planner's words, while the other
nodes go on. A node the person unblocks (ticked, re-ran its step) is picked up again.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.changelog.events import EventKind, wave_number
from cockpit.changelog.facts import WaveEndedFacts
from cockpit.engine import actions
from cockpit.engine.actions import Action, ActionRefused, describe
from cockpit.engine.planner import Plan, node_plan
from cockpit.engine.state import DONE, FINISHED
from cockpit.engine.waverun import (
    NeedsYou,
    admissible,
    confirmation_text,
    first_auto_wave,
    halt_reason,
    max_unavailable,
    node_failed,
    out_of_service,
    person_action,
    progress_words,
    runner_may_take,
)
from cockpit.errors import BadInput, CockpitError
from cockpit.session.operator import Session

#: Seconds between looks at a node whose step is in flight elsewhere, or at a paused wave.
POLL_S = 0.05
#: Runs of one same action on one node before the runner leaves it to a person.
MAX_REPEATS = 12
#: Seconds between probe rounds over the wave's nodes at work (triggers judge the probes).
REFRESH_S = 1.0


@dataclass
class WaveStatus:
    """What the screen shows of a running wave."""

    wave: int
    running: list[str] = field(default_factory=list)
    needs_you: list[NeedsYou] = field(default_factory=list)
    halted: str | None = None
    paused: bool = False
    finished: bool = False
    actions: int = 0
    progress: str = ""


class WaveRunner:
    """Runs one wave of ``session`` by itself; :meth:`start` is the one person action."""

    def __init__(
        self,
        session: Session,
        wave: int,
        *,
        actor: str | None = None,
        parallel: int | None = None,
        poll_s: float = POLL_S,
        refresh_s: float = REFRESH_S,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.session = session
        self.wave = wave
        self.actor = actor or session.operator
        state = session.state
        self.limit = max_unavailable(session.runbook, session.params, len(state.nodes))
        self.parallel = max(1, parallel or state.max_parallel)
        self.poll_s = poll_s
        self.refresh_s = refresh_s
        self.on_change = on_change
        #: what a person must do, by node (the node holds until it is done)
        self.held: dict[str, NeedsYou] = {}
        self.halted: str | None = None
        self.actions = 0
        self._tasks: dict[str, asyncio.Task[NeedsYou | None]] = {}
        self._resume = asyncio.Event()
        self._resume.set()
        self._killed = False
        self._finished = False
        self._held_seen: int | None = None  # the change log's seq when the held nodes were last looked at
        #: the actions taken per node, counted (across pick-ups: a node never loops for ever)
        self._taken: dict[str, Counter[str]] = {}
        self._plans: dict[str, tuple[tuple[int, int], Plan]] = {}  # per node: the fold version it was planned at

    # ------------------------------------------------------------------ the person's part

    @classmethod
    def start(
        cls,
        session: Session,
        confirmation: str,
        *,
        wave: int | None = None,
        actor: str | None = None,
        parallel: int | None = None,
        poll_s: float = POLL_S,
        refresh_s: float = REFRESH_S,
        on_change: Callable[[], None] | None = None,
    ) -> WaveRunner:
        """Start ``wave`` (default: the next one) as a wave that runs itself, once the person
        typed its node set (:func:`confirmation_text`). Refused (nothing written) for the
        canary and the second node, which a person walks step by step, or a wrong node set."""
        state = session.state
        nxt = 0 if state.current_wave is None else state.current_wave + 1
        if wave is None:
            running = state.current_wave
            # the wave Next started by hand and not yet through is taken over; else the next one
            unfinished = running is not None and any(
                state.nodes[n].current not in FINISHED for n in state.waves[running]
            )
            wave = running if unfinished and running is not None else nxt
        if not 0 <= wave < len(state.waves):
            raise BadInput(f"no wave {wave_number(wave)}: the plan has {len(state.waves)} waves")
        first = first_auto_wave(session.runbook)
        if wave < first:
            raise BadInput(
                f"wave {wave_number(wave)} is walked by a person step by step; waves run themselves "
                f"from wave {wave_number(first)} on"
            )
        expected = confirmation_text(state, wave)
        if confirmation.strip() != expected:
            raise BadInput(f"type the wave's node set, {expected!r}, to confirm its destructive steps")
        runner = cls(
            session, wave, actor=actor, parallel=parallel, poll_s=poll_s, refresh_s=refresh_s, on_change=on_change
        )
        if wave == nxt:
            session.start_wave(wave, actor=runner.actor, confirmed=expected, parallel=runner.parallel)
        else:
            session.note(f"wave {wave_number(wave)} runs itself from here (confirmed {expected!r})", actor=runner.actor)
        return runner

    def pause(self) -> None:
        """No new action is taken (steps in flight finish); :meth:`resume` goes on."""
        self._resume.clear()
        self._changed()

    def resume(self) -> None:
        self._resume.set()
        self._changed()

    def kill(self) -> None:
        """Stop the wave: no new action, the steps in flight cancelled as `k` cancels one
        (their outcome is recorded unknown), and the wave recorded halted."""
        self._killed = True
        self.halted = self.halted or "killed by the operator"
        for run in list(self.session.running.values()):
            if run.node in self.session.state.waves[self.wave]:
                self.session.steps.request_cancel(run.stage, run.step, run.node)
        for task in self._tasks.values():
            task.cancel()
        self._resume.set()
        self._changed()

    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    def status(self) -> WaveStatus:
        return WaveStatus(
            wave=self.wave,
            running=sorted(self._tasks),
            needs_you=list(self.held.values()),
            halted=self.halted,
            paused=self.paused,
            finished=self._finished,
            actions=self.actions,
            progress=progress_words(self.session.state, self.wave),
        )

    # ------------------------------------------------------------------ the wave's part

    async def run(self) -> WaveStatus:
        """Walk the wave until every node is through, or it halted and its nodes at work
        stopped; then record wave-done or wave-halted."""
        state = self.session.state
        members = list(state.waves[self.wave])
        last_refresh = time.monotonic()
        try:
            while not self._killed:
                await self._resume.wait()
                if self._killed or self.session.state.paused:
                    break  # the session paused (q): no new action; resume starts the wave again
                self._collect()
                self.halted = self.halted or halt_reason(self.session.state, self.wave, self.held)
                self._pick_up_unblocked()
                if self.halted is None:
                    self._admit(members)
                if not self._tasks:
                    through = all(self.session.state.nodes[n].current in FINISHED for n in members)
                    # a node held for a person's tick goes on once it is given, halted or not; a
                    # halted wave ends when only nodes stopped at a failure are left
                    waiting = any(not need.failed for need in self.held.values())
                    if through or (self.halted is not None and not waiting):
                        break
                if time.monotonic() - last_refresh >= self.refresh_s:
                    await self._refresh()
                    last_refresh = time.monotonic()
                await asyncio.sleep(self.poll_s)
        finally:
            for task in self._tasks.values():
                task.cancel()
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
            self._tasks.clear()
        self._finished = True
        self._record_end(members)
        self._changed()
        return self.status()

    def _startable(self, members: list[str]) -> list[str]:
        state = self.session.state
        return [n for n in members if n not in self.held and state.nodes[n].current not in FINISHED]

    def _admit(self, members: list[str]) -> None:
        busy = set(self._tasks) | set(self.held)
        room = admissible(self.session.state, self.wave, len(busy), self.limit, self.parallel)
        for node in self._startable(members):
            if room <= 0:
                break
            if node in self._tasks:
                continue
            self._tasks[node] = asyncio.create_task(self._walk(node))
            room -= 1
            self._changed()

    def _collect(self) -> None:
        for node, task in list(self._tasks.items()):
            if not task.done():
                continue
            del self._tasks[node]
            need = None if task.cancelled() else task.result()
            if need is not None:
                self.held[node] = need
            self._changed()

    def _pick_up_unblocked(self) -> None:
        """A held node a person has unblocked (its Next is the runner's again) goes back to work.
        Looked at again only once something was recorded (a big wave held at a per-wave item)."""
        state = self.session.state
        if state.last_seq == self._held_seen:
            return
        self._held_seen = state.last_seq
        for node, need in list(self.held.items()):
            planned = self._plan(node)
            if state.nodes[node].current in FINISHED:
                del self.held[node]
            elif planned.action is not None and runner_may_take(planned.action):  # started: it may go on
                del self.held[node]
                self._tasks[node] = asyncio.create_task(self._walk(node))
            elif planned.action is not None and planned.action != need.action:
                self.held[node] = self._need(node, f"{describe(planned.action)}: a person's to do", planned.action)
            elif planned.action is None and planned.person_must is not None and planned.person_must != need.what:
                self.held[node] = self._need(node, planned.person_must)  # what a person must do changed
            else:
                continue
            self._changed()

    async def _walk(self, node: str) -> NeedsYou | None:
        """Take Next for ``node`` while it needs no person; what a person must do, or None once through."""
        session = self.session
        taken = self._taken.setdefault(node, Counter())
        while not self._killed:
            await self._resume.wait()
            # planned and started in a turn: an acknowledgement (one fsync) releases many
            # nodes' walks at once, each planning and starting its next action
            await session.recorder.pacer.turn()
            state = session.state
            if state.nodes[node].current in FINISHED or state.paused:
                return None  # through, or the session paused: nothing more is taken or recorded
            planned = self._plan(node)
            action = planned.action
            if action is None:
                if planned.waiting_for is not None:
                    await asyncio.sleep(self.poll_s)
                    continue
                return self._need(node, planned.person_must or "nothing the runner may do")
            if not runner_may_take(action):
                return self._need(node, f"{describe(action)}: a person's to do", action)
            key = action.model_dump_json()
            taken[key] += 1
            if taken[key] > MAX_REPEATS:  # a step cut short again and again: a person looks
                return self._need(node, f"{describe(action)} taken {MAX_REPEATS} times without getting further")
            confirmation = node if isinstance(action, actions.RunStep) else None
            try:
                await session.perform(action, actor=self.actor, confirmation=confirmation)
            except ActionRefused as exc:
                return self._need(node, f"{describe(action)} refused: {'; '.join(exc.reasons)}")
            except CockpitError as exc:
                return self._need(node, f"{describe(action)} failed: {exc}")
            self.actions += 1
            self._changed()
        return None

    def _plan(self, node: str) -> Plan:
        """:func:`node_plan` for ``node``, planned again only once something was folded since
        (a pure function of the state: a node waiting on its step asks every poll)."""
        state = self.session.state
        version = (id(state), state.last_seq)
        cached = self._plans.get(node)
        if cached is not None and cached[0] == version:
            return cached[1]
        planned = node_plan(state, self.session.runbook, self.actor, node)
        self._plans[node] = (version, planned)
        return planned

    def _need(self, node: str, what: str, action: Action | None = None) -> NeedsYou:
        state = self.session.state
        return NeedsYou(node, what, failed=node_failed(state, node), action=action or person_action(state, node))

    async def _refresh(self) -> None:
        """A probe round over the wave's nodes at work without a step in flight: the triggers
        judge what the probes see (a GPU fallen off the bus stops the wave)."""
        busy = {run.node for run in self.session.running.values()}
        nodes = [n for n in self._tasks if n not in busy]
        if nodes:
            await self.session.refresh(nodes)

    def _record_end(self, members: list[str]) -> None:
        state = self.session.state
        if state.ended_at is not None or state.paused:
            return  # nothing follows session-paused: the resumed session starts the wave again
        out = set(out_of_service(state))
        done = [n for n in members if state.nodes[n].current == DONE]
        through = all(state.nodes[n].current in FINISHED for n in members) and self.halted is None
        facts = WaveEndedFacts(
            reason=None if through else (self.halted or "a person must act on the held nodes"),
            done=done,
            held=sorted(self.held) or None,
            not_started=[
                n for n in members if state.nodes[n].current not in FINISHED and n not in self.held and n not in out
            ]
            or None,
            actions=self.actions,
        )
        kind = EventKind.WAVE_DONE if through else EventKind.WAVE_HALTED
        self.session.recorder.record(kind, actor=self.actor, wave=self.wave, facts=facts)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
