"""The RHEL 9 cells the real dnf answers for: NVIDIA's repository, the start roots, a node's shell and facts.

Shared by tests/core/test_real_packages_dnf.py (the runbook's dnf procedure against the real dnf) and
tests/core/test_dnf_differential.py (the simulated dnf held to the real one). cockpit/sim/repos/rhel9 holds
NVIDIA's RHEL 9 ``nvidia-driver`` module (packages.txt, modules.yaml); the dnf oracle (tests/dnf_oracle.py)
builds it into a ``file://`` repository of empty rpms. Each start root is what the real ``dnf module
install nvidia-driver:STREAM/PROFILE`` makes of an empty root, with every NVIDIA package version-locked as
an operator's node would be. A :class:`Node` runs the runbook's filled commands with ``/bin/sh -c`` (what
the executor runs), ``dnf`` and ``rpm`` on PATH being wrappers that add the root's options; its
``/var/cache/cockpit/`` is a per-test directory. Nothing touches the host's rpmdb, /etc or the network.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from dnf_oracle import (
    DnfOracle,
    DnfRoot,
    ModuleState,
    base_os_stub,
    default_cache_dir,
    parse_rpm_stanzas,
    require_dnf_oracle,
)

from cockpit.gpu.parsers import platform as parsers
from cockpit.runbook.conditions import when_holds
from cockpit.runbook.model import Runbook, Step
from cockpit.runbook.placeholders import ParamValue
from cockpit.runbook.targets import target_facts

DATA = Path(__file__).resolve().parents[1] / "cockpit" / "sim" / "repos" / "rhel9"
STANZAS = parse_rpm_stanzas((DATA / "packages.txt").read_text())
STUB = base_os_stub(STANZAS)
MODULES_YAML = (DATA / "modules.yaml").read_text()
#: the repository's 575 and 580 driver versions (the data's own, not written twice)
START_VERSION = next(s.version for s in STANZAS if s.name == "nvidia-driver" and s.version.startswith("575."))
TARGET_VERSION = next(s.version for s in STANZAS if s.name == "nvidia-driver" and s.version.startswith("580."))
CACHE = "/var/cache/cockpit/"
CHANGE_ID = "CHG-4242"
#: the start stream -> the stream the runbook must derive for the node (same packaging, same flavour)
TARGET_STREAM = {"575": "580", "575-dkms": "580-dkms", "575-open": "580-open"}
PROFILES = ("fm", "default")
NVIDIA = re.compile(r"^(nvidia-|libnvidia-|kmod-nvidia|xorg-x11-nvidia$)")
CONTAINER = re.compile(r"^(lib)?nvidia-container")
CELLS = [pytest.param(s, p, id=f"rhel9-{s}-{p}") for s in TARGET_STREAM for p in PROFILES]


@dataclass(frozen=True)
class StartState:
    """A node's packages (name -> EVR), module state and version locks before the change."""

    stream: str
    profile: str
    installed: dict[str, str]
    locks: tuple[str, ...]


def make_oracle() -> DnfOracle:
    """The real repository (built once, cached by its hash across runs); skips without the tools."""
    require_dnf_oracle()
    assert STUB is not None
    return DnfOracle([*STANZAS, STUB], MODULES_YAML, default_cache_dir())


def make_start(oracle: DnfOracle, stream: str, profile: str, tmp: Path) -> StartState:
    """One start as the real dnf installs it: module install, then lock every NVIDIA package."""
    assert STUB is not None
    root = oracle.make_root(tmp, installed=[STUB])
    done = root.run(["module", "install", f"nvidia-driver:{stream}/{profile}"], apply=True)
    assert done.rc == 0, done.output
    names = sorted(n for n in root.installed() if NVIDIA.match(n))
    locked = root.run(["versionlock", "add", *names], apply=True)
    assert locked.rc == 0, locked.output
    return StartState(stream, profile, root.installed(), tuple(root.versionlocks()))


class Node:
    """A scratch root plus the shell the runbook's commands run in there (dnf and rpm wrapped onto it)."""

    def __init__(self, oracle: DnfOracle, start: StartState, tmp: Path) -> None:
        self.start = start
        self.tmp = tmp
        self.cache = tmp / "cache"
        self.cache.mkdir()
        installed = [oracle.find(f"{name}-{evr}") for name, evr in start.installed.items()]
        self.root: DnfRoot = oracle.make_root(
            tmp / "root",
            installed=installed,
            module=ModuleState(start.stream, (start.profile,)),
            versionlocks=start.locks,
        )
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        dnf_base = self.root.dnf_argv(["-y"])[:-1]  # the harness's options, no answer flag: the command says -y
        dnf = [shutil.which("dnf") or "/usr/bin/dnf", *dnf_base[1:]]
        rpm = [shutil.which("rpm") or "/usr/bin/rpm", "--root", str(self.root.root), "--dbpath", "/var/lib/rpm"]
        for name, argv in (("dnf", dnf), ("rpm", rpm)):
            (bin_dir / name).write_text(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')
            (bin_dir / name).chmod(0o755)
        self.env = {**oracle.env(), "PATH": f"{bin_dir}:{oracle.env()['PATH']}"}

    def sh(self, command: str) -> subprocess.CompletedProcess[str]:
        """Run a filled runbook command as the executor does (``sh -c``), its cache in this test's tmp dir."""
        command = command.replace(CACHE, f"{self.cache}/")
        assert "/var/cache/cockpit" not in command
        return subprocess.run(
            ["/bin/sh", "-c", command],
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=300,
            check=False,
        )

    def nvidia(self) -> dict[str, str]:
        """The NVIDIA package set as the runbook's save step sees it (container toolkit left out)."""
        return {n: evr for n, evr in self.root.installed().items() if NVIDIA.match(n) and not CONTAINER.match(n)}

    def stream(self) -> str:
        state = self.root.module_state()
        return state["stream"] if state.get("state") == "enabled" else ""

    def use_repository(self, oracle: DnfOracle) -> None:
        """Point the root's only repository at another build (dnf keys its cache by the baseurl)."""
        repo_file = self.root.root / "etc/yum.repos.d/oracle.repo"
        text = re.sub(r"baseurl=file://\S+", f"baseurl=file://{oracle.repo}", repo_file.read_text())
        repo_file.write_text(text)


def version(evr: str) -> str:
    """``3:580.95.05-1.el9`` -> ``580.95.05``."""
    return evr.split(":", 1)[-1].split("-", 1)[0]


def recorded_facts(packages: Mapping[str, str], stream: str) -> dict[str, ParamValue]:
    """The ``recorded_*`` facts the project's parsers derive from a node's packages (name -> version-release,
    no epoch) and its enabled stream; a fact the node lacks is absent."""
    found = {
        "recorded_package_manager": "dnf",
        "recorded_driver_flavour": parsers.driver_flavour(packages, None, stream),
        "recorded_module_packaging": parsers.module_packaging(packages, stream),
        "recorded_dnf_stream": stream,
        "recorded_fabric_manager_version": parsers.package_version(
            packages, ("nvidia-fabricmanager", "nvidia-fabric-manager")
        ),
        "recorded_nscq_version": parsers.package_version(packages, ("libnvidia-nscq",)),
    }
    return {k: v for k, v in found.items() if v}


def node_values(
    runbook: Runbook, node: Node
) -> tuple[dict[str, ParamValue], dict[str, ParamValue], dict[str, ParamValue]]:
    """(parameters, recorded facts, every placeholder value) the way the engine has them for this node."""
    packages = {n: evr.split(":", 1)[-1] for n, evr in node.root.installed().items()}
    params: dict[str, ParamValue] = {n: p.default for n, p in runbook.parameters.items() if p.default is not None}
    params.update(target_branch="580", driver_version=TARGET_VERSION, driver_flavour="keep", change_id=CHANGE_ID)
    facts = recorded_facts(packages, node.stream())
    values = {**params, **facts}
    values.update(target_facts(values))
    return params, facts, values


def dnf_steps(steps: list[Step], params: Mapping[str, object], facts: Mapping[str, object]) -> list[Step]:
    """The steps of a stage (or the rollback) that run a dnf command on this node over SSH
    (the window's backend is a condition: the upgrade stage's SSH path says ``backend = "ssh"``)."""
    conditions = {**params, "backend": "ssh"}
    return [s for s in steps if s.run and s.id.startswith("dnf-") and when_holds(s.when, conditions, facts)]
