"""The engines a runbook may be run through, and what a runbook's ``backend`` steps ask of them.

The runbook layer names them (it cannot import :mod:`cockpit.fleet`); the executor
backend interface (:mod:`cockpit.fleet.backends.base`) re-exports these names. A
runbook lists the engines it was written for (top-level ``backends = ["ssh", "slurm"]``,
``["ssh"]`` when absent); a step of ``kind = "backend"`` asks the chosen engine for one
:class:`BackendAction`; ``when = {backend = "slurm"}`` makes a step depend on the choice.
Whether the chosen engine performs every action the runbook asks of it is judged before
the window (:func:`cockpit.runbook.crosscheck.backend_problems`), from the engine's own list of actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

_V = TypeVar("_V")


class BackendName(StrEnum):
    """The engines the cockpit can drive (``cockpit run --backend``)."""

    SSH = "ssh"
    SLURM = "slurm"
    KUBERNETES = "kubernetes"
    ANSIBLE = "ansible"


class BackendAction(StrEnum):
    """What the cockpit may ask an engine to do for a node."""

    DRAIN = "drain"  # out of scheduling, and wait until the node's work has ended
    UPGRADE = "upgrade"  # the engine installs the target driver (operator-managed Kubernetes, a playbook)
    REBOOT = "reboot"  # through the engine, watched until the node is back
    RESUME = "resume"  # back into scheduling
    PREFLIGHT = "preflight"  # the engine checks, before the node is touched, that it can carry the change
    SMOKE = "smoke"  # the runbook's smoke command on the node, through the engine (a Kubernetes pod)
    ROLLBACK = "rollback"  # the engine returns the node to the driver recorded before the window


#: The name a ``when`` condition reads the chosen backend by (``when = {backend = "slurm"}``);
#: the window's parameters carry it under this name, so no runbook parameter may take it.
BACKEND_CONDITION = "backend"

#: What a runbook that lists no ``backends`` was written for: today's SSH steps.
DEFAULT_BACKENDS: tuple[BackendName, ...] = (BackendName.SSH,)


def with_backend(params: Mapping[str, _V], backend: str | None) -> dict[str, _V | str]:
    """The window's parameters with the chosen backend (``ssh`` when none was recorded), as the
    fold, the executor and the dry run read ``when = {backend = ...}``."""
    return {**params, BACKEND_CONDITION: backend or BackendName.SSH.value}
