"""Running a session's steps and verifying its items: the gate, the destructive-step
confirmation, the step-started and step-finished events around the execution, large
outputs moved to artifacts, and the live output the UI shows while a step runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from cockpit.changelog.events import EventKind
from cockpit.changelog.facts import (
    BaselineFacts,
    ItemVerifiedFacts,
    NodeObservedFacts,
    StepFinishedFacts,
    StepStartedFacts,
)
from cockpit.engine.actions import ActionRefused, RunStep, VerifyItem
from cockpit.engine.checks import NO_ANSWER, run_check
from cockpit.engine.state import CANCELLED_OUTCOME, INTERRUPTED_OUTCOME, NO_VERDICT_KINDS, SYSTEM_ACTOR
from cockpit.errors import BadInput
from cockpit.fleet.backends.base import Observation, ObservedStage
from cockpit.fleet.executor import Executor, RebootProgress, StepOutcome
from cockpit.fleet.probes import baseline_of
from cockpit.fleet.results import ErrorKind
from cockpit.runbook.model import Step, StepKind, Verify, Where
from cockpit.runbook.placeholders import fill
from cockpit.session.probing import Prober
from cockpit.session.recording import Recorder, masked

log = logging.getLogger(__name__)

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
    #: set by an explicit cancel (the UI's k) before the task is cancelled: only then
    #: does the step record a cancel; any other stop leaves its outcome unknown
    cancel_requested: bool = False
    #: who runs it, and its outcome once its command came back (while it waits its turn to
    #: be recorded, a pause records this outcome: it is known, not "interrupted")
    actor: str | None = None
    outcome: StepOutcome | None = None


def _unreached(error: str | None) -> ErrorKind:
    """Why a probe step did not reach its node, as a command would say it: it has no verdict on the node."""
    return ErrorKind.CONNECTION_LOST if "connection lost" in (error or "") else ErrorKind.CONNECT_FAILED


def step_key(stage: str, step: str, node: str | None) -> str:
    return f"{stage}/{step}/{node or '-'}"


#: What a record step keeps of its probe, by the probe's own names: the node's versions,
#: boot and GPU count before the change (the baseline later probes are held to).
BASELINE_KEYS = (
    "driver_package",
    "driver_version",
    "kernel_module_version",
    "cuda_version",
    "boot_id",
    "gpu_count",
    "fabric_manager",
    "container_toolkit_version",
    "kernel",
)


class StepRunner:
    """Runs steps and verifies items for a session, recording each through its :class:`Recorder`."""

    def __init__(self, recorder: Recorder, executor: Executor, prober: Prober) -> None:
        self.recorder = recorder
        self.executor = executor
        self.prober = prober
        #: steps in flight, by :func:`step_key`, for the UI
        self.running: dict[str, StepRun] = {}
        #: the latest step outcome per node, for the UI
        self.last_outcomes: dict[str, StepOutcome] = {}
        #: steps in flight a pause already recorded (interrupted, or their known outcome): their task writes nothing
        self.interrupted: set[str] = set()

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
        actor = actor or self.recorder.operator
        await self.recorder.pacer.turn()  # checked and started when the loop has room for it
        window = self.recorder.is_window(stage)
        if window:
            node = None  # a window step runs where the runbook says (the canary), never on a chosen node
        action = RunStep(stage=stage, node=node, step=step)
        self.recorder.check(action, actor)
        spec = self.recorder.step(stage, step)
        if spec.destructive:
            expected = node if node is not None else stage
            if confirmation != expected:
                raise ActionRefused(action, [f"destructive step: type {expected!r} to confirm"])
        target_node = self.recorder.window_target() if window and spec.where is Where.NODE else node
        key = step_key(stage, step, node)
        run = StepRun(stage=stage, step=step, node=target_node, started_at=self.recorder.clock(), actor=actor)
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
        facts = StepStartedFacts(command=preview, where=str(spec.where), target=self._target(spec, target_node))
        self.recorder.record_action(EventKind.STEP_STARTED, action, actor, recheck=True, node=target_node, facts=facts)
        if target_node is not None:
            self.prober.busy.add(target_node)
        try:
            # write-ahead: step-started is acknowledged (fsync'd) before the command runs
            await self.recorder.journal.durable()
            outcome = run.outcome = await self._execute(spec, stage, target_node, output, progress)
            # recorded when the loop has room (200 steps that end together were recorded in
            # one pass, every key waiting); the outcome is known: a cancel meanwhile comes after
            cancelled_late = await self.recorder.pacer.turn_to_record()
        except asyncio.CancelledError:
            # what the engine could not take back, for the log (taken here, never left for a later step)
            left = self.executor.cancel_failures.pop(target_node, None) if target_node is not None else None
            if key in self.interrupted:  # the pause recorded it: outcome unknown, not cancelled
                self.interrupted.discard(key)
                raise
            cancelled = run.cancel_requested
            error = CANCELLED_OUTCOME if cancelled else INTERRUPTED_OUTCOME
            if left:
                error = f"{error}; {left}"
            outcome = StepOutcome(
                step=step,
                node=target_node,
                kind=spec.kind,
                where=spec.where,
                command=preview,
                ok=False,
                error_kind=ErrorKind.CANCELLED if cancelled else ErrorKind.INTERRUPTED,
                error=error,
            )
            self._finish_step(stage, step, target_node, outcome, actor)
            raise
        finally:
            self.running.pop(key, None)
            if target_node is not None:
                self.prober.busy.discard(target_node)
        self.prober.record_accepted_host_keys()
        if key in self.interrupted:  # a pause came while it waited its turn, and recorded this outcome
            self.interrupted.discard(key)
        else:
            self._finish_step(stage, step, target_node, outcome, actor)
        if cancelled_late:
            raise asyncio.CancelledError
        if self.recorder.state.paused:
            return outcome  # its closing probe would be written after session-paused
        runs_on_node = spec.kind in (StepKind.COMMAND, StepKind.REBOOT, StepKind.BACKEND)
        if target_node is not None and runs_on_node and spec.where is Where.NODE:
            await self.prober.refresh([target_node])
        return outcome

    def request_cancel(self, stage: str, step: str, node: str | None) -> None:
        """The coming cancellation of this step is the operator's own (the UI's k): it records
        a cancel. Any other stop of a running step records it interrupted, outcome unknown."""
        for run in self.running.values():
            if (run.stage, run.step) == (stage, step) and node in (None, run.node):
                run.cancel_requested = True

    def interrupt_running(self, reason: str) -> list[str]:
        """Record every step in flight as interrupted (outcome unknown: it may still be running
        on the node), or with its outcome where its command came back and it waits its turn to
        be recorded; returns their keys. Their tasks record nothing more."""
        keys = []
        for key, run in list(self.running.items()):
            self.interrupted.add(key)
            keys.append(key)
            if run.outcome is not None:
                self._finish_step(run.stage, run.step, run.node, run.outcome, run.actor or self.recorder.operator)
                continue
            spec = self.recorder.step(run.stage, run.step)
            outcome = StepOutcome.of(
                spec,
                run.node,
                command=self._preview(spec, run.node),
                ok=False,
                error_kind=ErrorKind.INTERRUPTED,
                error=f"{INTERRUPTED_OUTCOME} ({reason})",
            )
            self._finish_step(run.stage, run.step, run.node, outcome, self.recorder.operator)
        return keys

    def preview_step(self, stage: str, step: str, node: str | None = None) -> tuple[str, str]:
        """Where a step would run and the exact command, as :meth:`run_step` would run it."""
        spec = self.recorder.step(stage, step)
        if node is None and self.recorder.is_window(stage) and spec.where is Where.NODE:
            node = self.recorder.window_target()
        return self._target(spec, node) or "N/A", self._preview(spec, node) or spec.run or str(spec.kind)

    def _preview(self, spec: Step, node: str | None) -> str | None:
        if self.executor.backend_action(spec) is not None:
            return self.executor.release_preview(spec, node)  # what the engine is asked, not a command
        if spec.kind not in (StepKind.COMMAND, StepKind.REBOOT) or not spec.run:
            return None
        facts = self.recorder.node_facts(node)
        try:  # as the executor will run it: with sudo -n where the step needs root and the login is not
            if node is None and spec.where is Where.NODE:
                return fill(spec.run, self.executor.values(node, facts))
            return self.executor.command_line(spec, node, facts)[1]
        except BadInput as exc:
            return f"(cannot fill: {exc})"

    def _target(self, spec: Step, node: str | None) -> str | None:
        if spec.where is Where.LOCAL:
            return "local"
        if spec.where is Where.CONTROL:
            return str(self.recorder.params.get("control_host") or "")
        return node

    async def _execute(
        self, spec: Step, stage: str, node: str | None, output: OutputCallback, progress: ProgressCallback
    ) -> StepOutcome:
        if spec.kind in (StepKind.PROBE, StepKind.RECORD):
            return await self._probe_step(spec, stage, node)
        return await self.executor.execute_step(
            spec, node, node_facts=self.recorder.node_facts(node), on_output=output, on_progress=progress,
            on_observation=lambda seen: self.record_observation(seen, stage, spec.id),
        )  # fmt: skip

    def record_observation(self, seen: Observation, stage: str | None = None, step: str | None = None) -> None:
        """Record what the window's engine saw of a node, when it differs from its last word."""
        progress = self.recorder.state.nodes.get(seen.node)
        if progress is None:
            return
        facts = NodeObservedFacts(
            backend=str(seen.backend), native_state=seen.native_state, stage=str(seen.stage),
            driver_version=seen.driver_version, reason=seen.reason, evidence=dict(seen.evidence) or None,
        )  # fmt: skip
        if facts == progress.observation:
            return
        self.recorder.record(
            EventKind.NODE_OBSERVED, actor=SYSTEM_ACTOR, node=seen.node, stage=stage, step=step, facts=facts
        )

    async def _probe_step(self, spec: Step, stage: str, node: str | None) -> StepOutcome:
        backend = self.executor.backend
        if node is not None and self.prober.transport is None and backend is not None and backend.reports_state:
            return await self._engine_record(spec, stage, node)
        if node is None or self.prober.transport is None:
            return StepOutcome.of(spec, node, ok=False, error="a probe step needs a node and an SSH transport")
        started = self.recorder.clock()
        state = await self.prober.probe_one(node, platform=True)
        self.prober.record_probe(node, state, force=True)
        ok = state.reachable and state.error is None
        if spec.kind is StepKind.RECORD and ok:
            self.recorder.record(
                EventKind.BASELINE_RECORDED,
                node=node,
                stage=stage,
                step=spec.id,
                facts=BaselineFacts.model_validate(baseline_of(state)),
            )
        return StepOutcome.of(
            spec,
            node,
            target=node,
            ok=ok,
            duration_s=(self.recorder.clock() - started).total_seconds(),
            stdout=f"{state.health}: {state.health_evidence}",
            error=state.error,
            error_kind=None if state.reachable else _unreached(state.error),
        )

    async def _engine_record(self, spec: Step, stage: str, node: str) -> StepOutcome:
        """A probe or record step where the window's engine reports the nodes (no SSH): what the
        engine sees of the node, its driver version and GPU count the baseline a rollback restores."""
        backend = self.executor.backend
        assert backend is not None
        started = self.recorder.clock()
        (seen,) = await backend.observe([node])
        self.record_observation(seen, stage, spec.id)
        gpus = seen.evidence.get("allocatable-gpus") or ""
        ok = seen.stage not in (ObservedStage.UNKNOWN, ObservedStage.DOWN, ObservedStage.FAILED)
        if spec.kind is StepKind.RECORD and ok:
            facts = {"driver_version": seen.driver_version, "gpu_count": int(gpus) if gpus.isdigit() else None}
            self.recorder.record(
                EventKind.BASELINE_RECORDED,
                node=node,
                stage=stage,
                step=spec.id,
                facts=BaselineFacts.model_validate({k: v for k, v in facts.items() if v is not None}),
            )
        return StepOutcome.of(
            spec,
            node,
            target=node,
            ok=ok,
            duration_s=(self.recorder.clock() - started).total_seconds(),
            stdout=f"{backend.name}: {seen.native_state} ({seen.stage})",
            error=None if ok else f"{backend.name} reports {seen.native_state}: {seen.reason or seen.stage}",
        )

    def _finish_step(self, stage: str, step: str, node: str | None, outcome: StepOutcome, actor: str) -> None:
        facts = outcome.facts()
        facts["ok"] = outcome.ok
        if outcome.skipped:
            facts["skipped"] = True
        if outcome.error_kind is not None:
            facts["error_kind"] = str(outcome.error_kind)
        self._output_to_artifacts(facts)
        if node is not None:
            self.last_outcomes[node] = outcome
        log.info(
            "step %s/%s on %s: %s in %s s",
            stage, step, node or "-", "ok" if outcome.ok else f"failed ({outcome.error_kind or outcome.exit_status})",
            outcome.duration_s,
        )  # fmt: skip
        self.recorder.record(
            EventKind.STEP_FINISHED,
            actor=actor,
            stage=stage,
            step=step,
            node=node,
            facts=StepFinishedFacts.model_validate(facts),
        )

    def _output_to_artifacts(self, facts: dict[str, object]) -> None:
        """A stream too long for the log goes to an artifact; its head and tail stay inline."""
        for stream in ("stdout", "stderr"):
            text = masked(str(facts.get(stream) or ""), self.recorder.secrets)  # the artifact too: no secret
            if len(text.encode()) > INLINE_OUTPUT_LIMIT:
                digest = self.recorder.journal.store_artifact(text)
                facts[f"{stream}_artifact"] = digest
                facts.setdefault("artifact", digest)
                facts[stream] = (
                    text[:2000] + f"\n[... {len(text)} characters in artifact {digest} ...]\n" + text[-2000:]
                )

    def _command_facts(self, outcome: StepOutcome | None) -> dict[str, object]:
        """What a command item ran and said, as a step records it: the filled command line
        (redacted by the executor), where, its exit status, output (redacted) and error."""
        if outcome is None:
            return {}
        keep = ("command", "where", "target", "exit_status", "duration_s", "stdout", "stderr", "error")
        facts = {k: v for k, v in outcome.facts().items() if k in keep}
        if outcome.error_kind is not None:
            facts["error_kind"] = str(outcome.error_kind)
        self._output_to_artifacts(facts)
        return facts

    async def verify_item(self, stage: str, item: str, node: str | None = None, *, actor: str | None = None) -> bool:
        """Verify a check or command item now and record the verdict with its evidence."""
        actor = actor or self.recorder.operator
        window = self.recorder.is_window(stage)
        if window:
            node = None
        action = VerifyItem(stage=stage, node=node, item=item)
        self.recorder.check(action, actor)
        spec = self.recorder.item(stage, item)
        escalated: bool | None = None
        ran: dict[str, object] = {}  # a command item's command line and output
        if spec.verify is Verify.CHECK and spec.check:
            result = run_check(spec.check, self.recorder.state, node, self.recorder.params, recaps=spec.recaps)
            ok, evidence = result.ok, result.evidence
        elif spec.verify is Verify.COMMAND:
            target = self.recorder.window_target() if window and spec.where is Where.NODE else node
            check = await self.executor.verify_item_command(spec, target, node_facts=self.recorder.node_facts(target))
            if self.recorder.state.paused:
                # The session was paused while the command ran (the operator's q: the link it
                # ran on is closed under it). A step in flight is recorded by the pause because
                # its step-started is in the log and the step may have changed the node; a check
                # only reads the node and no event says it began, so nothing is left open: it is
                # not recorded at all (a cut link is the operator's quit, not the node's failure,
                # and nothing follows session-paused), its item stays open and Next runs it again
                # on resume, as any unverified item.
                raise ActionRefused(action, ["the session was paused while its command ran: not recorded"])
            ok, evidence = check.ok, check.evidence
            escalated = check.outcome.escalated if check.outcome is not None else None
            ran = self._command_facts(check.outcome)
            kind = check.outcome.error_kind if check.outcome is not None else None
            if not ok and kind is not None and str(kind) in NO_VERDICT_KINDS:
                evidence += NO_ANSWER  # a dropped link is no evidence against the node (flaky-link)
        else:
            raise BadInput(f"item {item!r} is verified by {spec.verify}, not by a check or a command")
        self.recorder.record_action(
            EventKind.ITEM_VERIFIED,
            action,
            actor,
            facts=ItemVerifiedFacts.model_validate({"ok": ok, "evidence": evidence, "escalated": escalated, **ran}),
        )
        return ok
