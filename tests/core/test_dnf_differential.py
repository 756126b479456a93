"""The dnf differential: the simulator's dnf held to the REAL dnf, step by step, on the upgrade stage.

For each cell of tests/core/test_real_packages_dnf.py's matrix (start stream 575 precompiled, 575-dkms,
575-open; the fm or the default profile) the shipped runbook's dnf steps of the upgrade stage
(dnf-makecache, dnf-holds, dnf-save-rollback, dnf-unlock, dnf-target-downloadable, dnf-install,
dnf-relock) run twice: with ``/bin/sh`` in a scratch root of the REAL dnf over NVIDIA's real RHEL 9
metadata (tests/rhel_cells.py, tests/dnf_oracle.py), and through the shell of a simulated RHEL 9 node
(cockpit/sim/dnf.py over the hand-written model in cockpit/sim/rpms.py) in the same start state: the
stream's profile installed, every NVIDIA package version-locked (each side locks with its own dnf). Both
are filled with the same values: the real node's recorded facts and cockpit.runbook.targets.target_facts;
the simulated node's own probe output (``rpm -qa``, ``dnf -q module list --enabled``), read by the
project's parsers, must give the same flavour, module packaging, fabric manager presence, dnf stream
and target module.

After the start and after every step the two must agree (:func:`disagreements`): the exit status class
(0 or not), the enabled ``nvidia-driver`` stream, the EVR installed and the EVR version-locked of each
package the simulator models, and the files of those packages that dnf-save-rollback and the dry run
(dnf-target-downloadable) left in the change's cache dir (``NAME-V-R.ARCH.rpm``: the rollback matches
files by these names). The comparison is RESTRICTED to the names the simulator models: the driver's six parts
(nvidia-driver, -libs, -cuda, -cuda-libs, nvidia-kmod-common, nvidia-persistenced), the kmod
(``kmod-nvidia*``), fabric manager (``nvidia-fabric-manager``, ``nvidia-fabricmanager``) and nscq
(``libnvidia-nscq*``). The real node has more NVIDIA packages (libnvidia-ml, nvidia-modprobe,
nvidia-settings, ...) that the simulator does not model, and the simulated node has the container
toolkit, which the real root lacks: neither is compared. Where the two disagree, the simulator is wrong.

The real side runs once per cell and worker (cached); the mutation test reruns only the simulated side,
with the simulator made to deviate, and the comparison must see it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from dnf_oracle import DnfOracle
from rhel_cells import (
    CACHE,
    CELLS,
    CHANGE_ID,
    NVIDIA,
    Node,
    dnf_steps,
    make_oracle,
    make_start,
    node_values,
    recorded_facts,
)
from sim_nodes import quick_node, sh

import cockpit.sim.rpms
from cockpit.gpu.parsers import platform as parsers
from cockpit.runbook.loader import load
from cockpit.runbook.model import Runbook, Step
from cockpit.runbook.placeholders import ParamValue, fill
from cockpit.runbook.targets import target_facts
from cockpit.sim.node import SimNode
from cockpit.sim.platform import RHEL9_PROFILE
from cockpit.sim.scenarios import SCENARIOS

# a real resolver's runs, like the real Slurm and Ansible ones: the full suite's, not the inner loop's
pytestmark = pytest.mark.slow  # the real dnf answers every step of every cell

#: the packages the simulator models (cockpit/sim/rpms.py): only these are compared
MODELLED_NAMES = (
    "nvidia-driver",
    "nvidia-driver-libs",
    "nvidia-driver-cuda",
    "nvidia-driver-cuda-libs",
    "nvidia-kmod-common",
    "nvidia-persistenced",
    "nvidia-fabric-manager",
    "nvidia-fabricmanager",
)
MODELLED_PREFIXES = ("kmod-nvidia", "libnvidia-nscq")
#: the upgrade stage's dnf steps the differential must cover (dnf-makecache runs too)
UPGRADE_STEPS = (
    "dnf-holds",
    "dnf-save-rollback",
    "dnf-unlock",
    "dnf-target-downloadable",
    "dnf-install",
    "dnf-relock",
)
#: the facts that decide the target, compared between the real node and the simulated one
TARGET_KEYS = ("recorded_driver_flavour", "recorded_module_packaging", "recorded_dnf_stream")
#: the simulated node's probe: the platform probe's rpm query (cockpit/fleet/platform_probe.py) and dnf's
SIM_PACKAGES = "rpm -qa --qf 'ii %{NAME}=%{VERSION}-%{RELEASE}\\n' 'nvidia-*' 'libnvidia-nscq*' 'kmod-nvidia*'"
SIM_STREAM = "dnf -q module list --enabled nvidia-driver"
#: how the real start was locked (rhel_cells.make_start: every installed NVIDIA package), on the sim's shell
SIM_LOCK_ALL = (
    "rpm -qa --qf '%{NAME}\\n' 'nvidia-*' 'libnvidia-*' 'kmod-nvidia*' xorg-x11-nvidia | xargs -r dnf versionlock add"
)
SIM_CHANGE_DIR = f"{CACHE}{CHANGE_ID}/"
_LOCK = re.compile(r"^!?(?P<name>.+)-(?:(?P<epoch>\d+):)?(?P<version>[^-]+)-(?P<release>[^-]+?)\.\*$")


def modelled(name: str) -> bool:
    return name in MODELLED_NAMES or name.startswith(MODELLED_PREFIXES)


def locked(entries: list[str]) -> dict[str, str]:
    """Modelled name -> the EVR its versionlock entry pins (``0:`` dropped: the plugin may write it)."""
    result: dict[str, str] = {}
    for entry in entries:
        m = _LOCK.match(entry.strip())
        if m and modelled(m["name"]):
            epoch = m["epoch"] if m["epoch"] not in (None, "0") else ""
            result[m["name"]] = f"{epoch + ':' if epoch else ''}{m['version']}-{m['release']}"
    return result


# --------------------------------------------------------------------------- a node's state


@dataclass(frozen=True)
class State:
    """What one node shows after a step: exit status, enabled stream, modelled packages installed, locked, saved."""

    status: int
    stream: str
    installed: dict[str, str]
    locks: dict[str, str]
    saved: frozenset[str]  # the modelled rpm files under the change's cache dir (``target/`` for the dry run's)
    said: str = field(default="", compare=False)  # the end of what the step printed, for the message


def disagreements(real: State, sim: State) -> list[str]:
    """Where the simulated node's state differs from the real one's (empty: they agree)."""
    found: list[str] = []
    if (real.status == 0) != (sim.status == 0):
        found.append(
            f"exit status: real {real.status}, sim {sim.status}\n  real said: {real.said}\n  sim said: {sim.said}"
        )
    if real.stream != sim.stream:
        found.append(f"enabled stream: real {real.stream or '(none)'}, sim {sim.stream or '(none)'}")
    for what, theirs, ours in (("installed", real.installed, sim.installed), ("locked", real.locks, sim.locks)):
        for name in sorted(theirs.keys() | ours.keys()):
            if theirs.get(name) != ours.get(name):
                found.append(f"{what} {name}: real {theirs.get(name, '(none)')}, sim {ours.get(name, '(none)')}")
    found += [f"saved {path}: only on the real node" for path in sorted(real.saved - sim.saved)]
    found += [f"saved {path}: only on the simulated node" for path in sorted(sim.saved - real.saved)]
    return found


def saved(paths: list[str]) -> frozenset[str]:
    """The rpm files (relative to the change's cache dir) of modelled packages: ``name-version-release.arch.rpm``."""
    return frozenset(p for p in paths if p.endswith(".rpm") and modelled(p.rsplit("/", 1)[-1].rsplit("-", 2)[0]))


def _tail(text: str) -> str:
    return text.strip()[-600:]


def real_state(node: Node, status: int = 0, said: str = "") -> State:
    installed = {n: evr for n, evr in node.root.installed().items() if modelled(n)}
    files = [str(p.relative_to(node.cache / CHANGE_ID)) for p in (node.cache / CHANGE_ID).rglob("*.rpm")]
    return State(status, node.stream(), installed, locked(node.root.versionlocks()), saved(files), _tail(said))


def sim_state(node: SimNode, status: int = 0, said: str = "") -> State:
    dnf = node.dnf
    assert dnf is not None, "not a RHEL node"
    installed = {n: p.evr for n, p in dnf.installed.items() if modelled(n)}
    files = [p.removeprefix(SIM_CHANGE_DIR) for p in dnf.site.files if p.startswith(SIM_CHANGE_DIR)]
    return State(status, dnf.stream or "", installed, locked(dnf.locks), saved(files), _tail(said))


# --------------------------------------------------------------------------- the two sides


@dataclass(frozen=True)
class RealRun:
    """The real node's answer for one cell: its placeholder values, the steps run, its states."""

    params: dict[str, ParamValue]
    facts: dict[str, ParamValue]
    values: dict[str, ParamValue]
    steps: tuple[Step, ...]
    states: tuple[tuple[str, State], ...]  # ("start", ...), then one per step


@pytest.fixture(scope="module")
def oracle() -> DnfOracle:
    return make_oracle()


@pytest.fixture(scope="module")
def runbook() -> Runbook:
    return load("driver-upgrade-r580").runbook


@pytest.fixture(scope="module")
def real_runs() -> dict[tuple[str, str], RealRun]:
    """The real side's answers, filled as the cells ask (the mutation test reuses one where it can)."""
    return {}


def real_run(
    cache: dict[tuple[str, str], RealRun],
    oracle: DnfOracle,
    runbook: Runbook,
    stream: str,
    profile: str,
    tmp: pytest.TempPathFactory,
) -> RealRun:
    """Run the upgrade stage's dnf steps on a real start root of the cell, recording every state."""
    if (stream, profile) in cache:
        return cache[stream, profile]
    start = make_start(oracle, stream, profile, tmp.mktemp(f"start-{stream}-{profile}"))
    node = Node(oracle, start, tmp.mktemp(f"real-{stream}-{profile}"))
    params, facts, values = node_values(runbook, node)
    upgrade = next(s for s in runbook.stages if s.id == "upgrade")
    steps = dnf_steps(upgrade.steps, params, facts)
    assert set(UPGRADE_STEPS) <= {s.id for s in steps}, [s.id for s in steps]
    states = [("start", real_state(node))]
    for step in steps:
        done = node.sh(fill(step.run or "", values))
        states.append((step.id, real_state(node, done.returncode, done.stdout + done.stderr)))
    cache[stream, profile] = RealRun(params, facts, values, tuple(steps), tuple(states))
    return cache[stream, profile]


def sim_node(stream: str, profile: str) -> SimNode:
    """A simulated RHEL 9 node with the cell's stream and profile (fm: an NVSwitch node with fabric manager)."""
    node_profile = dataclasses.replace(RHEL9_PROFILE, dnf_stream=stream, nvswitch=profile == "fm")
    return quick_node("gpu01", 0, SCENARIOS["happy"], profile=node_profile)


async def sim_facts(node: SimNode, params: Mapping[str, ParamValue]) -> tuple[dict[str, ParamValue], dict[str, str]]:
    """(recorded facts, target facts) from the simulated node's own probe output, read by the project's parsers."""
    status, packages_out, err = await sh(node, SIM_PACKAGES)
    assert status == 0, err
    status, stream_out, err = await sh(node, SIM_STREAM)
    assert status == 0, err
    facts = recorded_facts(parsers.installed_packages(packages_out), parsers.dnf_module_stream(stream_out) or "")
    return facts, target_facts({**params, **facts})


async def sim_run(node: SimNode, real: RealRun) -> list[tuple[str, State]]:
    """The same filled steps on the simulated node (locked first as the real start was), every state."""
    status, out, err = await sh(node, SIM_LOCK_ALL)
    assert status == 0, out + err
    states = [("start", sim_state(node))]
    for step in real.steps:
        status, out, err = await sh(node, fill(step.run or "", real.values))
        states.append((step.id, sim_state(node, status, out + err)))
    return states


def differences(real: RealRun, sim: list[tuple[str, State]]) -> list[str]:
    assert [s for s, _ in real.states] == [s for s, _ in sim]
    return [
        f"{step}: {d}"
        for (step, theirs), (_, ours) in zip(real.states, sim, strict=True)
        for d in disagreements(theirs, ours)
    ]


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize(("stream", "profile"), CELLS)
async def test_simulated_dnf_answers_as_the_real_dnf(
    stream: str,
    profile: str,
    oracle: DnfOracle,
    runbook: Runbook,
    real_runs: dict[tuple[str, str], RealRun],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Same start, same filled steps: the same exit class, stream and modelled packages after every step."""
    real = real_run(real_runs, oracle, runbook, stream, profile, tmp_path_factory)
    node = sim_node(stream, profile)
    facts, targets = await sim_facts(node, real.params)
    assert {k: facts.get(k) for k in TARGET_KEYS} == {k: real.facts.get(k) for k in TARGET_KEYS}
    assert ("recorded_fabric_manager_version" in facts) == ("recorded_fabric_manager_version" in real.facts)
    assert ("recorded_fabric_manager_version" in real.facts) == (profile == "fm")
    assert targets["target_dnf_module"] == real.values["target_dnf_module"]
    assert [s for s, state in real.states if state.status != 0] == [], "the real dnf refused a step"
    assert differences(real, await sim_run(node, real)) == []


async def test_the_differential_sees_a_simulator_that_keeps_the_renamed_packages(
    oracle: DnfOracle,
    runbook: Runbook,
    real_runs: dict[tuple[str, str], RealRun],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Mutation: a simulator whose stream switch keeps the packages 580 renamed (fabric manager and
    nscq beside their new names, as if nothing conflicted) must disagree with the real dnf, which
    replaces them under --allowerasing."""
    real = real_run(real_runs, oracle, runbook, "575-dkms", "fm", tmp_path_factory)
    monkeypatch.setattr(cockpit.sim.rpms, "family", lambda name: name)
    found = differences(real, await sim_run(sim_node("575-dkms", "fm"), real))
    assert any(
        d.startswith("dnf-install: installed nvidia-fabric-manager: real (none), sim 575.57.08-1") for d in found
    ), found
    assert not any(d.startswith("start:") for d in found), found  # the start itself is the same


def test_disagreements_names_each_difference() -> None:
    """The comparison itself: exit class, stream, a version, a package only one side has, a lock."""
    files = frozenset({"nvidia-driver-575.57.08-1.el9.x86_64.rpm"})
    real = State(0, "580-dkms", {"nvidia-driver": "3:580.95.05-1.el9", "libnvidia-nscq": "580.95.05-1"}, {}, files)
    assert disagreements(real, real) == []
    assert disagreements(real, dataclasses.replace(real, status=100, said="x"))[0].startswith("exit status")
    sim = State(
        1, "575-dkms", {"nvidia-driver": "3:575.57.08-1.el9"}, {"nvidia-driver": "3:575.57.08-1.el9"}, frozenset()
    )
    found = disagreements(real, sim)
    assert found[0].startswith("exit status: real 0, sim 1")
    assert found[1:] == [
        "enabled stream: real 580-dkms, sim 575-dkms",
        "installed libnvidia-nscq: real 580.95.05-1, sim (none)",
        "installed nvidia-driver: real 3:580.95.05-1.el9, sim 3:575.57.08-1.el9",
        "locked nvidia-driver: real (none), sim 3:575.57.08-1.el9",
        "saved nvidia-driver-575.57.08-1.el9.x86_64.rpm: only on the real node",
    ]
    assert saved(
        ["target/libnvidia-ml-580.95.05-1.el9.x86_64.rpm", "target/libnvidia-nscq-580.95.05-1.x86_64.rpm"]
    ) == {"target/libnvidia-nscq-580.95.05-1.x86_64.rpm"}
    assert locked(["nvidia-fabric-manager-0:575.57.08-1.*", "libnvidia-ml-3:575.57.08-1.el9.*"]) == {
        "nvidia-fabric-manager": "575.57.08-1"
    }
    assert NVIDIA.match("kmod-nvidia-latest-dkms") and modelled("kmod-nvidia-575.57.08-5.14.0-570.23.1")
