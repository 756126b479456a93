"""Which backend a window runs through, its settings, and the one way one is made.

:class:`BackendOptions` is what ``cockpit run --backend NAME`` and its flags say (and what
the session header records, so ``cockpit resume`` asks the same engine the same way).
:func:`make_backend` builds the backend: the SSH one here, the others from their own
module (``cockpit/fleet/backends/<name>.py``), imported by name only when chosen, so a
build without one still runs every other (and says in one line that it lacks it).

An implementation module plugs in with:

- a :class:`~cockpit.fleet.backends.base.Backend` subclass whose ``name`` is its
  :class:`BackendName` (its ``actions`` are read before the window, without building it);
- ``def make(options: BackendOptions, *, transport: Transport | None, runner: CommandRunner)
  -> Backend``: ``runner`` runs its engine's tools (``scontrol``, ``sinfo``) on the control
  host the options name, or on the jump host; ``transport`` is the window's SSH pool.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from cockpit.errors import BadInput
from cockpit.fleet.backends.base import Backend, BackendAction, BackendName, CommandRunner
from cockpit.fleet.backends.runners import local_runner, ssh_runner
from cockpit.runbook.placeholders import validate_host_name

if TYPE_CHECKING:
    from cockpit.fleet.transport import Transport


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlurmSettings(_Settings):
    #: where scontrol and sinfo run: a host reached over SSH, or None for this host (the jump host)
    control_host: str | None = None


class KubernetesSettings(_Settings):
    kubeconfig: Path | None = None  # None: as kubectl finds it ($KUBECONFIG, ~/.kube/config)
    context: str | None = None  # None: the kubeconfig's current-context
    #: "operator": the GPU Operator's upgrade controller does the nodes, the cockpit gates it;
    #: "cockpit": autoUpgrade off, the cockpit cordons, evicts and deletes the driver pod
    mode: Literal["operator", "cockpit"] = "operator"
    namespace: str = "gpu-operator"  # where the operator's driver DaemonSet and validator run


class AnsibleSettings(_Settings):
    #: a playbook the site already has; None: the runbook's steps as a generated playbook
    playbook: Path | None = None
    #: the nodes' Python for Ansible's modules (an absolute path); None: Ansible discovers it. The
    #: apt module needs the Python that has python-apt (Debian's /usr/bin/python3), which
    #: discovery can miss on a node whose login PATH puts another python3 first (pyenv, conda)
    python_interpreter: Annotated[str, StringConstraints(pattern=r"^/[^\s]+$")] | None = None


class BackendOptions(_Settings):
    """The engine a window goes through, and each engine's settings (only the chosen one's count)."""

    name: BackendName = BackendName.SSH
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)
    ansible: AnsibleSettings = Field(default_factory=AnsibleSettings)

    def settings(self) -> _Settings | None:
        """The chosen engine's settings (None for ssh, which has none)."""
        return getattr(self, str(self.name), None)

    def recorded(self) -> dict[str, Any]:
        """The chosen engine's settings as the session header keeps them (paths as text)."""
        chosen = self.settings()
        return chosen.model_dump(mode="json", exclude_none=True) if chosen is not None else {}

    @classmethod
    def from_recorded(cls, name: str | None, settings: dict[str, Any] | None) -> BackendOptions:
        """What a session header recorded (no name: ssh, as every log before backends)."""
        try:
            backend = BackendName(name or BackendName.SSH)
        except ValueError:
            raise BadInput(f"the session names backend {name!r}, which this cockpit does not know") from None
        if backend is BackendName.SSH or not settings:
            return cls(name=backend)
        return cls.model_validate({"name": backend, str(backend): settings})

    def control_host(self) -> str | None:
        """The host the engine's tools run on over SSH, when the settings name one."""
        host = getattr(self.settings(), "control_host", None)
        return validate_host_name(host) if host else None


#: the module each engine lives in, under cockpit/fleet/backends/
_MODULES: dict[BackendName, str] = {
    BackendName.SLURM: "slurm",
    BackendName.KUBERNETES: "kubernetes",
    BackendName.ANSIBLE: "ansible",
}


def _module(name: BackendName) -> ModuleType:
    module_name = f"cockpit.fleet.backends.{_MODULES[name]}"
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise BadInput(f"backend {name} is not available in this build") from None
        raise BadInput(f"backend {name} is not available in this build: it needs {exc.name}") from None


def backend_class(name: BackendName | str) -> type[Backend]:
    """The class of backend ``name`` (its ``actions`` and ``reports_state``), imported only now."""
    try:
        backend = BackendName(name)
    except ValueError:
        raise BadInput(f"unknown backend {name!r} (expected one of: {', '.join(BackendName)})") from None
    if backend is BackendName.SSH:
        from cockpit.fleet.backends.ssh import SshBackend

        return SshBackend
    module = _module(backend)
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if issubclass(cls, Backend) and not inspect.isabstract(cls) and getattr(cls, "name", None) == backend:
            return cls
    raise BadInput(f"backend {backend} is not available in this build (its module has no {backend} backend)")


def backend_actions(name: BackendName | str) -> frozenset[BackendAction]:
    """What backend ``name`` performs, for the checks before the window."""
    return backend_class(name).actions


def make_runner(options: BackendOptions, transport: Transport | None) -> CommandRunner:
    """Where the chosen engine's tools run: its control host over the window's SSH, or here."""
    host = options.control_host()
    if host is None:
        return local_runner()
    if transport is None:
        raise BadInput(f"backend {options.name}: control host {host} needs an SSH transport to reach it")
    return ssh_runner(transport, host)


def make_backend(
    options: BackendOptions, *, transport: Transport | None, runner: CommandRunner | None = None, **settings: Any
) -> Backend:
    """The backend ``options`` choose. ``settings`` go to the SSH backend (reboot polling);
    another engine gets its module's ``make(options, transport=..., runner=...)``."""
    if options.name is BackendName.SSH:
        from cockpit.fleet.backends.ssh import SshBackend

        return SshBackend(transport, **settings)
    backend_class(options.name)  # one line when this build lacks it
    make = getattr(_module(options.name), "make", None)
    if make is None:
        raise BadInput(f"backend {options.name} is not available in this build (its module has no make())")
    backend = make(options, transport=transport, runner=runner or make_runner(options, transport))
    if not isinstance(backend, Backend):
        raise BadInput(f"backend {options.name}: its make() returned {type(backend).__name__}, not a Backend")
    return backend
