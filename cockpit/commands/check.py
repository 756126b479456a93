"""`cockpit check RUNBOOK`: validate a runbook; print its outline, or every problem.

Exit 0 with a one-screen outline on stdout, or exit 2 with one problem per line on
stderr (``FILE:LINE: field.path: what was expected``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.runbook.loader import LoadedRunbook
    from cockpit.runbook.model import Runbook, Step, Waves


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runbook", metavar="RUNBOOK", help="a runbook file, or the id of a shipped runbook (e.g. driver-upgrade-r580)"
    )
    parser.add_argument(
        "--backend",
        metavar="NAME",
        help="also check that the runbook runs through this engine (ssh, slurm, kubernetes, ansible): "
        "it lists it, and the engine performs every action its steps ask (default: each listed one in this build)",
    )


def run(args: argparse.Namespace) -> int:
    from cockpit.runbook.loader import RunbookInvalid, find_runbook, load_runbook

    try:
        loaded = load_runbook(find_runbook(args.runbook))
    except RunbookInvalid as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 2
    problems = backend_lines(loaded.runbook, args.backend) + trust_lines(loaded)
    if problems:
        for line in problems:
            print(f"{loaded.path}: {line}", file=sys.stderr)
        return 2
    sys.stdout.write(outline(loaded))
    return 0


def trust_lines(loaded: LoadedRunbook) -> list[str]:
    """What is wrong with the runbook's ``[trust]`` allowed_signers (missing, a planted link,
    writable by others, a look-alike principal): one line, or none. Checked now, not when a
    window first needs a signature."""
    from cockpit.changelog.sshsig import read_allowed_signers
    from cockpit.changelog.trust import RunbookTrust
    from cockpit.errors import BadInput

    trust = RunbookTrust.of(loaded)
    if trust is None or trust.allowed_signers is None:
        return []
    try:
        read_allowed_signers(trust.allowed_signers)
    except BadInput as exc:
        return [f"trust.allowed_signers: {exc}"]
    return []


def backend_lines(runbook: Runbook, backend: str | None) -> list[str]:
    """Why the runbook cannot run through ``backend`` (or, when None, through each engine it
    lists that this build has): one line each."""
    from cockpit.commands.backend_flags import BACKENDS
    from cockpit.errors import BadInput
    from cockpit.fleet.backends.registry import backend_actions
    from cockpit.runbook.crosscheck import backend_problems

    if backend is not None and backend not in BACKENDS:
        raise BadInput(f"--backend {backend}: unknown backend (expected one of: {', '.join(BACKENDS)})")
    names = [backend] if backend is not None else [str(b) for b in runbook.backends]
    out = []
    listed = [str(b) for b in runbook.backends]
    for name in names:
        if name not in listed:
            out.append(f"backend {name}: runbook {runbook.id} is not written for it (it lists: {', '.join(listed)})")
            continue
        try:
            performs = backend_actions(name)
        except BadInput:
            if backend is not None:
                raise  # asked for by name: "backend slurm is not available in this build"
            continue  # listed, but not in this build: its own checks run where it is
        out += [f"backend {name}: {p}" for p in backend_problems(runbook, name, performs)]
    return out


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _steps_summary(steps: list[Step]) -> str:
    destructive = sum(1 for s in steps if s.destructive)
    sudo = sum(1 for s in steps if s.sudo)
    marks = [f"{destructive} destructive"] * bool(destructive) + [f"{sudo} with sudo"] * bool(sudo)
    text = _count(len(steps), "step")
    return f"{text} ({', '.join(marks)})" if marks else text


def _int_or_param(value: int | str, runbook: Runbook) -> str:
    if isinstance(value, int):
        return str(value)
    return f"{value} (={runbook.parameters[value].default})"


def _waves(waves: Waves, runbook: Runbook) -> str:
    sizes = ", ".join(str(s) for s in waves.sizes)
    rest = waves.rest
    if rest == 0:
        later = f"no later waves (a fleet over {sum(waves.sizes)} nodes is refused)"
    else:
        later = f"then waves of {_int_or_param(rest, runbook)}"
    return (
        f"{sizes}, {later}; max parallel {_int_or_param(waves.max_parallel, runbook)}; "
        f"failure budget {_int_or_param(waves.failure_budget, runbook)}"
    )


def outline(loaded: LoadedRunbook) -> str:
    """The runbook at a glance: header, parameters, waves, triggers, stages, rollback."""
    from cockpit.runbook.model import Scope

    rb = loaded.runbook
    lines = [
        f"{rb.id} v{rb.runbook.version}: {rb.runbook.title}",
        f"  file {loaded.path}  sha256 {loaded.sha256[:16]}",
        "parameters:",
    ]
    width = max((len(n) for n in rb.parameters), default=0)
    for name, param in rb.parameters.items():
        default = "(required)" if param.required and param.default is None else repr(param.default)
        choices = f"  ({'|'.join(param.choices)})" if param.choices else ""
        lines.append(f"  {name:<{width}}  {param.type!s:<6} = {default}{choices}")
    if [str(b) for b in rb.backends] != ["ssh"]:
        lines.append(f"backends: {', '.join(str(b) for b in rb.backends)}")
    lines.append(f"waves: {_waves(rb.waves, rb)}")
    if rb.trust is not None:
        signers = f"; allowed_signers {rb.trust.allowed_signers}" if rb.trust.allowed_signers else ""
        gates = f"; two-person gates {', '.join(rb.trust.two_person_gates)}" if rb.trust.two_person_gates else ""
        lines.append(f"trust: signatures {'required' if rb.trust.requires else 'not required'}{signers}{gates}")
    lines.append(f"triggers ({len(rb.triggers)}, armed before the first change):")
    for trigger in rb.triggers:
        how = trigger.evaluator if trigger.evaluator else "raised by a person"
        lines.append(f"  {trigger.mode:<6} {trigger.id:<28} {how}")
    lines.append(f"stages ({len(rb.stages)}):")
    for stage in rb.stages:
        flags = "  [arms triggers]" if stage.arms_triggers else ""
        scope = "node" if stage.scope is Scope.NODE else "window"
        lines.append(
            f"  {scope:<6} {stage.id:<22} {_steps_summary(stage.steps)}, {_count(len(stage.items), 'item')}{flags}"
        )
    if rb.rollback is None:
        lines.append("rollback: none")
    else:
        rollback = rb.rollback
        lines.append(
            f"rollback: {rollback.title}: {_steps_summary(rollback.steps)}, {_count(len(rollback.items), 'item')}"
        )
    lines.append("ok")
    return "\n".join(lines) + "\n"
