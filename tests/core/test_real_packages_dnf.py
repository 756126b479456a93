"""The shipped runbook's dnf procedure on RHEL 9, proven by the REAL dnf over the REAL repository metadata.

cockpit/sim/repos/rhel9 holds NVIDIA's RHEL 9 ``nvidia-driver`` module (packages.txt, modules.yaml); the
dnf oracle (tests/dnf_oracle.py) builds it into a ``file://`` repository of empty rpms. Each start root is
what the real ``dnf module install nvidia-driver:STREAM/PROFILE`` makes of an empty root, with every NVIDIA
package version-locked as an operator's node would be. The runbook's dnf steps are filled exactly as the
engine fills them (``target_facts`` over the facts the project's parsers derive from the root) and run as
shell pipelines by ``/bin/sh -c`` (what the executor runs), with ``dnf`` and ``rpm`` on PATH being wrapper
scripts that add the root's options (``--installroot``, the harness's setopts, its private HOME); so find,
grep and xargs are the real ones and every resolution is the real dnf's. ``/var/cache/cockpit/`` becomes a
per-test directory. Before the rollback the root is pointed at a copy of the repository without the start's
575 packages: the rollback must work from the node's saved files alone, as the runbook promises.

Nothing touches the host's rpmdb, /etc or the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from dnf_oracle import DnfOracle, default_cache_dir
from rhel_cells import (
    CELLS,
    CHANGE_ID,
    MODULES_YAML,
    NVIDIA,
    PROFILES,
    STANZAS,
    START_VERSION,
    STUB,
    TARGET_STREAM,
    TARGET_VERSION,
    Node,
    StartState,
    dnf_steps,
    make_oracle,
    make_start,
    node_values,
    version,
)

from cockpit.gpu.parsers import platform as parsers
from cockpit.runbook.loader import load
from cockpit.runbook.model import Runbook, Step
from cockpit.runbook.placeholders import ParamValue, fill, quoting_problems, template_problems

# a real resolver's runs, like the real Slurm and Ansible ones: the full suite's, not the inner loop's
pytestmark = pytest.mark.slow  # the real dnf installs each cell's packages

#: The rollback's dnf-reinstall that restores the start in every cell, found with the real dnf. ``dnf
#: downgrade`` cannot bring back a package the upgrade removed or renamed (nvidia-fabric-manager ->
#: nvidia-fabricmanager, libnvidia-nscq-575 -> libnvidia-nscq: "not installed, cannot downgrade it", exit 0)
#: nor take away a package the upgrade added (the 580 precompiled kmod has a new name): ``install
#: --allowerasing`` of the saved files brings every old package back (nvidia-fabric-manager obsoletes the
#: new fabric manager, libnvidia-nscq-575 conflicts the new nscq away), then every NVIDIA package whose
#: exact NAME-VERSION-RELEASE.ARCH.rpm was not saved is removed. Nothing is downloaded. POSIX sh.
ROLLBACK_REINSTALL = (
    "find /var/cache/cockpit/{change_id} -maxdepth 1 -name '*.rpm' | grep -q ."
    " && dnf -y module reset nvidia-driver && dnf -y module enable nvidia-driver:{recorded_dnf_stream}"
    " && find /var/cache/cockpit/{change_id} -maxdepth 1 -name '*.rpm' | xargs -r dnf -y install --allowerasing"
    " && rpm -qa --qf '%{{NAME}}-%{{VERSION}}-%{{RELEASE}}.%{{ARCH}}.rpm %{{NAME}}\\n'"
    " 'nvidia-*' 'libnvidia-*' 'kmod-nvidia*' xorg-x11-nvidia"
    " | grep -v -e '^nvidia-container' -e '^libnvidia-container'"
    ' | while read -r file name; do test -e /var/cache/cockpit/{change_id}/"$file" || echo "$name"; done'
    " | xargs -r dnf -y remove --noautoremove"
)


@pytest.fixture(scope="module")
def oracle() -> DnfOracle:
    """The real repository (built once, cached by its hash across runs)."""
    return make_oracle()


@pytest.fixture(scope="module")
def oracle_without_start(oracle: DnfOracle) -> DnfOracle:
    """The same repository once NVIDIA no longer carries 575: the rollback must not need it."""
    assert STUB is not None
    kept = [s for s in STANZAS if s.version != START_VERSION]
    return DnfOracle([*kept, STUB], MODULES_YAML, default_cache_dir())


@pytest.fixture(scope="module")
def starts(oracle: DnfOracle, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], StartState]:
    """Every start, as the real dnf installs it (once per module): module install, then lock every NVIDIA package."""
    return {
        (stream, profile): make_start(oracle, stream, profile, tmp_path_factory.mktemp(f"start-{stream}-{profile}"))
        for stream in TARGET_STREAM
        for profile in PROFILES
    }


@pytest.fixture(scope="module")
def runbook() -> Runbook:
    return load("driver-upgrade-r580").runbook


# --------------------------------------------------------------------------------------------- helpers


def rollback_steps(runbook: Runbook) -> list[Step]:
    assert runbook.rollback is not None
    return list(runbook.rollback.steps)


def run_upgrade(runbook: Runbook, node: Node) -> dict[str, ParamValue]:
    """The upgrade stage's dnf steps in order; checks (1) the dry run on the way. Returns the placeholder values."""
    params, facts, values = node_values(runbook, node)
    upgrade = next(s for s in runbook.stages if s.id == "upgrade")
    steps = dnf_steps(upgrade.steps, params, facts)
    ids = [s.id for s in steps]
    assert {"dnf-holds", "dnf-save-rollback", "dnf-unlock", "dnf-target-downloadable", "dnf-install"} <= set(ids)
    for step in steps:
        if step.id == "dnf-install":
            check_dry_run(node, values)
        done = node.sh(fill(step.run or "", values))
        assert done.returncode == 0, f"{step.id}: {done.stdout}\n{done.stderr}"
    return values


def check_dry_run(node: Node, values: Mapping[str, ParamValue]) -> None:
    """(1) --downloadonly fetched the target set at 580 (driver, kmod, fm and nscq) and changed nothing."""
    start = node.start
    assert node.nvidia() == {n: e for n, e in start.installed.items() if NVIDIA.match(n)}, "the dry run installed"
    assert node.stream() == start.stream
    fetched = sorted(p.name for p in (node.cache / CHANGE_ID / "target").glob("*.rpm"))
    assert fetched and all(f"-{TARGET_VERSION}-" in f for f in fetched), fetched
    names = {f.rsplit("-", 2)[0] for f in fetched}
    assert "nvidia-driver" in names
    kmod = {
        "575": f"kmod-nvidia-{TARGET_VERSION}-",
        "575-dkms": "kmod-nvidia-latest-dkms",
        "575-open": "kmod-nvidia-open-dkms",
    }
    assert any(n.startswith(kmod[start.stream]) for n in names), names
    assert ({"nvidia-fabricmanager", "libnvidia-nscq"} <= names) == (start.profile == "fm"), names
    saved = sorted(p.name for p in (node.cache / CHANGE_ID).glob("*.rpm"))
    assert saved == sorted(node.root.oracle.find(f"{n}-{e}").filename for n, e in node.nvidia().items())


def check_installed(node: Node, values: Mapping[str, ParamValue]) -> None:
    """(2) the target stream, the node's own kmod flavour and packaging, every driver-set package at 580."""
    start = node.start
    after = node.nvidia()
    packages = {n: e.split(":", 1)[-1] for n, e in after.items()}
    assert node.stream() == TARGET_STREAM[start.stream] == values["target_dnf_stream"]
    assert parsers.driver_flavour(packages, None, node.stream()) == values["recorded_driver_flavour"]
    assert parsers.module_packaging(packages, node.stream()) == values["recorded_module_packaging"]
    kmods = sorted(n for n in after if n.startswith("kmod-nvidia"))
    old_kmods = [n for n in start.installed if n.startswith("kmod-nvidia-5")]
    if start.stream == "575":
        # precompiled kmods are named per driver and kernel: dnf adds the 580 one and keeps the 575 one
        new = [n for n in kmods if n.startswith(f"kmod-nvidia-{TARGET_VERSION}-")]
        assert len(new) == 1 and kmods == sorted([*new, *old_kmods]), kmods
    else:
        kmod = "kmod-nvidia-latest-dkms" if start.stream == "575-dkms" else "kmod-nvidia-open-dkms"
        assert kmods == [kmod], kmods
    stale = {n: e for n, e in after.items() if version(e) != TARGET_VERSION and n not in old_kmods}
    assert stale == {}, f"driver-set packages not at {TARGET_VERSION}: {stale}"
    had_fabric = "nvidia-fabric-manager" in start.installed
    assert had_fabric == (start.profile == "fm")
    for name in ("nvidia-fabricmanager", "libnvidia-nscq"):
        assert (version(after[name]) if name in after else None) == (TARGET_VERSION if had_fabric else None), name
    assert "nvidia-fabric-manager" not in after and "libnvidia-nscq-575" not in after


def run_rollback(runbook: Runbook, node: Node, values: Mapping[str, ParamValue], reinstall: str) -> list[str]:
    """The rollback's dnf steps, its dnf-reinstall replaced by ``reinstall``; returns what each printed."""
    params = {k: v for k, v in values.items() if k in runbook.parameters or k == "change_id"}
    facts = {k: v for k, v in values.items() if k.startswith("recorded_")}
    steps = dnf_steps(rollback_steps(runbook), params, facts)
    assert [s.id for s in steps] == ["dnf-unlock", "dnf-reinstall", "dnf-relock"]
    printed: list[str] = []
    for step in steps:
        template = reinstall if step.id == "dnf-reinstall" else step.run or ""
        done = node.sh(fill(template, values))
        assert done.returncode == 0, f"{step.id}: {done.stdout}\n{done.stderr}"
        printed.append(done.stdout + done.stderr)
    return printed


# --------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize(("stream", "profile"), CELLS)
def test_upgrade_and_rollback_matrix(
    stream: str,
    profile: str,
    runbook: Runbook,
    oracle: DnfOracle,
    oracle_without_start: DnfOracle,
    starts: dict[tuple[str, str], StartState],
    tmp_path: Path,
) -> None:
    """The runbook keeps each node's packaging and flavour on 580, and its rollback restores the node exactly."""
    start = starts[stream, profile]
    node = Node(oracle, start, tmp_path)
    before = node.nvidia()
    _, _, values = node_values(runbook, node)
    assert values["target_dnf_module"] == f"nvidia-driver:{TARGET_STREAM[stream]}/{profile}"

    values = run_upgrade(runbook, node)
    check_installed(node, values)

    node.use_repository(oracle_without_start)  # the repository no longer carries 575
    run_rollback(runbook, node, values, ROLLBACK_REINSTALL)
    assert node.nvidia() == before
    assert node.stream() == stream


def test_runbook_dnf_reinstall_is_the_proven_sequence(runbook: Runbook) -> None:
    """The matrix proves ROLLBACK_REINSTALL; the runbook must run exactly that."""
    step = next(s for s in rollback_steps(runbook) if s.id == "dnf-reinstall")
    values = {"recorded_dnf_stream": "575-dkms", "change_id": CHANGE_ID}
    assert fill(step.run or "", values) == fill(ROLLBACK_REINSTALL, values)


def test_proven_sequence_is_a_valid_runbook_template() -> None:
    """The constant can go into the runbook as it is: well-formed braces, placeholders outside quotes."""
    assert template_problems(ROLLBACK_REINSTALL) == []
    assert quoting_problems(ROLLBACK_REINSTALL) == []


def test_old_belief_plain_switch_to_580_does_not_keep_dkms(
    oracle: DnfOracle, starts: dict[tuple[str, str], StartState], tmp_path: Path
) -> None:
    """The old runbook switched every node to ``nvidia-driver:580/fm`` without --allowerasing, believing a DKMS
    node stays DKMS: the real dnf refuses (the 575 DKMS kmod needs the 575 kmod-common, and the nscq packages
    conflict), and with --allowerasing it erases the DKMS kmod for a precompiled one."""
    node = Node(oracle, starts["575-dkms", "fm"], tmp_path)
    refused = node.root.run(["module", "switch-to", "nvidia-driver:580/fm"])
    assert refused.rc == 1 and not refused.resolved and refused.hints_allowerasing, refused.output
    assert any("kmod-nvidia-latest-dkms-3:575.57.08" in p and "modular filtering" in p for p in refused.problems)
    assert any("libnvidia-nscq-575" in p and "conflicts" in p for p in refused.problems)

    erasing = node.root.run(["module", "switch-to", "nvidia-driver:580/fm", "--allowerasing"])
    assert erasing.resolved and erasing.aborted, erasing.output
    removed = {**erasing.names("Removing"), **erasing.names("Removing dependent packages")}
    assert "kmod-nvidia-latest-dkms" in removed
    added = {**erasing.names("Installing"), **erasing.names("Installing dependencies")}
    added |= erasing.names("Installing group/module packages")
    assert f"kmod-nvidia-{TARGET_VERSION}-5.14.0-570.49.1" in added, erasing.transaction
    assert node.stream() == "575-dkms"  # --assumeno: nothing applied


#: the rollback the runbooks ran before: downgrade the saved files in the old stream
OLD_DNF_REINSTALL = (
    "dnf -y module reset nvidia-driver && dnf -y module enable nvidia-driver:{recorded_dnf_stream}"
    " && find /var/cache/cockpit/{change_id} -maxdepth 1 -name '*.rpm' | xargs -r dnf -y downgrade"
)


def test_the_old_dnf_reinstall_leaves_the_580_parts(
    runbook: Runbook,
    oracle: DnfOracle,
    oracle_without_start: DnfOracle,
    starts: dict[tuple[str, str], StartState],
    tmp_path: Path,
) -> None:
    """Why ``xargs dnf downgrade`` was wrong: on a precompiled HGX node it exits 0 yet keeps the
    580 fabric manager, nscq and precompiled kmod (renamed packages cannot be "downgraded")."""
    start = starts["575", "fm"]
    node = Node(oracle, start, tmp_path)
    before = node.nvidia()
    values = run_upgrade(runbook, node)
    node.use_repository(oracle_without_start)
    printed = run_rollback(runbook, node, values, OLD_DNF_REINSTALL)
    assert "Package nvidia-fabric-manager not installed, cannot downgrade it." in printed[1]
    after = node.nvidia()
    assert {n: e for n, e in after.items() if before.get(n) != e} == {
        "kmod-nvidia-580.95.05-5.14.0-570.49.1": "3:580.95.05-3.el9_6",
        "libnvidia-nscq": "580.95.05-1",
        "nvidia-fabricmanager": "580.95.05-1",
    }
    assert {"nvidia-fabric-manager", "libnvidia-nscq-575"} & set(after) == set()
