"""The executor backend interface: the engine that does a node's work, seen from the cockpit.

The cockpit keeps the waves, the gates, the rollback triggers, the sign-offs and the
change log; a backend does the per-node work and says what it sees. Today's SSH
executor is one backend; Slurm, the NVIDIA GPU Operator and Ansible are others. A site
that already runs one of those engines will not let a second tool drain and reboot
behind its back, so the cockpit asks the engine to do it and watches what the engine
reports.

A backend answers four questions:

- :meth:`Backend.discover`: which nodes it knows, with what it sees of each now;
- :meth:`Backend.observe`: what it sees of some nodes now, as :class:`Observation`
  values (its own state words, mapped onto the cockpit's :class:`ObservedStage`);
- :meth:`Backend.release`: do what a :class:`ReleaseRequest` asks (one
  :class:`BackendAction` for a set of nodes: the current wave's, never more), reporting
  observations as they change, until each node has reached the action's end or failed or
  the timeout passed;
- :meth:`Backend.cancel`: stop what was released and not yet done.

Observations are values, so the rollback-trigger evaluators judge them the same way
whichever engine produced them, and the change log records the engine's own evidence
(label values, job ids, node states) beside the cockpit's words.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

from cockpit.errors import CockpitError
from cockpit.fleet.results import CommandResult

# the runbook names the engines and their actions (a runbook's ``backends`` and ``action``);
# they are the interface's names too, importable from here
from cockpit.runbook.backends import BackendAction as BackendAction
from cockpit.runbook.backends import BackendName as BackendName

if TYPE_CHECKING:
    from cockpit.runbook.model import Runbook


class ObservedStage(StrEnum):
    """An engine's state of a node, in the cockpit's words (the native word is kept beside it)."""

    IN_SERVICE = "in-service"  # scheduling work, nothing released
    DRAINING = "draining"  # out of scheduling, work still running
    DRAINED = "drained"  # out of scheduling, no work left
    UPGRADING = "upgrading"  # the engine is changing the driver
    REBOOTING = "rebooting"  # asked to reboot, not back yet
    VALIDATING = "validating"  # back, the engine's own checks not yet passed
    DONE = "done"  # the engine says the node is through
    FAILED = "failed"  # the engine says the node failed (a rollback trigger)
    DOWN = "down"  # the engine cannot reach the node
    UNKNOWN = "unknown"  # a native state this mapping does not know: never read as good


class Observation(BaseModel):
    """What one engine saw of one node at one moment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: BackendName
    node: str
    native_state: str  # the engine's own word: "DRAIN+REBOOT_ISSUED", "upgrade-failed"
    stage: ObservedStage
    driver_version: str | None = None  # as the engine reports it, when it does
    reason: str | None = None  # the engine's reason text (Slurm's Reason=, a Kubernetes event)
    #: the engine's native evidence, one short value each: label values, job ids, node flags
    evidence: dict[str, str] = Field(default_factory=dict)

    def changed_from(self, earlier: Observation | None) -> bool:
        """Whether this is worth a change-log line after ``earlier`` (the same node's last one)."""
        if earlier is None:
            return True
        return (self.native_state, self.stage, self.driver_version, self.reason) != (
            earlier.native_state,
            earlier.stage,
            earlier.driver_version,
            earlier.reason,
        )


class ReleaseResult(BaseModel):
    """How one released action ended for one node."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node: str
    action: BackendAction
    ok: bool
    final: Observation | None = None  # the last observation of the node
    error: str | None = None  # one line when not ok: what the engine said, or the timeout
    waited_s: float = 0.0
    #: not ok because ``timeout_s`` passed before the node reached the action's end (its outcome is
    #: then unknown, as a reboot that never came back over SSH); False: the engine's own verdict
    timed_out: bool = False
    #: the engine's handles for what it did: a job id, a Kubernetes event name, a runner artifact hash
    evidence: dict[str, str] = Field(default_factory=dict)


ObservationCallback = Callable[[Observation], None]


@dataclass(frozen=True, slots=True)
class ReleaseRequest:
    """What the cockpit asks an engine to do: one value, so every backend's :meth:`Backend.release`
    takes the same thing and an engine hands it (or a copy with its own node names) on whole.

    ``reason`` names the change (Slurm's ``reason=``, a Kubernetes annotation); ``context``
    carries what the action needs (the target driver version, the node's facts).
    """

    action: BackendAction
    nodes: tuple[str, ...]
    _: KW_ONLY
    reason: str
    timeout_s: float
    context: Mapping[str, str] = field(default_factory=dict)

    def refused(self, error: str, nodes: Sequence[str] | None = None) -> list[ReleaseResult]:
        """A failed result for each of ``nodes`` (all the request's by default): the engine did nothing."""
        return [
            ReleaseResult(node=n, action=self.action, ok=False, error=error)
            for n in (self.nodes if nodes is None else nodes)
        ]


class CommandRunner(Protocol):
    """Runs one argv (never a shell string built from values) where the engine's tools live:
    the jump host itself, or the control host over SSH (``shlex.join`` of the argv there)."""

    async def __call__(self, argv: Sequence[str], *, timeout: float) -> CommandResult: ...


class BackendError(CockpitError):
    """The engine could not be asked at all (no controller, no credentials): one line, for the operator."""


class Backend(abc.ABC):
    """One engine that does node work for the cockpit. Implementations hold their own connections."""

    name: ClassVar[BackendName]
    #: the actions this engine performs; a runbook step asking for another is refused before the window
    actions: ClassVar[frozenset[BackendAction]]
    #: whether the engine reports node state itself, so a probe need not open SSH to every node
    reports_state: ClassVar[bool] = False

    @abc.abstractmethod
    async def discover(self) -> list[Observation]:
        """Every node the engine knows, as it sees each now."""

    @abc.abstractmethod
    async def observe(self, nodes: Sequence[str]) -> list[Observation]:
        """What the engine sees of ``nodes`` now (a node it does not know is ``UNKNOWN``)."""

    @abc.abstractmethod
    async def release(
        self, request: ReleaseRequest, on_observation: ObservationCallback | None = None
    ) -> list[ReleaseResult]:
        """Ask the engine to do ``request.action`` for ``request.nodes`` and wait until each ends.

        ``on_observation`` hears every observation that changed, as it happens, for the
        change log. Never raises for a node's failure: its result says it. Raises
        :class:`BackendError` only when the engine cannot be asked at all.
        """

    @abc.abstractmethod
    async def cancel(self, nodes: Sequence[str]) -> None:
        """Stop what was released for ``nodes`` and is not done (the operator cancelled)."""

    def use_runbook(self, runbook: Runbook) -> None:  # noqa: B027 - most engines do their own work
        """The window's runbook, given once by the session before any release: an engine that
        runs the runbook's own steps (Ansible's generated playbook) keeps it; the default ignores it."""

    async def end_window(self, *, through: bool) -> list[str]:
        """The window has ended (``through``: every node reached the target): put back what the
        engine changed on the site's own configuration for it; one line per thing put back.
        The default changed nothing of the kind."""
        return []

    async def close(self) -> None:  # noqa: B027 - most backends hold nothing to close
        """Release connections; the default holds none."""

    async def watch(self, nodes: Sequence[str], interval_s: float) -> AsyncIterator[list[Observation]]:
        """Observations of ``nodes`` every ``interval_s`` seconds, only those that changed."""
        last: dict[str, Observation] = {}
        while True:
            seen = await self.observe(nodes)
            changed = [o for o in seen if o.changed_from(last.get(o.node))]
            last.update({o.node: o for o in seen})
            if changed:
                yield changed
            await asyncio.sleep(interval_s)
