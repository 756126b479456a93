"""Run one runbook step for one node, and verify command checklist items.

The executor turns a :class:`~cockpit.runbook.model.Step` into a command line (every
placeholder shell-quoted by :func:`cockpit.runbook.placeholders.fill`), runs it where the
step says (the node or the control host over SSH, or the jump host itself), bounds
it by the step's timeout, streams its output to a callback and returns a
:class:`~cockpit.fleet.outcomes.StepOutcome`. Output is redacted before it is streamed or returned, so no
secret reaches the change log or the screen.

A REBOOT step is a round trip: record the boot id and the loaded kernel module,
issue the reboot (a dropped connection is the expected answer), then poll until the
node answers with a different boot id, or the step's timeout passes (:mod:`.reboot`).

A step the window's engine does (``kind = "backend"``, or a reboot step when the backend
reboots nodes itself) is released to the :class:`~cockpit.fleet.backends.base.Backend` for
its node alone; the engine's verdict, its last observation and its native evidence (job
ids, label values) become the outcome, and every observation that changed is handed on
for the change log. Cancelling such a step asks the engine to cancel too.

Remote and transport failures never raise: the outcome says what happened. Input
that cannot be made safe (a missing placeholder value, an unsafe control host)
comes back as ``error_kind = bad-input`` before anything ran. Cancelling the task
stops the remote (or local) command and re-raises :class:`asyncio.CancelledError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cockpit.errors import BadInput
from cockpit.fleet import privilege
from cockpit.fleet.backends.base import (
    Backend,
    BackendAction,
    BackendError,
    BackendName,
    Observation,
    ObservationCallback,
    ReleaseRequest,
    ReleaseResult,
)
from cockpit.fleet.local import LOCAL_TARGET, OutputCallback, run_local
from cockpit.fleet.outcomes import ItemCheck, ProgressCallback, RebootProgress, StepOutcome, UnsupportedStepKind
from cockpit.fleet.reboot import (
    BOOT_ID_COMMAND,
    DEFAULT_REBOOT_COMMAND,
    MODULE_VERSION_COMMAND,
    RebootRoundTrip,
    kernel_module_version,
    one_line,
)
from cockpit.fleet.redact import RedactingOutput, redact
from cockpit.fleet.results import CommandResult, ErrorKind
from cockpit.runbook import regexes
from cockpit.runbook.backends import BACKEND_CONDITION
from cockpit.runbook.conditions import RECORDED_PREFIX, when_holds, when_text
from cockpit.runbook.model import Item, Step, StepKind, Where
from cockpit.runbook.placeholders import ParamValue, fill, validate_host_name
from cockpit.runbook.targets import target_facts
from cockpit.runbook.waves import resolve_int

if TYPE_CHECKING:
    from cockpit.fleet.transport import Transport


# the names callers have always imported from here, wherever they now live
__all__ = [
    "BOOT_ID_COMMAND",
    "DEFAULT_REBOOT_COMMAND",
    "LOCAL_TARGET",
    "MODULE_VERSION_COMMAND",
    "Executor",
    "ItemCheck",
    "OutputCallback",
    "ProgressCallback",
    "RebootProgress",
    "StepOutcome",
    "UnsupportedStepKind",
    "control_host",
    "kernel_module_version",
    "run_local",
    "when_holds",
]


# --- helpers -----------------------------------------------------------------------------


_one_line = one_line


def control_host(params: Mapping[str, object]) -> str:
    """The control host named by the ``control_host`` parameter, checked."""
    value = params.get("control_host")
    if value is None or value == "":
        raise BadInput("this step runs on the control host, but parameter control_host has no value")
    return validate_host_name(str(value))


# --- the executor ---------------------------------------------------------------------------


@dataclass
class Executor:
    """Runs steps and command items for a change window.

    ``transport`` reaches the nodes and the control host (``None`` is fine when every
    step runs locally); ``params`` are the runbook parameters; ``facts`` are values
    shared by every node (``change_id``, ``operator``); per-node facts are passed to
    each call. ``reboot_poll_s`` is the pause between reboot polls.
    """

    transport: Transport | None
    params: Mapping[str, ParamValue]
    facts: Mapping[str, ParamValue] | None = None
    reboot_poll_s: float = 2.0
    item_timeout_s: float = 60.0
    #: how long the reboot command itself may take before the wait begins
    reboot_issue_timeout_s: float = 30.0
    #: the engine the window's node work goes through (:mod:`cockpit.fleet.backends`); None: SSH alone
    backend: Backend | None = None
    #: how long a backend may take to stop what was released when the step is cancelled
    cancel_timeout_s: float = 30.0
    #: node -> why the engine could not stop what was released for it when its step was
    #: cancelled; the session takes it into the step's recorded outcome
    cancel_failures: dict[str, str] = field(default_factory=dict)
    #: the runbook's secret parameters' values: shown as *** in live output and what is returned
    secrets: tuple[str, ...] = ()

    def values(self, node: str | None, node_facts: Mapping[str, object] | None) -> dict[str, ParamValue]:
        """Placeholder values: parameters, shared facts, then the node's own facts."""
        values: dict[str, ParamValue] = dict(self.params)
        values.update(self.facts or {})
        if node is not None:
            values["node"] = node
            host, node_name = node, node
            if self.transport is not None and node in self.transport.hosts:
                target = self.transport.target(node)
                host, node_name = target.address or node, target.node_name or node
            values["host"] = host
            values["node_name"] = node_name  # what drain/uncordon name (kubectl, scontrol)
        # a placeholder is one shell word: list facts (runtimes, holds) serve conditions only
        values.update({k: v for k, v in (node_facts or {}).items() if isinstance(v, str | int | float | bool)})
        # what the node's change installs, named as its own repository names it (lists read too); a
        # value that is no package name leaves them unset, so a command naming them is refused unfilled
        with contextlib.suppress(BadInput):
            values.update(target_facts({**values, **(node_facts or {})}))
        return values

    def condition_params(self) -> dict[str, ParamValue]:
        """The parameters ``when`` reads: the window's, with the chosen backend's name (``backend``)."""
        name = self.backend.name if self.backend is not None else self.params.get(BACKEND_CONDITION)
        return {**self.params, BACKEND_CONDITION: str(name or BackendName.SSH)}

    def backend_action(self, step: Step) -> BackendAction | None:
        """What ``step`` asks of the window's backend, or None when it runs over SSH as ever: a
        backend step's action; a reboot step's REBOOT when the backend reboots nodes itself (Slurm's
        ``scontrol reboot``). Under the SSH backend a reboot step keeps its own command, sudo and
        live output: the reboot round trip is the SSH backend's reboot."""
        if step.kind is StepKind.BACKEND:
            return step.action
        if self.backend is None or self.backend.name is BackendName.SSH:
            return None
        return step.backend_action(self.backend.actions)

    def _configured_user(self, host: str) -> str | None:
        if self.transport is None or host not in self.transport.hosts:
            return None
        return self.transport.target(host).user

    def escalates(self, step: Step | Item, target: str, node_facts: Mapping[str, object] | None) -> bool:
        """Whether ``step`` (or a command item) runs under ``sudo -n`` on ``target``: it says ``sudo =
        true`` and the login there is not known to be root (the node's recorded uid, else the configured user)."""
        if not step.sudo or step.where is Where.LOCAL:
            return False
        facts = node_facts if step.where is Where.NODE else None  # the control host has no baseline
        return not privilege.login_is_root(facts, self._configured_user(target))

    def command_line(
        self, step: Step, node: str | None, node_facts: Mapping[str, object] | None
    ) -> tuple[str, str, bool]:
        """Where ``step`` runs, its command as it will run, and whether sudo was added; raises
        :class:`BadInput` when it cannot be made safe."""
        target = self._target(step.where, node)
        template = step.run or (DEFAULT_REBOOT_COMMAND if step.kind is StepKind.REBOOT else None)
        if template is None:
            raise BadInput(f"step {step.id}: no command to run")
        command = fill(template, self.values(node, node_facts))
        escalated = self.escalates(step, target, node_facts)
        return target, privilege.escalate(command) if escalated else command, escalated

    def _refused(self, base: StepOutcome, result: CommandResult, node_facts: Mapping[str, object] | None) -> str | None:
        """sudo's refusal of an escalated step, in words; None when it was not escalated or sudo let it run."""
        if not base.escalated or base.target is None:
            return None
        facts = node_facts if base.where is Where.NODE else None
        user = privilege.login_name(facts, self._configured_user(base.target))
        return privilege.refusal(result, base.target, user)

    def _target(self, where: Where, node: str | None) -> str:
        if where is Where.LOCAL:
            return LOCAL_TARGET
        if where is Where.CONTROL:
            return control_host(self.params)
        if node is None:
            raise BadInput("this step runs on a node, but no node was given")
        return node

    async def run_command(
        self, where: Where, target: str, command: str, *, timeout: float, on_output: OutputCallback | None = None
    ) -> CommandResult:
        """Run an already filled command line where ``where`` says; never raises for remote failures."""
        if where is Where.LOCAL:
            return await run_local(command, timeout=timeout, on_output=on_output)
        if self.transport is None:
            return CommandResult(
                host=target, command=command, error_kind=ErrorKind.BAD_INPUT,
                error=f"{target}: no SSH transport to reach it",
            )  # fmt: skip
        return await self.transport.run(target, command, timeout=timeout, on_output=on_output)

    async def execute_step(
        self,
        step: Step,
        node: str | None = None,
        *,
        node_facts: Mapping[str, object] | None = None,
        on_output: OutputCallback | None = None,
        on_progress: ProgressCallback | None = None,
        on_observation: ObservationCallback | None = None,
    ) -> StepOutcome:
        """Run a COMMAND, REBOOT or BACKEND step for ``node``; other kinds raise :class:`UnsupportedStepKind`.

        A step the backend does (:meth:`backend_action`) is released to it for ``node`` alone;
        ``on_observation`` hears each observation of the node that changed while it ran."""
        if step.kind not in (StepKind.COMMAND, StepKind.REBOOT, StepKind.BACKEND):
            raise UnsupportedStepKind(
                f"step {step.id}: kind {step.kind} is run by the session (a probe), not by the executor"
            )
        base = StepOutcome.of(step, node)
        recorded = {k: v for k, v in (node_facts or {}).items() if k.startswith(RECORDED_PREFIX)}
        holds = when_holds(step.when, self.condition_params(), recorded or None)
        if holds is False:
            wanted = when_text(step.when)
            return base.model_copy(update={"ok": True, "skipped": True, "error": f"skipped: runs only when {wanted}"})
        if holds is None:
            return base.model_copy(
                update={
                    "error_kind": ErrorKind.BAD_INPUT,
                    "error": f"step {step.id}: its condition ({when_text(step.when)}) waits for the node's baseline",
                }
            )
        action = self.backend_action(step)
        if action is not None:
            return await self._release(step, base, node, action, node_facts, on_observation)
        try:
            timeout = resolve_int(step.timeout_s, self.params, f"step {step.id} timeout_s")
            target, command, escalated = self.command_line(step, node, node_facts)
        except BadInput as exc:
            return base.model_copy(update={"error_kind": ErrorKind.BAD_INPUT, "error": str(exc)})
        shown = redact(command, self.secrets)
        base = base.model_copy(update={"target": target, "command": shown, "escalated": escalated or None})
        if step.kind is StepKind.REBOOT:
            if step.where is not Where.NODE or node is None:
                return base.model_copy(
                    update={"error_kind": ErrorKind.BAD_INPUT, "error": f"step {step.id}: a reboot runs on a node"}
                )
            return await self._reboot(base, node, command, float(timeout), on_output, on_progress, node_facts)
        output = RedactingOutput(on_output, self.secrets)
        try:
            result = await self.run_command(step.where, target, command, timeout=float(timeout), on_output=output)
        finally:
            output.flush()
        outcome = _finish(base, result)
        if self.secrets:  # what the screen shows of the outcome, as the log will hold it
            outcome = outcome.model_copy(
                update={"stdout": redact(outcome.stdout, self.secrets), "stderr": redact(outcome.stderr, self.secrets)}
            )
        refused = self._refused(base, result, node_facts)
        if refused is not None:  # no retry and no prompt: a person gives the login its rights
            return outcome.model_copy(update={"ok": False, "error_kind": ErrorKind.PRIVILEGE, "error": refused})
        return outcome

    async def verify_item_command(
        self,
        item: Item,
        node: str | None = None,
        *,
        node_facts: Mapping[str, object] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ItemCheck:
        """Run a ``verify = "command"`` item's command and compare with its ``expect``."""
        if item.command is None:
            raise BadInput(f"item {item.id}: verify = command needs a command")
        step = Step(
            id=item.id, title=item.text, run=item.command, where=item.where,
            timeout_s=int(self.item_timeout_s) if item.timeout_s is None else item.timeout_s, when=item.when,
            sudo=item.sudo,
        )  # fmt: skip
        outcome = await self.execute_step(step, node, node_facts=node_facts, on_output=on_output)
        if outcome.skipped:
            return ItemCheck(item=item.id, ok=True, evidence=outcome.error or "skipped", outcome=outcome)
        if outcome.error_kind is not None:
            return ItemCheck(item=item.id, ok=False, evidence=outcome.error or str(outcome.error_kind), outcome=outcome)
        expect = item.expect
        wanted_status = expect.exit_status if expect else 0
        if outcome.exit_status != wanted_status:
            evidence = f"expected exit status {wanted_status}, got {outcome.exit_status}"
            tail = _one_line(outcome.stderr or outcome.stdout)[-200:]
            return ItemCheck(
                item=item.id, ok=False, evidence=f"{evidence}: {tail}" if tail else evidence, outcome=outcome
            )
        if expect is not None and expect.stdout_matches is not None:
            try:  # RE2, linear in the output: no pattern holds the event loop
                found = regexes.search(expect.stdout_matches, outcome.stdout)
            except ValueError as exc:
                return ItemCheck(
                    item=item.id, ok=False, outcome=outcome,
                    evidence=f"bad stdout_matches pattern {expect.stdout_matches!r}: {exc}",
                )  # fmt: skip
            if found is None:
                return ItemCheck(
                    item=item.id, ok=False, outcome=outcome,
                    evidence=f"stdout does not match {expect.stdout_matches!r}",
                )  # fmt: skip
            return ItemCheck(
                item=item.id, ok=True, outcome=outcome,
                evidence=f"exit status {wanted_status}; stdout matched {_one_line(found.group(0) or '')[:120]!r}",
            )  # fmt: skip
        return ItemCheck(item=item.id, ok=True, evidence=f"exit status {wanted_status}", outcome=outcome)

    # -- a step the backend does ------------------------------------------------------------

    def change_reason(self, step: Step) -> str:
        """The reason an engine records for what it was asked (Slurm's ``reason=``, an annotation):
        it names the change, so a person reading the engine's state finds the window."""
        change = (self.facts or {}).get("change_id") or "a change window"
        return f"cockpit {change}: {step.id}"

    def release_preview(self, step: Step, node: str | None) -> str:
        """What a backend step will ask, in the words the step-started event records."""
        action = self.backend_action(step) or step.action
        name = self.backend.name if self.backend is not None else "no backend"
        return f"{name}: {action} {node or ''}".rstrip()

    async def _release(
        self,
        step: Step,
        base: StepOutcome,
        node: str | None,
        action: BackendAction,
        node_facts: Mapping[str, object] | None,
        on_observation: ObservationCallback | None,
    ) -> StepOutcome:
        """Release ``action`` for ``node`` alone to the backend and wait for its end."""
        backend = self.backend

        def refuse(error: str) -> StepOutcome:
            return base.model_copy(update={"error_kind": ErrorKind.BAD_INPUT, "error": error})

        if node is None or step.where is not Where.NODE:
            return refuse(f"step {step.id}: the engine acts on a node, and this step is for none")
        if backend is None:
            return refuse(f"step {step.id} asks the window's engine to {action}, but the window has no backend")
        if action not in backend.actions:
            can = ", ".join(sorted(backend.actions)) or "nothing"
            return refuse(f"step {step.id}: backend {backend.name} does not {action} (it performs: {can})")
        try:
            timeout = resolve_int(step.timeout_s, self.params, f"step {step.id} timeout_s")
        except BadInput as exc:
            return refuse(str(exc))
        base = base.model_copy(
            update={"target": node, "command": self.release_preview(step, node), "backend": str(backend.name),
                    "action": str(action)}
        )  # fmt: skip
        # what the action may need (the target version): the placeholder values, as text
        context = {k: str(v) for k, v in self.values(node, node_facts).items()}
        last: Observation | None = None

        def heard(seen: Observation) -> None:
            nonlocal last
            if seen.node == node and seen.changed_from(last):
                last = seen
                if on_observation is not None:
                    on_observation(seen)

        started = time.monotonic()
        request = ReleaseRequest(
            action, (node,), reason=self.change_reason(step), timeout_s=float(timeout), context=context
        )
        released = asyncio.ensure_future(backend.release(request, heard))
        try:
            # shielded: a cancel reaches this step for certain (a cancel landing as one of the
            # engine's own commands finishes can be lost inside it on Python 3.11's wait_for)
            results = await asyncio.shield(released)
        except BackendError as exc:
            return base.model_copy(
                update={"error_kind": ErrorKind.CONNECT_FAILED, "error": redact(f"backend {backend.name}: {exc}"),
                        "duration_s": round(time.monotonic() - started, 3)}
            )  # fmt: skip
        except asyncio.CancelledError:
            # the operator (or a pause) stopped the step: stop waiting, ask the engine to stop too
            released.cancel()
            released.add_done_callback(_retrieve)  # whatever it ends with is no longer anyone's
            try:
                await asyncio.wait_for(backend.cancel([node]), timeout=self.cancel_timeout_s)
            except TimeoutError:
                waited = f"{self.cancel_timeout_s:g} s"
                self.cancel_failures[node] = f"backend {backend.name}: its cancel did not end in {waited}"
            except Exception as exc:  # the step's cancellation goes on whatever the engine says
                self.cancel_failures[node] = redact(f"backend {backend.name}: cancel failed: {exc}")
            raise
        result = next((r for r in results if r.node == node), None)
        duration = round(time.monotonic() - started, 3)
        if result is None:
            return base.model_copy(
                update={
                    "error": f"backend {backend.name} said nothing of {node} after {action}",
                    "duration_s": duration,
                }
            )
        return _released(base, result, last, duration)

    # -- the reboot round trip ------------------------------------------------------------

    async def _reboot(
        self,
        base: StepOutcome,
        node: str,
        command: str,
        timeout: float,
        on_output: OutputCallback | None,
        on_progress: ProgressCallback | None,
        node_facts: Mapping[str, object] | None = None,
    ) -> StepOutcome:
        async def run(host: str, line: str, limit: float, output: OutputCallback | None) -> CommandResult:
            return await self.run_command(Where.NODE, host, line, timeout=limit, on_output=output)

        round_trip = RebootRoundTrip(
            run,
            connected=self.transport.connected if self.transport is not None else None,
            poll_s=self.reboot_poll_s,
            issue_timeout_s=self.reboot_issue_timeout_s,
            refused=lambda result: self._refused(base, result, node_facts),
        )
        return await round_trip(base, node, command, timeout, on_output, on_progress)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


#: what an engine's evidence may say of a reboot, kept where a reboot step over SSH keeps it
_REBOOT_FIELDS = ("boot_id_before", "boot_id_after", "kernel_module_before", "kernel_module_after")


def _released(base: StepOutcome, result: ReleaseResult, last: Observation | None, duration: float) -> StepOutcome:
    """The outcome of a released action: the engine's verdict, its last word and its handles."""
    final = result.final or last
    evidence = {k: redact(v) for k, v in {**(final.evidence if final else {}), **result.evidence}.items()}
    update: dict[str, object] = {
        "ok": result.ok,
        "duration_s": duration,
        "waited_s": result.waited_s or None,
        "native_state": final.native_state if final else None,
        "observed_stage": str(final.stage) if final else None,
        "evidence": evidence or None,
        **{k: evidence[k] for k in _REBOOT_FIELDS if k in evidence},
    }
    if not result.ok:
        said = result.error or (f"{final.native_state}" if final else "no word from the engine")
        update["error"] = redact(one_line(f"{base.node}: {base.action} through {base.backend}: {said}"))[:400]
        # past the timeout the node's outcome is unknown (as a reboot over SSH that never came back)
        update["error_kind"] = ErrorKind.TIMEOUT if result.timed_out else None
    return base.model_copy(update=update)


def _finish(base: StepOutcome, result: CommandResult) -> StepOutcome:
    return base.model_copy(
        update={
            "exit_status": result.exit_status,
            "ok": result.ok,
            "duration_s": result.duration_s,
            "stdout": redact(result.stdout),
            "stderr": redact(result.stderr),
            "error_kind": result.error_kind,
            "error": redact(result.error) if result.error else None,
            "notice": getattr(result, "notice", None),
        }
    )
