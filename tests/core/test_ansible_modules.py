"""A shipped runbook's upgrade stage through Ansible MODULES, on a REAL sshd node whose apt is scratch.

The node is this machine seen through a real OpenSSH sshd (tests/sshd_fixture.py) started
inside its own mount namespace (``unshare --mount``), where the apt oracle's scratch root
(tests/apt_oracle.py, via tests/package_cells.py: the real repository metadata of
cockpit/sim/repos, dummy .debs built from it, the cell's start packages installed) is
bound over ``/etc/apt`` and ``/var/lib/dpkg``, and scratch folders over ``/var/cache`` and
``/var/log``. Everything that runs in a session there - the probe's dpkg-query, the
runbook's commands, Ansible's ``apt`` module with python-apt, the real apt-get and the real
dpkg it calls - sees the scratch node and nothing else; the host's own files are never
bound anywhere, and ``host_untouched`` checks the host's dpkg status, apt state and
sources after the module, as for the other real-package tests.

The window is ``checklists/minimal-driver-upgrade.toml`` with ``--backend ansible``: its
record stage probes the node over SSH, and its upgrade stage's backend step is released
to the Ansible backend, whose generated playbook runs ``save-rollback`` as a command task
with ``creates`` and ``install`` with ``ansible.builtin.apt`` (each step's ``ansible``
table). Ansible needs python-apt on the node for its apt module: the node's interpreter is
the system's ``/usr/bin/python3``.
"""

from __future__ import annotations

import hashlib
import os
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
from package_cells import (  # noqa: F401  (autouse: skip without apt, host untouched)
    CELLS,
    RELEASES,
    Node,
    data_version,
    host_untouched,
    needs_apt,
    shared_deb_cache,
    start_node,
)

from cockpit.fleet.backends.ansible import AnsibleBackend
from cockpit.fleet.backends.base import BackendAction
from cockpit.fleet.targets import HostTarget, TransportOptions
from cockpit.session.operator import Session

pytestmark = [pytest.mark.sshd]

CELL = next(c for c in CELLS if c.id == "archive-server")
RELEASE = RELEASES["24.04"]
CHANGE_ID = "CHG-ANSIBLE"
#: the folders of the node's own that the namespace replaces (the host's stay as they are)
BOUND = ("/etc/apt", "/var/lib/dpkg", "/var/lib/apt", "/var/cache", "/var/log")


def _python_apt() -> bool:
    return os.access(NODE_PYTHON, os.X_OK) and subprocess.run([NODE_PYTHON, "-c", "import apt"]).returncode == 0


@dataclass
class AptNode:
    """The scratch apt node and the sshd that serves it inside its namespace."""

    node: Node
    server: Any
    target: HostTarget
    cache: Path  # the namespace's /var/cache
    root: Path

    def status_sha256(self) -> str:
        return hashlib.sha256(self.node.oracle.status_path.read_bytes()).hexdigest()

    def held(self) -> list[str]:
        """The node's held packages (the real apt-mark on its scratch root)."""
        return sorted(self.node.oracle.run(["apt-mark", "showhold"]).lines)

    def cockpit_cache(self) -> list[str]:
        """What the change left under the node's /var/cache/cockpit (relative paths)."""
        top = self.cache / "cockpit"
        return sorted(p.relative_to(top).as_posix() for p in top.rglob("*")) if top.exists() else []

    def settings(self) -> TransportOptions:
        return transport_options(self.server)


#: where the runbooks keep a change's files; the host's own must never gain one
HOST_COCKPIT_CACHE = Path("/var/cache/cockpit")
#: the host's package logs, which a dpkg or apt run outside the namespace would write
HOST_LOGS = (Path("/var/log/dpkg.log"), Path("/var/log/apt/history.log"), Path("/var/log/apt/term.log"))


def host_logs() -> list[str | None]:
    return [hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else None for f in HOST_LOGS]


@pytest.fixture
def apt_node(
    tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path, request: pytest.FixtureRequest
) -> Iterator[AptNode]:
    need(sshd_fixture.find_sshd() is not None, "sshd not installed (package openssh-server)")
    try:
        import ansible_runner  # noqa: F401
    except ImportError:
        need(False, "ansible-runner not installed (pip install '.[ansible]')")
    need(can_unshare(), "a mount namespace (unshare --mount, as root) keeps the scratch apt node off the host")
    need(_python_apt(), f"Ansible's apt module needs python-apt for {NODE_PYTHON} (package python3-apt)")
    host_cockpit_cache = HOST_COCKPIT_CACHE.exists()
    host_logs_before = host_logs()
    root = tmp_path_factory.mktemp("ansible-apt")
    # held as operators hold them, unless the test says otherwise (the minimal runbook does not unhold)
    hold = bool(getattr(request, "param", False))
    node = start_node(root / "scratch", CELL, RELEASE, shared_deb_cache(tmp_path_factory), hold=hold)
    cache, log = root / "var-cache", root / "var-log"
    cache.mkdir()
    log.mkdir()
    binds = {
        "/etc/apt": node.oracle.root / "etc/apt",
        "/var/lib/dpkg": node.oracle.root / "var/lib/dpkg",
        "/var/lib/apt": node.oracle.root / "var/lib/apt",  # where the apt module reads the lists' age
        "/var/cache": cache,
        "/var/log": log,
    }
    assert tuple(binds) == BOUND
    script = namespace_script(root / "namespace.sh", binds)
    server = sshd_fixture.start_sshd(
        root / "gpu01",
        fixtures_dir,
        prefix=["unshare", "--mount", "--propagation", "private", "/bin/sh", str(script)],
        path_extra=["/usr/sbin", "/sbin"],  # dpkg wants ldconfig and start-stop-daemon on PATH
    )
    smi = server.workdir / "bin" / "nvidia-smi"
    table = server.node_dir / "nvidia-smi.txt"
    smi.write_text(NVIDIA_SMI_STUB.format(python=sys.executable, table=table, capture=fixtures_dir / QUERY_CAPTURE))
    try:
        target = HostTarget(name="gpu01", address="127.0.0.1", port=server.port, user=server.user)
        yield AptNode(node, server, target, cache, root)
    finally:
        server.stop()
    assert HOST_COCKPIT_CACHE.exists() == host_cockpit_cache  # the change's files went to the node's
    assert host_logs() == host_logs_before  # the real dpkg and apt logged on the node, not here


def driver_version() -> str:
    return data_version(CELL.path(RELEASE), CELL.driver)


# --- a window of the shipped runbook, through Ansible ------------------------------------------


def ansible_backend(apt_node: AptNode, workdir: Path, *, check: bool = False) -> AnsibleBackend:
    return ansible_node.ansible_backend(apt_node.target, apt_node.server, workdir, check=check)


async def recorded_window(
    apt_node: AptNode, sessions: Path, backend: AnsibleBackend, runbook: str = "minimal-driver-upgrade"
) -> Session:
    """A window of the minimal runbook with ``--backend ansible``, gpu01 through its record stage:
    the baseline is the real probe over SSH of the scratch node (its packages, as dpkg-query reads
    them there), so what the upgrade installs is named from the node's own facts."""
    from cockpit.fleet.backends.registry import AnsibleSettings, BackendOptions
    from cockpit.fleet.transport import Transport
    from cockpit.runbook.loader import load

    options = BackendOptions(name="ansible", ansible=AnsibleSettings())
    session = Session.start(
        sessions_dir=sessions, change_id=CHANGE_ID, loaded=load(runbook),
        params={"driver_version": driver_version()}, targets=[apt_node.target], operator="alice",
        transport=Transport([apt_node.target], apt_node.settings()), backend=backend, backend_options=options,
    )  # fmt: skip
    open_window(session)
    session.start_wave(0)
    # no Kubernetes here to drain from: the operator says so, in words, in the change log
    session.override("drain", "gpu01", reason="test node: no scheduler to drain it from")
    recorded = await session.steps.run_step("record", "baseline", "gpu01")
    assert recorded.ok, recorded.error
    assert session.node_facts("gpu01")["recorded_driver_metapackage"] == "nvidia-driver-570-server"
    # the record stage's GPU and kernel checks (DKMS headers, Secure Boot) have no GPU node to hold on
    session.override("record", "gpu01", reason="test node: no GPU, no kernel headers for the DKMS check")
    return session


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_the_minimal_runbooks_upgrade_stage_passes_through_ansible_modules_and_a_second_run_changes_nothing(
    apt_node: AptNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cockpit.changelog.events import EventKind
    from cockpit.changelog.journal import read_session

    backend = ansible_backend(apt_node, tmp_path / "jobs")
    session = await recorded_window(apt_node, tmp_path, backend)
    try:
        outcome = await session.steps.run_step("upgrade", "via-ansible", "gpu01", confirmation="gpu01")
        assert outcome.ok, outcome.error
        assert await session.verify_item("upgrade", "package-present", "gpu01")  # dpkg -l on the node, over SSH
        session.pass_gate("upgrade", "gpu01")  # installed-ansible (the step) and package-present hold
        context = context_of(session)
    finally:
        await session.close()
    version = driver_version()
    installed = apt_node.node.installed()
    # the real apt module, through the real apt-get and dpkg, installed the node's own set at driver_version
    for package in ("nvidia-driver-580-server", "nvidia-dkms-580-server", "nvidia-fabricmanager-580"):
        assert installed[package].startswith(version), (package, installed.get(package))
    assert "nvidia-driver-570-server" not in installed
    # save-rollback ran first: the 570 set's .debs, and its listing last (the mark that it is done)
    saved = apt_node.cockpit_cache()
    assert f"{CHANGE_ID}/nvidia-driver-570-server_570.211.01-0ubuntu0.24.04.2_amd64.deb" in saved
    assert f"{CHANGE_ID}/rollback-saved" in saved

    log = read_session(session.path)
    observed = [e.facts for e in log.events if e.kind is EventKind.NODE_OBSERVED and e.step == "via-ansible"]
    assert [(str(f.native_state).split(":", 2)[:2], (f.evidence or {}).get("changed")) for f in observed] == [
        (["runner_on_ok", " save-rollback"], "true"),
        (["runner_on_ok", " install"], "true"),
        (["playbook_on_stats", " ok"], "2"),  # the play recap: two tasks changed the node
    ]
    finished = [e.facts for e in log.events if e.kind is EventKind.STEP_FINISHED and e.step == "via-ansible"]
    assert len(finished) == 1 and finished[0].ok and (finished[0].evidence or {})["check_mode"] == "false"

    # the same release again (the executor's context for gpu01): Ansible finds nothing to do
    status, cache = apt_node.status_sha256(), apt_node.cockpit_cache()
    result, seen = await release(backend, context)
    assert result.ok, result.error
    tasks = by_task(seen)
    assert {t: e["changed"] for t, e in tasks.items()} == {"save-rollback": "false", "install": "false"}
    assert (recap(seen)["ok"], recap(seen)["changed"]) == ("2", "0")
    assert apt_node.status_sha256() == status and apt_node.cockpit_cache() == cache


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_check_mode_predicts_runs_what_only_reads_and_changes_nothing_on_the_node(
    apt_node: AptNode, tmp_path: Path
) -> None:
    from cockpit.fleet.backends.ansible import play_tasks
    from cockpit.runbook.model import Step

    backend = ansible_backend(apt_node, tmp_path / "jobs", check=True)
    session = await recorded_window(apt_node, tmp_path, backend)
    context = context_of(session)
    await session.close()
    status, installed = apt_node.status_sha256(), apt_node.node.installed()

    # the runbook's upgrade stage under --check: each module predicts, nothing runs for real
    result, seen = await release(backend, context)
    assert result.ok, result.error
    tasks = by_task(seen)
    # save-rollback has not run on this node (no listing yet): it would run, so it would change
    assert tasks["save-rollback"]["changed"] == "true"
    assert tasks["save-rollback"]["msg"] == "Command would have run if not in check mode"
    assert "rc" in tasks["save-rollback"] and tasks["save-rollback"]["rc"] == "0"
    assert tasks["install"]["changed"] == "true"  # the apt module asked apt-get -s: the 580 set would install
    assert recap(seen)["check_mode"] == "true" and result.evidence["check_mode"] == "true"
    assert result.final is not None and result.final.native_state == "playbook_on_stats: check mode, nothing changed"
    assert result.final.stage == "upgrading"  # the job claims no upgrade done
    assert apt_node.status_sha256() == status and apt_node.node.installed() == installed
    assert apt_node.cockpit_cache() == []  # not even /var/cache/cockpit: nothing was saved

    # a read-only command still runs under --check (and reports ok); a changing one is skipped, saying so
    steps = [
        Step(id="holds", title="List the package holds", run="apt-mark showhold", read_only=True),
        Step(id="mark", title="Mark the node", run="mkdir -p /var/cache/cockpit/marked"),
    ]
    backend.use_steps(BackendAction.UPGRADE, play_tasks(steps, [apt_node.target], {}))
    result, seen = await release(backend, {})
    assert result.ok, result.error
    tasks = by_task(seen)
    assert (tasks["holds"]["changed"], tasks["holds"]["rc"]) == ("false", "0")  # it ran: apt-mark's exit status
    assert [o.native_state for o in seen if o.evidence and o.evidence.get("task", "").startswith("mark")] == [
        "runner_on_skipped: mark: Mark the node"
    ]
    assert tasks["mark"]["skipped"] == "Command would have run if not in check mode"
    assert apt_node.cockpit_cache() == []

    # the same two steps for real: the read-only one still reports ok, the changing one changed
    backend.check = False
    result, seen = await release(backend, {})
    assert result.ok, result.error
    assert {t: e["changed"] for t, e in by_task(seen).items()} == {"holds": "false", "mark": "true"}
    assert apt_node.cockpit_cache() == ["marked"]


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_step_that_really_changes_the_node_reports_changed_and_only_it(
    apt_node: AptNode, tmp_path: Path
) -> None:
    from cockpit.fleet.backends.ansible import play_tasks
    from cockpit.runbook.model import Step

    backend = ansible_backend(apt_node, tmp_path / "jobs")
    session = await recorded_window(apt_node, tmp_path, backend)
    context = context_of(session)
    await session.close()
    first, seen = await release(backend, context)
    assert first.ok, first.error
    assert recap(seen)["changed"] == "2"
    fabric = apt_node.node.installed()["nvidia-fabricmanager-580"]

    # the mutation: the real dpkg on the node removes one package of the target set (through
    # Ansible too, a command task: it changed the node, and says so)
    mutator = ansible_backend(apt_node, tmp_path / "mutator")
    remove = Step(id="remove", title="Remove fabric manager", run="dpkg -r nvidia-fabricmanager-580")
    mutator.use_steps(BackendAction.UPGRADE, play_tasks([remove], [apt_node.target], {}))
    removed, seen = await release(mutator, {})
    assert removed.ok, removed.error
    assert by_task(seen)["remove"]["changed"] == "true"
    assert "nvidia-fabricmanager-580" not in apt_node.node.installed()

    # the upgrade again: the install task changed the node (fabric manager is back), save-rollback did not
    again, seen = await release(backend, context)
    assert again.ok, again.error
    assert {t: e["changed"] for t, e in by_task(seen).items()} == {"save-rollback": "false", "install": "true"}
    assert recap(seen)["changed"] == "1"
    assert apt_node.node.installed()["nvidia-fabricmanager-580"] == fabric


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("apt_node", [True], indirect=True, ids=["held"])
@pytest.mark.parametrize("runbook", ["driver-upgrade", "driver-upgrade-r580"])
async def test_the_full_runbooks_apt_upgrade_passes_through_ansible_repeats_unchanged_and_restores_a_hold(
    apt_node: AptNode, tmp_path: Path, runbook: str
) -> None:
    backend = ansible_backend(apt_node, tmp_path / "jobs")
    session = await recorded_window(apt_node, tmp_path, backend, runbook)
    held = apt_node.held()
    assert "nvidia-driver-570-server" in held  # the node's packages held, as operators hold them
    try:
        outcome = await session.steps.run_step("upgrade", "via-ansible", "gpu01", confirmation="gpu01")
        assert outcome.ok, outcome.error
        # the stage's own checks, over SSH as ever: the package, its module, one version for the set
        for item in ("rollback-saved-driver", "package-present", "module-package-present", "lockstep"):
            assert await session.verify_item("upgrade", item, "gpu01"), item
        session.tick("upgrade", "official-procedure", "gpu01", note="the runbook's own procedure, through Ansible")
        session.pass_gate("upgrade", "gpu01")
        context = context_of(session)
    finally:
        await session.close()
    # the first run, as the change log holds it: each task changed the node but the dry run,
    # which only reads (the lists were fetched from the copy: source the first time)
    changing = ["apt-update", "holds", "save-rollback", "unhold", "target-set", "install", "rehold"]
    assert first_run_changes(session) == {**dict.fromkeys(changing, "true"), "target-downloadable": "false"}
    version = driver_version()
    installed = apt_node.node.installed()
    assert installed["nvidia-driver-580-server"].startswith(version)
    assert "nvidia-driver-570-server" not in installed
    # unhold released the recorded holds for the install, rehold set them on the new set
    assert (apt_node.cache / "cockpit" / CHANGE_ID / "holds").read_text().split() == sorted(held)
    assert {"nvidia-driver-580-server", "nvidia-fabricmanager-580", "libnvidia-nscq-580"} <= set(apt_node.held())

    # the same release again: every task ran (or found its work done) and none changed the node
    status, cache = apt_node.status_sha256(), apt_node.cockpit_cache()
    result, seen = await release(backend, context)
    assert result.ok, result.error
    tasks = by_task(seen)
    apt_tasks = ["apt-update", "holds", "save-rollback", "unhold", "target-set", "target-downloadable", "install"]
    assert {t: tasks[t].get("changed") for t in [*apt_tasks, "rehold"]} == dict.fromkeys(
        [*apt_tasks, "rehold"], "false"
    )
    assert tasks["dnf-install"]["skipped"] == "the step does not run on this node (its when)"  # an apt node
    assert recap(seen)["changed"] == "0"
    assert apt_node.status_sha256() == status and apt_node.cockpit_cache() == cache

    # the dry run now (--check): the once-per-change files are there, so even the read-only target
    # check runs for real, and every prediction but the lists' is "nothing to change" (the apt
    # module cannot know whether a refresh would bring anything new: under --check it says it would)
    backend.check = True
    result, seen = await release(backend, context)
    backend.check = False
    assert result.ok, result.error
    tasks = by_task(seen)
    assert tasks["target-downloadable"] == {**tasks["target-downloadable"], "changed": "false", "rc": "0"}
    predicted = [t for t in apt_tasks if t not in ("unhold", "apt-update")]
    assert {t: tasks[t]["changed"] for t in predicted} == dict.fromkeys(predicted, "false")
    assert tasks["apt-update"]["changed"] == "true"
    for command in ("unhold", "rehold"):  # no creates: Ansible cannot tell, so check mode skips them
        assert tasks[command]["skipped"] == "Command would have run if not in check mode"
    assert recap(seen)["changed"] == "1" and apt_node.status_sha256() == status  # the lists' refresh

    # the mutation: someone releases a hold on the new driver; the next run puts it back, and only
    # rehold says it changed something (apt-mark's own words, its changed_if)
    released = apt_node.node.oracle.run(["apt-mark", "unhold", "nvidia-driver-580-server"])
    assert released.ok and "nvidia-driver-580-server" not in apt_node.held()
    result, seen = await release(backend, context)
    assert result.ok, result.error
    tasks = by_task(seen)
    assert [t for t in [*apt_tasks, "rehold"] if tasks[t]["changed"] == "true"] == ["rehold"]
    assert recap(seen)["changed"] == "1"
    assert "nvidia-driver-580-server" in apt_node.held()


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_the_dry_run_through_ansible_is_its_check_mode_and_changes_nothing(
    apt_node: AptNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cockpit run --dry-run --backend ansible``: the plan, then the engine's steps rehearsed
    with ``--check`` on the probed node (the function the CLI calls, with the engine it makes)."""
    from cockpit.commands.dry_run import dry_run
    from cockpit.fleet.transport import Transport
    from cockpit.runbook.loader import load

    backend = ansible_backend(apt_node, tmp_path / "jobs")
    status, installed = apt_node.status_sha256(), apt_node.node.installed()
    transport = Transport([apt_node.target], apt_node.settings())
    params = {"driver_version": driver_version()}
    code = await dry_run(
        CHANGE_ID, load("minimal-driver-upgrade"), params, [apt_node.target], "alice", transport, backend
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert backend.check  # the dry run asked Ansible's check mode
    assert "nothing was run but a read-only probe and Ansible's check mode (below)" in out.splitlines()[0]
    rehearsal = out[out.index("ansible check mode (--check)") :].splitlines()
    assert rehearsal[1] == (
        "  gpu01: stage upgrade, step via-ansible (upgrade): would change 2 of 2 tasks; nothing changed; "
        "1 changing command(s) did not run, later tasks predict without them"  # save-rollback, before the install
    )
    assert rehearsal[2].startswith("    save-rollback: Save every installed package")
    assert rehearsal[2].endswith(": would change (Command would have run if not in check mode)")
    assert rehearsal[3].startswith("    install: Install the node's target set") and rehearsal[3].endswith(
        ": would change"
    )
    assert apt_node.status_sha256() == status and apt_node.node.installed() == installed
    assert apt_node.cockpit_cache() == []


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("apt_node", [True], indirect=True, ids=["held"])
async def test_the_full_runbooks_dry_run_on_a_held_node_says_where_check_mode_cannot_predict(
    apt_node: AptNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Check mode runs no changing command, so what the runbook's later steps read or need is not
    there: the dry run (read-only) of the target set finds no target file, and apt's prediction of
    the install still sees the holds the unhold would have released. The rehearsal says so task by
    task, fails (exit 1), and the node is left exactly as it was."""
    from cockpit.commands.dry_run import dry_run
    from cockpit.fleet.transport import Transport
    from cockpit.runbook.loader import load

    backend = ansible_backend(apt_node, tmp_path / "jobs")
    status, held = apt_node.status_sha256(), apt_node.held()
    transport = Transport([apt_node.target], apt_node.settings())
    params = {"driver_version": driver_version()}
    code = await dry_run(CHANGE_ID, load("driver-upgrade"), params, [apt_node.target], "alice", transport, backend)
    out = capsys.readouterr().out
    assert code == 1, out
    rehearsal = out[out.index("ansible check mode (--check)") :].splitlines()
    assert rehearsal[1].startswith("  gpu01: stage upgrade, step via-ansible (upgrade): FAILED: exit status 100: ")
    assert rehearsal[1].endswith("; 4 changing command(s) did not run, later tasks predict without them")
    words = {line.split(":", 1)[0].strip(): line.rsplit(": ", 1)[-1] for line in rehearsal[2:9]}
    assert words["apt-update"] == "would change"  # the apt module's own prediction
    would_run = "would change (Command would have run if not in check mode)"
    assert [words[t] for t in ("holds", "save-rollback", "target-set")] == [would_run] * 3
    assert rehearsal[5].endswith("skipped: Command would have run if not in check mode")  # unhold
    assert "failed (ignored in check mode): exit status 2: " in rehearsal[7]  # target-downloadable
    assert rehearsal[7].endswith("/var/cache/cockpit/CHG-ANSIBLE/target: No such file")
    assert "held packages" in rehearsal[8]  # install: apt still sees the holds
    assert apt_node.status_sha256() == status and apt_node.held() == held
    assert apt_node.cockpit_cache() == []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_cockpit_run_dry_run_backend_ansible_is_the_check_mode_from_the_command_line(
    apt_node: AptNode, tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI as an operator types it: hosts from an ssh_config, the node's Python with python-apt
    named (this machine's root login puts a pyenv python3 first, which discovery would pick), the
    jobs' artifacts under the operator's home."""
    from cockpit.cli import main

    server = apt_node.server
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host gpu01\n  HostName 127.0.0.1\n  Port {server.port}\n  User {server.user}\n"
        f"  IdentityFile {server.client_key}\n  IdentitiesOnly yes\n"
    )
    status = apt_node.status_sha256()
    code = main(
        ["run", "--dry-run", "--change-id", CHANGE_ID, "--hosts", "gpu01", "--runbook", "minimal-driver-upgrade",
         "--backend", "ansible", "--ansible-python", NODE_PYTHON,
         "--ssh-config", str(config), "--known-hosts", str(server.known_hosts),
         "--param", f"driver_version={driver_version()}"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    rehearsal = out[out.index("ansible check mode (--check)") :].splitlines()
    assert rehearsal[1].startswith("  gpu01: stage upgrade, step via-ansible (upgrade): would change 2 of 2 tasks;")
    assert list((isolated_home / ".local/state/cockpit/ansible").iterdir())  # the job's artifacts, kept
    assert apt_node.status_sha256() == status and apt_node.cockpit_cache() == []
