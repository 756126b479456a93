"""Run one runbook step for one node, and verify command checklist items.

The executor turns a :class:`~cockpit.runbook.model.Step` into a command line (every
placeholder shell-quoted by :func:`cockpit.runbook.placeholders.fill`), runs it where the
step says (the node or the control host over SSH, or the jump host itself), bounds
it by the step's timeout, streams its output to a callback and returns a
:class:`~cockpit.fleet.outcomes.StepOutcome`. Output is redacted before it is streamed or returned, so no
secret reaches the change log or the screen.

A REBOOT step is a round trip: record the boot id and the loaded kernel module,
issue the reboot (a dropped connection is the expected answer), then poll until the
node answers with a different boot id, or the step's timeout passes.

Remote and transport failures never raise: the outcome says what happened. Input
that cannot be made safe (a missing placeholder value, an unsafe control host)
comes back as ``error_kind = bad-input`` before anything ran. Cancelling the task
stops the remote (or local) command and re-raises :class:`asyncio.CancelledError`.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cockpit.errors import BadInput
from cockpit.fleet import privilege
from cockpit.fleet.local import LOCAL_TARGET, OutputCallback, run_local
from cockpit.fleet.outcomes import ItemCheck, ProgressCallback, RebootProgress, StepOutcome, UnsupportedStepKind
from cockpit.fleet.redact import RedactingOutput, redact
from cockpit.fleet.results import CommandResult, ErrorKind
from cockpit.gpu.parsers import ParseError
from cockpit.gpu.parsers.proc_version import parse_proc_version
from cockpit.runbook.conditions import RECORDED_PREFIX, when_holds, when_text
from cockpit.runbook.model import Item, Step, StepKind, Where
from cockpit.runbook.placeholders import ParamValue, fill, validate_host_name
from cockpit.runbook.waves import resolve_int

if TYPE_CHECKING:
    from cockpit.fleet.transport import Transport

BOOT_ID_COMMAND = "cat /proc/sys/kernel/random/boot_id"
MODULE_VERSION_COMMAND = "cat /proc/driver/nvidia/version"
DEFAULT_REBOOT_COMMAND = "systemctl reboot"

_BOOT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

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


def kernel_module_version(proc_version_text: str) -> str | None:
    """The version in ``/proc/driver/nvidia/version`` (``565.57.01``), or None."""
    try:
        return parse_proc_version(proc_version_text).version
    except ParseError:
        return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


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
        return values

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
    ) -> StepOutcome:
        """Run a COMMAND or REBOOT step for ``node``; other kinds raise :class:`UnsupportedStepKind`."""
        if step.kind not in (StepKind.COMMAND, StepKind.REBOOT):
            raise UnsupportedStepKind(
                f"step {step.id}: kind {step.kind} is run by the session (a probe), not by the executor"
            )
        base = StepOutcome.of(step, node)
        recorded = {k: v for k, v in (node_facts or {}).items() if k.startswith(RECORDED_PREFIX)}
        holds = when_holds(step.when, self.params, recorded or None)
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
        try:
            timeout = resolve_int(step.timeout_s, self.params, f"step {step.id} timeout_s")
            target, command, escalated = self.command_line(step, node, node_facts)
        except BadInput as exc:
            return base.model_copy(update={"error_kind": ErrorKind.BAD_INPUT, "error": str(exc)})
        base = base.model_copy(update={"target": target, "command": redact(command), "escalated": escalated or None})
        if step.kind is StepKind.REBOOT:
            if step.where is not Where.NODE or node is None:
                return base.model_copy(
                    update={"error_kind": ErrorKind.BAD_INPUT, "error": f"step {step.id}: a reboot runs on a node"}
                )
            return await self._reboot(base, node, command, float(timeout), on_output, on_progress, node_facts)
        output = RedactingOutput(on_output)
        try:
            result = await self.run_command(step.where, target, command, timeout=float(timeout), on_output=output)
        finally:
            output.flush()
        outcome = _finish(base, result)
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
            try:
                found = re.search(expect.stdout_matches, outcome.stdout, re.MULTILINE)
            except re.error as exc:
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
                evidence=f"exit status {wanted_status}; stdout matched {_one_line(found.group(0))[:120]!r}",
            )  # fmt: skip
        return ItemCheck(item=item.id, ok=True, evidence=f"exit status {wanted_status}", outcome=outcome)

    # -- the reboot round trip ------------------------------------------------------------

    async def _read_boot_id(self, node: str, timeout: float) -> tuple[str | None, CommandResult]:
        result = await self.run_command(Where.NODE, node, BOOT_ID_COMMAND, timeout=timeout)
        boot_id = result.stdout.strip() if result.ok else None
        if boot_id is not None and not _BOOT_ID.match(boot_id):
            boot_id = None
        return boot_id, result

    async def _read_module(self, node: str, timeout: float) -> str | None:
        result = await self.run_command(Where.NODE, node, MODULE_VERSION_COMMAND, timeout=timeout)
        return kernel_module_version(result.stdout) if result.ok else None

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
        started = time.monotonic()
        probe_timeout = min(30.0, timeout)

        def fail(kind: ErrorKind | None, error: str, **update: object) -> StepOutcome:
            return base.model_copy(
                update={"ok": False, "error_kind": kind, "error": error,
                        "duration_s": round(time.monotonic() - started, 3), **update}
            )  # fmt: skip

        boot_before, read = await self._read_boot_id(node, probe_timeout)
        if boot_before is None:
            why = read.error or f"unexpected output {_one_line(read.stdout)[:80]!r}"
            return fail(read.error_kind, f"{node}: cannot read the boot id before the reboot, not rebooting: {why}")
        module_before = await self._read_module(node, probe_timeout)
        recorded: dict[str, object] = {"boot_id_before": boot_before, "kernel_module_before": module_before}

        def progress(phase: str, attempts: int, last_error: str | None) -> None:
            if on_progress is not None:
                on_progress(
                    RebootProgress(node, phase, round(time.monotonic() - issued, 3), timeout, attempts, last_error)
                )

        # issue the reboot; the link going away mid-command is the expected answer
        output = RedactingOutput(on_output)
        issued = time.monotonic()
        try:
            result = await self.run_command(
                Where.NODE, node, command, timeout=min(self.reboot_issue_timeout_s, timeout), on_output=output
            )
        finally:
            output.flush()
        dropped = result.error_kind in (ErrorKind.CONNECTION_LOST, ErrorKind.TIMEOUT)
        if result.error_kind is not None and not dropped:
            return fail(result.error_kind, f"{node}: reboot not issued: {result.error}", **recorded)
        refused = self._refused(base, result, node_facts)
        if refused is not None:
            return fail(
                ErrorKind.PRIVILEGE, refused, exit_status=result.exit_status, stderr=redact(result.stderr), **recorded
            )
        if result.error_kind is None and result.exit_status != 0:
            tail = _one_line(redact(result.stderr or result.stdout))[-200:]
            return fail(
                None, f"{node}: reboot command failed with exit status {result.exit_status}: {tail}",
                exit_status=result.exit_status, stdout=redact(result.stdout), stderr=redact(result.stderr), **recorded,
            )  # fmt: skip
        recorded.update(exit_status=result.exit_status, stdout=redact(result.stdout), stderr=redact(result.stderr))
        progress("issued", 0, result.error)

        # wait for a different boot id
        saw_down = dropped
        attempts = 0
        last_error: str | None = result.error if dropped else None
        while True:
            remaining = timeout - (time.monotonic() - issued)
            if remaining <= 0:
                break
            await asyncio.sleep(min(self.reboot_poll_s, remaining))
            remaining = timeout - (time.monotonic() - issued)
            if remaining <= 0:
                break
            attempts += 1
            if not saw_down and self.transport is not None and not self.transport.connected(node):
                # the link carrying the reboot is gone (keepalive or the server closing it);
                # the transport may reconnect within one poll, so look before asking
                saw_down = True
                progress("down", attempts, "connection lost")
            # a poll right at the deadline still gets a second to answer: a slow reply is not
            # evidence that the node went down
            answer_s = max(remaining, 1.0)
            try:
                boot_after, read = await asyncio.wait_for(
                    self._read_boot_id(node, min(probe_timeout, answer_s)), timeout=answer_s
                )
            except TimeoutError:
                boot_after, last_error = None, f"no answer within {answer_s:.1f} s"
                saw_down = True
                progress("down", attempts, last_error)
                continue
            if boot_after is None:
                saw_down = True
                last_error = read.error or f"unexpected boot id output {_one_line(read.stdout)[:80]!r}"
                progress("down", attempts, last_error)
                continue
            if boot_after == boot_before:
                progress("waiting", attempts, last_error)
                continue
            waited = round(time.monotonic() - issued, 3)
            progress("back", attempts, None)
            module_after = await self._read_module(node, probe_timeout)
            return base.model_copy(
                update={
                    **recorded,
                    "ok": True,
                    "boot_id_after": boot_after,
                    "kernel_module_after": module_after,
                    "saw_node_down": saw_down,
                    "waited_s": waited,
                    "duration_s": round(time.monotonic() - started, 3),
                }
            )
        progress("timeout", attempts, last_error)
        state = "still running the old boot" if not saw_down else "not back"
        detail = f" (last error: {last_error})" if last_error else ""
        return fail(
            ErrorKind.TIMEOUT,
            f"{node}: {state} with a new boot id after {timeout:g} s{detail}",
            saw_node_down=saw_down, waited_s=round(time.monotonic() - issued, 3), **recorded,
        )  # fmt: skip


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
