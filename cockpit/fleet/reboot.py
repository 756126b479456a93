"""A node's reboot as a round trip: record the boot id and the loaded kernel module, issue
the reboot (a dropped connection is the expected answer), then poll until the node answers
with a different boot id, or the timeout passes.

The executor runs a reboot step this way, and so does the SSH backend
(:mod:`cockpit.fleet.backends.ssh`) when a runbook asks the window's engine to reboot a
node; both hand it their way of running one command on a node. Remote failures never
raise: the outcome says what happened.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cockpit.fleet.local import OutputCallback
from cockpit.fleet.outcomes import ProgressCallback, RebootProgress, StepOutcome
from cockpit.fleet.redact import RedactingOutput, redact
from cockpit.fleet.results import CommandResult, ErrorKind
from cockpit.gpu.parsers import ParseError
from cockpit.gpu.parsers.proc_version import parse_proc_version

BOOT_ID_COMMAND = "cat /proc/sys/kernel/random/boot_id"
MODULE_VERSION_COMMAND = "cat /proc/driver/nvidia/version"
DEFAULT_REBOOT_COMMAND = "systemctl reboot"

_BOOT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

#: runs one filled command line on a node: (node, command, timeout, where its output goes)
NodeRun = Callable[[str, str, float, OutputCallback | None], Awaitable[CommandResult]]


def kernel_module_version(proc_version_text: str) -> str | None:
    """The version in ``/proc/driver/nvidia/version`` (``565.57.01``), or None."""
    try:
        return parse_proc_version(proc_version_text).version
    except ParseError:
        return None


def one_line(text: str) -> str:
    return " ".join(text.split())


def _never_refused(result: CommandResult) -> str | None:
    return None


@dataclass
class RebootRoundTrip:
    """One reboot, watched until the node is back. ``run`` runs a command on a node;
    ``connected`` says whether the link to a node is still up (None: not known);
    ``refused`` says sudo's refusal of the issued reboot in words, or None."""

    run: NodeRun
    connected: Callable[[str], bool] | None = None
    poll_s: float = 2.0
    #: how long the reboot command itself may take before the wait begins
    issue_timeout_s: float = 30.0
    refused: Callable[[CommandResult], str | None] = _never_refused

    async def _read_boot_id(self, node: str, timeout: float) -> tuple[str | None, CommandResult]:
        result = await self.run(node, BOOT_ID_COMMAND, timeout, None)
        boot_id = result.stdout.strip() if result.ok else None
        if boot_id is not None and not _BOOT_ID.match(boot_id):
            boot_id = None
        return boot_id, result

    async def _read_module(self, node: str, timeout: float) -> str | None:
        result = await self.run(node, MODULE_VERSION_COMMAND, timeout, None)
        return kernel_module_version(result.stdout) if result.ok else None

    async def __call__(
        self,
        base: StepOutcome,
        node: str,
        command: str,
        timeout: float,
        on_output: OutputCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> StepOutcome:
        """Reboot ``node`` with ``command`` (filled, escalated where it needs to be) and wait for a
        new boot id; ``base`` is the outcome the result is written into."""
        started = time.monotonic()
        probe_timeout = min(30.0, timeout)

        def fail(kind: ErrorKind | None, error: str, **update: object) -> StepOutcome:
            return base.model_copy(
                update={"ok": False, "error_kind": kind, "error": error,
                        "duration_s": round(time.monotonic() - started, 3), **update}
            )  # fmt: skip

        boot_before, read = await self._read_boot_id(node, probe_timeout)
        if boot_before is None:
            why = read.error or f"unexpected output {one_line(read.stdout)[:80]!r}"
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
            result = await self.run(node, command, min(self.issue_timeout_s, timeout), output)
        finally:
            output.flush()
        dropped = result.error_kind in (ErrorKind.CONNECTION_LOST, ErrorKind.TIMEOUT)
        if result.error_kind is not None and not dropped:
            return fail(result.error_kind, f"{node}: reboot not issued: {result.error}", **recorded)
        refused = self.refused(result)
        if refused is not None:
            return fail(
                ErrorKind.PRIVILEGE, refused, exit_status=result.exit_status, stderr=redact(result.stderr), **recorded
            )
        if result.error_kind is None and result.exit_status != 0:
            tail = one_line(redact(result.stderr or result.stdout))[-200:]
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
            await asyncio.sleep(min(self.poll_s, remaining))
            remaining = timeout - (time.monotonic() - issued)
            if remaining <= 0:
                break
            attempts += 1
            if not saw_down and self.connected is not None and not self.connected(node):
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
                last_error = read.error or f"unexpected boot id output {one_line(read.stdout)[:80]!r}"
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
