"""One exception tree (``cockpit/errors.py``): every exception class in ``cockpit`` is a
``CockpitError`` (the CLI says it in one line), or one of the few that never leave their module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import cockpit
from cockpit.errors import BadInput, CockpitError, error_line

#: exceptions that never reach a user, and why
INTERNAL = {
    # the connect retry's envelope: turned into a failed NodeResult before it leaves transport
    "cockpit.fleet.transport._ConnectFailure",
    # a programming error (a step kind the executor was never meant to run), never input
    "cockpit.fleet.outcomes.UnsupportedStepKind",
    # the GPU Operator path's step failure: caught in its module and recorded as the step's outcome
    "cockpit.fleet.backends.kubernetes_cockpit.StepFailed",
}
#: the simulator imitates other tools' own failures (a shell's syntax error, Python's exit)
SIMULATED = "cockpit.sim."


def exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(cockpit.__path__, "cockpit."):
        if info.name.startswith(SIMULATED) or info.name == "cockpit.__main__":
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_exception_in_cockpit_is_in_the_tree() -> None:
    found = exception_classes()
    assert "cockpit.errors.BadInput" in found and "cockpit.fleet.backends.base.BackendError" in found
    outside = sorted(n for n, cls in found.items() if not issubclass(cls, CockpitError) and n not in INTERNAL)
    assert outside == [], "each must derive from cockpit.errors.CockpitError (or be named internal, with why)"
    stale = sorted(INTERNAL - set(found))
    assert stale == [], "an internal exception named here no longer exists"


def test_the_tree_sets_exit_status_and_one_line() -> None:
    from cockpit.fleet.backends.base import BackendError
    from cockpit.fleet.backends.slurm_nodes import SlurmParseError

    assert BadInput("x").exit_status == 2 and CockpitError("x").exit_status == 1
    assert BackendError("slurmctld not reachable").exit_status == 1
    assert issubclass(SlurmParseError, BackendError) and issubclass(SlurmParseError, ValueError)
    assert error_line(BackendError("slurmctld not reachable")) == "cockpit: slurmctld not reachable"
