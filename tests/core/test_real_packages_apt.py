"""The shipped SSH runbooks' apt procedure, run for real over the real repository metadata.

The upgrade stage (holds, save-rollback, unhold, target-set, target-downloadable, install,
rehold) and the rollback (unhold, reinstall, holds) of checklists/driver-upgrade-r580.toml
are filled exactly as the executor fills them (parameters, the node's recorded facts, and
cockpit.runbook.targets.target_facts) and run with bash against a scratch node of the apt
oracle (tests/apt_oracle.py): the repository is cockpit/sim/repos' Packages of that
release, the start state is what the real apt installed for the start packages, and the
facts are what the probe's own dpkg-query line and parsers read from it.

On the bash PATH, apt-get, apt-mark, apt-cache, dpkg-query and dpkg are wrappers that run
the real tools with the oracle's scratch options (never the host's status, /etc/apt or
the network); an apt-get that would install gets ``-s`` and its answer is applied to the
scratch status afterwards (the oracle never runs dpkg). ``--download-only`` runs for
real: the sources are ``copy:`` instead of ``file:`` so that apt copies the fetched .debs
into Dir::Cache::archives as an http: source would (file: ones are read in place).
``/var/cache/cockpit/`` becomes a per-test folder. The cells, the scratch node and its
wrappers are tests/package_cells.py's, shared with the package differential
(tests/core/test_packages_differential.py), which runs the same steps on simulated nodes.

Where the archive data carries 570-server fabric manager, nscq or IMEX (cockpit/sim/repos/ubuntu-archive,
section 5), the archive -server and -server-open starts install them too (an HGX node).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from apt_oracle import Unmet
from package_cells import (  # noqa: F401  (autouse: skip without apt, host untouched)
    CACHE_ROOT,
    CELLS,
    CHANGE_ID,
    RELEASES,
    ROLLBACK_STEPS,
    UPGRADE_STEPS,
    Cell,
    Node,
    Release,
    Shell,
    data_version,
    host_untouched,
    needs_apt,
    node_steps,
    placeholder_values,
    recorded_facts,
    shared_deb_cache,
    stanzas,
    start_node,
    upstream,
)

from cockpit.runbook.loader import load
from cockpit.runbook.model import Step
from cockpit.runbook.placeholders import ParamValue, fill, resolve_parameters

# a real resolver's runs, like the real Slurm and Ansible ones: the full suite's, not the inner loop's
pytestmark = pytest.mark.slow  # the real apt-get and dpkg install each cell's packages


@pytest.fixture(scope="module")
def deb_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One .deb cache for the run: each repository package is built once for every cell."""
    return shared_deb_cache(tmp_path_factory)


@dataclass
class Window:
    """One node's change, step by step: the node, its start, facts, filled commands and outputs."""

    node: Node
    start: dict[str, str]
    start_holds: set[str]
    facts: dict[str, object]
    values: dict[str, ParamValue]
    commands: dict[str, str] = field(default_factory=dict)
    done: dict[str, Shell] = field(default_factory=dict)

    def run(self, step: Step, section: str) -> Shell:
        command = fill(step.run or "", self.values).replace(CACHE_ROOT, f"{self.node.cache}/")
        self.commands[f"{section}:{step.id}"] = command
        shell = self.node.sh(command)
        self.done[f"{section}:{step.id}"] = shell
        return shell


def upgrade_window(base: Path, cell: Cell, release: Release, deb_cache: Path, runbook_name: str) -> Window:
    """Start the node, record it, fill the runbook and run its upgrade stage's apt steps in order."""
    node = start_node(base, cell, release, deb_cache)
    version = data_version(cell.path(release), cell.driver)
    runbook = load(runbook_name).runbook
    params = {"target_branch": cell.branch, "driver_version": version}
    facts = recorded_facts(node, cuda_repo=cell.source == "cuda", kernel=release.kernel)
    window = Window(node, node.installed(), node.oracle.held(), facts, placeholder_values(runbook, params, facts))
    stage = next(s for s in runbook.stages if s.id == "upgrade")
    steps = node_steps(stage.steps, resolve_parameters(runbook, params), facts)
    assert [s.id for s in steps] == UPGRADE_STEPS
    for step in steps:
        shell = window.run(step, "upgrade")
        assert shell.returncode == 0, f"upgrade step {step.id} failed:\n$ {shell.command}\n{shell.output}"
    return window


def rollback(window: Window, runbook_name: str) -> None:
    runbook = load(runbook_name).runbook
    assert runbook.rollback is not None
    params = {
        "target_branch": str(window.values["target_branch"]),
        "driver_version": str(window.values["driver_version"]),
    }
    steps = node_steps(runbook.rollback.steps, resolve_parameters(runbook, params), window.facts)
    apt_steps = [s for s in steps if s.id in ROLLBACK_STEPS]
    assert [s.id for s in apt_steps] == ROLLBACK_STEPS
    for step in apt_steps:
        shell = window.run(step, "rollback")
        assert shell.returncode == 0, f"rollback step {step.id} failed:\n$ {shell.command}\n{shell.output}"


# --------------------------------------------------------------------------- the matrix


def module_packages(installed: Mapping[str, str]) -> list[str]:
    return sorted(n for n in installed if n.startswith(("nvidia-dkms", "linux-modules-nvidia-")))


def is_open(modules: list[str]) -> bool:
    opens = {"-open" in name for name in modules}
    assert len(opens) == 1, modules
    return opens.pop()


PARTS = {
    "fabric manager": ("nvidia-fabricmanager", "nvidia-fabric-manager"),
    "nscq": ("libnvidia-nscq",),
    "imex": ("nvidia-imex",),
}


@pytest.fixture(scope="module")
def windows(tmp_path_factory: pytest.TempPathFactory, deb_cache: Path) -> Callable[[Cell, str], Window]:
    """Each cell's upgraded node, made once: the rollback test goes on from where the upgrade test stopped."""
    made: dict[tuple[str, str], Window] = {}

    def upgraded(cell: Cell, release: str) -> Window:
        key = (cell.id, release)
        if key not in made:
            base = tmp_path_factory.mktemp(f"{cell.id}-{release}")
            made[key] = upgrade_window(base, cell, RELEASES[release], deb_cache, "driver-upgrade-r580")
        return made[key]

    return upgraded


MATRIX = [pytest.param(cell, release, id=f"{cell.id}-{release}") for cell in CELLS for release in RELEASES]


@pytest.mark.parametrize(("cell", "release"), MATRIX)
def test_the_upgrade_stage_moves_the_node(windows: Callable[[Cell, str], Window], cell: Cell, release: str) -> None:
    """The real apt resolves the target set, keeps the module's flavour and packaging, and moves
    fabric manager, nscq and IMEX with the driver."""
    window = windows(cell, release)
    node, start, version = window.node, window.start, str(window.values["driver_version"])
    # (1) the dry run: the real apt resolves the target set at driver_version
    dry = window.done["upgrade:target-downloadable"]
    assert dry.returncode == 0 and "Inst " in dry.output, dry.output
    after = node.installed()
    assert upstream(after[cell.driver]) == version, after
    # (2) the kernel module keeps its flavour and packaging
    before_modules, after_modules = module_packages(start), module_packages(after)
    assert after_modules, after
    assert is_open(after_modules) == is_open(before_modules), (before_modules, after_modules)
    if window.facts["recorded_module_packaging"] == "precompiled":
        assert not [n for n in after if n.startswith("nvidia-dkms")], after
        assert all(n.startswith(f"linux-modules-nvidia-{cell.branch}") for n in after_modules), after_modules
    else:
        assert [upstream(after[n]) for n in after_modules] == [version], after_modules
    # (3) fabric manager, nscq and IMEX, where the start had them, at the driver's version
    for part, prefixes in PARTS.items():
        had = [n for n in start if n.startswith(prefixes)]
        has = [n for n in after if n.startswith(prefixes)]
        if had:
            assert [upstream(after[n]) for n in has] == [version], (part, had, {n: after[n] for n in has})
        else:
            assert not has, (part, has)
    # the new set is held where the old one was
    target = (node.cache / CHANGE_ID / "target").read_text().split()
    assert node.oracle.held() == {w.split("=", 1)[0] for w in target}


@pytest.mark.parametrize(("cell", "release"), MATRIX)
def test_the_rollback_brings_back_the_start(windows: Callable[[Cell, str], Window], cell: Cell, release: str) -> None:
    """(4) The files save-rollback kept bring back every package of the start at its version,
    precompiled modules included, whatever the repository still carries. What the target added
    and nothing of the start conflicts with stays installed, and must be inert there: the
    target's GSP firmware (its own /lib/firmware/nvidia/VERSION), a precompiled module's
    object files without the module package, 590's libnvidia-gpucomp that no 580 library
    loads (the real apt keeps them: reinstalling files removes nothing it need not)."""
    window = windows(cell, release)
    rollback(window, "driver-upgrade-r580")
    now = window.node.installed()
    back = {n: now.get(n) for n in window.start}
    assert back == dict(window.start), _diff(window.start, now)
    left = {n: v for n, v in now.items() if n not in window.start}
    assert all(n.startswith(INERT_LEFTOVERS) for n in left), left
    assert window.node.oracle.held() == window.start_holds


#: what a rollback from saved files leaves of the target: nothing that loads with the old driver
INERT_LEFTOVERS = ("nvidia-firmware-", "linux-objects-nvidia-", "libnvidia-gpucomp")


def _diff(start: Mapping[str, str], now: Mapping[str, str]) -> dict[str, tuple[str | None, str | None]]:
    names = set(start) | set(now)
    return {n: (start.get(n), now.get(n)) for n in sorted(names) if start.get(n) != now.get(n)}


def test_the_routine_runbook_runs_the_same_commands(tmp_path: Path, deb_cache: Path) -> None:
    """driver-upgrade.toml's node stages are a verbatim copy: on a node, they fill to the same commands."""
    cell, release = CELLS[1], RELEASES["24.04"]
    node = start_node(tmp_path, cell, release, deb_cache)
    facts = recorded_facts(node, cuda_repo=False, kernel=release.kernel)
    params = {"target_branch": cell.branch, "driver_version": data_version(cell.path(release), cell.driver)}

    def commands(name: str) -> list[str]:
        runbook = load(name).runbook
        values = placeholder_values(runbook, params, facts)
        stage = next(s for s in runbook.stages if s.id == "upgrade")
        assert runbook.rollback is not None
        steps = [*stage.steps, *runbook.rollback.steps]
        return [fill(s.run or "", values) for s in node_steps(steps, resolve_parameters(runbook, params), facts)]

    assert commands("driver-upgrade") == commands("driver-upgrade-r580")


def test_the_old_command_line_is_refused_on_an_archive_server_node(tmp_path: Path, deb_cache: Path) -> None:
    """Why the runbook names packages per node: the former fixed line (desktop driver, branch-suffixed
    fabric manager and nscq) cannot be installed from Ubuntu's archive on a -server node."""
    cell, release = CELLS[0], RELEASES["24.04"]
    node = start_node(tmp_path, cell, release, deb_cache, hold=False)
    version = data_version(cell.path(release), cell.driver)
    old = ["nvidia-driver-580", "nvidia-fabricmanager-580", "libnvidia-nscq-580"]
    pinned = node.oracle.run(["apt-get", "install", "-y", *(f"{n}={version}*" for n in old)])
    assert pinned.returncode == 100
    assert ("nvidia-driver-580", f"{version}*") in pinned.not_found  # the desktop driver is at another version
    unpinned = node.oracle.run(["apt-get", "install", "-y", *old])  # and at any version, the parts refuse it
    assert unpinned.returncode == 100 and unpinned.held_broken, unpinned.output
    assert set(unpinned.unmet) == {
        Unmet("nvidia-fabricmanager-580", f"Depends: nvidia-kernel-common-580-server-{version}"),
        Unmet("libnvidia-nscq-580", f"Depends: nvidia-kernel-common-580-server-{version}"),
    }


@pytest.mark.parametrize("release", list(RELEASES))
def test_the_archive_parts_follow_the_server_driver_exactly(release: str) -> None:
    """Why fabric manager, nscq and IMEX are named and pinned with the driver on the archive: each
    depends on the server kernel-common of its own upstream version (Launchpad bug 2129682)."""
    path = f"ubuntu-archive/{RELEASES[release].archive}.Packages"
    prefixes = PARTS["fabric manager"] + PARTS["nscq"] + PARTS["imex"]
    parts = [s for s in stanzas(path) if s.package.startswith(prefixes)]
    assert {s.package for s in parts} >= {"nvidia-fabricmanager-580", "libnvidia-nscq-580", "nvidia-imex-580"}
    for part in parts:
        branch = part.package.rsplit("-", 1)[1]
        assert f"nvidia-kernel-common-{branch}-server-{upstream(part.version)}" in part.depends, part
