"""A small real backend for the tests: it drains and resumes nodes through the simulated
control host's ``scontrol`` (cockpit/sim/slurm.py), over the window's real SSH transport,
and reads their state back from ``scontrol show node``. Not the Slurm backend (that one
lives in cockpit/fleet/backends/slurm.py): it exists so the core's tests exercise the
interface end to end, an engine's own words through the change log, without a mock.

Its mapping is its own and strict: a node the controller reports DOWN is FAILED (the
engine said so), a state it does not know is UNKNOWN, never good.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import ClassVar

from cockpit.fleet.backends import base

_STATE = re.compile(r"^\s*State=(\S+)", re.MULTILINE)
_REASON = re.compile(r"^\s*Reason=(.*)$", re.MULTILINE)

#: the end each action waits for
_WANTED = {
    base.BackendAction.DRAIN: base.ObservedStage.DRAINED,
    base.BackendAction.RESUME: base.ObservedStage.IN_SERVICE,
}


def stage_of(state: str) -> base.ObservedStage:
    flags = set(state.split("+"))
    if "DOWN" in flags or "FAIL" in flags:
        return base.ObservedStage.FAILED
    if "DRAIN" in flags:
        return base.ObservedStage.DRAINING if flags & {"MIXED", "ALLOCATED"} else base.ObservedStage.DRAINED
    if flags <= {"IDLE", "MIXED", "ALLOCATED"}:
        return base.ObservedStage.IN_SERVICE
    return base.ObservedStage.UNKNOWN


class ScontrolDouble(base.Backend):
    name: ClassVar[base.BackendName] = base.BackendName.SLURM
    actions: ClassVar[frozenset[base.BackendAction]] = frozenset({base.BackendAction.DRAIN, base.BackendAction.RESUME})
    reports_state: ClassVar[bool] = True

    def __init__(self, runner: base.CommandRunner, *, poll_s: float = 0.05) -> None:
        self.runner = runner
        self.poll_s = poll_s
        self.cancelled: list[str] = []
        self.asked: list[tuple[base.BackendAction, str, str]] = []  # (action, node, reason)

    async def discover(self) -> list[base.Observation]:
        result = await self.runner(["sinfo", "-h", "-o", "%N"], timeout=10)
        if not result.ok:
            raise base.BackendError(f"sinfo failed: {result.error or result.stderr.strip()}")
        return await self.observe(result.stdout.split())

    async def observe(self, nodes: Sequence[str]) -> list[base.Observation]:
        return [await self._one(node) for node in nodes]

    async def _one(self, node: str) -> base.Observation:
        result = await self.runner(["scontrol", "show", "node", node], timeout=10)
        if result.error_kind is not None:
            raise base.BackendError(f"scontrol on the control host: {result.error}")
        if result.exit_status != 0:
            return base.Observation(
                backend=self.name, node=node, native_state="not-found", stage=base.ObservedStage.UNKNOWN,
                reason=result.stderr.strip()[:200],
            )  # fmt: skip
        state = _STATE.search(result.stdout)
        reason = _REASON.search(result.stdout)
        native = state.group(1) if state else "?"
        said = reason.group(1).strip() if reason else ""
        return base.Observation(
            backend=self.name, node=node, native_state=native, stage=stage_of(native),
            reason=None if said in ("", "(null)") else said, evidence={"scontrol_state": native},
        )  # fmt: skip

    async def release(
        self, request: base.ReleaseRequest, on_observation: base.ObservationCallback | None = None
    ) -> list[base.ReleaseResult]:
        return [await self._release(request, node, on_observation) for node in request.nodes]

    async def _release(
        self, request: base.ReleaseRequest, node: str, heard: base.ObservationCallback | None
    ) -> base.ReleaseResult:
        action, reason, timeout_s = request.action, request.reason, request.timeout_s
        started = time.monotonic()
        first = await self._one(node)
        if heard is not None:
            heard(first)
        if first.stage is base.ObservedStage.FAILED:
            return base.ReleaseResult(
                node=node, action=action, ok=False, final=first, error=f"the controller reports {first.native_state}"
            )
        self.asked.append((action, node, reason))
        state = "state=drain" if action is base.BackendAction.DRAIN else "state=resume"
        argv = ["scontrol", "update", f"nodename={node}", state]
        if action is base.BackendAction.DRAIN:
            argv.append(f"reason={reason}")
        result = await self.runner(argv, timeout=10)
        if not result.ok:
            return base.ReleaseResult(
                node=node, action=action, ok=False, final=first, error=result.stderr.strip() or result.error
            )
        last = first
        while True:
            seen = await self._one(node)
            if heard is not None and seen.changed_from(last):
                heard(seen)
            last = seen
            waited = round(time.monotonic() - started, 3)
            if seen.stage is _WANTED[action]:
                return base.ReleaseResult(node=node, action=action, ok=True, final=seen, waited_s=waited)
            if seen.stage is base.ObservedStage.FAILED:
                return base.ReleaseResult(
                    node=node, action=action, ok=False, final=seen, waited_s=waited, error=seen.reason
                )
            if waited > timeout_s:
                return base.ReleaseResult(
                    node=node, action=action, ok=False, final=seen, waited_s=waited, timed_out=True,
                    error=f"still {seen.native_state} after {timeout_s:g} s",
                )  # fmt: skip
            await asyncio.sleep(self.poll_s)

    async def cancel(self, nodes: Sequence[str]) -> None:
        self.cancelled.extend(nodes)
