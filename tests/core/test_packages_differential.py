"""The package differential: the simulator's apt against the real apt, step by step, on every cell.

For each cell of tests/core/test_real_packages_apt.py's matrix (Ubuntu 24.04 and 22.04; Ubuntu's
archive -server, -server-open and precompiled modules; NVIDIA's CUDA repository proprietary
and open, 575 -> 580 and 580 -> 590) the shipped runbook's apt steps (the upgrade stage's,
then the rollback's) run twice: with bash on a scratch node of the REAL apt
(tests/package_cells.py, tests/apt_oracle.py), and through the shell of a simulated node
whose apt resolves over the same repository metadata (cockpit/sim/repos). Both are filled
with the same values: the real node's recorded facts and cockpit.runbook.targets.target_facts
(the simulated node's own probe must read the very same facts). After every step the two
must agree (:func:`disagreements`): the exit status (0 or not; where both fail, why), the
installed NVIDIA packages and their versions, the holds, and a dry run's transaction (the
``Inst`` and ``Remv`` lines of ``apt-get -s``). The simulator must never be kinder than a
real node; where it disagrees, the simulator is wrong.

The two sides never talk to each other, so the real side runs once per cell (module
fixture) and the mutation test reruns only the simulated side against the real answers.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from apt_oracle import AptAnswer, parse_answer
from package_cells import (  # noqa: F401  (autouse: skip without apt, host untouched)
    CACHE_ROOT,
    CELLS,
    RELEASES,
    ROLLBACK_STEPS,
    UPGRADE_STEPS,
    Cell,
    Node,
    Release,
    data_version,
    facts_of,
    host_untouched,
    needs_apt,
    node_steps,
    placeholder_values,
    recorded_facts,
    shared_deb_cache,
    stanzas,
    start_node,
)
from sim_nodes import quick_node, sh

import cockpit.sim.apt_resolve
from cockpit.fleet.platform_probe import PLATFORM_SECTIONS
from cockpit.runbook.loader import load
from cockpit.runbook.placeholders import ParamValue, fill, resolve_parameters
from cockpit.sim.debs import TOOLKIT_PACKAGES
from cockpit.sim.node import SimNode
from cockpit.sim.platform import CUDA_SOURCES, NodeProfile
from cockpit.sim.scenarios import SCENARIOS

# a real resolver's runs, like the real Slurm and Ansible ones: the full suite's, not the inner loop's
pytestmark = pytest.mark.slow  # the real apt answers every step of every cell

RUNBOOK = "driver-upgrade-r580"
#: the simulated node's apt repository (cockpit.sim.repos.APT_REPOSITORIES) for a cell's source and release
SIM_REPOSITORY = {
    ("archive", "24.04"): "archive-noble",
    ("archive", "22.04"): "archive-jammy",
    ("cuda", "24.04"): "cuda-ubuntu2404",
    ("cuda", "22.04"): "cuda-ubuntu2204",
}
#: apt-get's flags that make it only print the transaction
_SIMULATE = re.compile(r"\bapt-get\b[^|;&<>]*\s(?:-s|--simulate|--dry-run|--just-print|--no-act|--recon)(?:\s|$)")


# --------------------------------------------------------------------------- a node's state


@dataclass(frozen=True)
class State:
    """What one node shows after a step: its exit status and why it failed, the NVIDIA packages
    installed (name -> version) and held, and for a dry run the transaction it printed."""

    returncode: int
    failure: str | None  # the kind of refusal (:func:`failure_kind`), None where the step passed
    installed: Mapping[str, str]
    held: frozenset[str]
    #: a dry run's ``Inst`` lines (name -> new version), None where the step printed no transaction
    inst: Mapping[str, str] | None = None
    #: a dry run's ``Remv`` lines (name -> old version)
    remv: Mapping[str, str] | None = None


def failure_kind(answer: AptAnswer) -> str | None:
    """Why apt refused, in terms both sides must share (the wording is test_sim_apt_real.py's business)."""
    if answer.returncode == 0:
        return None
    if answer.not_found:
        return "version not found: " + " ".join(sorted(f"{p}={v}" for p, v in answer.not_found))
    if answer.not_located:
        return "unable to locate: " + " ".join(sorted(answer.not_located))
    if answer.no_candidate:
        return "no installation candidate: " + " ".join(sorted(answer.no_candidate))
    if answer.unmet or answer.held_broken:
        return "unmet dependencies"
    if any("pkgProblemResolver" in e for e in answer.errors):
        return "resolver broke held packages"
    if any(e.startswith("Held packages were changed") for e in answer.errors):
        return "held packages changed under -y"
    if any(e.startswith("Packages were downgraded") for e in answer.errors):
        return "downgrade under -y"
    if any("lock" in e for e in answer.errors):
        return "dpkg lock"
    return f"exit status {answer.returncode}"


def state_of(
    command: str, returncode: int, output: str, installed: Mapping[str, str], held: set[str], carried: set[str]
) -> State:
    """A node's state from a step's output and its package database, NVIDIA's packages only:
    the names the repository carries."""
    answer = parse_answer([], [], returncode, output, "", "")
    dry = _SIMULATE.search(command) is not None
    return State(
        returncode=returncode,
        failure=failure_kind(answer),
        installed={n: v for n, v in installed.items() if n in carried},
        held=frozenset(held),
        inst={n: new for n, (_, new) in answer.changes.items() if new is not None} if dry else None,
        remv=dict(answer.remove) if dry else None,
    )


def _mapping_diff(what: str, real: Mapping[str, str], sim: Mapping[str, str]) -> list[str]:
    return [
        f"{what} {name}: real {real.get(name)}, sim {sim.get(name)}"
        for name in sorted(set(real) | set(sim))
        if real.get(name) != sim.get(name)
    ]


def disagreements(real: State, sim: State) -> list[str]:
    """Where the simulated node's state after a step differs from the real node's (empty: they agree)."""
    found: list[str] = []
    if (real.returncode == 0) != (sim.returncode == 0):
        found.append(f"exit status: real {real.returncode} ({real.failure}), sim {sim.returncode} ({sim.failure})")
    elif real.failure != sim.failure:
        found.append(f"refusal: real {real.failure!r}, sim {sim.failure!r}")
    found += _mapping_diff("installed", real.installed, sim.installed)
    if real.held != sim.held:
        found.append(f"held: real only {sorted(real.held - sim.held)}, sim only {sorted(sim.held - real.held)}")
    if (real.inst is None) != (sim.inst is None):
        found.append(f"dry run: real printed {real.inst}, sim printed {sim.inst}")
    if real.inst is not None and sim.inst is not None:
        found += _mapping_diff("dry run Inst", real.inst, sim.inst)
        found += _mapping_diff("dry run Remv", real.remv or {}, sim.remv or {})
    return found


# --------------------------------------------------------------------------- the two sides


@dataclass
class RealRun:
    """One cell on the real apt: its start, the facts and values its commands are filled with,
    and each step's filled command (as a node runs it) and the state after it."""

    cell: Cell
    release: str
    start: State
    facts: dict[str, object]
    values: dict[str, ParamValue]
    steps: list[tuple[str, str]] = field(default_factory=list)  # (section:step, filled command)
    states: list[State] = field(default_factory=list)

    @property
    def carried(self) -> set[str]:
        return {s.package for s in stanzas(self.cell.path(RELEASES[self.release]))}


@dataclass
class SimRun:
    """The same cell on a simulated node: its start, its own probe's facts, the state after each step."""

    start: State
    facts: dict[str, object]
    states: list[State] = field(default_factory=list)


def run_real(base: Path, cell: Cell, release: str, deb_cache: Path) -> RealRun:
    """Start the real node, record it, fill the runbook's apt steps and run them, keeping each state."""
    rel = RELEASES[release]
    node = start_node(base, cell, rel, deb_cache, hold=False)
    carried = {s.package for s in stanzas(cell.path(rel))}
    hold = node.sh(hold_command(cell, rel))
    start = state_of("", hold.returncode, hold.output, node.installed(), node.oracle.held(), carried)
    facts = recorded_facts(node, cuda_repo=cell.source == "cuda", kernel=rel.kernel)
    runbook = load(RUNBOOK).runbook
    params = {"target_branch": cell.branch, "driver_version": data_version(cell.path(rel), cell.driver)}
    values = placeholder_values(runbook, params, facts)
    run = RealRun(cell, release, start, facts, values)
    resolved = resolve_parameters(runbook, params)
    stage = next(s for s in runbook.stages if s.id == "upgrade")
    upgrade = node_steps(stage.steps, resolved, facts)
    assert [s.id for s in upgrade] == UPGRADE_STEPS
    assert runbook.rollback is not None
    back = [s for s in node_steps(runbook.rollback.steps, resolved, facts) if s.id in ROLLBACK_STEPS]
    assert [s.id for s in back] == ROLLBACK_STEPS
    for section, steps in (("upgrade", upgrade), ("rollback", back)):
        for step in steps:
            command = fill(step.run or "", values)
            run.steps.append((f"{section}:{step.id}", command))
            run.states.append(_real_step(node, command, carried))
    return run


def _real_step(node: Node, command: str, carried: set[str]) -> State:
    shell = node.sh(command.replace(CACHE_ROOT, f"{node.cache}/"))
    return state_of(command, shell.returncode, shell.output, node.installed(), node.oracle.held(), carried)


def hold_command(cell: Cell, release: Release) -> str:
    """Hold the start packages, as operators hold them (the real side's start_node does the same)."""
    return "apt-mark hold " + " ".join(word.split("=", 1)[0] for word in cell.packages(release))


def sim_profile(cell: Cell, release: str) -> NodeProfile:
    """The simulated node of a cell: the cell's repository, installed with its start packages."""
    return NodeProfile(
        name=f"differential-{cell.id}",
        apt_repository=SIM_REPOSITORY[(cell.source, release)],
        driver_install=cell.packages(RELEASES[release]),
        fabric_install=(),
        extra_files=dict([CUDA_SOURCES]) if cell.source == "cuda" else {},
    )


def _without_toolkit(printed: str) -> str:
    """The probe's dpkg-query lines but the container toolkit's: the simulated node has it installed
    (from NVIDIA's container repository, which the real scratch node does not carry)."""
    return "".join(
        line
        for line in printed.splitlines(keepends=True)
        if not any(line[3:].startswith(f"{name}=") for name in TOOLKIT_PACKAGES)
    )


async def _run_sim(real: RealRun) -> SimRun:
    rel = RELEASES[real.release]
    node: SimNode = quick_node("gpu01", 0, SCENARIOS["happy"], profile=sim_profile(real.cell, real.release))
    pm = node.packages
    carried = real.carried
    status, out, err = await sh(node, hold_command(real.cell, rel))
    start = state_of("", status, out + err, pm.installed, pm.held, carried)
    status, out, _ = await sh(node, PLATFORM_SECTIONS["packages"])
    facts = facts_of(_without_toolkit(out), cuda_repo=real.cell.source == "cuda", kernel=rel.kernel)
    run = SimRun(start, facts)
    status, out, err = await sh(node, f"mkdir -p {CACHE_ROOT}")
    assert status == 0, out + err
    for _, command in real.steps:
        status, out, err = await sh(node, command)  # filled with the real node's values
        run.states.append(state_of(command, status, out + err, pm.installed, pm.held, carried))
    return run


def run_sim(real: RealRun) -> SimRun:
    """The real run's filled commands, in order, on a fresh simulated node of the cell."""
    return asyncio.run(_run_sim(real))


def step_disagreements(real: RealRun, sim: SimRun) -> list[str]:
    """Every disagreement of a cell, step by step: where the simulator first parts from apt and after."""
    found = [f"start: {d}" for d in disagreements(real.start, sim.start)]
    for (label, _), real_state, sim_state in zip(real.steps, real.states, sim.states, strict=True):
        found += [f"{label}: {d}" for d in disagreements(real_state, sim_state)]
    return found


# --------------------------------------------------------------------------- the matrix

MATRIX = [pytest.param(cell, release, id=f"{cell.id}-{release}") for cell in CELLS for release in RELEASES]


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Cell, str], RealRun]:
    """Each cell's real run, made once for the module (the .deb cache shared with the other real-apt tests)."""
    deb_cache = shared_deb_cache(tmp_path_factory)
    made: dict[tuple[str, str], RealRun] = {}

    def real(cell: Cell, release: str) -> RealRun:
        key = (cell.id, release)
        if key not in made:
            made[key] = run_real(tmp_path_factory.mktemp(f"diff-{cell.id}-{release}"), cell, release, deb_cache)
        return made[key]

    return real


@pytest.fixture(scope="module")
def sim_runs(real_runs: Callable[[Cell, str], RealRun]) -> Callable[[Cell, str], SimRun]:
    """Each cell's simulated run beside its real one, made once for the module."""
    made: dict[tuple[str, str], SimRun] = {}

    def sim(cell: Cell, release: str) -> SimRun:
        key = (cell.id, release)
        if key not in made:
            made[key] = run_sim(real_runs(cell, release))
        return made[key]

    return sim


@pytest.mark.parametrize(("cell", "release"), MATRIX)
def test_the_start_states_agree(
    real_runs: Callable[[Cell, str], RealRun], sim_runs: Callable[[Cell, str], SimRun], cell: Cell, release: str
) -> None:
    """The simulator's install_initial installs what the real apt installed for the start packages,
    and apt-mark holds them alike."""
    real, sim = real_runs(cell, release), sim_runs(cell, release)
    assert real.start.installed and real.start.held, "the real start installed or held nothing"
    assert disagreements(real.start, sim.start) == []


@pytest.mark.parametrize(("cell", "release"), MATRIX)
def test_the_probe_reads_the_same_facts(
    real_runs: Callable[[Cell, str], RealRun], sim_runs: Callable[[Cell, str], SimRun], cell: Cell, release: str
) -> None:
    """The record step's dpkg-query line and parsers read the same facts from both nodes, so the
    simulated node's commands would have been filled exactly as the real node's."""
    real, sim = real_runs(cell, release), sim_runs(cell, release)
    assert sim.facts == real.facts


@pytest.mark.parametrize(("cell", "release"), MATRIX)
def test_every_step_agrees_with_the_real_apt(
    real_runs: Callable[[Cell, str], RealRun], sim_runs: Callable[[Cell, str], SimRun], cell: Cell, release: str
) -> None:
    """After each of the upgrade stage's and the rollback's apt steps, the simulated node is where
    the real one is: exit status, installed NVIDIA packages, holds, the dry run's transaction."""
    real, sim = real_runs(cell, release), sim_runs(cell, release)
    assert [label for label, _ in real.steps] == [f"upgrade:{s}" for s in UPGRADE_STEPS] + [
        f"rollback:{s}" for s in ROLLBACK_STEPS
    ]
    dry = real.states[UPGRADE_STEPS.index("target-downloadable")]
    assert dry.inst, "the dry run printed no transaction: nothing was compared"
    assert step_disagreements(real, sim) == []


def test_the_differential_catches_a_simulator_that_ignores_conflicts(
    real_runs: Callable[[Cell, str], RealRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutation check: a simulator whose resolver ignores Conflicts and Breaks (the old branch
    stays beside the new) disagrees with the real apt on some cell, so the differential can fail."""
    monkeypatch.setattr(cockpit.sim.apt_resolve, "_clash", lambda pkg, other: False)
    for param in MATRIX:
        cell, release = param.values
        assert isinstance(cell, Cell) and isinstance(release, str)
        real = real_runs(cell, release)
        found = step_disagreements(real, run_sim(real))
        if found:
            assert any("installed" in d or "dry run" in d for d in found), found
            return
    pytest.fail("the simulator ignored Conflicts and Breaks, yet no cell disagreed with the real apt")
