"""The session engine: intents in, events out, through the gate and onto disk first.

Every intent (run a step, tick an item, sign off, override, raise or clear a trigger,
start a wave, ...) goes the same way:

1. the gating engine judges it (:func:`cockpit.engine.rules.check_action`); a refusal
   raises :class:`ActionRefused` with the gate's reasons and writes nothing;
2. the event is appended to the change log (one write) by
   :class:`cockpit.changelog.journal.Journal`;
3. only then is it folded into the state the UI renders, the trigger evaluators
   run over the new state, and subscribers are told;
4. its fsync is batched with the others' off the event loop (the journal's group
   commit): the action is reported done (:meth:`Session.perform` returns), a step's
   command runs, a notice is sent and the head is anchored only once it is
   acknowledged, i.e. that fsync returned.

So nothing on screen exists only in memory: the reviewer's view and replay fold
the same events. The live per-GPU detail of the latest probe is the one thing
kept in memory (:attr:`Session.live`); its summary is recorded whenever it changes.

The session is composed of the parts it owns: the :class:`~.recording.Recorder` (that
one path onto disk, and the runbook lookups), the :class:`~.probing.Prober` (probe
rounds) and the :class:`~.steps.StepRunner` (steps and item checks). The intents and
:meth:`Session.perform` stay here; opening a new or saved log is :mod:`~.opening`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeAlias, assert_never

from cockpit import __version__
from cockpit.changelog.events import Event, EventKind, utcnow
from cockpit.changelog.facts import (
    DecisionFacts,
    OverrideFacts,
    PathChosenFacts,
    RollbackFinishedFacts,
    SessionEndedFacts,
    SessionResumedFacts,
    SessionStartedFacts,
    TriggerFiredFacts,
    TriggersArmedFacts,
    WaveStartedFacts,
)
from cockpit.changelog.journal import Journal, JournalWriteError
from cockpit.changelog.reader import follower_after, gc_paused
from cockpit.changelog.sshsig import Signer
from cockpit.engine import actions
from cockpit.engine.actions import Action, ActionRefused, Verdict, describe
from cockpit.engine.fold import Folder
from cockpit.engine.forecast import StageHistory
from cockpit.engine.gates import gate_blockers
from cockpit.engine.planner import InFlight, Plan, demo_reviewer, node_plan, plan
from cockpit.engine.rules import check_action
from cockpit.engine.stagerun import (
    MAX_REPEATS,
    StageRunResult,
    Stop,
    Wait,
    stage_confirmation,
    stage_of,
    stage_run_move,
)
from cockpit.engine.state import CockpitState
from cockpit.errors import BadInput
from cockpit.fleet.backends.base import Backend, BackendError, BackendName
from cockpit.fleet.backends.registry import BackendOptions
from cockpit.fleet.backends.ssh import SshBackend
from cockpit.fleet.executor import Executor, StepOutcome
from cockpit.fleet.targets import ConnectionSource
from cockpit.fleet.transport import HostTarget, Transport
from cockpit.gpu.nodestate import NodeState
from cockpit.notify.delivery import Notifier
from cockpit.runbook.backends import with_backend
from cockpit.runbook.loader import LoadedRunbook
from cockpit.runbook.model import ROLLBACK_OUTCOME, Parameter, Runbook
from cockpit.runbook.placeholders import SECRET_SHOWN, ParamValue, secret_values, shown_parameters
from cockpit.session.notes import kept_note
from cockpit.session.notices import SessionNotices
from cockpit.session.opening import Reopened, Trust, check_operator, new_header, reopen
from cockpit.session.probing import Prober
from cockpit.session.recording import Recorder, masked
from cockpit.session.steps import OutputCallback, ProgressCallback, StepRun, StepRunner
from cockpit.session.steps import step_key as step_key  # the UI imports it from here

#: what a parameter the runbook does not name is: not a secret
_PLAIN = Parameter()
#: Seconds between looks while a stage run waits for the node's work in flight elsewhere.
STAGE_RUN_POLL_S = 0.05


#: What :meth:`Session.perform` returns, by the action: a step's outcome (``RunStep``), whether
#: the check held (``VerifyItem``), what a stage run did (``RunStage``), else the event the
#: action recorded.
Performed: TypeAlias = "StepOutcome | bool | StageRunResult | Event"


@dataclass(frozen=True, slots=True)
class EndedWindow:
    """What :meth:`Session.end_by_person` leaves: the log, the ``session-ended`` event's seq
    and outcome, what the engine put back, and the command that writes the ticket."""

    path: Path
    seq: int
    outcome: str
    put_back: list[str]

    @property
    def export_command(self) -> str:
        return f"cockpit export {shlex.quote(str(self.path))} --format markdown"

    def words(self) -> list[str]:
        """What to tell the person: the window ended, where the log is, how to export it."""
        return [
            f"window ended (outcome: {self.outcome}, seq {self.seq}); the change log is {self.path}",
            *(f"put back: {line}" for line in self.put_back),
            f"the ticket: {self.export_command}",
        ]


def ending_outcome(runbook: Runbook, outcome: str) -> str:
    """``outcome`` as a window of ``runbook`` may end with: one of its decision's outcomes
    (:attr:`~cockpit.runbook.model.Runbook.ending_outcomes`, the list the screen's end dialog
    offers), else :class:`BadInput` naming them. ``roll-back`` is among them in every runbook
    without a ``[decision]`` table: the end of a window that went wrong."""
    outcome = outcome.strip()
    if not outcome or "\n" in outcome or len(outcome) > 200:
        raise BadInput("ending a window needs its outcome: one line of at most 200 characters")
    choices = runbook.ending_outcomes
    if outcome not in choices:
        also = f" ({ROLLBACK_OUTCOME} ends a window that went wrong)" if ROLLBACK_OUTCOME in choices else ""
        raise BadInput(f"outcome {outcome!r} is not one of the runbook's: {', '.join(choices)}{also}")
    return outcome


def _same_work(a: Action, b: Action) -> bool:
    """Whether two actions are the same step or the same check (their words aside)."""
    if isinstance(a, actions.RunStep) and isinstance(b, actions.RunStep):
        return (a.stage, a.step, a.node) == (b.stage, b.step, b.node)
    if isinstance(a, actions.VerifyItem) and isinstance(b, actions.VerifyItem):
        return (a.stage, a.item, a.node) == (b.stage, b.item, b.node)
    if isinstance(a, actions.RunStage) and isinstance(b, actions.RunStage):
        return (a.stage, a.node) == (b.stage, b.node)
    return False


def default_operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


class Session:
    """One change window: the change log, the folded state, and the means to act."""

    def __init__(
        self,
        *,
        journal: Journal,
        loaded: LoadedRunbook,
        folder: Folder,
        transport: Transport | None,
        operator: str,
        clock: Callable[[], datetime] = utcnow,
        backend: Backend | None = None,
    ) -> None:
        self.journal = journal
        self._planned: tuple[tuple[int, int, str | None, InFlight], Plan] | None = None  # next_plan's last
        # appends made on the event loop share fsyncs, each in a thread (group commit): the
        # loop never waits on the disk; perform, a step's command and a notice wait instead
        journal.group_commit = True
        self.loaded = loaded
        self.runbook: Runbook = loaded.runbook
        self.folder = folder
        self.transport = transport
        self.operator = operator
        self.clock = clock
        self.params: dict[str, Any] = dict(folder.state.params)
        # secret parameters were never written (the log holds ***): from the environment again
        self.params.update(secret_values(self.runbook, os.environ))
        secrets = [str(v) for k, v in self.params.items() if self.runbook.parameters.get(k, _PLAIN).secret]
        if backend is None and journal.header.backend_name == BackendName.SSH:
            backend = SshBackend(transport)  # no engine: the nodes over SSH, as always
        #: the engine the window's node work goes through (None: one this session could not make)
        self.backend = backend
        if backend is not None:
            backend.use_runbook(self.runbook)  # an engine that runs the runbook's own steps (Ansible) takes them
        self.executor = Executor(
            transport, self.params, facts={"change_id": journal.header.change_id, "operator": operator}, backend=backend
        )
        self.executor.secrets = tuple(s for s in secrets if s != SECRET_SHOWN)  # live output too
        self.recorder = Recorder(
            journal=journal, folder=folder, runbook=self.runbook, operator=operator, params=self.params, clock=clock,
            secrets=tuple(s for s in secrets if s != SECRET_SHOWN),
        )  # fmt: skip
        self.prober = Prober(self.recorder, transport)
        self.steps = StepRunner(self.recorder, self.executor, self.prober)
        # what the UI reads: the same objects the prober and the step runner fill
        self.live: dict[str, NodeState] = self.prober.live
        self.running: dict[str, StepRun] = self.steps.running
        self.last_outcomes: dict[str, StepOutcome] = self.steps.last_outcomes
        #: what the session tells people beyond its screen (None: no sink configured)
        self.notices: SessionNotices | None = None
        #: an earlier window's measured stages, for the forecast to start from (``--history``)
        self.history: StageHistory | None = None
        #: how long closing waits for deliveries under way (the window-ended notice)
        self.notify_drain_s = 5.0
        #: the actions being performed now, by a token of each call (see :meth:`in_flight`)
        self._flight: dict[int, Action] = {}
        #: told (no arguments) when an action starts or ends being performed: a screen's Next
        #: changes then, with no event written yet (a check's command, a step's closing probe)
        self.flight_listeners: list[Callable[[], None]] = []
        #: what :meth:`end_by_person` left (None until a person ended the window here)
        self.ended: EndedWindow | None = None
        self.prober.listeners.append(self._flight_changed)  # a probe round reads nodes a check waits for
        self._closed = False

    # ------------------------------------------------------------------ construction

    @classmethod
    def start(
        cls,
        *,
        sessions_dir: Path,
        change_id: str,
        loaded: LoadedRunbook,
        params: Mapping[str, ParamValue],
        targets: Sequence[HostTarget],
        operator: str,
        transport: Transport | None,
        connection: ConnectionSource | None = None,
        clock: Callable[[], datetime] = utcnow,
        trust: Trust | None = None,
        backend: Backend | None = None,
        backend_options: BackendOptions | None = None,
    ) -> Session:
        """Open a new change window: write the header (:func:`~.opening.new_header`) and
        the session-started event. ``trust``: whether sign-offs need signatures, whose
        keys count, and the operator's own key."""
        trust = trust or Trust()
        book = loaded.runbook.trust
        if book is not None and book.requires and not trust.require_signatures:  # the runbook can only add
            raise BadInput(f"runbook {loaded.runbook.id} requires signatures ([trust]): this window must be signed")
        hosts = [t.name for t in targets]
        merged = {**loaded.runbook.defaults(), **params}
        # planning the waves validates the fleet against the runbook before anything is written
        signatures: dict[int, str] | None = {} if trust.require_signatures else None
        options = backend_options or BackendOptions(name=backend.name if backend is not None else BackendName.SSH)
        if backend is not None and backend.name != options.name:
            raise BadInput(f"backend {backend.name} given with the options of backend {options.name}")
        folder = Folder(
            loaded.runbook, with_backend(merged, options.name), hosts, operator=operator, signatures=signatures
        )
        with gc_paused():  # a big fleet's header: many objects, no garbage, over a heap the fold just grew
            header = new_header(
                change_id,
                loaded,
                shown_parameters(loaded.runbook, merged),  # a secret parameter is written as ***
                targets,
                operator,
                connection,
                created_at=clock(),
                require_signatures=trust.require_signatures,
                allowed_signers=trust.allowed_signers,
                backend=options,
            )
            journal = Journal.create(sessions_dir, header, clock=clock, signer=trust.signer)
        session = cls(
            journal=journal, loaded=loaded, folder=folder, transport=transport, operator=operator, clock=clock,
            backend=backend,
        )  # fmt: skip
        session._record(
            EventKind.SESSION_STARTED,
            actor=operator,
            facts=SessionStartedFacts(operator=operator, hosts=hosts, tool_version=__version__),
        )
        return session

    @classmethod
    def resume(
        cls,
        path: Path,
        *,
        operator: str | None = None,
        runbook: Path | None = None,
        transport_factory: Callable[[list[str]], Transport | None] | None = None,
        clock: Callable[[], datetime] = utcnow,
        signer: Signer | None = None,
        backend_factory: Callable[[BackendOptions, Transport | None], Backend | None] | None = None,
        opened: Reopened | None = None,
    ) -> Session:
        """Reopen a saved window where it stopped (:func:`~.opening.reopen` reads it back;
        ``opened``: what the caller's reopen already read, not read again).

        A step that was in flight when the writer died has an unknown outcome: the
        resumed event names it and the gate counts it failed until it is run again.
        """
        path = Path(path)
        log, loaded, folder = opened or reopen(path, operator=operator, runbook=runbook)
        check_operator(log.header, operator)
        secret_values(loaded.runbook, os.environ)  # a missing secret refused before the lock is taken
        header = log.header
        operator = operator or header.operator
        journal = Journal.open_for_append(path, operator, clock=clock, signer=signer, log=log)  # read once
        transport = transport_factory(list(header.hosts)) if transport_factory else None
        # the engine the window started with, as its header recorded it (none recorded: ssh)
        options = BackendOptions.from_recorded(header.backend, header.backend_options)
        backend = backend_factory(options, transport) if backend_factory else None
        session = cls(
            journal=journal, loaded=loaded, folder=folder, transport=transport, operator=operator, clock=clock,
            backend=backend,
        )  # fmt: skip
        session.recorder.follow(follower_after(log))  # others' appends from where the read ended
        interrupted = [
            step_key(stage.id, step.id, stage.node)
            for stage in session.state.all_stages()
            for step in stage.steps.values()
            if step.status == "running"
        ]
        torn = log.torn.describe() if log.torn is not None else None
        session._record(
            EventKind.SESSION_RESUMED,
            actor=operator,
            facts=SessionResumedFacts(interrupted=interrupted, torn_tail=torn),
        )
        return session

    # ------------------------------------------------------------------ reading

    @property
    def state(self) -> CockpitState:
        return self.folder.state

    @property
    def change_id(self) -> str:
        return self.journal.header.change_id

    @property
    def path(self) -> Path:
        return self.journal.path

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        self.recorder.subscribe(callback)

    def notify_with(self, notifier: Notifier) -> SessionNotices:
        """Tell ``notifier``'s sinks what happens from now on (:mod:`~.notices`); each
        delivery is recorded as a ``notification-sent`` event. Delivery runs in the
        background: nothing the window does waits for a webhook."""
        self.notices = SessionNotices(
            notifier,
            change_id=self.change_id,
            state=lambda: self.state,
            record=self.recorder.record,
            acknowledged=self.journal.is_acknowledged,
        )
        self.subscribe(self.notices.on_event)
        self.journal.acknowledged.append(self.notices.synced)
        return self.notices

    def verdict(self, action: Action, actor: str | None = None) -> Verdict:
        return check_action(self.state, self.runbook, action, actor or self.operator, operator=self.operator)

    def in_flight(self) -> InFlight:
        """What is under way that the change log does not show yet: the actions being
        performed (a check's command, a step until the probe that closes it) and the nodes a
        probe is reading. Next never proposes them again and waits for them."""
        return InFlight(tuple(self._flight.values()), self.prober.probing)

    def next_plan(self, reviewer: str | None = None) -> Plan:
        """What Next is now: an action the gate accepts, or what it waits for, or who must
        act. ``reviewer``: a second person at hand to sign (default: the demo's simulated
        reviewer when the demo's operator is at the controls, else nobody)."""
        state, reviewer, flight = self.state, reviewer or demo_reviewer(self.operator), self.in_flight()
        # a pure function of these: asked again (the screen's every redraw) before anything was
        # folded or started, the plan is the same one, not every node of the wave walked again
        key = (id(state), state.last_seq, reviewer, flight)
        if self._planned is not None and self._planned[0] == key:
            return self._planned[1]
        planned = plan(state, self.runbook, self.operator, reviewer=reviewer, flight=flight)
        self._planned = (key, planned)
        return planned

    def next_action(self, reviewer: str | None = None) -> Action | None:
        """The action of :meth:`next_plan`, if there is one."""
        return self.next_plan(reviewer).action

    # ------------------------------------------------------------------ recording (see recording.Recorder)

    def _record(self, kind: EventKind, *, gate: Action | None = None, **fields: Any) -> Event:
        return self.recorder.record(kind, gate=gate, **fields)

    def evaluate_triggers(self, now: datetime | None = None) -> list[Event]:
        """Record a trigger-fired event for every new firing (the moment it is seen)."""
        return self.recorder.evaluate_triggers(now)

    def absorb_foreign(self) -> list[Event]:
        """Fold, in file order, the events other processes (a reviewer) appended since the last fold."""
        return self.recorder.absorb_foreign()

    def _check(self, action: Action, actor: str) -> None:
        self.recorder.check(action, actor)

    def _is_window(self, stage: str) -> bool:
        return self.recorder.is_window(stage)

    def window_target(self) -> str | None:
        """Where a window step that runs ``where = "node"`` runs: the canary."""
        return self.recorder.window_target()

    def node_facts(self, node: str | None) -> dict[str, Any]:
        """Recorded facts of a node (its baseline) for ``{recorded_*}`` placeholders."""
        return self.recorder.node_facts(node)

    # ------------------------------------------------------------------ steps (see steps.StepRunner)

    def preview_step(self, stage: str, step: str, node: str | None = None) -> tuple[str, str]:
        """Where a step would run and the exact command, as :meth:`perform` would run it."""
        return self.steps.preview_step(stage, step, node)

    # ------------------------------------------------------------------ items and gates

    async def verify_item(self, stage: str, item: str, node: str | None = None, *, actor: str | None = None) -> bool:
        """Verify a check or command item now and record the verdict with its evidence."""
        return await self.steps.verify_item(stage, item, node, actor=actor)

    async def run_stage(
        self, stage: str, node: str | None = None, *, actor: str | None = None, confirmation: str | None = None
    ) -> StageRunResult:
        """Take ``stage`` (of ``node``; None: the window's current stage) up to its gate: each
        step and check Next proposes there that needs no person, through :meth:`perform` as a
        person's own press would (judged by the gate, recorded with ``actor``), one after
        another, as a wave runner takes a node's (:func:`~cockpit.engine.stagerun.stage_run_move`).
        Stops at the gate, at the first step or check that fails, or at what a person must do.
        A destructive step left in the stage wants ``confirmation``, the node's name, typed
        once; refused before anything runs without it."""
        actor = actor or self.operator
        node = None if self._is_window(stage) else node
        action = actions.RunStage(stage=stage, node=node)
        self._check(action, actor)
        expected = stage_confirmation(self.state, stage, node)
        if expected is not None and confirmation != expected:
            raise ActionRefused(action, [f"stage {stage!r} has destructive steps: type {expected!r} to confirm them"])
        taken: dict[str, int] = {}
        count = 0
        while True:
            if node is None:
                planned = self.next_plan() if self.state.window_current == stage else Plan(person_must="")
            else:
                busy = self.in_flight().on(node)  # a step or check of the node under way elsewhere
                if busy is not None:
                    planned = Plan(waiting_for=describe(busy))
                else:
                    planned = node_plan(self.state, self.runbook, actor, node)
            move = stage_run_move(planned, stage, node)
            if isinstance(move, Stop):
                return StageRunResult(stage, node, count, move.why or f"stage {stage!r} is no longer current")
            if isinstance(move, Wait):
                await asyncio.sleep(STAGE_RUN_POLL_S)
                continue
            key = move.action.model_dump_json()
            taken[key] = taken.get(key, 0) + 1
            if taken[key] > MAX_REPEATS:
                why = f"{describe(move.action)} taken {MAX_REPEATS} times without getting further"
                return StageRunResult(stage, node, count, why, ok=False, error=why)
            confirm = expected if isinstance(move.action, actions.RunStep) else None
            try:
                result = await self.perform(move.action, actor=actor, confirmation=confirm)
            except ActionRefused as exc:  # the gate said no to this one (max_parallel...): the person looks
                why = f"{describe(move.action)} refused: {'; '.join(exc.reasons)}"
                return StageRunResult(stage, node, count, why, ok=False, error=why)
            count += 1
            held = result if isinstance(result, bool) else getattr(result, "ok", True)
            if not held:
                evidence = getattr(result, "error", None) or self._evidence(move.action)
                why = f"{describe(move.action)} failed" + (f": {evidence}" if evidence else "")
                return StageRunResult(stage, node, count, why, ok=False, error=why)

    def _evidence(self, action: actions.RunStep | actions.VerifyItem) -> str | None:
        """The recorded evidence of a check that did not hold, or why a step failed."""
        stage = stage_of(self.state, action.stage, action.node)
        if stage is None:
            return None
        if isinstance(action, actions.VerifyItem):
            return stage.items[action.item].evidence
        return stage.steps[action.step].failure()

    def tick(
        self, stage: str, item: str, node: str | None = None, *, note: str | None = None, actor: str | None = None
    ) -> Event:
        actor = actor or self.operator
        window = self._is_window(stage)
        action = actions.TickItem(stage=stage, node=None if window else node, item=item, note=note)
        self._check(action, actor)
        return self.recorder.record_action(EventKind.ITEM_TICKED, action, actor, node=node)

    def sign_off(
        self, stage: str, item: str | None = None, node: str | None = None, *, note: str | None = None, actor: str
    ) -> Event:
        window = self._is_window(stage)
        action = actions.SignOff(stage=stage, node=None if window else node, item=item, note=note)
        self._check(action, actor)
        return self.recorder.record_action(EventKind.SIGNOFF, action, actor, node=node)

    def pass_gate(self, stage: str, node: str | None = None, *, actor: str | None = None) -> Event:
        actor = actor or self.operator
        window = self._is_window(stage)
        action = actions.PassGate(stage=stage, node=None if window else node)
        self._check(action, actor)
        return self.recorder.record_action(EventKind.GATE_PASSED, action, actor, recheck=True)

    def override(self, stage: str, node: str | None = None, *, reason: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        window = self._is_window(stage)
        node = None if window else node
        action = actions.Override(stage=stage, node=node, reason=reason)
        self._check(action, actor)
        stage_state = self.state.window[stage] if window else self.state.nodes[node or ""].stages.get(stage)
        blocked = gate_blockers(stage_state) if stage_state is not None else []
        return self.recorder.record_action(
            EventKind.OVERRIDE, action, actor, recheck=True, facts=OverrideFacts(blocked_by=blocked)
        )

    # ------------------------------------------------------------------ triggers, waves, decisions

    def arm_triggers(self, *, actor: str | None = None) -> Event:
        actor = actor or self.operator
        self._check(actions.ArmTriggers(), actor)
        return self._record(
            EventKind.TRIGGERS_ARMED,
            actor=actor,
            facts=TriggersArmedFacts(triggers=[t.id for t in self.runbook.triggers]),
        )

    def raise_trigger(self, trigger: str, node: str | None = None, *, note: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        action = actions.RaiseTrigger(trigger=trigger, node=node, note=note)
        self._check(action, actor)
        facts = TriggerFiredFacts(evidence=f"raised by {actor}: {note}")
        return self.recorder.record_action(EventKind.TRIGGER_FIRED, action, actor, facts=facts)

    def clear_trigger(self, trigger: str, *, reason: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        action = actions.ClearTrigger(trigger=trigger, reason=reason)
        self._check(action, actor)
        return self.recorder.record_action(EventKind.TRIGGER_CLEARED, action, actor)

    def start_wave(
        self,
        wave: int | None = None,
        *,
        actor: str | None = None,
        confirmed: str | None = None,
        parallel: int | None = None,
    ) -> Event:
        """Start the next wave. ``confirmed`` and ``parallel``: a wave that runs itself
        (:mod:`~.waves`), the node set its person typed and how many nodes go at once."""
        actor = actor or self.operator
        st = self.state
        if wave is None:
            wave = 0 if st.current_wave is None else st.current_wave + 1
        action = actions.StartWave(wave=wave)
        self._check(action, actor)
        members = st.waves[wave] if 0 <= wave < len(st.waves) else []
        facts = WaveStartedFacts(nodes=list(members), confirmed=confirmed, parallel=parallel)
        return self.recorder.record_action(EventKind.WAVE_STARTED, action, actor, recheck=True, facts=facts)

    def choose_path(self, path: str, *, rationale: str, owner: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        self._check(actions.ChoosePath(path=path, rationale=rationale, owner=owner), actor)
        return self._record(
            EventKind.PATH_CHOSEN, actor=actor, facts=PathChosenFacts(path=path, rationale=rationale, owner=owner)
        )

    def record_decision(
        self,
        outcome: str,
        *,
        answers: Mapping[str, str] | None = None,
        halt_rollout: bool = False,
        actor: str | None = None,
    ) -> Event:
        actor = actor or self.operator
        self._check(
            actions.RecordDecision(
                outcome=outcome,
                answers=tuple((answers or {}).items()),
                halt_rollout=halt_rollout,
            ),
            actor,
        )
        facts = DecisionFacts(outcome=outcome, answers=dict(answers or {}), halt_rollout=halt_rollout or None)
        return self._record(EventKind.DECISION, actor=actor, facts=facts)

    def start_rollback(self, node: str, *, reason: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        action = actions.StartRollback(node=node, reason=reason)
        self._check(action, actor)
        return self.recorder.record_action(EventKind.ROLLBACK_STARTED, action, actor)

    def finish_rollback(self, node: str, *, actor: str | None = None) -> Event:
        """End a node's rollback with its result: ok only when every rollback item holds."""
        actor = actor or self.operator
        self._check(actions.FinishRollback(node=node), actor)
        progress = self.state.nodes[node]
        assert progress.rollback is not None  # the gate checked it
        blockers = gate_blockers(progress.rollback)
        blockers += [
            f"step {st.id!r} not run" for st in progress.rollback.steps.values() if st.status == "open"
        ]  # every rollback step must have run, not only its checks hold
        facts = RollbackFinishedFacts(ok=not blockers, blocked_by=blockers or None)
        return self._record(EventKind.ROLLBACK_FINISHED, actor=actor, node=node, facts=facts)

    def note(self, text: str, node: str | None = None, *, actor: str | None = None) -> Event:
        actor = actor or self.operator
        if not text.strip():
            raise BadInput("a note needs some text")
        # 10 MB pasted: kept aside (masked first: the artifact holds no secret parameter either)
        text = kept_note(masked(text, self.recorder.secrets), self.recorder.journal.store_artifact)
        action = actions.Note(node=node, text=text)
        self._check(action, actor)
        return self.recorder.record_action(EventKind.NOTE, action, actor, note=text)

    async def perform(
        self,
        action: Action,
        *,
        actor: str | None = None,
        confirmation: str | None = None,
        on_output: OutputCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Performed:
        """Carry out any :data:`Action`: the one way in for every intent (the UI's keys and
        palette, the autopilot). ``confirmation`` is the typed name a destructive step wants.

        The same step or check already under way (a second key press while its command
        runs) is refused: it would run twice and record two verdicts."""
        # only a step, a check or a stage run waits on the node: the others end before anyone could look
        lasts = isinstance(action, actions.RunStep | actions.VerifyItem | actions.RunStage)
        if lasts:
            for under_way in self._flight.values():
                if _same_work(under_way, action):
                    raise ActionRefused(action, [f"{describe(under_way)} is already under way"])
        token = object()
        self._flight[id(token)] = action
        if lasts:
            self._flight_changed()
        try:
            done = await self._perform(
                action, actor=actor, confirmation=confirmation, on_output=on_output, on_progress=on_progress
            )
            await self.journal.durable()  # reported done once what it recorded is acknowledged
            return done
        finally:
            del self._flight[id(token)]
            if lasts:
                self._flight_changed()

    def _flight_changed(self) -> None:
        for listener in list(self.flight_listeners):
            listener()

    async def _perform(
        self,
        action: Action,
        *,
        actor: str | None,
        confirmation: str | None,
        on_output: OutputCallback | None,
        on_progress: ProgressCallback | None,
    ) -> Performed:
        # every kind of action has its case: mypy proves it (assert_never), so a new kind
        # cannot be added to the union and silently do nothing here
        match action:
            case actions.RunStep():
                return await self.steps.run_step(
                    action.stage,
                    action.step,
                    action.node,
                    actor=actor,
                    confirmation=confirmation,
                    on_output=on_output,
                    on_progress=on_progress,
                )
            case actions.RunStage():
                return await self.run_stage(action.stage, action.node, actor=actor, confirmation=confirmation)
            case actions.VerifyItem():
                return await self.verify_item(action.stage, action.item, action.node, actor=actor)
            case actions.TickItem():
                return self.tick(action.stage, action.item, action.node, note=action.note, actor=actor)
            case actions.SignOff():
                return self.sign_off(
                    action.stage, action.item, action.node, note=action.note, actor=actor or self.operator
                )
            case actions.PassGate():
                return self.pass_gate(action.stage, action.node, actor=actor)
            case actions.FinishRollback():
                return self.finish_rollback(action.node, actor=actor)
            case actions.Override():
                return self.override(action.stage, action.node, reason=action.reason, actor=actor)
            case actions.ArmTriggers():
                return self.arm_triggers(actor=actor)
            case actions.RaiseTrigger():
                return self.raise_trigger(action.trigger, action.node, note=action.note, actor=actor)
            case actions.ClearTrigger():
                return self.clear_trigger(action.trigger, reason=action.reason, actor=actor)
            case actions.StartWave():
                return self.start_wave(action.wave, actor=actor)
            case actions.ChoosePath():
                return self.choose_path(action.path, rationale=action.rationale, owner=action.owner, actor=actor)
            case actions.StartRollback():
                return self.start_rollback(action.node, reason=action.reason, actor=actor)
            case actions.RecordDecision():
                return self.record_decision(
                    action.outcome, answers=dict(action.answers), halt_rollout=action.halt_rollout, actor=actor
                )
            case actions.Note():
                return self.note(action.text, action.node, actor=actor)
            case _:
                assert_never(action)

    # ------------------------------------------------------------------ probes (see probing.Prober)

    async def refresh(self, nodes: Sequence[str] | None = None) -> dict[str, NodeState]:
        """One probe round over ``nodes`` (default: every node without a step in flight)."""
        return await self.prober.refresh(nodes)

    # ------------------------------------------------------------------ lifecycle

    def pause(self, reason: str | None = None) -> None:
        """Record the pause, once. A step still in flight is recorded first as interrupted
        (outcome unknown: it may go on running on the node), never as cancelled."""
        if self._closed or self.state.ended_at is not None or self.state.paused:
            return
        self.steps.interrupt_running(reason or "the session was paused while it ran")
        self._record(EventKind.SESSION_PAUSED, note=reason)

    async def end_window(self) -> list[str]:
        """Ask the backend to put back what it changed on the site's configuration for the window
        (a GPU Operator's ClusterPolicy and node labels), each line a note in the change log."""
        if self.backend is None:
            return []
        through = bool(self.state.nodes) and all(p.current == "done" for p in self.state.nodes.values())
        said = await self.backend.end_window(through=through)
        for line in said:
            self.note(f"{self.backend.name}: {line}")
        return said

    def end(self, outcome: str) -> Event:
        return self._record(EventKind.SESSION_ENDED, facts=SessionEndedFacts(outcome=outcome))

    async def end_by_person(self, outcome: str, *, note: str | None = None) -> EndedWindow:
        """The operator ends the window: the one way a person writes ``session-ended`` (``q``
        only pauses a window, for ``cockpit resume`` to go on with; the demo's autopilot ends
        its own). ``outcome``: one of the runbook's outcomes (:func:`ending_outcome`, the
        list the decision offers), the ticket's title; ``note``: why, in the timeline.

        Refused (nothing written) while a step runs (``k`` cancels it first: its outcome must be
        known before the window is closed on it) or once the window has ended. The engine puts
        back what it changed on the site's configuration for the window first (a GPU Operator's
        ClusterPolicy), since an ended window is never resumed to do it later; then the event,
        then the session is closed and its lock file removed. Returns where the log is and the
        command that writes its ticket. The UI's key for it is the screens' to add."""
        outcome = ending_outcome(self.runbook, outcome)
        if self._closed or self.state.ended_at is not None:
            raise BadInput(f"session {self.change_id} has already ended")
        if self.running:
            steps = ", ".join(sorted(self.running))
            raise BadInput(f"a step is still running ({steps}): let it finish or cancel it (k) first")
        try:
            said = await self.end_window()
        except BackendError as exc:
            # the window still ends (a person asked, and nobody could resume it to try again):
            # the failure is in the log and in the words returned, for a person to act on
            said = [f"putting back the engine's changes FAILED: {exc}"]
            self.note(said[0])
        event = self._record(
            EventKind.SESSION_ENDED, facts=SessionEndedFacts(outcome=outcome), note=(note or "").strip() or None
        )
        self.journal.remove_lock_file()  # while still held: nobody may take it for an ended window
        await self.close()
        self.ended = EndedWindow(path=self.path, seq=event.seq, outcome=outcome, put_back=said)
        return self.ended

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            with contextlib.suppress(JournalWriteError):  # a failed fsync was said to whoever waited
                await self.journal.durable()  # the last events acknowledged (their notices go out)
            if self.notices is not None:
                # the window-ended notice and any retry under way, bounded; what is still
                # trying then is recorded as abandoned while the log is open
                await self.notices.notifier.close(self.notify_drain_s)
            if self.backend is not None:
                await self.backend.close()
            if self.transport is not None:
                await self.transport.close()
        finally:
            self.journal.close()
