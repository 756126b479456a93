"""Privilege done right: a ``sudo = true`` step runs under ``sudo -n`` on a login that is not
root, sudo wanting a password is refused in words that say what to configure, the login is
recorded, and the simulated node refuses a user what the real tools refuse one.

Real parts: the simulator's shell and commands, the executor over real SSH to the simulated
fleet, the session recording the change log.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from sim_nodes import sh

from cockpit.changelog.events import StepFinishedEvent
from cockpit.changelog.facts import BaselineFacts
from cockpit.changelog.journal import read_session
from cockpit.fleet.executor import Executor, StepOutcome
from cockpit.fleet.platform_probe import platform_facts, sudo_state
from cockpit.fleet.privilege import escalate, login_is_root
from cockpit.fleet.results import ErrorKind
from cockpit.fleet.transport import Transport
from cockpit.runbook.loader import RunbookInvalid, load, load_runbook
from cockpit.runbook.model import Runbook, Step, StepKind
from cockpit.runbook.placeholders import resolve_parameters
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session
from cockpit.sim import SimFleet
from cockpit.sim.node import SimNode
from cockpit.sim.platform import NodeProfile
from cockpit.sim.privilege import SUDO_NEEDS_PASSWORD, Login
from cockpit.sim.scenarios import SCENARIOS

pytestmark = pytest.mark.ssh  # the simulator's SSH server: tests/conftest.py SLOW_MARKS

OPS = Login("ops", uid=1001, sudo="passwordless")


def sim_node(login: Login) -> SimNode:
    return SimNode.create("gpu01", 0, SCENARIOS["happy"], seed=7, profile=NodeProfile(login=login))


# -- the simulated node as a user -----------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "status", "words"),
    [
        # apt 2.x as a user: the dpkg frontend lock cannot be opened
        ("apt-get install -y nvidia-driver-580", 100, "are you root?"),
        ("apt-get -o DPkg::Lock::Timeout=120 update", 100, "E: Unable to lock directory /var/lib/apt/lists/"),
        ("apt-mark hold nvidia-driver-575", 100, "E: Executing dpkg failed. Are you root?"),
        ("systemctl reboot", 1, "Call to Reboot failed: Interactive authentication required."),
        ("systemctl stop nvidia-persistenced", 1, "Interactive authentication required."),
        ("dmesg", 1, "dmesg: read kernel buffer failed: Operation not permitted"),
        (
            "mkdir -p /var/cache/cockpit/CHG-1",
            1,
            "mkdir: cannot create directory '/var/cache/cockpit': Permission denied",
        ),
        ("echo x > /etc/cockpit-test", 2, "cannot create /etc/cockpit-test: Permission denied"),
        ("docker image inspect img", 1, "permission denied while trying to connect to the Docker daemon socket"),
    ],
)
async def test_a_user_is_refused_what_root_may_do(line: str, status: int, words: str) -> None:
    node = sim_node(Login("ops", uid=1001, sudo="password-required"))
    got, _out, err = await sh(node, line)
    assert (got, words in err) == (status, True), err
    if line.startswith("apt-get install"):
        assert "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)" in err
        assert node.packages.installed.get("nvidia-driver-580") is None  # nothing moved


async def test_a_user_reads_what_users_may_read() -> None:
    node = sim_node(Login("ops", uid=1001, sudo="password-required"))
    assert await sh(node, "id -u") == (0, "1001\n", "")
    assert await sh(node, "id -un") == (0, "ops\n", "")
    assert (await sh(node, "apt-mark showhold"))[0] == 0
    status, _out, err = await sh(node, "fuser -v /dev/nvidia0")
    assert (status, err) == (1, "")  # root's persistenced is not a user's to see
    # journalctl -k -q shows a user outside adm nothing (journalctl(1)): not "no XID"
    assert await sh(node, "journalctl -k -b 0 -q -n 1 --no-pager") == (0, "", "")


async def test_sudo_as_sudo_says_it_without_a_terminal() -> None:
    wants = sim_node(Login("ops", uid=1001, sudo="password-required"))
    assert await sh(wants, "sudo -n true") == (1, "", SUDO_NEEDS_PASSWORD)
    status, _out, err = await sh(wants, "sudo apt-get update")
    assert status == 1 and err.startswith("sudo: a terminal is required to read the password; either use the -S")
    assert err.endswith(SUDO_NEEDS_PASSWORD)
    absent = sim_node(Login("ops", uid=1001, sudo="absent"))
    assert await sh(absent, "sudo -n true") == (127, "", "sh: 1: sudo: not found\n")


async def test_passwordless_sudo_runs_the_whole_command_as_root() -> None:
    node = sim_node(OPS)
    inner = "id -u && mkdir -p /var/cache/cockpit/C && apt-mark showhold > /var/cache/cockpit/C/holds && dmesg"
    status, out, err = await sh(node, escalate(inner))
    assert status == 0, err
    assert out.startswith("0\n") and "/var/cache/cockpit/C/holds" in node.files
    status, _out, err = await sh(node, "fuser -v /dev/nvidia0")
    assert status == 1  # the same user, without sudo, still sees no holder
    status, _out, err = await sh(node, "sudo -n fuser -v /dev/nvidia0")
    assert status == 0 and "nvidia-persiste" in err


async def test_root_is_what_every_node_was_before() -> None:
    node = SimNode.create("gpu01", 0, SCENARIOS["happy"], seed=7)
    assert node.login.root
    assert await sh(node, "id -u") == (0, "0\n", "")
    assert (await sh(node, "mkdir -p /var/cache/cockpit/C"))[0] == 0


# -- what the probe learns -------------------------------------------------------------------


def test_the_probe_reads_the_login_and_its_sudo() -> None:
    assert sudo_state("", 0) == "passwordless"
    assert sudo_state("sudo: a password is required", 1) == "password-required"
    assert sudo_state("sh: 1: sudo: not found", 127) == "absent"
    texts = {
        "os-release": ("ID=ubuntu\n", 0),
        "login": ("ops\n1001\n", 0),
        "sudo": ("sudo: a password is required\n", 1),
        "holders": ("", 1),
    }
    facts = platform_facts(texts)
    assert facts is not None
    assert (facts.ssh_user, facts.uid, facts.sudo) == ("ops", 1001, "password-required")
    assert facts.gpu_holders is None  # a user's fuser cannot say "none"


def test_whether_the_login_is_root() -> None:
    assert login_is_root({"recorded_uid": 0}, None)
    assert not login_is_root({"recorded_uid": 1001}, "root")  # what the node said wins
    assert login_is_root({}, "root")
    assert not login_is_root(None, None)  # not known: escalate (sudo never asks root)


def test_escalation_quotes_the_filled_command_once_as_one_argument() -> None:
    inner = "apt-mark showhold > /var/cache/cockpit/'CHG 1'/holds && echo \"$HOME\""
    assert shlex.split(escalate(inner)) == ["sudo", "-n", "--", "sh", "-c", inner]


# -- the runbook ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "words"),
    [
        (
            '  [[stages.steps]]\n  id = "p"\n  title = "t"\n  kind = "probe"\n  sudo = true\n',
            "sudo applies to commands",
        ),
        (
            '  [[stages.steps]]\n  id = "l"\n  title = "t"\n  run = "true"\n  where = "local"\n  sudo = true\n',
            "no sudo",
        ),
        (
            '  [[stages.items]]\n  id = "i"\n  text = "t"\n  verify = "manual"\n  sudo = true\n',
            "sudo applies to commands",
        ),
    ],
)
def test_sudo_is_refused_where_there_is_no_command_to_escalate(tmp_path: Path, block: str, words: str) -> None:
    text = '[runbook]\nid = "rb"\ntitle = "t"\n\n[[stages]]\nid = "s"\ntitle = "t"\nscope = "window"\n\n' + block
    path = tmp_path / "rb.toml"
    path.write_text(text)
    with pytest.raises(RunbookInvalid) as exc:
        load_runbook(path)
    assert any("sudo" in str(p) and words in str(p) for p in exc.value.problems), exc.value.problems


# -- the executor over SSH ------------------------------------------------------------------------


async def _run(tmp_path: Path, scenario: str, step: Step, facts: dict[str, object]) -> StepOutcome:
    fleet = SimFleet(nodes=1, scenario=scenario, speed=20.0)
    await fleet.start()
    files = fleet.write_client_files(tmp_path)
    transport = Transport(fleet.targets(), fleet.transport_options(files, connect_timeout_s=2))
    try:
        params = resolve_parameters(load().runbook, {})
        executor = Executor(transport=transport, params=params, facts={"change_id": "CHG-7"})
        return await executor.execute_step(step, fleet.node_names[0], node_facts=facts)
    finally:
        await transport.close()
        await fleet.stop()


HOLDS = Step(id="holds", title="t", run="mkdir -p /var/cache/cockpit/{change_id} && id -u", sudo=True)


async def test_a_sudo_step_on_a_user_login_runs_under_sudo_n(tmp_path: Path) -> None:
    outcome = await _run(tmp_path, "non-root", HOLDS, {"recorded_uid": 1001, "recorded_ssh_user": "ops"})
    assert outcome.ok and outcome.escalated, outcome
    assert outcome.command == "sudo -n -- sh -c 'mkdir -p /var/cache/cockpit/CHG-7 && id -u'"
    assert outcome.stdout == "0\n"
    assert outcome.facts()["escalated"] is True


async def test_a_root_login_gets_no_sudo(tmp_path: Path) -> None:
    outcome = await _run(tmp_path, "happy", HOLDS, {})  # no baseline yet: the configured user is root
    assert outcome.ok and not outcome.escalated
    assert outcome.command == "mkdir -p /var/cache/cockpit/CHG-7 && id -u"
    assert "escalated" not in outcome.facts()


async def test_sudo_wanting_a_password_is_a_clear_refusal(tmp_path: Path) -> None:
    facts = {"recorded_uid": 1001, "recorded_ssh_user": "ops"}
    outcome = await _run(tmp_path, "sudo-password", HOLDS, facts)
    assert not outcome.ok and outcome.error_kind is ErrorKind.PRIVILEGE
    assert outcome.error == (
        "sudo -n on gpu01 asks for a password: give ops passwordless sudo for these commands (see docs/real-nodes.md), "
        "or connect as root"
    )
    reboot = Step(id="reboot", title="t", kind=StepKind.REBOOT, run="systemctl reboot", sudo=True, timeout_s=5)
    outcome = await _run(tmp_path, "sudo-password", reboot, facts)
    assert outcome.error_kind is ErrorKind.PRIVILEGE and outcome.boot_id_after is None


# -- the change log ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_the_non_root_window_records_the_login_and_every_escalation(tmp_path: Path) -> None:
    async with demo_session(
        nodes=2, scenario="non-root", sessions_dir=tmp_path, speed=100.0, params={"reboot_timeout_s": 5}
    ) as (session, _fleet):
        result = await drive(session)
        assert result.stuck_on is None and result.outcome == "keep-upgraded-path"
        log = read_session(session.path)
        runbook = session.runbook
    for node in ("gpu01", "gpu02"):
        baseline = session.state.nodes[node].baseline
        assert (baseline.ssh_user, baseline.uid, baseline.sudo) == ("ops", 1001, "passwordless")
    finished = [e for e in log.events if isinstance(e, StepFinishedEvent) and not e.facts.skipped]
    privileged = [e for e in finished if _needs_root(runbook, e)]
    assert len(privileged) >= 10
    assert all(e.facts.escalated and (e.facts.command or "").startswith("sudo -n -- sh -c ") for e in privileged)
    assert not any(e.facts.escalated for e in finished if not _needs_root(runbook, e))


def _needs_root(runbook: Runbook, event: StepFinishedEvent) -> bool:
    steps = (
        runbook.rollback.steps
        if event.stage == "rollback" and runbook.rollback
        else runbook.stage(event.stage or "").steps
    )
    return next(s.sudo for s in steps if s.id == event.step)


def test_the_node_detail_says_who_the_login_is() -> None:
    from cockpit.view.detail import login_lines

    assert login_lines(BaselineFacts(os_id="ubuntu")) == []  # a baseline recorded before the login was probed
    (root,) = login_lines(BaselineFacts(ssh_user="root", uid=0, sudo="passwordless"))
    assert root.text == "login root (root): steps run as it, no sudo"
    (user,) = login_lines(BaselineFacts(ssh_user="ops", uid=1001, sudo="password-required"))
    assert user.text == "login ops (uid 1001): sudo password-required" and user.tone == "warning"
