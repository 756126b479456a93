"""``--backend NAME`` and each engine's settings, shared by ``run``, ``probe``, ``check`` and ``demo``
(not a subcommand of its own). Imports nothing heavy: the registry loads when a command runs."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.fleet.backends.registry import BackendOptions
    from cockpit.runbook.model import Runbook

BACKENDS = ("ssh", "slurm", "kubernetes", "ansible")

#: flag -> (the backend it belongs to, the settings field it sets)
_FLAGS: dict[str, tuple[str, str]] = {
    "slurm_control_host": ("slurm", "control_host"),
    "kubeconfig": ("kubernetes", "kubeconfig"),
    "kube_context": ("kubernetes", "context"),
    "gpu_operator_mode": ("kubernetes", "mode"),
    "gpu_operator_namespace": ("kubernetes", "namespace"),
    "ansible_playbook": ("ansible", "playbook"),
    "ansible_python": ("ansible", "python_interpreter"),
}


def add_backend_arguments(parser: argparse.ArgumentParser, *, settings: bool = True) -> None:
    """``--backend`` (default ssh) and, with ``settings``, each engine's own flags."""
    parser.add_argument(
        "--backend",
        default="ssh",
        metavar="NAME",
        help="the engine that does the node work: " + ", ".join(BACKENDS) + " (default ssh: the cockpit over SSH)",
    )
    if not settings:
        return
    group = parser.add_argument_group("backend settings (each for its --backend only)")
    group.add_argument(
        "--slurm-control-host", metavar="HOST", help="slurm: run scontrol and sinfo there over SSH (default: this host)"
    )
    group.add_argument("--kubeconfig", type=Path, metavar="FILE", help="kubernetes: kubeconfig (default as kubectl)")
    group.add_argument("--kube-context", metavar="NAME", help="kubernetes: kubeconfig context (default current)")
    group.add_argument(
        "--gpu-operator-mode",
        metavar="MODE",
        help="kubernetes: operator (the GPU Operator's upgrade controller, gated) or cockpit (default operator)",
    )
    group.add_argument(
        "--gpu-operator-namespace", metavar="NS", help="kubernetes: the GPU Operator's namespace (default gpu-operator)"
    )
    group.add_argument(
        "--ansible-playbook", type=Path, metavar="FILE", help="ansible: the site's playbook (default: generated)"
    )
    group.add_argument(
        "--ansible-python",
        metavar="PATH",
        help="ansible: the nodes' Python for its modules, e.g. /usr/bin/python3 (default: Ansible discovers it)",
    )


def backend_options(args: argparse.Namespace) -> BackendOptions:
    """The options ``--backend`` and its settings flags give; one line for a bad one."""
    from pydantic import ValidationError

    from cockpit.errors import BadInput
    from cockpit.fleet.backends.registry import BackendOptions

    name = str(args.backend)
    if name not in BACKENDS:
        raise BadInput(f"--backend {name}: unknown backend (expected one of: {', '.join(BACKENDS)})")
    chosen: dict[str, object] = {}
    for attr, (owner, field) in _FLAGS.items():
        value = getattr(args, attr, None)
        if value is None:
            continue
        flag = "--" + attr.replace("_", "-")
        if owner != name:
            raise BadInput(f"{flag} is a setting of --backend {owner}, not of --backend {name}")
        chosen[field] = value
    for field in ("kubeconfig", "playbook"):
        path = chosen.get(field)
        if isinstance(path, Path) and not path.is_file():
            flag = "--kubeconfig" if field == "kubeconfig" else "--ansible-playbook"
            raise BadInput(f"{flag} {path}: no such file")
    try:
        return BackendOptions.model_validate({"name": name, name: chosen} if chosen else {"name": name})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][-1])
        flag = next((f"--{a.replace('_', '-')}" for a, (o, f) in _FLAGS.items() if o == name and f == field), field)
        raise BadInput(f"{flag}: {first['msg']}") from None


def check_runbook_backend(
    runbook: Runbook, options: BackendOptions, params: Mapping[str, object] | None = None
) -> None:
    """Refuse, in one line and before any window, a backend the runbook does not list or a
    step asking it for an action it does not perform."""
    from cockpit.errors import BadInput
    from cockpit.fleet.backends.registry import backend_actions
    from cockpit.runbook.crosscheck import backend_problems

    listed = [str(b) for b in runbook.backends]
    if str(options.name) not in listed:
        raise BadInput(
            f"--backend {options.name}: runbook {runbook.id} is not written for it (it lists: {', '.join(listed)})"
        )
    problems = backend_problems(runbook, str(options.name), backend_actions(options.name), params)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BadInput(f"--backend {options.name}: {problems[0]}{more}")
