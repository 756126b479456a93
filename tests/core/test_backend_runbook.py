"""A runbook's engines: ``backends = [...]``, ``kind = "backend"`` steps with their action,
``when = {backend = ...}``; the loader's line-numbered refusals, and ``cockpit check`` /
``cockpit run`` refusing, before any window, an engine the runbook does not list or a step
asking it for what it does not perform."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.runbook.backends import BackendAction, BackendName, with_backend
from cockpit.runbook.conditions import when_holds
from cockpit.runbook.crosscheck import backend_problems
from cockpit.runbook.loader import RunbookInvalid, load_runbook, parse_runbook
from cockpit.runbook.model import StepKind

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runbooks" / "backend-drain.toml"
MINIMAL = Path(__file__).resolve().parents[2] / "checklists" / "minimal-driver-upgrade.toml"


def problems_of(text: str) -> list[str]:
    with pytest.raises(RunbookInvalid) as caught:
        parse_runbook(text.encode(), "rb.toml")
    return [str(p) for p in caught.value.problems]


def with_drain_step(step: str, *, top: str = "") -> str:
    """The minimal shipped runbook with ``step`` (TOML lines) as the drain stage's first step."""
    text = MINIMAL.read_text()
    marker = '  [[stages.steps]]\n  id = "cordon"'
    assert marker in text
    return top + text.replace(marker, f"  [[stages.steps]]\n{step}\n\n{marker}", 1)


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_the_fixture_loads_with_its_backends_and_backend_steps() -> None:
    rb = load_runbook(FIXTURE).runbook
    assert rb.backends == [BackendName.SSH, BackendName.SLURM]
    drain = {s.id: s for s in rb.stage("drain").steps}
    assert drain["engine-drain"].kind is StepKind.BACKEND and drain["engine-drain"].action is BackendAction.DRAIN
    # the chosen backend reads as a parameter in when: the engine's steps under slurm, kubectl's under ssh
    for backend, runs in (("ssh", {"cordon", "drain"}), ("slurm", {"engine-drain"})):
        params = with_backend(rb.defaults(), backend)
        assert {s.id for s in drain.values() if when_holds(s.when, params)} == runs


def test_a_runbook_without_backends_is_written_for_ssh() -> None:
    text = '[runbook]\nid = "x"\ntitle = "x"\n\n[[stages]]\nid = "s"\ntitle = "s"\nscope = "node"\n'
    assert parse_runbook(text.encode(), "rb.toml").runbook.backends == [BackendName.SSH]
    # the minimal shipped runbook lists its own: SSH, and Ansible for its upgrade stage
    assert load_runbook(MINIMAL).runbook.backends == [BackendName.SSH, BackendName.ANSIBLE]


#: the minimal runbook's own backends line, which the tests below replace
MINIMAL_BACKENDS = 'backends = ["ssh", "ansible"]\n'


def test_backend_step_problems_name_their_lines() -> None:
    text = with_drain_step(
        '  id = "x"\n  title = "x"\n  kind = "backend"\n  run = "scontrol drain"\n  where = "control"'
    )
    step_line = line_of(text, 'id = "x"')
    assert problems_of(text) == [
        f'rb.toml:{step_line - 1}: stages[1].steps[0]: a backend step needs action = "drain" | "upgrade" | "reboot" | "resume" | "preflight" | "smoke" | "rollback"',
        f"rb.toml:{step_line + 3}: stages[1].steps[0].run: a backend step asks the engine to act, it runs no command: remove run",
        f'rb.toml:{step_line + 4}: stages[1].steps[0].where: a backend step acts on the node it is run for: remove where (or use "node")',
    ]


def test_an_action_on_a_command_step_and_an_unknown_action_are_refused() -> None:
    text = with_drain_step('  id = "x"\n  title = "x"\n  run = "true"\n  action = "drain"')
    assert problems_of(text) == [
        f'rb.toml:{line_of(text, "action = ")}: stages[1].steps[0].action: is used only with kind = "backend" (kind is command)'
    ]
    text = with_drain_step('  id = "x"\n  title = "x"\n  kind = "backend"\n  action = "reimage"')
    (problem,) = problems_of(text)
    assert problem.startswith(f"rb.toml:{line_of(text, 'reimage')}: stages[1].steps[0].action: ")
    assert "'drain', 'upgrade', 'reboot' or 'resume'" in problem or "drain" in problem


def test_backends_list_problems() -> None:
    minimal = MINIMAL.read_text()
    assert MINIMAL_BACKENDS in minimal
    at = line_of(minimal, MINIMAL_BACKENDS.strip())
    text = minimal.replace(MINIMAL_BACKENDS, 'backends = ["ssh", "ansible", "ssh"]\n')
    assert problems_of(text) == [f"rb.toml:{at}: backends[2]: backend 'ssh' is listed twice"]
    (problem,) = problems_of(minimal.replace(MINIMAL_BACKENDS, 'backends = ["lsf"]\n'))
    assert problem.startswith(f"rb.toml:{at}: backends[0]: ")
    assert problems_of(minimal.replace(MINIMAL_BACKENDS, "backends = []\n"))[0].startswith(f"rb.toml:{at}: backends: ")


def test_when_backend_names_a_listed_backend_and_no_parameter_takes_the_name() -> None:
    text = with_drain_step('  id = "x"\n  title = "x"\n  run = "true"\n  when = { backend = "kubernetes" }')
    kube_line = line_of(text, 'backend = "kubernetes"')
    assert problems_of(text) == [
        f"rb.toml:{kube_line}: stages[1].steps[0].when.backend: "
        "names backend 'kubernetes', which this runbook does not list (backends: ssh, ansible)"
    ]
    text = MINIMAL.read_text().replace(
        "[parameters.wave_size]", '[parameters.backend]\ntype = "str"\n\n[parameters.wave_size]'
    )
    assert problems_of(text) == [
        f"rb.toml:{line_of(text, '[parameters.backend]')}: parameters.backend: "
        "'backend' names the engine chosen with --backend; a parameter cannot take its name"
    ]


def test_a_backend_step_in_a_window_stage_is_refused() -> None:
    text = MINIMAL.read_text()
    marker = '  [[stages.items]]\n  id = "triggers-reviewed"'
    text = text.replace(
        marker, '  [[stages.steps]]\n  id = "x"\n  title = "x"\n  kind = "backend"\n  action = "drain"\n\n' + marker
    )
    window_line = line_of(text, 'id = "x"') - 1
    assert problems_of(text) == [
        f"rb.toml:{window_line}: stages[0].steps[0]: "
        "a backend step acts on a node: put it in a node stage or in [rollback]"
    ]


def test_backend_problems_judge_the_steps_the_backend_would_be_asked() -> None:
    rb = load_runbook(FIXTURE).runbook
    both = frozenset({BackendAction.DRAIN, BackendAction.RESUME})
    assert backend_problems(rb, "slurm", both) == []
    assert backend_problems(rb, "slurm", {BackendAction.DRAIN}) == [
        "step expand/engine-resume asks backend slurm to resume (it runs when backend!=ssh); slurm performs: drain"
    ]
    # under ssh the engine's steps never run: nothing asked of it
    assert backend_problems(rb, "ssh", {BackendAction.REBOOT}) == []
    assert backend_problems(rb, "kubernetes", both) == [
        "runbook backend-drain is not written for backend kubernetes (it lists: ssh, slurm)"
    ]


def test_check_refuses_a_backend_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(FIXTURE), "--backend", "ssh"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "ok"
    assert main(["check", str(FIXTURE), "--backend", "kubernetes"]) == 2
    assert capsys.readouterr().err == (
        f"{FIXTURE}: backend kubernetes: runbook backend-drain is not written for it (it lists: ssh, slurm)\n"
    )
    assert main(["check", str(FIXTURE), "--backend", "lsf"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("--backend lsf: unknown backend (expected one of: ssh, slurm, kubernetes, ansible)")
    )


def test_check_refuses_an_ssh_runbook_asking_the_ssh_backend_to_drain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rb.toml"
    path.write_text(with_drain_step('  id = "x"\n  title = "x"\n  kind = "backend"\n  action = "drain"'))
    assert main(["check", str(path)]) == 2  # the listed ssh backend is checked without --backend too
    assert (
        capsys.readouterr().err
        == f"{path}: backend ssh: step drain/x asks backend ssh to drain; ssh performs: reboot\n"
    )
