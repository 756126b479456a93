"""The SSH backend: today's cockpit, seen as an engine.

Over SSH there is no engine between the cockpit and the node: the runbook's command
steps drain, install and resume (``kubectl``/``scontrol`` on the control host, ``apt`` on
the node), and a reboot step runs its own command through the reboot round trip
(:mod:`cockpit.fleet.reboot`), exactly as before backends existed. So this backend
performs one action, REBOOT, for a runbook step that asks the window's engine to reboot
a node (``kind = "backend"``, ``action = "reboot"``): ``systemctl reboot`` (under ``sudo
-n`` unless the login is root), watched until a new boot id answers. It reports no state
of its own (``reports_state = False``): a probe of an SSH window opens SSH to each node.
What it observes is what SSH can tell: whether the node answers, and its boot id.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from cockpit.fleet import privilege
from cockpit.fleet.backends import base
from cockpit.fleet.outcomes import RebootProgress, StepOutcome
from cockpit.fleet.reboot import BOOT_ID_COMMAND, DEFAULT_REBOOT_COMMAND, RebootRoundTrip, one_line
from cockpit.fleet.results import CommandResult, ErrorKind
from cockpit.runbook.model import StepKind, Where

if TYPE_CHECKING:
    from cockpit.fleet.local import OutputCallback
    from cockpit.fleet.transport import Transport

#: the native words of this backend's observations (SSH has no engine: these are the cockpit's own)
UP = "up"
UNREACHABLE = "unreachable"
REBOOT_ISSUED = "reboot-issued"
BACK = "back"
NOT_BACK = "not-back"


class SshBackend(base.Backend):
    """No engine: the cockpit reaches each node over SSH itself."""

    name: ClassVar[base.BackendName] = base.BackendName.SSH
    actions: ClassVar[frozenset[base.BackendAction]] = frozenset({base.BackendAction.REBOOT})
    reports_state: ClassVar[bool] = False

    def __init__(
        self,
        transport: Transport | None,
        *,
        reboot_command: str = DEFAULT_REBOOT_COMMAND,
        reboot_poll_s: float = 2.0,
        reboot_issue_timeout_s: float = 30.0,
        probe_timeout_s: float = 30.0,
    ) -> None:
        self.transport = transport
        self.reboot_command = reboot_command
        self.reboot_poll_s = reboot_poll_s
        self.reboot_issue_timeout_s = reboot_issue_timeout_s
        self.probe_timeout_s = probe_timeout_s
        self._releases: dict[str, asyncio.Task[base.ReleaseResult]] = {}

    def _transport(self) -> Transport:
        if self.transport is None:
            raise base.BackendError("the SSH backend has no SSH transport to reach the nodes")
        return self.transport

    async def _run(self, node: str, command: str, timeout: float, on_output: OutputCallback | None) -> CommandResult:
        return await self._transport().run(node, command, timeout=timeout, on_output=on_output)

    # -- what SSH sees

    async def discover(self) -> list[base.Observation]:
        return await self.observe(self._transport().hosts)

    async def observe(self, nodes: Sequence[str]) -> list[base.Observation]:
        transport = self._transport()

        async def one(node: str) -> base.Observation:
            if node not in transport.hosts:
                return base.Observation(
                    backend=self.name, node=node, native_state="not-in-window", stage=base.ObservedStage.UNKNOWN,
                    reason=f"{node} is not a host this window connects to",
                )  # fmt: skip
            result = await self._run(node, BOOT_ID_COMMAND, self.probe_timeout_s, None)
            if not result.ok:
                why = result.error or one_line(result.stderr)[:200] or f"exit status {result.exit_status}"
                return base.Observation(
                    backend=self.name, node=node, native_state=UNREACHABLE, stage=base.ObservedStage.DOWN, reason=why
                )
            # SSH cannot say whether the node is scheduling work: never read as good
            return base.Observation(
                backend=self.name, node=node, native_state=UP, stage=base.ObservedStage.UNKNOWN,
                evidence={"boot_id": result.stdout.strip()[:64]},
            )  # fmt: skip

        return list(await asyncio.gather(*(one(n) for n in nodes)))

    # -- what it does

    async def release(
        self, request: base.ReleaseRequest, on_observation: base.ObservationCallback | None = None
    ) -> list[base.ReleaseResult]:
        transport = self._transport()
        if request.action not in self.actions:
            return request.refused(
                f"over SSH the runbook's own steps {request.action} a node: the SSH backend only reboots"
            )
        tasks = {n: asyncio.ensure_future(self._reboot(transport, n, request, on_observation)) for n in request.nodes}
        self._releases.update(tasks)
        try:
            return list(await asyncio.gather(*tasks.values()))
        finally:
            for node, task in tasks.items():
                if self._releases.get(node) is task:
                    del self._releases[node]

    async def cancel(self, nodes: Sequence[str]) -> None:
        """Stop waiting for the nodes' return (a reboot issued cannot be taken back)."""
        for node in nodes:
            task = self._releases.pop(node, None)
            if task is not None:
                task.cancel()

    async def _reboot(
        self,
        transport: Transport,
        node: str,
        request: base.ReleaseRequest,
        on_observation: base.ObservationCallback | None,
    ) -> base.ReleaseResult:
        facts = request.context
        user = transport.target(node).user if node in transport.hosts else None
        command = self.reboot_command
        escalated = not privilege.login_is_root(facts, user)
        if escalated:
            command = privilege.escalate(command)

        def observed(native: str, stage: base.ObservedStage, reason: str | None = None, **evidence: str | None) -> None:
            if on_observation is not None:
                kept = {k: v for k, v in evidence.items() if v}
                on_observation(
                    base.Observation(
                        backend=self.name, node=node, native_state=native, stage=stage, reason=reason, evidence=kept
                    )
                )

        def progress(tick: RebootProgress) -> None:
            if tick.phase == "issued":
                observed(REBOOT_ISSUED, base.ObservedStage.REBOOTING)

        def refused(result: CommandResult) -> str | None:
            if not escalated:
                return None
            return privilege.refusal(result, node, privilege.login_name(facts, user))

        round_trip = RebootRoundTrip(
            self._run,
            connected=transport.connected,
            poll_s=self.reboot_poll_s,
            issue_timeout_s=self.reboot_issue_timeout_s,
            refused=refused,
        )
        blank = StepOutcome(step="reboot", node=node, kind=StepKind.REBOOT, where=Where.NODE, target=node)
        started = time.monotonic()
        outcome = await round_trip(blank, node, command, request.timeout_s, on_progress=progress)
        evidence = {
            k: str(v)
            for k in ("boot_id_before", "boot_id_after", "kernel_module_before", "kernel_module_after")
            if (v := getattr(outcome, k)) is not None
        }
        if outcome.ok:
            native, stage = BACK, base.ObservedStage.DONE
        else:
            native = NOT_BACK if outcome.error_kind is ErrorKind.TIMEOUT else UNREACHABLE
            stage = base.ObservedStage.DOWN  # not back is the reboot_timeout trigger's to judge, not a failure seen
        final = base.Observation(
            backend=self.name, node=node, native_state=native, stage=stage,
            reason=None if outcome.ok else outcome.error, evidence=evidence,
        )  # fmt: skip
        if on_observation is not None:
            on_observation(final)
        return base.ReleaseResult(
            node=node, action=base.BackendAction.REBOOT, ok=outcome.ok, final=final, error=outcome.error,
            waited_s=outcome.waited_s or round(time.monotonic() - started, 3), evidence=evidence,
            timed_out=outcome.error_kind is ErrorKind.TIMEOUT,
        )  # fmt: skip
