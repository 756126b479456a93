"""The session engine: intents in, events out, through the gate and onto disk first.

Every intent (run a step, tick an item, sign off, override, raise or clear a trigger,
start a wave, ...) goes the same way:

1. the gating engine judges it (:func:`cockpit.engine.rules.check_action`); a refusal
   raises :class:`ActionRefused` with the gate's reasons and writes nothing;
2. the event is appended to the change log (one write, fsync'd) by
   :class:`cockpit.changelog.journal.Journal`;
3. only then is it folded into the state the UI renders, the trigger evaluators
   run over the new state, and subscribers are told.

So nothing on screen exists only in memory: the reviewer's view and replay fold
the same events. The live per-GPU detail of the latest probe is the one thing
kept in memory (:attr:`Session.live`); its summary is recorded whenever it changes.
"""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit import __version__
from cockpit.changelog.events import Event, EventKind, utcnow
from cockpit.changelog.journal import (
    Journal,
    JournalFollower,
    SessionHeader,
    read_session,
)
from cockpit.engine.actions import (
    Action,
    ActionRefused,
    ArmTriggers,
    ChoosePath,
    ClearTrigger,
    FinishRollback,
    Note,
    Override,
    PassGate,
    RaiseTrigger,
    RecordDecision,
    RunStep,
    SignOff,
    StartRollback,
    StartWave,
    TickItem,
    Verdict,
    VerifyItem,
)
from cockpit.engine.checks import run_check
from cockpit.engine.fold import Folder
from cockpit.engine.gates import gate_blockers
from cockpit.engine.planner import plan
from cockpit.engine.rules import check_action
from cockpit.engine.state import (
    ROLLBACK_STAGE,
    SYSTEM_ACTOR,
    CockpitState,
)
from cockpit.engine.triggers import evaluate as evaluate_triggers
from cockpit.errors import BadInput
from cockpit.fleet.executor import Executor, RebootProgress, StepOutcome
from cockpit.fleet.probes import probe_node
from cockpit.fleet.transport import HostTarget, Transport
from cockpit.gpu.nodestate import NodeState
from cockpit.runbook.loader import LoadedRunbook, load_runbook
from cockpit.runbook.model import Item, Runbook, Step, StepKind, Verify, Where
from cockpit.runbook.placeholders import fill

#: Outputs longer than this go to an artifact; the event keeps head and tail.
INLINE_OUTPUT_LIMIT = 8 * 1024
#: Lines of live output kept per running step for the UI.
LIVE_OUTPUT_LINES = 400

OutputCallback = Callable[[str, str], None]
ProgressCallback = Callable[[RebootProgress], None]


@dataclass
class StepRun:
    """A step in flight, for the UI: its streamed output and reboot progress."""

    stage: str
    step: str
    node: str | None
    started_at: datetime
    output: list[str] = field(default_factory=list)
    progress: RebootProgress | None = None


def step_key(stage: str, step: str, node: str | None) -> str:
    return f"{stage}/{step}/{node or '-'}"


def default_operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def _clean(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Facts as the change log keeps them (TOML has no null)."""
    return {k: v for k, v in facts.items() if v is not None}


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
    ) -> None:
        self.journal = journal
        self.loaded = loaded
        self.runbook: Runbook = loaded.runbook
        self.folder = folder
        self.transport = transport
        self.operator = operator
        self.clock = clock
        self.params: dict[str, Any] = dict(folder.state.params)
        self.executor = Executor(
            transport, self.params, facts={"change_id": journal.header.change_id, "operator": operator}
        )
        self.live: dict[str, NodeState] = {}
        self.running: dict[str, StepRun] = {}
        self.last_outcomes: dict[str, StepOutcome] = {}
        self._subscribers: list[Callable[[Event], None]] = []
        self._refresh_lock = asyncio.Lock()
        self._busy: set[str] = set()  # nodes with a step in flight: the poller leaves them alone
        self._closed = False
        self._follower: JournalFollower | None = None  # for events other processes append

    # ------------------------------------------------------------------ construction

    @classmethod
    def start(
        cls,
        *,
        sessions_dir: Path,
        change_id: str,
        loaded: LoadedRunbook,
        params: Mapping[str, object],
        targets: Sequence[HostTarget],
        operator: str,
        transport: Transport | None,
        clock: Callable[[], datetime] = utcnow,
    ) -> Session:
        """Open a new change window: write the header and the session-started event."""
        hosts = [t.name for t in targets]
        merged = {**loaded.runbook.defaults(), **params}
        # planning the waves validates the fleet against the runbook before anything is written
        folder = Folder(loaded.runbook, merged, hosts, operator=operator)
        header = SessionHeader(
            change_id=change_id,
            runbook_id=loaded.runbook.id,
            runbook_sha256=loaded.sha256,
            runbook_path=str(loaded.path),
            operator=operator,
            hosts=hosts,
            targets=[t.model_dump(exclude_none=True) for t in targets],
            parameters=merged,
            tool_version=__version__,
            created_at=clock(),
        )
        journal = Journal.create(sessions_dir, header, clock=clock)
        session = cls(
            journal=journal, loaded=loaded, folder=folder, transport=transport, operator=operator, clock=clock
        )
        session._record(
            EventKind.SESSION_STARTED,
            actor=operator,
            facts={"operator": operator, "hosts": hosts, "tool_version": __version__},
        )
        return session

    @classmethod
    def resume(
        cls,
        path: Path,
        *,
        operator: str | None = None,
        transport_factory: Callable[[list[str]], Transport | None] | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> Session:
        """Reopen a saved window where it stopped.

        A step that was in flight when the writer died has an unknown outcome: the
        resumed event names it and the gate counts it failed until it is run again.
        """
        path = Path(path)
        log = read_session(path)
        header = log.header
        operator = operator or header.operator
        if operator != header.operator:
            raise BadInput(f"session {header.change_id} belongs to operator {header.operator}, not {operator}")
        loaded = load_runbook(Path(header.runbook_path))
        if loaded.sha256 != header.runbook_sha256:
            raise BadInput(
                f"runbook {header.runbook_path} changed since the session started "
                f"(sha256 {loaded.sha256[:12]} vs recorded {header.runbook_sha256[:12]}); restore it to resume"
            )
        folder = Folder(loaded.runbook, header.parameters, header.hosts, operator=header.operator)
        folder.apply_all(log.events)
        journal = Journal.open_for_append(path, operator, clock=clock)
        transport = transport_factory(list(header.hosts)) if transport_factory else None
        session = cls(
            journal=journal, loaded=loaded, folder=folder, transport=transport, operator=operator, clock=clock
        )
        interrupted = [
            step_key(stage.id, step.id, stage.node)
            for stage in session._all_stages()
            for step in stage.steps.values()
            if step.status == "running"
        ]
        facts: dict[str, Any] = {"interrupted": interrupted}
        if log.torn is not None:
            facts["torn_tail"] = log.torn.describe()
        session._record(EventKind.SESSION_RESUMED, actor=operator, facts=facts)
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
        self._subscribers.append(callback)

    def verdict(self, action: Action, actor: str | None = None) -> Verdict:
        return check_action(self.state, self.runbook, action, actor or self.operator, operator=self.operator)

    def next_action(self) -> Action | None:
        return plan(self.state, self.runbook, self.operator)

    def _all_stages(self) -> list[Any]:
        st = self.state
        stages = list(st.window.values())
        for progress in st.nodes.values():
            stages.extend(progress.stages.values())
            if progress.rollback is not None:
                stages.append(progress.rollback)
        return stages

    # ------------------------------------------------------------------ recording

    def _record(self, kind: EventKind, *, gate: Action | None = None, **fields: Any) -> Event:
        """Append durably, fold, evaluate the triggers, tell subscribers.

        With ``gate``, the action is judged again under the change log's lock, after
        folding whatever another process (a reviewer raising a trigger) appended since
        the first check: a refusal then writes nothing.
        """
        fields.setdefault("actor", self.operator)
        actor = fields["actor"]

        def recheck() -> None:
            assert gate is not None
            self._check(gate, actor)

        event = self.journal.append(kind, precondition=recheck if gate is not None else None, **fields)
        self._fold_appended(event)
        if kind is not EventKind.TRIGGER_FIRED:
            self.evaluate_triggers()
        return event

    def _notify(self, event: Event) -> None:
        for callback in list(self._subscribers):
            callback(event)

    def evaluate_triggers(self, now: datetime | None = None) -> list[Event]:
        """Record a trigger-fired event for every new firing (the moment it is seen)."""
        fired: list[Event] = []
        for _ in range(10):  # a firing can enable another (e.g. the wave budget); bounded
            findings = evaluate_triggers(self.runbook, self.state, self.params, now or self.clock())
            if not findings:
                break
            for finding in findings:
                event = self.journal.append(
                    EventKind.TRIGGER_FIRED,
                    actor=SYSTEM_ACTOR,
                    trigger=finding.trigger_id,
                    node=finding.node,
                    facts={"evidence": finding.evidence},
                )
                self._fold_appended(event)
                fired.append(event)
        return fired

    def _fold_appended(self, event: Event) -> None:
        """Fold an event this process just appended; others' appends before it are folded first."""
        if event.seq == self.state.last_seq + 1:
            self.folder.apply(event)
            self._notify(event)
        else:
            self.absorb_foreign()

    def absorb_foreign(self) -> list[Event]:
        """Fold, in file order, the events other processes (a reviewer) appended since the last fold.

        Cheap when nothing changed (one ``stat``); the first call reads the file once.
        The UI calls it on a short timer; every gate check and probe round calls it too.
        """
        if self._follower is None:
            self._follower = JournalFollower(self.journal.path)
        fresh = [e for e in self._follower.poll() if e.seq > self.state.last_seq]
        for event in fresh:
            self.folder.apply(event)
            self._notify(event)
        return fresh

    def _check(self, action: Action, actor: str) -> None:
        self.absorb_foreign()
        verdict = check_action(self.state, self.runbook, action, actor, operator=self.operator)
        if not verdict.allowed:
            raise ActionRefused(action, verdict.reasons)

    # ------------------------------------------------------------------ runbook lookups

    def _stage_spec(self, stage: str) -> tuple[list[Step], list[Item]]:
        """The steps and items of a stage, or of the rollback procedure."""
        if stage == ROLLBACK_STAGE and self.runbook.rollback is not None:
            return list(self.runbook.rollback.steps), list(self.runbook.rollback.items)
        try:
            spec = self.runbook.stage(stage)
        except KeyError:
            raise BadInput(f"no stage {stage!r} in runbook {self.runbook.id}") from None
        return list(spec.steps), list(spec.items)

    def _step(self, stage: str, step: str) -> Step:
        found = next((s for s in self._stage_spec(stage)[0] if s.id == step), None)
        if found is None:
            raise BadInput(f"no step {step!r} in stage {stage!r}")
        return found

    def _item(self, stage: str, item: str) -> Item:
        found = next((i for i in self._stage_spec(stage)[1] if i.id == item), None)
        if found is None:
            raise BadInput(f"no item {item!r} in stage {stage!r}")
        return found

    def _is_window(self, stage: str) -> bool:
        return stage in self.state.window

    def window_target(self) -> str | None:
        """Where a window step that runs ``where = "node"`` runs: the canary."""
        waves = self.state.waves
        return waves[0][0] if waves and waves[0] else None

    def node_facts(self, node: str | None) -> dict[str, Any]:
        """Recorded facts of a node (its baseline) for ``{recorded_*}`` placeholders."""
        if node is None or node not in self.state.nodes:
            return {}
        baseline = self.state.nodes[node].baseline
        facts = {
            "recorded_driver_package": baseline.get("driver_package"),
            "recorded_driver_version": baseline.get("driver_version"),
            "recorded_boot_id": baseline.get("boot_id"),
            "recorded_gpu_count": baseline.get("gpu_count"),
        }
        return {k: v for k, v in facts.items() if v is not None}

    # ------------------------------------------------------------------ steps

    async def run_step(
        self,
        stage: str,
        step: str,
        node: str | None = None,
        *,
        actor: str | None = None,
        confirmation: str | None = None,
        on_output: OutputCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> StepOutcome:
        """Run one step of a stage (for ``node`` when node-scoped) and record it."""
        actor = actor or self.operator
        window = self._is_window(stage)
        if window:
            node = None  # a window step runs where the runbook says (the canary), never on a chosen node
        action = RunStep(stage=stage, node=node, step=step)
        self._check(action, actor)
        spec = self._step(stage, step)
        if spec.destructive:
            expected = node if node is not None else stage
            if confirmation != expected:
                raise ActionRefused(action, [f"destructive step: type {expected!r} to confirm"])
        target_node = self.window_target() if window and spec.where is Where.NODE else node
        key = step_key(stage, step, node)
        run = StepRun(stage=stage, step=step, node=target_node, started_at=self.clock())
        self.running[key] = run

        def output(stream: str, text: str) -> None:
            run.output.extend(text.splitlines())
            del run.output[:-LIVE_OUTPUT_LINES]
            if on_output is not None:
                on_output(stream, text)

        def progress(tick: RebootProgress) -> None:
            run.progress = tick
            if on_progress is not None:
                on_progress(tick)

        preview = self._preview(spec, target_node)
        self._record(
            EventKind.STEP_STARTED,
            gate=action,
            actor=actor,
            stage=stage,
            step=step,
            node=target_node,
            facts=_clean({"command": preview, "where": str(spec.where), "target": self._target(spec, target_node)}),
        )
        if target_node is not None:
            self._busy.add(target_node)
        try:
            outcome = await self._execute(spec, stage, target_node, output, progress)
        except asyncio.CancelledError:
            outcome = StepOutcome(
                step=step,
                node=target_node,
                kind=spec.kind,
                where=spec.where,
                command=preview,
                ok=False,
                error_kind="cancelled",
                error="cancelled by the operator",
            )
            self._finish_step(stage, step, target_node, outcome, actor)
            raise
        finally:
            self.running.pop(key, None)
            if target_node is not None:
                self._busy.discard(target_node)
        self._record_accepted_host_keys()
        self._finish_step(stage, step, target_node, outcome, actor)
        if target_node is not None and spec.kind in (StepKind.COMMAND, StepKind.REBOOT) and spec.where is Where.NODE:
            await self.refresh([target_node])
        return outcome

    def preview_step(self, stage: str, step: str, node: str | None = None) -> tuple[str, str]:
        """Where a step would run and the exact command, as :meth:`run_step` would run it."""
        spec = self._step(stage, step)
        if node is None and self._is_window(stage) and spec.where is Where.NODE:
            node = self.window_target()
        return self._target(spec, node) or "N/A", self._preview(spec, node) or spec.run or str(spec.kind)

    def _preview(self, spec: Step, node: str | None) -> str | None:
        if spec.kind not in (StepKind.COMMAND, StepKind.REBOOT) or not spec.run:
            return None
        try:
            return fill(spec.run, self.executor.values(node, self.node_facts(node)))
        except BadInput as exc:
            return f"(cannot fill: {exc})"

    def _target(self, spec: Step, node: str | None) -> str | None:
        if spec.where is Where.LOCAL:
            return "local"
        if spec.where is Where.CONTROL:
            return str(self.params.get("control_host") or "")
        return node

    async def _execute(
        self, spec: Step, stage: str, node: str | None, output: OutputCallback, progress: ProgressCallback
    ) -> StepOutcome:
        if spec.kind in (StepKind.PROBE, StepKind.RECORD):
            return await self._probe_step(spec, stage, node)
        return await self.executor.execute_step(
            spec, node, node_facts=self.node_facts(node), on_output=output, on_progress=progress
        )

    async def _probe_step(self, spec: Step, stage: str, node: str | None) -> StepOutcome:
        if node is None or self.transport is None:
            return StepOutcome(
                step=spec.id,
                node=node,
                kind=spec.kind,
                where=spec.where,
                ok=False,
                error="a probe step needs a node and an SSH transport",
            )
        started = self.clock()
        state = await self._probe_one(node)
        self._record_probe(node, state, force=True)
        ok = state.reachable and state.error is None
        if spec.kind is StepKind.RECORD and ok:
            self._record(
                EventKind.BASELINE_RECORDED,
                node=node,
                stage=stage,
                step=spec.id,
                facts=_clean(
                    {
                        "driver_package": state.driver_package,
                        "driver_version": state.driver_version,
                        "kernel_module_version": state.kernel_module_version,
                        "cuda_version": state.cuda_version,
                        "boot_id": state.boot_id,
                        "gpu_count": state.gpu_count,
                        "fabric_manager": state.fabric_manager,
                        "container_toolkit_version": state.container_toolkit_version,
                        "kernel": state.kernel,
                        "gpu_uuids": [g.uuid for g in state.gpus if g.uuid],
                    }
                ),
            )
        return StepOutcome(
            step=spec.id,
            node=node,
            kind=spec.kind,
            where=spec.where,
            target=node,
            ok=ok,
            duration_s=(self.clock() - started).total_seconds(),
            stdout=f"{state.health}: {state.health_evidence}",
            error=state.error,
        )

    def _finish_step(self, stage: str, step: str, node: str | None, outcome: StepOutcome, actor: str) -> None:
        facts = outcome.facts()
        facts["ok"] = outcome.ok
        if outcome.skipped:
            facts["skipped"] = True
        if outcome.error_kind is not None:
            facts["error_kind"] = str(outcome.error_kind)
        for stream in ("stdout", "stderr"):
            text = str(facts.get(stream) or "")
            if len(text.encode()) > INLINE_OUTPUT_LIMIT:
                digest = self.journal.store_artifact(text)
                facts[f"{stream}_artifact"] = digest
                facts.setdefault("artifact", digest)
                facts[stream] = (
                    text[:2000] + f"\n[... {len(text)} characters in artifact {digest} ...]\n" + text[-2000:]
                )
        if node is not None:
            self.last_outcomes[node] = outcome
        self._record(EventKind.STEP_FINISHED, actor=actor, stage=stage, step=step, node=node, facts=facts)

    # ------------------------------------------------------------------ items and gates

    async def verify_item(self, stage: str, item: str, node: str | None = None, *, actor: str | None = None) -> bool:
        """Verify a check or command item now and record the verdict with its evidence."""
        actor = actor or self.operator
        window = self._is_window(stage)
        if window:
            node = None
        action = VerifyItem(stage=stage, node=node, item=item)
        self._check(action, actor)
        spec = self._item(stage, item)
        if spec.verify is Verify.CHECK and spec.check:
            result = run_check(spec.check, self.state, node, self.params)
            ok, evidence = result.ok, result.evidence
        elif spec.verify is Verify.COMMAND:
            target = self.window_target() if window and spec.where is Where.NODE else node
            check = await self.executor.verify_item_command(spec, target, node_facts=self.node_facts(target))
            ok, evidence = check.ok, check.evidence
        else:
            raise BadInput(f"item {item!r} is verified by {spec.verify}, not by a check or a command")
        self._record(
            EventKind.ITEM_VERIFIED,
            actor=actor,
            stage=stage,
            item=item,
            node=node,
            facts={"ok": ok, "evidence": evidence},
        )
        return ok

    def tick(
        self, stage: str, item: str, node: str | None = None, *, note: str | None = None, actor: str | None = None
    ) -> Event:
        actor = actor or self.operator
        window = self._is_window(stage)
        self._check(TickItem(stage=stage, node=None if window else node, item=item, note=note), actor)
        return self._record(EventKind.ITEM_TICKED, actor=actor, stage=stage, item=item, node=node, note=note)

    def sign_off(
        self, stage: str, item: str | None = None, node: str | None = None, *, note: str | None = None, actor: str
    ) -> Event:
        window = self._is_window(stage)
        self._check(SignOff(stage=stage, node=None if window else node, item=item, note=note), actor)
        return self._record(EventKind.SIGNOFF, actor=actor, stage=stage, item=item, node=node, note=note)

    def pass_gate(self, stage: str, node: str | None = None, *, actor: str | None = None) -> Event:
        actor = actor or self.operator
        window = self._is_window(stage)
        action = PassGate(stage=stage, node=None if window else node)
        self._check(action, actor)
        return self._record(EventKind.GATE_PASSED, gate=action, actor=actor, stage=stage, node=None if window else node)

    def override(self, stage: str, node: str | None = None, *, reason: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        window = self._is_window(stage)
        node = None if window else node
        action = Override(stage=stage, node=node, reason=reason)
        self._check(action, actor)
        stage_state = self.state.window[stage] if window else self.state.nodes[node or ""].stages.get(stage)
        blocked = gate_blockers(stage_state) if stage_state is not None else []
        return self._record(
            EventKind.OVERRIDE,
            gate=action,
            actor=actor,
            stage=stage,
            node=node,
            reason=reason,
            facts={"blocked_by": blocked},
        )

    # ------------------------------------------------------------------ triggers, waves, decisions

    def arm_triggers(self, *, actor: str | None = None) -> Event:
        actor = actor or self.operator
        self._check(ArmTriggers(), actor)
        return self._record(
            EventKind.TRIGGERS_ARMED, actor=actor, facts={"triggers": [t.id for t in self.runbook.triggers]}
        )

    def raise_trigger(self, trigger: str, node: str | None = None, *, note: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        self._check(RaiseTrigger(trigger=trigger, node=node, note=note), actor)
        return self._record(
            EventKind.TRIGGER_FIRED,
            actor=actor,
            trigger=trigger,
            node=node,
            note=note,
            facts={"evidence": f"raised by {actor}: {note}"},
        )

    def clear_trigger(self, trigger: str, *, reason: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        self._check(ClearTrigger(trigger=trigger, reason=reason), actor)
        return self._record(EventKind.TRIGGER_CLEARED, actor=actor, trigger=trigger, reason=reason)

    def start_wave(self, wave: int | None = None, *, actor: str | None = None) -> Event:
        actor = actor or self.operator
        st = self.state
        if wave is None:
            wave = 0 if st.current_wave is None else st.current_wave + 1
        action = StartWave(wave=wave)
        self._check(action, actor)
        members = st.waves[wave] if 0 <= wave < len(st.waves) else []
        return self._record(EventKind.WAVE_STARTED, gate=action, actor=actor, wave=wave, facts={"nodes": list(members)})

    def choose_path(self, path: str, *, rationale: str, owner: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        self._check(ChoosePath(path=path, rationale=rationale, owner=owner), actor)
        return self._record(
            EventKind.PATH_CHOSEN, actor=actor, facts={"path": path, "rationale": rationale, "owner": owner}
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
            RecordDecision(
                outcome=outcome,
                answers=tuple((answers or {}).items()),
                halt_rollout=halt_rollout,
            ),
            actor,
        )
        facts: dict[str, Any] = {"outcome": outcome, "answers": dict(answers or {})}
        if halt_rollout:
            facts["halt_rollout"] = True
        return self._record(EventKind.DECISION, actor=actor, facts=facts)

    def start_rollback(self, node: str, *, reason: str, actor: str | None = None) -> Event:
        actor = actor or self.operator
        self._check(StartRollback(node=node, reason=reason), actor)
        return self._record(EventKind.ROLLBACK_STARTED, actor=actor, node=node, reason=reason)

    def finish_rollback(self, node: str, *, actor: str | None = None) -> Event:
        """End a node's rollback with its result: ok only when every rollback item holds."""
        actor = actor or self.operator
        self._check(FinishRollback(node=node), actor)
        progress = self.state.nodes[node]
        assert progress.rollback is not None  # the gate checked it
        blockers = gate_blockers(progress.rollback)
        blockers += [
            f"step {st.id!r} not run" for st in progress.rollback.steps.values() if st.status == "open"
        ]  # every rollback step must have run, not only its checks hold
        facts: dict[str, Any] = {"ok": not blockers}
        if blockers:
            facts["blocked_by"] = blockers
        return self._record(EventKind.ROLLBACK_FINISHED, actor=actor, node=node, facts=facts)

    def note(self, text: str, node: str | None = None, *, actor: str | None = None) -> Event:
        actor = actor or self.operator
        if not text.strip():
            raise BadInput("a note needs some text")
        self._check(Note(node=node, text=text), actor)
        return self._record(EventKind.NOTE, actor=actor, node=node, note=text)

    async def perform(
        self,
        action: Action,
        *,
        actor: str | None = None,
        confirmation: str | None = None,
        on_output: OutputCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> object:
        """Carry out any :data:`Action`: the one way in for every intent (the UI's keys and
        palette, the autopilot). ``confirmation`` is the typed name a destructive step wants."""
        match action:
            case RunStep():
                return await self.run_step(
                    action.stage,
                    action.step,
                    action.node,
                    actor=actor,
                    confirmation=confirmation,
                    on_output=on_output,
                    on_progress=on_progress,
                )
            case VerifyItem():
                return await self.verify_item(action.stage, action.item, action.node, actor=actor)
            case TickItem():
                return self.tick(action.stage, action.item, action.node, note=action.note, actor=actor)
            case SignOff():
                return self.sign_off(
                    action.stage, action.item, action.node, note=action.note, actor=actor or self.operator
                )
            case PassGate():
                return self.pass_gate(action.stage, action.node, actor=actor)
            case FinishRollback():
                return self.finish_rollback(action.node, actor=actor)
            case Override():
                return self.override(action.stage, action.node, reason=action.reason, actor=actor)
            case ArmTriggers():
                return self.arm_triggers(actor=actor)
            case RaiseTrigger():
                return self.raise_trigger(action.trigger, action.node, note=action.note, actor=actor)
            case ClearTrigger():
                return self.clear_trigger(action.trigger, reason=action.reason, actor=actor)
            case StartWave():
                return self.start_wave(action.wave, actor=actor)
            case ChoosePath():
                return self.choose_path(action.path, rationale=action.rationale, owner=action.owner, actor=actor)
            case StartRollback():
                return self.start_rollback(action.node, reason=action.reason, actor=actor)
            case RecordDecision():
                return self.record_decision(
                    action.outcome, answers=dict(action.answers), halt_rollout=action.halt_rollout, actor=actor
                )
            case Note():
                return self.note(action.text, action.node, actor=actor)

    # ------------------------------------------------------------------ probes

    async def _probe_one(self, node: str) -> NodeState:
        assert self.transport is not None
        baseline = self.state.nodes[node].baseline if node in self.state.nodes else {}
        gpus = baseline.get("gpu_count")
        state = await probe_node(self.transport, node, baseline_gpus=int(gpus) if gpus is not None else None)
        self.live[node] = state
        return state

    @staticmethod
    def _summary(state: NodeState) -> dict[str, Any]:
        summary = _clean(state.summary())
        if state.health_evidence:
            summary["health_evidence"] = state.health_evidence
        if state.error:
            summary["error"] = state.error
        return summary

    def _record_probe(self, node: str, state: NodeState, *, force: bool = False) -> Event | None:
        """Record a probe when its summary changed; ``force`` (a step boundary) records it in full."""
        progress = self.state.nodes.get(node)
        if progress is None:
            return None
        summary = self._summary(state)
        recorded = {k: v for k, v in progress.probe.items() if k != "gpus"}
        if not force and recorded == summary:
            return None
        if force:
            summary["gpus"] = [g.model_dump(exclude_none=True) for g in state.gpus]
        return self._record(EventKind.PROBE, actor=SYSTEM_ACTOR, node=node, facts=summary)

    def _record_accepted_host_keys(self) -> None:
        """A host key trusted on first use (--accept-new-host-keys) is a fact of the window."""
        accepted = getattr(self.transport, "accepted_host_keys", None)
        while accepted:
            host, line = accepted.popitem()
            self._record(
                EventKind.NOTE,
                actor=SYSTEM_ACTOR,
                node=host if host in self.state.nodes else None,
                note=f"new host key accepted for {host}: {line}",
            )

    async def refresh(self, nodes: Sequence[str] | None = None) -> dict[str, NodeState]:
        """One probe round over ``nodes`` (default: every node without a step in flight).

        Rounds never overlap: a caller that finds one running waits for it. Probe
        events are recorded only when a node's summary changed; the triggers are
        evaluated after the round (also for the passing of time).
        """
        if self.transport is None:
            return {}
        async with self._refresh_lock:
            self.absorb_foreign()
            names = list(nodes) if nodes is not None else [n for n in self.state.hosts if n not in self._busy]
            results = await asyncio.gather(*(self._probe_one(n) for n in names))
            out = dict(zip(names, results, strict=True))
            self._record_accepted_host_keys()
            for name, state in out.items():
                self._record_probe(name, state)
            self.evaluate_triggers()
            return out

    # ------------------------------------------------------------------ lifecycle

    def pause(self) -> None:
        if not self._closed and self.state.ended_at is None:
            self._record(EventKind.SESSION_PAUSED)

    def end(self, outcome: str) -> Event:
        return self._record(EventKind.SESSION_ENDED, facts={"outcome": outcome})

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.transport is not None:
                await self.transport.close()
        finally:
            self.journal.close()
