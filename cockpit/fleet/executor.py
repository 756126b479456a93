"""Run one runbook step for one node, and verify command checklist items.

The executor turns a :class:`~cockpit.runbook.model.Step` into a command line (every
placeholder shell-quoted by :func:`cockpit.runbook.placeholders.fill`), runs it where the
step says (the node or the control host over SSH, or the jump host itself), bounds
it by the step's timeout, streams its output to a callback and returns a
:class:`StepOutcome`. Output is redacted before it is streamed or returned, so no
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
import codecs
import contextlib
import os
import re
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from cockpit.errors import BadInput
from cockpit.fleet.redact import StreamRedactor, redact
from cockpit.fleet.results import CommandResult, ErrorKind
from cockpit.gpu.parsers import ParseError
from cockpit.gpu.parsers.proc_version import parse_proc_version
from cockpit.runbook.model import Item, Step, StepKind, Where
from cockpit.runbook.placeholders import ParamValue, fill, validate_host_name
from cockpit.runbook.waves import resolve_int

if TYPE_CHECKING:
    from cockpit.fleet.transport import Transport

OutputCallback = Callable[[str, str], None]  # (stream "stdout"/"stderr", redacted text)

BOOT_ID_COMMAND = "cat /proc/sys/kernel/random/boot_id"
MODULE_VERSION_COMMAND = "cat /proc/driver/nvidia/version"
DEFAULT_REBOOT_COMMAND = "systemctl reboot"
#: the jump host, as a step's target is named in outcomes and events
LOCAL_TARGET = "local"

_BOOT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class UnsupportedStepKind(ValueError):
    """A step kind the executor does not run (probe and record belong to the session)."""


class StepOutcome(BaseModel):
    """What one step did on one node. ``command`` and outputs are already redacted."""

    model_config = ConfigDict(extra="forbid")

    step: str
    node: str | None = None  # the node the step is for (None for a window step)
    kind: StepKind = StepKind.COMMAND
    where: Where = Where.NODE
    target: str | None = None  # where it ran: the node, the control host, or "local"
    command: str | None = None  # as run (placeholders filled), redacted
    exit_status: int | None = None
    ok: bool = False
    skipped: bool = False  # the step's ``when`` did not match: nothing ran
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    error_kind: ErrorKind | None = None
    error: str | None = None  # one line
    notice: str | None = None  # e.g. a new host key recorded
    # reboot round trip
    boot_id_before: str | None = None
    boot_id_after: str | None = None
    kernel_module_before: str | None = None
    kernel_module_after: str | None = None
    saw_node_down: bool | None = None  # the reboot dropped the node off the network
    waited_s: float | None = None  # from issuing the reboot to the new boot id

    def facts(self) -> dict[str, object]:
        """The STEP_FINISHED facts (the fields of :class:`cockpit.changelog.facts.StepFinishedFacts`), None dropped."""
        keys = ("command", "where", "target", "exit_status", "ok", "duration_s", "stdout", "stderr", "error")
        data: dict[str, object] = {k: getattr(self, k) for k in keys}
        data["where"] = str(self.where)
        if self.kind is StepKind.REBOOT:
            for key in ("boot_id_before", "boot_id_after", "kernel_module_before", "kernel_module_after", "waited_s"):
                data[key] = getattr(self, key)
        return {k: v for k, v in data.items() if v is not None}


class ItemCheck(BaseModel):
    """The verdict of a ``verify = "command"`` item, with the command's outcome."""

    model_config = ConfigDict(extra="forbid")

    item: str
    ok: bool
    evidence: str  # one line: what was compared and what was seen
    outcome: StepOutcome


@dataclass(frozen=True)
class RebootProgress:
    """One tick of the wait for a rebooting node, for the UI's progress line."""

    node: str
    phase: str  # "issued", "waiting" (still the old boot), "down", "back", "timeout"
    elapsed_s: float
    timeout_s: float
    attempts: int
    last_error: str | None = None


ProgressCallback = Callable[[RebootProgress], None]


# --- helpers -----------------------------------------------------------------------------


def when_matches(when: Mapping[str, str], params: Mapping[str, object]) -> bool:
    """True when every ``when`` parameter has the given value (booleans as true/false)."""
    for name, wanted in when.items():
        value = params.get(name)
        shown = ("true" if value else "false") if isinstance(value, bool) else ("" if value is None else str(value))
        if shown != wanted:
            return False
    return True


def kernel_module_version(proc_version_text: str) -> str | None:
    """The version in ``/proc/driver/nvidia/version`` (``565.57.01``), or None."""
    try:
        return parse_proc_version(proc_version_text).version
    except ParseError:
        return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Redacting:
    """Wraps an output callback so it only ever sees redacted, whole lines."""

    def __init__(self, callback: OutputCallback | None) -> None:
        self.callback = callback
        self.streams = {"stdout": StreamRedactor(), "stderr": StreamRedactor()}

    def __call__(self, stream: str, text: str) -> None:
        if self.callback is None:
            return
        shown = self.streams[stream].feed(text)
        if shown:
            self.callback(stream, shown)

    def flush(self) -> None:
        if self.callback is None:
            return
        for stream, redactor in self.streams.items():
            rest = redactor.flush()
            if rest:
                self.callback(stream, rest)


# --- where a command runs ------------------------------------------------------------------


async def run_local(command: str, *, timeout: float, on_output: OutputCallback | None = None) -> CommandResult:
    """Run ``sh -c command`` on the jump host; on timeout or cancel the whole process group is stopped."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group, so a timeout stops its children too
    )  # fmt: skip
    chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}

    async def pump(stream: asyncio.StreamReader, name: str) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while data := await stream.read(65536):
            text = decoder.decode(data)
            if text:
                chunks[name].append(text)
                if on_output is not None:
                    on_output(name, text)
        tail = decoder.decode(b"", final=True)
        if tail:
            chunks[name].append(tail)
            if on_output is not None:
                on_output(name, tail)

    assert proc.stdout is not None and proc.stderr is not None
    pumps = asyncio.gather(pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"), proc.wait())

    def result(**kw: object) -> CommandResult:
        return CommandResult(
            host=LOCAL_TARGET,
            command=command,
            stdout="".join(chunks["stdout"]),
            stderr="".join(chunks["stderr"]),
            duration_s=round(time.monotonic() - started, 3),
            **kw,
        )

    try:
        await asyncio.wait_for(asyncio.shield(pumps), timeout=timeout)
    except TimeoutError:
        await _stop_local(proc, pumps)
        return result(error_kind=ErrorKind.TIMEOUT, error=f"local: timed out after {timeout:g} s; command stopped")
    except asyncio.CancelledError:
        await _stop_local(proc, pumps)
        raise
    status = proc.returncode
    if status is not None and status < 0:  # killed by a signal: report it the way a shell would
        return result(exit_status=128 - status, error=f"local: command killed by signal {signal.Signals(-status).name}")
    return result(exit_status=status)


async def _stop_local(proc: asyncio.subprocess.Process, pumps: asyncio.Future[Any]) -> None:
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(asyncio.shield(pumps), timeout=grace)
            return
        except TimeoutError:
            continue
        except asyncio.CancelledError:
            pumps.cancel()
            raise
    pumps.cancel()


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

    def values(self, node: str | None, node_facts: Mapping[str, ParamValue] | None) -> dict[str, ParamValue]:
        """Placeholder values: parameters, shared facts, then the node's own facts."""
        values: dict[str, ParamValue] = dict(self.params)
        values.update(self.facts or {})
        if node is not None:
            values["node"] = node
            host = node
            if self.transport is not None and node in self.transport.hosts:
                host = self.transport.target(node).address or node
            values["host"] = host
        values.update(node_facts or {})
        return values

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
        node_facts: Mapping[str, ParamValue] | None = None,
        on_output: OutputCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> StepOutcome:
        """Run a COMMAND or REBOOT step for ``node``; other kinds raise :class:`UnsupportedStepKind`."""
        if step.kind not in (StepKind.COMMAND, StepKind.REBOOT):
            raise UnsupportedStepKind(
                f"step {step.id}: kind {step.kind} is run by the session (a probe), not by the executor"
            )
        base = StepOutcome(step=step.id, node=node, kind=step.kind, where=step.where)
        if not when_matches(step.when, self.params):
            wanted = ", ".join(f"{k}={v}" for k, v in step.when.items())
            return base.model_copy(update={"ok": True, "skipped": True, "error": f"skipped: runs only when {wanted}"})
        try:
            timeout = resolve_int(step.timeout_s, self.params, f"step {step.id} timeout_s")
            target = self._target(step.where, node)
            template = step.run or (DEFAULT_REBOOT_COMMAND if step.kind is StepKind.REBOOT else None)
            if template is None:
                raise BadInput(f"step {step.id}: no command to run")
            command = fill(template, self.values(node, node_facts))
        except BadInput as exc:
            return base.model_copy(update={"error_kind": ErrorKind.BAD_INPUT, "error": str(exc)})
        base = base.model_copy(update={"target": target, "command": redact(command)})
        if step.kind is StepKind.REBOOT:
            if step.where is not Where.NODE or node is None:
                return base.model_copy(
                    update={"error_kind": ErrorKind.BAD_INPUT, "error": f"step {step.id}: a reboot runs on a node"}
                )
            return await self._reboot(base, node, command, float(timeout), on_output, on_progress)
        output = _Redacting(on_output)
        try:
            result = await self.run_command(step.where, target, command, timeout=float(timeout), on_output=output)
        finally:
            output.flush()
        return _finish(base, result)

    async def verify_item_command(
        self,
        item: Item,
        node: str | None = None,
        *,
        node_facts: Mapping[str, ParamValue] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ItemCheck:
        """Run a ``verify = "command"`` item's command and compare with its ``expect``."""
        if item.command is None:
            raise BadInput(f"item {item.id}: verify = command needs a command")
        step = Step(
            id=item.id, title=item.text, run=item.command, where=item.where,
            timeout_s=int(self.item_timeout_s), when=item.when,
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
        output = _Redacting(on_output)
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


async def execute_step(
    step: Step,
    node: str | None,
    *,
    transport: Transport | None,
    params: Mapping[str, ParamValue],
    facts: Mapping[str, ParamValue] | None = None,
    on_output: OutputCallback | None = None,
    on_progress: ProgressCallback | None = None,
    reboot_poll_s: float = 2.0,
) -> StepOutcome:
    """One-call form of :meth:`Executor.execute_step`."""
    executor = Executor(transport=transport, params=params, reboot_poll_s=reboot_poll_s)
    return await executor.execute_step(step, node, node_facts=facts, on_output=on_output, on_progress=on_progress)


async def verify_item_command(
    item: Item,
    node: str | None,
    *,
    transport: Transport | None,
    params: Mapping[str, ParamValue],
    facts: Mapping[str, ParamValue] | None = None,
    on_output: OutputCallback | None = None,
) -> ItemCheck:
    """One-call form of :meth:`Executor.verify_item_command`."""
    executor = Executor(transport=transport, params=params)
    return await executor.verify_item_command(item, node, node_facts=facts, on_output=on_output)
