"""The Ansible backend against REAL ansible-runner jobs on REAL OpenSSH sshd "hosts".

Three sshd servers on 127.0.0.1 (tests/sshd_fixture.py) are the inventory's gpu01-03,
each with its own stubs on the session's PATH: ``mark`` appends its arguments to that
server's ``node/marks``, so a test reads on the remote side which host ran what.
ansible-playbook is slow to start, so each job is one test (three jobs in all, marked
``slow`` so xdist starts them first, on different workers) that checks everything the
job left; each gets its own three servers, so no job sees another's marks. The generated
playbook of two commands on two hosts runs through the cockpit itself (a window's backend
step, via the Session API), the failing task, the unknown host key and the reboot through
the backend directly, the site playbook and its cancel likewise.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sshd_fixture
import yaml

from cockpit.errors import BadInput
from cockpit.fleet.backends import ansible_play as play
from cockpit.fleet.backends.ansible import AnsibleBackend, play_tasks, ssh_settings
from cockpit.fleet.backends.ansible_play import SshSettings
from cockpit.fleet.backends.base import (
    BackendAction,
    BackendError,
    Observation,
    ObservedStage,
    ReleaseRequest,
    ReleaseResult,
)
from cockpit.fleet.targets import HostTarget, TransportOptions
from cockpit.runbook.model import Step, StepKind, Where

pytestmark = pytest.mark.sshd

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
NODES = ("gpu01", "gpu02", "gpu03")
#: a value with Jinja2 and shell syntax in it: it must reach the node as these very characters
VERSION = "580.95.05 {{ 7 * 6 }} $(id)"
SITE_PLAYBOOK = Path(__file__).parent.parent / "fixtures" / "ansible" / "site-upgrade.yml"
WINDOW_RUNBOOK = SITE_PLAYBOOK.with_name("ansible-window.toml")


def _need(ok: bool, why: str) -> None:
    if not ok:
        if CI:
            pytest.fail(f"{why} but CI=true: .ci/run installs it")
        pytest.skip(why)


@dataclass
class Fleet:
    servers: dict[str, Any]
    targets: list[HostTarget]
    known_hosts: Path
    root: Path

    def marks(self, node: str) -> list[str]:
        path = self.servers[node].node_dir / "marks"
        return path.read_text().splitlines() if path.exists() else []

    def settings(self, known_hosts: Path | None = None) -> SshSettings:
        return SshSettings(
            known_hosts=known_hosts or self.known_hosts,
            ssh_config=self.servers["gpu01"].ssh_config,  # empty: the developer's ~/.ssh/config stays out
            identity_files=tuple(s.client_key for s in self.servers.values()),
            python_interpreter=sys.executable,  # the nodes are this machine: its Python runs the modules
            connect_timeout_s=30,  # a loaded CI machine: a slow banner must not pass for a refused key
        )


@pytest.fixture
def fleet(tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path) -> Iterator[Fleet]:
    _need(sshd_fixture.find_sshd() is not None, "sshd not installed (package openssh-server)")
    try:
        import ansible_runner  # noqa: F401
    except ImportError:
        _need(False, "ansible-runner not installed (pip install '.[ansible]')")
    root = tmp_path_factory.mktemp("ansible")
    servers: dict[str, Any] = {}
    try:
        for node in NODES:
            server = sshd_fixture.start_sshd(root / node, fixtures_dir)
            servers[node] = server
            stub(server, "mark", f'echo "$@" >> "{server.node_dir}/marks"\n')
            # fails on gpu02 only, as a real install would: a message on stderr, a non-zero exit
            failing = node == "gpu02"
            stub(server, "fails-here", 'echo "fails-here: no space left on /var" >&2\nexit 3\n' if failing else "")
        known_hosts = root / "known_hosts"
        known_hosts.write_text("".join(s.known_hosts.read_text() for s in servers.values()))
        targets = [HostTarget(name=n, address="127.0.0.1", port=s.port, user=s.user) for n, s in servers.items()]
        yield Fleet(servers, targets, known_hosts, root)
    finally:
        for server in servers.values():
            server.stop()


def stub(server: Any, name: str, body: str) -> None:
    path = server.workdir / "bin" / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@dataclass
class Job:
    results: dict[str, ReleaseResult]
    seen: list[Observation] = field(default_factory=list)
    off_loop: int = 0  # observations delivered outside the event loop's thread (must stay 0)
    cancelled_at: float | None = None
    ended_at: float = 0.0


def release(
    backend: AnsibleBackend, action: BackendAction, nodes: list[str], *, cancel_after: str | None = None
) -> Job:
    """One release on a fresh loop; ``cancel_after``: cancel once that task's first ok arrives."""

    async def go() -> Job:
        job = Job(results={})
        loop_thread = threading.get_ident()

        def heard(observation: Observation) -> None:
            job.seen.append(observation)
            job.off_loop += threading.get_ident() != loop_thread
            if cancel_after and observation.native_state == f"runner_on_ok: {cancel_after}":
                job.cancelled_at = time.monotonic()
                asyncio.get_running_loop().create_task(backend.cancel(nodes))

        out = await backend.release(ReleaseRequest(action, tuple(nodes), reason="CHG-7 r580", timeout_s=60), heard)
        job.ended_at = time.monotonic()
        job.results = {r.node: r for r in out}
        return job

    return asyncio.run(go())


def bad_job(fleet: Fleet) -> tuple[Job, bytes, bytes]:
    """All three in the wave: gpu02's second task fails, gpu03's host key is not in known_hosts."""
    partial = fleet.root / "known_hosts.partial"
    port3 = fleet.servers["gpu03"].port
    partial.write_text(
        "".join(line + "\n" for line in fleet.known_hosts.read_text().splitlines() if f":{port3} " not in line)
    )
    before = partial.read_bytes()
    backend = AnsibleBackend(fleet.targets, fleet.settings(known_hosts=partial), fleet.root / "jobs-bad")
    steps = [
        Step(id="first", title="mark first", run="mark first"),
        Step(id="install", title="install", run="fails-here {node}"),
    ]
    backend.use_steps(BackendAction.UPGRADE, play_tasks(steps, fleet.targets, {}))
    job = release(backend, BackendAction.UPGRADE, list(NODES))
    return job, before, partial.read_bytes()


# --- what each job must have done (checked in the job's test below) ------------------------------------------------------


def a_failing_task_fails_its_host_only_with_rc_and_stderr(fleet: Fleet, bad_job: tuple[Job, bytes, bytes]) -> None:
    job, _, _ = bad_job
    assert set(job.results) == set(NODES)  # a result per host
    assert job.off_loop == 0  # the runner's thread handed every event to the loop
    failed = job.results["gpu02"]
    assert not failed.ok
    assert failed.error == "exit status 3: fails-here: no space left on /var"
    assert failed.evidence["task"] == "install: install"
    assert failed.final is not None and failed.final.stage is ObservedStage.FAILED
    assert failed.final.native_state == "runner_on_failed: install: install"
    assert (failed.final.evidence["rc"], failed.final.evidence["stderr"]) == ("3", "fails-here: no space left on /var")
    assert fleet.marks("gpu02")[-1] == "first"  # its first task ran before the failure
    ok = job.results["gpu01"]
    assert ok.ok, ok.error
    assert ok.final is not None and ok.final.stage is ObservedStage.DONE


def an_unknown_host_key_fails_and_is_not_learnt(fleet: Fleet, bad_job: tuple[Job, bytes, bytes]) -> None:
    job, before, after = bad_job
    refused = job.results["gpu03"]
    assert not refused.ok
    assert refused.final is not None and refused.final.stage is ObservedStage.DOWN
    assert refused.final.native_state.startswith("runner_on_unreachable: ")
    assert "Host key verification failed" in (refused.error or ""), refused.error
    assert after == before  # known_hosts gained no line
    assert "first" not in fleet.marks("gpu03")  # nothing ran there


@pytest.mark.slow
def test_a_failing_task_and_an_unknown_host_key_fail_their_hosts_only(fleet: Fleet) -> None:
    outcome = bad_job(fleet)
    a_failing_task_fails_its_host_only_with_rc_and_stderr(fleet, outcome)
    an_unknown_host_key_fails_and_is_not_learnt(fleet, outcome)


# --- a site's own playbook, and cancelling -----------------------------------------------------


@pytest.mark.slow
def test_a_site_playbook_gets_the_reason_and_cancel_stops_the_job(fleet: Fleet) -> None:
    backend = AnsibleBackend(
        fleet.targets, fleet.settings(), fleet.root / "jobs-site", playbooks={BackendAction.DRAIN: SITE_PLAYBOOK}
    )
    job = release(backend, BackendAction.DRAIN, ["gpu03"], cancel_after="site mark")
    result = job.results["gpu03"]
    assert "site CHG-7 r580 drain" in fleet.marks("gpu03")  # the playbook's task, with cockpit_reason
    assert not result.ok
    assert result.error == "the Ansible job was cancelled"
    assert result.evidence["runner_status"] == "canceled"
    assert job.cancelled_at is not None
    assert job.ended_at - job.cancelled_at < 10  # the playbook's next task sleeps 15 s: cancel did not wait for it


# --- the pure half: what is written, and what is refused -------------------------------------


def test_a_plain_command_is_its_words_and_shell_syntax_goes_to_sh() -> None:
    assert play.command_argv("nvidia-smi -q 'a b'") == ["nvidia-smi", "-q", "a b"]
    assert play.command_argv("apt-get install -y 'x;reboot'") == ["/bin/sh", "-c", "apt-get install -y 'x;reboot'"]
    assert play.command_argv("dpkg -l | grep nvidia")[:2] == ["/bin/sh", "-c"]
    assert play.command_argv("FOO=1 run")[:2] == ["/bin/sh", "-c"]
    with pytest.raises(BadInput):
        play.command_argv("echo 'unclosed")


@pytest.mark.parametrize("name", ["gpu*", "a:b", "!gpu01", "gpu[1:2]", "all&x", "~gpu", "a,b", ""])
def test_a_name_ansible_would_read_as_a_pattern_is_refused(name: str) -> None:
    with pytest.raises(BadInput):
        play.limit_expression([name])


def test_become_follows_the_login_as_the_ssh_executor_does() -> None:
    targets = [HostTarget(name="n1", user="root"), HostTarget(name="n2", user="ops"), HostTarget(name="n3")]
    steps = [Step(id="s", title="s", run="true", sudo=True), Step(id="p", title="p", run="true")]
    sudo, plain = play_tasks(steps, targets, {})
    assert sudo.become == {"n1": False, "n2": True, "n3": True}
    assert not any(plain.become.values())
    document = play.playbook_document("t", [sudo, plain])
    assert document[0]["tasks"][0]["become"] == "{{ cockpit_become['s'] }}"
    assert document[0]["tasks"][1]["become"] is False


def test_a_reboot_step_is_ansibles_reboot_module_with_the_steps_command_and_timeout() -> None:
    # ran against the sshd fixture's reboot stub while writing it (boot ids changed, 20 s on a loaded
    # machine); kept out of the suite for its time: the reboot module's own waits and fact gathering
    step = Step(id="boot", title="reboot", kind=StepKind.REBOOT, timeout_s=900, sudo=True)
    (task,) = play_tasks([step], [HostTarget(name="n1", user="ops")], {})
    assert (task.reboot, task.commands, task.become) == (True, {"n1": "systemctl reboot"}, {"n1": True})
    (entry,) = play.playbook_document("t", [task])[0]["tasks"]
    assert entry["ansible.builtin.reboot"] == {
        "reboot_command": "{{ cockpit_argv['boot'] }}",
        "boot_time_command": "cat /proc/sys/kernel/random/boot_id",  # the boot id the cockpit reads
        "reboot_timeout": 900,
    }
    assert "timeout" not in entry  # the task's own timeout would cut the reboot's wait short
    hosts = play.inventory_document([HostTarget(name="n1")], SshSettings(), [task])["all"]["hosts"]
    assert hosts["n1"]["cockpit_argv"] == {"boot": "systemctl reboot"}  # a command line: the module runs it


def test_a_command_is_filled_as_the_ssh_executor_fills_it() -> None:
    from cockpit.fleet.executor import Executor
    from cockpit.fleet.transport import Transport
    from cockpit.runbook.placeholders import fill

    target = HostTarget(name="gpu01", address="10.0.0.1", user="ops", node_name="gpu01.cluster")
    run = "drain {node} {host} {node_name} {driver_version} {change_id} {recorded_os_id}"
    params, shared, own = {"driver_version": "580.95.05"}, {"change_id": "CHG-1"}, {"recorded_os_id": "ubuntu"}
    (task,) = play_tasks([Step(id="s", title="s", run=run)], [target], params, facts=shared, node_facts={"gpu01": own})
    executor = Executor(Transport([target]), params, facts=shared)
    assert task.commands["gpu01"] == fill(run, executor.values("gpu01", own))
    assert task.commands["gpu01"] == "drain gpu01 10.0.0.1 gpu01.cluster 580.95.05 CHG-1 ubuntu"


def test_a_step_ansible_does_not_run_is_refused_in_words() -> None:
    with pytest.raises(BadInput, match="control"):
        play_tasks([Step(id="d", title="d", run="scontrol drain", where=Where.CONTROL)], [HostTarget(name="n1")], {})


def test_a_condition_leaves_the_node_out_of_that_task() -> None:
    steps = [Step(id="s", title="s", run="true", when={"recorded_os_id": "ubuntu"})]
    facts = {"n1": {"recorded_os_id": "ubuntu"}, "n2": {"recorded_os_id": "rhel"}}
    (task,) = play_tasks(steps, [HostTarget(name="n1"), HostTarget(name="n2")], {}, node_facts=facts)
    assert set(task.commands) == {"n1"}


def test_every_written_value_is_unsafe_for_ansible() -> None:
    from ansible.parsing.yaml.loader import AnsibleLoader

    text = play.dump_yaml({"all": {"hosts": {"n1": {"x": "{{ lookup('pipe', 'id') }}", "n": 3}}}})
    loaded = yaml.load(text, Loader=AnsibleLoader)  # Ansible's own loader, as ansible-playbook reads it
    value = loaded["all"]["hosts"]["n1"]["x"]
    assert value == "{{ lookup('pipe', 'id') }}"
    assert "!unsafe" in text and loaded["all"]["hosts"]["n1"]["n"] == 3
    from ansible.template import is_trusted_as_template

    assert not is_trusted_as_template(value)


def test_ssh_never_accepts_a_key_silently(tmp_path: Path) -> None:
    kh = tmp_path / "kh"
    args = play.ssh_common_args(ssh_settings(TransportOptions(known_hosts=kh)))
    assert ["-o", f"UserKnownHostsFile={kh.resolve()}"] == args[args.index(f"UserKnownHostsFile={kh.resolve()}") - 1 :][
        :2
    ]
    assert "StrictHostKeyChecking=yes" in args and "StrictHostKeyChecking=no" not in args
    with pytest.raises(BadInput):
        play.ssh_common_args(SshSettings(known_hosts=tmp_path / "a b"))


async def test_a_node_outside_the_inventory_is_refused_before_any_job(tmp_path: Path) -> None:
    backend = AnsibleBackend([HostTarget(name="n1")], SshSettings(), tmp_path)
    backend.use_steps(
        BackendAction.UPGRADE, play_tasks([Step(id="s", title="s", run="true")], [HostTarget(name="n1")], {})
    )
    with pytest.raises(BackendError, match="not in the Ansible inventory: n9"):
        await backend.release(ReleaseRequest(BackendAction.UPGRADE, ("n9",), reason="r", timeout_s=5))
    # Ansible reboots nothing itself: a runbook's reboot step stays the cockpit's (or a playbook task)
    assert BackendAction.REBOOT not in AnsibleBackend.actions
    with pytest.raises(BackendError, match="does not reboot"):
        await backend.release(ReleaseRequest(BackendAction.REBOOT, ("n1",), reason="r", timeout_s=5))
    assert not list(tmp_path.iterdir())


# --- through the cockpit: a window's backend step, released to Ansible ------------------------


@pytest.mark.slow
async def test_a_window_step_runs_its_stage_through_ansible_with_events_in_the_change_log(
    fleet: Fleet, tmp_path: Path
) -> None:
    from cockpit.changelog.events import EventKind
    from cockpit.changelog.journal import read_session
    from cockpit.fleet.backends.registry import AnsibleSettings, BackendOptions, make_backend
    from cockpit.fleet.transport import Transport, TransportOptions
    from cockpit.runbook.loader import load_runbook
    from cockpit.session.operator import Session

    loaded = load_runbook(WINDOW_RUNBOOK)
    transport = Transport(
        fleet.targets,  # the inventory holds all three; the first wave is gpu01 and gpu02
        TransportOptions(
            ssh_config=fleet.servers["gpu01"].ssh_config,
            known_hosts=fleet.known_hosts,
            client_keys=[s.client_key for s in fleet.servers.values()],
            connect_timeout_s=30,
        ),
    )
    options = BackendOptions(name="ansible", ansible=AnsibleSettings())
    backend = make_backend(options, transport=transport)  # the registry finds backends/ansible.py's make()
    assert isinstance(backend, AnsibleBackend)
    backend.workdir = tmp_path / "jobs"
    backend.ssh = backend.ssh.model_copy(update={"python_interpreter": sys.executable})
    assert backend.runbook is None  # the session hands it the runbook, as `cockpit run` and `resume` start it
    session = Session.start(
        sessions_dir=tmp_path, change_id="CHG-ANS", loaded=loaded, params={"driver_version": VERSION},
        targets=fleet.targets, operator="alice",
        transport=transport, backend=backend, backend_options=options,
    )  # fmt: skip
    assert backend.runbook is loaded.runbook
    try:
        session.tick("arm", "reviewed")
        session.arm_triggers()
        session.pass_gate("arm")
        session.start_wave(0)
        outcomes = await asyncio.gather(
            *(session.steps.run_step("upgrade", "via-ansible", n) for n in ("gpu01", "gpu02"))
        )
    finally:
        await session.close()
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    # the stage's SSH path ran on each wave node, through Ansible, filled as the SSH executor
    # fills it; neither Jinja2 ({{ 7 * 6 }} stays, no 42) nor a shell ($(id) stays) touched the value
    assert fleet.marks("gpu01") == [f"install {VERSION} gpu01", f"pin {VERSION}"]
    assert fleet.marks("gpu02") == [f"install {VERSION} gpu02", f"pin {VERSION}"]
    assert fleet.marks("gpu03") == []  # in the inventory, not in the wave: --limit kept it out
    log = read_session(session.path)
    observed = [e for e in log.events if e.kind is EventKind.NODE_OBSERVED]
    assert {e.node for e in observed} == {"gpu01", "gpu02"}
    jobs = {e.facts.evidence["job_id"] for e in observed if e.facts.evidence}
    assert len(jobs) == 1  # the two nodes' releases went as one job
    (job_id,) = jobs
    for node in ("gpu01", "gpu02"):
        seen = [e.facts for e in observed if e.node == node]
        assert [f.native_state for f in seen] == [
            "runner_on_ok: install: Install the driver packages",
            "runner_on_ok: pin: Pin the version",
            "playbook_on_stats: ok",
        ]
        assert [f.stage for f in seen] == ["upgrading", "upgrading", "done"]
        assert all(f.backend == "ansible" and f.evidence and f.evidence["job_id"] == job_id for f in seen)
        assert [f.evidence["rc"] for f in seen[:2] if f.evidence] == ["0", "0"]
        assert all(e.step == "via-ansible" for e in observed if e.node == node)
    finished = {e.node: e.facts for e in log.events if e.kind is EventKind.STEP_FINISHED}
    assert set(finished) == {"gpu01", "gpu02"} and all(f.ok and f.backend == "ansible" for f in finished.values())
    evidence = finished["gpu02"].evidence or {}
    artifacts = Path(evidence["artifacts"])
    assert artifacts.name == job_id
    assert evidence["artifacts_sha256"] == play.tree_sha256(artifacts)  # the artifacts, referenced by hash
    kept = [yaml.safe_load(p.read_text())["event"] for p in (artifacts / "job_events").glob("*.json")]
    assert kept.count("runner_on_ok") == 4  # every event kept for the audit: two tasks on two nodes
    argv = yaml.safe_load((artifacts / "command").read_text())["command"]
    assert argv[argv.index("--limit") + 1] == "gpu01,gpu02"
