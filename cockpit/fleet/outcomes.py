"""What running a step or verifying an item produced, and how a reboot's wait is reported."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from cockpit.fleet.results import ErrorKind
from cockpit.runbook.model import Step, StepKind, Where


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
    escalated: bool | None = None  # ran under ``sudo -n`` (a ``sudo = true`` step on a non-root login)
    # reboot round trip
    boot_id_before: str | None = None
    boot_id_after: str | None = None
    kernel_module_before: str | None = None
    kernel_module_after: str | None = None
    saw_node_down: bool | None = None  # the reboot dropped the node off the network
    waited_s: float | None = None  # from issuing the reboot to the new boot id
    # a step the window's engine did (:mod:`cockpit.fleet.backends`): which engine and action,
    # the engine's last word on the node and in the cockpit's words, its handles (job ids, labels)
    backend: str | None = None
    action: str | None = None
    native_state: str | None = None
    observed_stage: str | None = None
    evidence: dict[str, str] | None = None

    @classmethod
    def of(cls, step: Step, node: str | None, **fields: Any) -> StepOutcome:
        """An outcome of ``step`` for ``node``, naming the step's id, kind and where."""
        return cls(step=step.id, node=node, kind=step.kind, where=step.where, **fields)

    def facts(self) -> dict[str, object]:
        """The STEP_FINISHED facts (the fields of :class:`cockpit.changelog.facts.StepFinishedFacts`), None dropped."""
        keys = ("command", "where", "target", "exit_status", "ok", "duration_s", "stdout", "stderr", "error")
        data: dict[str, object] = {k: getattr(self, k) for k in keys}
        data["where"] = str(self.where)
        if self.escalated:
            data["escalated"] = True
        if self.kind is StepKind.REBOOT or self.backend is not None:
            for key in ("boot_id_before", "boot_id_after", "kernel_module_before", "kernel_module_after", "waited_s"):
                data[key] = getattr(self, key)
        if self.backend is not None:
            for key in ("backend", "action", "native_state", "observed_stage"):
                data[key] = getattr(self, key)
            data["evidence"] = dict(self.evidence) if self.evidence else None
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
