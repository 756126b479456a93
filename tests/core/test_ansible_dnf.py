"""The shipped runbooks' RHEL 9 (dnf) upgrade through Ansible, on a REAL sshd node whose dnf is scratch.

As tests/core/test_ansible_modules.py does for apt: this machine seen through a real OpenSSH sshd
(tests/sshd_fixture.py) started in its own mount namespace (``unshare --mount``), where the dnf
oracle's scratch root (tests/dnf_oracle.py via tests/rhel_cells.py: NVIDIA's RHEL 9 ``nvidia-driver``
module from cockpit/sim/repos/rhel9 built into a ``file://`` repository of empty rpms, the 575/fm
start installed by the real dnf and every NVIDIA package version-locked) is bound over what dnf and
rpm read: ``/etc/dnf`` (dnf.conf, modules.d, the versionlock plugin's list, vars), the rpm database
at ``/var/lib/rpm`` and at Debian's ``%_dbpath`` (``~/.rpmdb``), and scratch folders over
``/var/lib/dnf``, ``/var/cache`` and ``/var/log``. ``/etc/os-release`` says RHEL 9.6; apt-get is
made not executable and ``/var/lib/dpkg`` empty, so the record probe finds dnf as on RHEL.

The host has no ``/etc/yum.repos.d`` to bind over (creating one would touch it): the node's own
dnf.conf names the root's repository folder (``reposdir``), as a site's may. Everything that runs
in a session there - the probe's rpm, the runbook's commands, Ansible's ``dnf`` module with the
system's python3-dnf, the real dnf and rpm - sees the scratch node; the host's rpmdb and dnf state
are compared before and after.

The runbooks switch the stream by ``ansible.builtin.dnf`` (``@nvidia-driver:STREAM/PROFILE``,
``allowerasing``) under Ansible and by ``dnf module switch-to --allowerasing`` over SSH: one test
holds the two to the same rpmdb and module state in every RHEL 9 start cell.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ansible_node
import pytest
import sshd_fixture
from ansible_node import (
    NODE_PYTHON,
    NVIDIA_SMI_STUB,
    QUERY_CAPTURE,
    by_task,
    can_unshare,
    context_of,
    first_run_changes,
    namespace_script,
    need,
    open_window,
    recap,
    release,
    transport_options,
)
from rhel_cells import PROFILES, TARGET_STREAM, TARGET_VERSION, Node, make_oracle, make_start, node_values

from cockpit.fleet.backends.ansible import AnsibleBackend, play_tasks
from cockpit.fleet.backends.ansible_play import CHECK_MODE_SKIP
from cockpit.fleet.backends.base import BackendAction
from cockpit.fleet.targets import HostTarget, TransportOptions
from cockpit.runbook.model import Step
from cockpit.runbook.placeholders import fill
from cockpit.session.operator import Session
from cockpit.sim.platform import RHEL_96

pytestmark = [pytest.mark.sshd]

CHANGE_ID = "CHG-ANSIBLE-DNF"
START_STREAM, START_PROFILE = "575", "fm"
#: the upgrade stage's dnf steps, in the runbook's order (the SSH path Ansible runs on this node)
DNF_TASKS = [
    "dnf-makecache",
    "dnf-holds",
    "dnf-save-rollback",
    "dnf-unlock",
    "dnf-target-downloadable",
    "dnf-install",
    "dnf-relock",
]
#: the logs dnf and its libraries write (/var/log as a whole changes under other services)
DNF_LOGS = ("dnf.log", "dnf.librepo.log", "dnf.rpm.log", "hawkey.log")
#: the host's rpm and dnf state, which no step may touch (hashed before and after)
HOST_STATE = ("/var/lib/rpm", "/var/lib/dnf", "/etc/dnf", "/var/cache/dnf", *(f"/var/log/{log}" for log in DNF_LOGS))


def _can_overlay(scratch: Path) -> bool:
    """Whether this kernel mounts an overlay in a mount namespace (how the node hides apt-get)."""
    upper = scratch / "overlay-probe"
    upper.mkdir()
    script = f"mount -t overlay cockpit-probe -o 'lowerdir={upper}:/usr/bin' /usr/bin"
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script]).returncode == 0


def _python_dnf() -> bool:
    return os.access(NODE_PYTHON, os.X_OK) and subprocess.run([NODE_PYTHON, "-c", "import dnf"]).returncode == 0


def login_dbpath() -> Path:
    """Where rpm on this machine keeps its database for the SSH login: Debian's rpm macros say
    ``%(bash -c 'echo ~/.rpmdb')``, so it follows the login's HOME (RHEL's say /var/lib/rpm)."""
    home = pwd.getpwuid(os.geteuid()).pw_dir
    env = {**os.environ, "HOME": home}
    done = subprocess.run(["rpm", "--eval", "%_dbpath"], env=env, capture_output=True, text=True, check=True)
    return Path(done.stdout.strip())


#: rewritten by every ``dnf --installroot`` on this machine (the dnf oracle's, which builds the node
#: and its twin, and other tests'): dnf keeps it outside the installroot; the node's is scratch
ORACLE_WRITES = Path("/var/cache/dnf/packages.db")


def tree_digest(paths: tuple[str | Path, ...]) -> dict[str, str]:
    """Each file under ``paths`` -> its content's sha256 (a missing path is simply absent)."""
    digests: dict[str, str] = {}
    for top in map(Path, paths):
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file() and not p.is_symlink())
        for path in files:
            if path != ORACLE_WRITES:
                digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


@dataclass
class DnfNode:
    """The scratch RHEL node and the sshd that serves it inside its namespace."""

    node: Node
    server: Any
    target: HostTarget
    cache: Path  # the namespace's /var/cache

    def state(self) -> tuple[dict[str, str], dict[str, str], list[str]]:
        """What dnf and rpm hold there: packages (name -> EVR), the module's state, the version locks."""
        root = self.node.root
        return root.installed(), root.module_state(), sorted(root.versionlocks())

    def cockpit_cache(self) -> list[str]:
        top = self.cache / "cockpit"
        return sorted(p.relative_to(top).as_posix() for p in top.rglob("*")) if top.exists() else []

    def settings(self) -> TransportOptions:
        return transport_options(self.server)


@pytest.fixture
def dnf_node(
    tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path, request: pytest.FixtureRequest
) -> Iterator[DnfNode]:
    need(sshd_fixture.find_sshd() is not None, "sshd not installed (package openssh-server)")
    try:
        import ansible_runner  # noqa: F401
    except ImportError:
        need(False, "ansible-runner not installed (pip install '.[ansible]')")
    need(can_unshare(), "a mount namespace (unshare --mount, as root) keeps the scratch dnf node off the host")
    need(_python_dnf(), f"Ansible's dnf module needs python3-dnf for {NODE_PYTHON} (package python3-dnf)")
    oracle = make_oracle()  # skips (fails under CI) without dnf, its versionlock plugin, rpmbuild, createrepo_c
    top = tmp_path_factory.mktemp("ansible-dnf")
    need(_can_overlay(top), "an overlay mount (the kernel's overlayfs) hides apt-get from the RHEL node")
    # the start's stream and profile: 575/fm unless the test names another (indirect parameter)
    stream, profile = getattr(request, "param", (START_STREAM, START_PROFILE))
    start = make_start(oracle, stream, profile, top / "start")
    (top / "node").mkdir()
    node = Node(oracle, start, top / "node")
    # the host's state once the oracle has built the node: from here on only the node changes
    dbpath = login_dbpath()
    host_paths: tuple[str | Path, ...] = (*HOST_STATE, dbpath)
    host_before = tree_digest(host_paths)
    host_cockpit_cache = Path("/var/cache/cockpit").exists()
    root = node.root.root
    # dnf's $releasever comes from /etc/dnf/vars when no system-release package says it
    (root / "etc/dnf/vars").mkdir()
    (root / "etc/dnf/vars/releasever").write_text("9\n")
    with (root / "etc/dnf/dnf.conf").open("a") as conf:
        conf.write(f"reposdir={root / 'etc/yum.repos.d'}\n")  # no /etc/yum.repos.d on the host to bind over
    scratch = {name: top / name for name in ("var-cache", "var-log", "var-lib-dnf", "var-lib-dpkg")}
    for folder in scratch.values():
        folder.mkdir()
    os_release = top / "os-release"
    os_release.write_text(RHEL_96)
    binds = {
        "/etc/dnf": root / "etc/dnf",
        "/var/lib/rpm": root / "var/lib/rpm",
        str(dbpath): root / "var/lib/rpm",
        "/var/lib/dnf": scratch["var-lib-dnf"],
        "/var/cache": scratch["var-cache"],
        "/var/log": scratch["var-log"],
        "/etc/os-release": os_release,
        "/var/lib/dpkg": scratch["var-lib-dpkg"],
    }
    # no apt-get, as on RHEL: bash's `command -v` reports any file there, even one not executable,
    # so a whiteout (a 0:0 character device) in an overlay's upper read-only layer hides it
    hide = top / "no-apt"
    hide.mkdir()
    os.mknod(hide / "apt-get", 0o600 | stat.S_IFCHR, os.makedev(0, 0))
    overlay = f"mount -t overlay cockpit-no-apt -o 'lowerdir={hide}:/usr/bin' /usr/bin"
    script = namespace_script(top / "namespace.sh", binds, first=[overlay])
    server = sshd_fixture.start_sshd(
        top / "gpu01",
        fixtures_dir,
        prefix=["unshare", "--mount", "--propagation", "private", "/bin/sh", str(script)],
        path_extra=["/usr/sbin", "/sbin"],
    )
    smi = server.workdir / "bin" / "nvidia-smi"
    table = server.node_dir / "nvidia-smi.txt"
    smi.write_text(NVIDIA_SMI_STUB.format(python=sys.executable, table=table, capture=fixtures_dir / QUERY_CAPTURE))
    try:
        target = HostTarget(name="gpu01", address="127.0.0.1", port=server.port, user=server.user)
        yield DnfNode(node, server, target, scratch["var-cache"])
    finally:
        server.stop()
    assert tree_digest(host_paths) == host_before  # the host's rpmdb, dnf state and logs untouched
    assert Path("/var/cache/cockpit").exists() == host_cockpit_cache  # the change's files went to the node's


def ansible_backend(dnf_node: DnfNode, workdir: Path, *, check: bool = False) -> AnsibleBackend:
    return ansible_node.ansible_backend(dnf_node.target, dnf_node.server, workdir, check=check)


async def recorded_window(dnf_node: DnfNode, sessions: Path, backend: AnsibleBackend, runbook: str) -> Session:
    """A window of ``runbook`` with ``--backend ansible``, gpu01 through its record stage: the
    baseline is the real probe over SSH (rpm -qa, dnf's enabled stream, os-release there)."""
    from cockpit.fleet.backends.registry import AnsibleSettings, BackendOptions
    from cockpit.fleet.transport import Transport
    from cockpit.runbook.loader import load

    options = BackendOptions(name="ansible", ansible=AnsibleSettings())
    session = Session.start(
        sessions_dir=sessions, change_id=CHANGE_ID, loaded=load(runbook),
        params={"driver_version": TARGET_VERSION}, targets=[dnf_node.target], operator="alice",
        transport=Transport([dnf_node.target], dnf_node.settings()), backend=backend, backend_options=options,
    )  # fmt: skip
    open_window(session)
    session.start_wave(0)
    session.override("drain", "gpu01", reason="test node: no scheduler to drain it from")
    recorded = await session.steps.run_step("record", "baseline", "gpu01")
    assert recorded.ok, recorded.error
    facts = session.node_facts("gpu01")
    assert facts["recorded_package_manager"] == "dnf"  # the probe saw a RHEL node: dnf, no apt-get
    assert facts["recorded_dnf_stream"] == START_STREAM  # dnf -q module list --enabled there
    session.override("record", "gpu01", reason="test node: no GPU, no kernel headers for the DKMS check")
    return session


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("runbook", ["driver-upgrade", "driver-upgrade-r580"])
async def test_the_full_runbooks_dnf_upgrade_passes_through_ansible_repeats_unchanged_and_relocks(
    dnf_node: DnfNode, tmp_path: Path, runbook: str
) -> None:
    installed, module, start_locks = dnf_node.state()
    assert module["stream"] == START_STREAM and any(n.startswith("nvidia-driver-3:575.") for n in start_locks)
    backend = ansible_backend(dnf_node, tmp_path / "jobs")
    session = await recorded_window(dnf_node, tmp_path, backend, runbook)
    try:
        outcome = await session.steps.run_step("upgrade", "via-ansible", "gpu01", confirmation="gpu01")
        assert outcome.ok, outcome.error
        # the stage's own checks, over SSH as ever (no NVSwitch on this node: the driver-only variants)
        for item in ("rollback-saved-driver-dnf", "target-available-driver-dnf", "package-present-dnf"):
            assert await session.verify_item("upgrade", item, "gpu01"), item
        context = context_of(session)
    finally:
        await session.close()
    # the first run: every task changed the node but the dry run (read_only: it downloads into the
    # change's folder, installs nothing) and the metadata refresh, which the dnf module reports
    # unchanged whatever it fetched ("Cache updated")
    changes = first_run_changes(session)
    assert {t: changes[t] for t in DNF_TASKS} == {
        **dict.fromkeys(DNF_TASKS, "true"),
        "dnf-makecache": "false",
        "dnf-target-downloadable": "false",
    }
    installed, module, locks = dnf_node.state()
    assert installed["nvidia-driver"].startswith(f"3:{TARGET_VERSION}-")
    assert "nvidia-fabric-manager" not in installed and "nvidia-fabricmanager" in installed  # the 580 name
    assert module["stream"] == "580" and module["state"] == "enabled"
    assert any(n.startswith(f"nvidia-driver-3:{TARGET_VERSION}-") for n in locks)  # relocked on the new set
    # the old locks released, and set again on the old precompiled kmod: another name than the new
    # one, it stays installed (a kmod for the old kernel), so relock locks it as it finds it
    assert [n for n in locks if ":575." in n] == [n for n in start_locks if n.startswith("kmod-nvidia-575.")]
    cache = dnf_node.cockpit_cache()
    assert {f"{CHANGE_ID}/{done}" for done in ("holds", "rollback-saved", "unlocked")} <= set(cache)
    assert any(p.startswith(f"{CHANGE_ID}/nvidia-driver-575.") for p in cache)  # the rollback set, saved

    # the same release again: every task ran (or found its work done) and none changed the node
    state = dnf_node.state()
    result, seen = await release(backend, context)
    assert result.ok, result.error
    tasks = by_task(seen)
    assert {t: tasks[t].get("changed") for t in DNF_TASKS} == dict.fromkeys(DNF_TASKS, "false")
    assert tasks["install"]["skipped"] == "the step does not run on this node (its when)"  # a dnf node
    assert recap(seen)["changed"] == "0"
    assert dnf_node.state() == state and dnf_node.cockpit_cache() == cache

    # --check now: the write-once files are there, the read-only dry run runs for real, the dnf
    # module predicts nothing to switch, relock (a command) is skipped by Ansible; nothing changes
    backend.check = True
    result, seen = await release(backend, context)
    backend.check = False
    assert result.ok, result.error
    tasks = by_task(seen)
    for done in ("dnf-makecache", "dnf-holds", "dnf-save-rollback", "dnf-unlock", "dnf-target-downloadable"):
        assert tasks[done]["changed"] == "false", done
    assert tasks["dnf-install"]["changed"] == "false"  # the dnf module's prediction: the stream is there
    assert tasks["dnf-relock"]["skipped"] == CHECK_MODE_SKIP  # no creates: Ansible cannot tell
    assert recap(seen)["changed"] == "0"
    assert dnf_node.state() == state and dnf_node.cockpit_cache() == cache

    # the mutation: someone releases the lock on the new driver; the next run puts it back, and
    # only relock says it changed something (dnf versionlock's own words, its changed_if)
    mutator = ansible_backend(dnf_node, tmp_path / "mutator")
    unlock = Step(id="unlock", title="Release a lock", run="dnf versionlock delete nvidia-driver", sudo=True)
    mutator.use_steps(BackendAction.UPGRADE, play_tasks([unlock], [dnf_node.target], {}))
    released, seen = await release(mutator, {})
    assert released.ok, released.error
    assert by_task(seen)["unlock"]["changed"] == "true"
    assert not any(n.startswith("nvidia-driver-3:") for n in dnf_node.state()[2])
    result, seen = await release(backend, context)
    assert result.ok, result.error
    tasks = by_task(seen)
    assert [t for t in DNF_TASKS if tasks[t]["changed"] == "true"] == ["dnf-relock"]
    assert recap(seen)["changed"] == "1"
    assert dnf_node.state() == state


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_the_dnf_upgrade_under_check_mode_changes_nothing_on_a_fresh_node(
    dnf_node: DnfNode, tmp_path: Path
) -> None:
    """``--check`` before anything ran: the write-once steps would run, the dnf module predicts the
    switch, relock is skipped, the dry run downloads; dnf's packages, module state and locks are
    as before."""
    backend = ansible_backend(dnf_node, tmp_path / "jobs", check=True)
    session = await recorded_window(dnf_node, tmp_path, backend, "driver-upgrade")
    context = context_of(session)
    await session.close()
    before = dnf_node.state()
    result, seen = await release(backend, context)
    assert result.ok, result.error
    tasks = by_task(seen)
    # the write-once commands would run (no file yet): the command module predicts a change
    for command in ("dnf-holds", "dnf-save-rollback", "dnf-unlock"):
        assert (tasks[command]["changed"], tasks[command]["msg"]) == ("true", CHECK_MODE_SKIP), command
    # the dnf module predicts the stream switch (it resolves, runs nothing); relock is skipped, saying so
    assert tasks["dnf-install"]["changed"] == "true"
    assert tasks["dnf-relock"]["skipped"] == CHECK_MODE_SKIP
    assert (tasks["dnf-makecache"]["changed"], tasks["dnf-makecache"]["msg"]) == ("false", "Cache updated")
    # the dry run ran for real and reads as unchanged: dnf downloaded the target stream's set
    # (the locks it would release do not stop a module switch-to's download), installed nothing
    assert (tasks["dnf-target-downloadable"]["changed"], tasks["dnf-target-downloadable"]["rc"]) == ("false", "0")
    assert recap(seen)["check_mode"] == "true" and recap(seen)["changed"] == "4"
    assert result.final is not None and result.final.stage == "upgrading"
    assert dnf_node.state() == before  # packages, module stream and locks exactly as they were
    cache = dnf_node.cockpit_cache()
    assert f"{CHANGE_ID}/target/nvidia-driver-{TARGET_VERSION}-1.el9.x86_64.rpm" in cache
    assert [p for p in cache if not p.startswith(f"{CHANGE_ID}/target")] == [CHANGE_ID]  # nothing else written


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "dnf_node", [(s, p) for s in TARGET_STREAM for p in PROFILES], indirect=True, ids=lambda c: f"rhel9-{c[0]}-{c[1]}"
)
async def test_the_dnf_module_switches_the_stream_exactly_as_dnf_module_switch_to_does(
    dnf_node: DnfNode, tmp_path: Path
) -> None:
    """The runbook's dnf-install through Ansible is ``ansible.builtin.dnf`` (``@STREAM/PROFILE``,
    ``allowerasing``), on the SSH path ``dnf module switch-to --allowerasing``: for every start
    (precompiled, DKMS, open; with and without fabric manager) the module leaves the node's rpmdb
    and module state exactly as the real switch-to leaves a twin root, then repeats unchanged."""
    from cockpit.runbook.loader import load

    runbook = load("driver-upgrade").runbook
    (install,) = [s for s in runbook.stage("upgrade").steps if s.id == "dnf-install"]
    _, facts, values = node_values(runbook, dnf_node.node)
    spec = str(values["target_dnf_module"])
    stream = dnf_node.node.stream()
    assert spec.startswith(f"nvidia-driver:{TARGET_STREAM[stream]}/")
    backend = ansible_backend(dnf_node, tmp_path / "jobs")
    tasks = play_tasks([install], [dnf_node.target], {**values, "backend": "ssh"}, node_facts={"gpu01": facts})
    assert (tasks[0].module, tasks[0].args["gpu01"]["name"]) == ("dnf", ["@" + spec])
    backend.use_steps(BackendAction.UPGRADE, tasks)
    result, seen = await release(backend, {})
    assert result.ok, result.error
    assert by_task(seen)["dnf-install"]["changed"] == "true"
    by_module = dnf_node.state()

    # the twin: the same start, switched by the real dnf's own command line (the SSH path's)
    twin_dir = tmp_path / "twin"
    twin_dir.mkdir()
    twin = Node(dnf_node.node.root.oracle, dnf_node.node.start, twin_dir)
    done = twin.sh(fill(install.run or "", values))
    assert done.returncode == 0, done.stderr
    assert (twin.root.installed(), twin.root.module_state()) == by_module[:2]
    assert by_module[1]["stream"] == TARGET_STREAM[stream]

    again, seen = await release(backend, {})
    assert again.ok, again.error
    assert by_task(seen)["dnf-install"]["changed"] == "false" and recap(seen)["changed"] == "0"
    assert dnf_node.state() == by_module
