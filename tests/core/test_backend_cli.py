"""``--backend`` on the command line: one-line refusals before any window (an unknown name, a
setting of another backend, a runbook not written for it, an engine this build lacks), a
resume refusing an engine its header names that this build lacks, ``probe`` and ``demo``
saying what they can do, and the dry run showing what the engine would be asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from backend_double import ScontrolDouble

from cockpit.changelog.header import SessionHeader
from cockpit.changelog.journal import Journal
from cockpit.cli import main
from cockpit.commands.dry_run import plan_text
from cockpit.engine.fold import Folder
from cockpit.fleet.backends import registry
from cockpit.fleet.backends.base import BackendName
from cockpit.fleet.backends.registry import BackendOptions, KubernetesSettings, make_backend
from cockpit.fleet.backends.runners import ssh_runner
from cockpit.fleet.backends.ssh import SshBackend
from cockpit.fleet.executor import Executor
from cockpit.fleet.results import CommandResult
from cockpit.fleet.transport import Transport
from cockpit.runbook.backends import with_backend
from cockpit.runbook.loader import load_runbook

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runbooks" / "backend-drain.toml"
RUN = ["run", "--change-id", "CHG-B1", "--hosts", "gpu[01-02]", "--no-require-signatures"]


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.fixture
def lacking_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build without the Slurm backend's module (the registry imports it by this name)."""
    monkeypatch.setitem(registry._MODULES, BackendName.SLURM, "no_such_slurm_module")


def test_run_refuses_a_bad_backend_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert refused(capsys, *RUN, "--backend", "lsf") == (
        "cockpit: --backend lsf: unknown backend (expected one of: ssh, slurm, kubernetes, ansible)"
    )
    assert refused(capsys, *RUN, "--kubeconfig", str(tmp_path / "k")) == (
        "cockpit: --kubeconfig is a setting of --backend kubernetes, not of --backend ssh"
    )
    assert refused(capsys, *RUN, "--backend", "kubernetes", "--kubeconfig", str(tmp_path / "k")) == (
        f"cockpit: --kubeconfig {tmp_path / 'k'}: no such file"
    )
    assert refused(capsys, *RUN, "--backend", "kubernetes", "--gpu-operator-mode", "auto").startswith(
        "cockpit: --gpu-operator-mode: "
    )
    # the r580 runbook lists ssh and slurm; the minimal one is written for ssh and ansible
    assert refused(capsys, *RUN, "--runbook", "minimal-driver-upgrade", "--backend", "slurm") == (
        "cockpit: --backend slurm: runbook minimal-driver-upgrade is not written for it (it lists: ssh, ansible)"
    )


@pytest.mark.usefixtures("lacking_slurm")
def test_run_refuses_an_engine_this_build_lacks(capsys: pytest.CaptureFixture[str]) -> None:
    assert refused(capsys, *RUN, "--runbook", str(FIXTURE), "--backend", "slurm") == (
        "cockpit: backend slurm is not available in this build"
    )


def test_run_refuses_a_step_the_engine_cannot_do(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The double performs drain and resume; told it only drains, the runbook's resume is refused."""
    only_drain = type("OnlyDrain", (ScontrolDouble,), {"actions": frozenset({"drain"})})
    monkeypatch.setattr(registry, "backend_class", lambda name: only_drain)
    assert refused(capsys, *RUN, "--runbook", str(FIXTURE), "--backend", "slurm") == (
        "cockpit: --backend slurm: step expand/engine-resume asks backend slurm to resume "
        "(it runs when backend!=ssh); slurm performs: drain"
    )


@pytest.mark.usefixtures("lacking_slurm")
def test_resume_asks_the_engine_its_header_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loaded = load_runbook(FIXTURE)
    header = SessionHeader(
        change_id="CHG-B2", runbook_id=loaded.runbook.id, runbook_sha256=loaded.sha256,
        runbook_path=str(FIXTURE), operator="alice", hosts=["gpu01"], backend="slurm",
    )  # fmt: skip
    with Journal.create(tmp_path, header) as journal:
        path = journal.path
    assert refused(capsys, "resume", str(path)) == "cockpit: backend slurm is not available in this build"


def test_probe_through_an_engine_this_build_lacks(capsys: pytest.CaptureFixture[str], lacking_slurm: None) -> None:
    assert refused(capsys, "probe", "gpu01", "--backend", "slurm") == (
        "cockpit: backend slurm is not available in this build"
    )


def test_demo_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert refused(capsys, "demo", "--backend", "lsf", "--autopilot", "--headless") == (
        "cockpit: --backend lsf: unknown backend (expected one of: ssh, slurm, kubernetes, ansible)"
    )


def test_demo_refuses_ansible_naming_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert refused(capsys, "demo", "--backend", "ansible", "--autopilot", "--headless") == (
        "cockpit demo --backend ansible: its playbook runs Ansible modules, which need Python on the "
        "targets, and the simulated nodes have none"
    )


def test_the_registry_makes_the_ssh_backend_and_keeps_each_engines_settings() -> None:
    assert isinstance(make_backend(BackendOptions(), transport=None), SshBackend)
    options = BackendOptions(name=BackendName.KUBERNETES, kubernetes=KubernetesSettings(context="prod", mode="cockpit"))
    assert options.recorded() == {"context": "prod", "mode": "cockpit", "namespace": "gpu-operator"}
    assert BackendOptions.from_recorded("kubernetes", options.recorded()) == options
    assert BackendOptions.from_recorded(None, None) == BackendOptions()  # a header before backends: ssh


def test_the_dry_run_says_what_the_engine_would_be_asked() -> None:
    loaded = load_runbook(FIXTURE)

    async def never(argv: object, *, timeout: float) -> CommandResult:
        raise AssertionError("the dry run asks the engine nothing")

    executor = Executor(None, loaded.runbook.defaults(), facts={"change_id": "CHG-DRY"}, backend=ScontrolDouble(never))
    params = with_backend(loaded.runbook.defaults(), "slurm")
    waves = Folder(loaded.runbook, params, ["gpu01"]).state.waves
    text = plan_text(loaded, params, waves, {}, executor)
    assert (
        "  step engine-drain on gpu01: asks slurm: drain gpu01 (the engine does it, reason 'cockpit CHG-DRY: engine-drain')"
        in text
    )
    assert "  step cordon on control host control: skipped (runs only when backend=ssh)" in text


@pytest.mark.binary
def test_probe_reads_an_engine_that_reports_state_without_ssh_to_the_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Told the double is the Slurm backend, ``probe --backend slurm`` reads the nodes' state from
    scontrol on the simulated control host: the SSH pool holds the control host alone."""
    import json

    from sim_process import clean_env, running_sim

    pools: list[list[str]] = []

    def make(options: BackendOptions, *, transport: object, runner: object = None) -> ScontrolDouble:
        assert isinstance(transport, Transport)
        pools.append(list(transport.hosts))
        return ScontrolDouble(ssh_runner(transport, "control"))

    monkeypatch.setattr(registry, "backend_class", lambda name: ScontrolDouble)
    monkeypatch.setattr(registry, "make_backend", make)
    for key, value in clean_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with running_sim(tmp_path, nodes=2) as sim:
        ssh = ["--ssh-config", str(sim.ssh_config), "--known-hosts", str(sim.known_hosts)]
        status = main(["probe", "gpu[01-02]", "--backend", "slurm", "--slurm-control-host", "control", *ssh, "--json"])
        out = json.loads(capsys.readouterr().out)
        folded = main(["probe", "gpu[01-02]", "--backend", "slurm", "--slurm-control-host", "control", *ssh])
        text = capsys.readouterr().out
    assert pools == [["control"], ["control"]]
    assert status == 0 and out["backend"] == "slurm"
    assert [(n["node"], n["native_state"], n["stage"]) for n in out["nodes"]] == [
        ("gpu01", "MIXED", "in-service"),
        ("gpu02", "MIXED", "in-service"),
    ]
    assert folded == 0 and text.splitlines()[1:4] == [
        "gpu[01-02] (2)",
        "---------------",
        "slurm       MIXED (in-service)",
    ]
