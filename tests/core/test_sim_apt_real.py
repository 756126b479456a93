"""The simulated apt refuses what the real apt-get refuses, in the same words.

The same scenario runs through the real apt-get (``--simulate`` over a scratch root: a
dummy-package file repository built with dpkg-deb, a scratch dpkg status; no network,
no root) and through the simulator's apt-get: a held package that would change, an
exact-version Depends nothing offers, a version the index no longer carries. The
dummy packages declare the real packages' relations (see cockpit/sim/debs.py).
"""

from __future__ import annotations

import asyncio
import getpass
import shutil
import subprocess
from pathlib import Path

import pytest
from sim_nodes import quick_node

from cockpit.sim.debcontrol import Package
from cockpit.sim.scenarios import SCENARIOS

pytestmark = pytest.mark.skipif(
    not (shutil.which("dpkg-deb") and shutil.which("apt-get") and shutil.which("dpkg-scanpackages")),
    reason="needs dpkg-deb, dpkg-scanpackages and apt-get (present on Debian and Ubuntu)",
)

OLD = "575.57.08-0ubuntu0.24.04.1"
NEW = "575.64.05-0ubuntu0.24.04.1"  # the point release that replaced OLD in the index


def _deb(out: Path, name: str, version: str, extra: str = "") -> Path:
    root = out / f"build-{name}-{version}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: t <t@example.org>\n"
        f"{extra}Description: dummy\n"
    )
    deb = out / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(root), str(deb)], check=True, capture_output=True)
    return deb


def _status(name: str, version: str, *, held: bool = False, extra: str = "") -> str:
    return (
        f"Package: {name}\nStatus: {'hold' if held else 'install'} ok installed\nVersion: {version}\n"
        f"Architecture: all\nMaintainer: t\n{extra}Description: d\n\n"
    )


FM = "Provides: nvidia-fabricmanager\nConflicts: nvidia-fabricmanager\nReplaces: nvidia-fabricmanager\n"


@pytest.fixture(scope="module")
def real_apt(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """apt-get over a scratch root whose index carries only NEW of the 575 branch, and a held fabric manager."""
    root = tmp_path_factory.mktemp("apt")
    repo = root / "repo"
    repo.mkdir()
    _deb(repo, "libnvidia-compute-575", NEW)
    _deb(repo, "nvidia-driver-575", NEW, f"Depends: libnvidia-compute-575 (= {NEW})\n")
    _deb(repo, "nvidia-fabricmanager-575", NEW, FM)
    saved = root / "saved"
    saved.mkdir()
    _deb(saved, "nvidia-driver-575", OLD, f"Depends: libnvidia-compute-575 (= {OLD})\n")
    packages = subprocess.run(
        ["dpkg-scanpackages", "-m", "."], cwd=repo, check=True, capture_output=True, text=True
    ).stdout
    (repo / "Packages").write_text(packages)
    for d in ("state/lists/partial", "cache/archives/partial", "etc/apt/sources.list.d", "etc/apt/preferences.d"):
        (root / d).mkdir(parents=True)
    (root / "etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
    (root / "state/status").write_text(
        _status("libnvidia-compute-575", "570.0-1") + _status("nvidia-fabricmanager-575", OLD, held=True, extra=FM)
    )
    apt = [
        "apt-get",
        *("-o", f"Dir={root}", "-o", f"Dir::State={root}/state", "-o", f"Dir::State::status={root}/state/status"),
        *("-o", f"Dir::Cache={root}/cache", "-o", f"Dir::Etc={root}/etc/apt", "-o", "Debug::NoLocking=1"),
        *("-o", f"APT::Sandbox::User={getpass.getuser()}"),
    ]
    subprocess.run([*apt, "update"], check=True, capture_output=True)
    return [*apt, str(saved)]


def _real(apt: list[str], *args: str) -> tuple[int, str]:
    *cmd, saved = apt
    argv = [a.replace("SAVED", saved) for a in args]
    done = subprocess.run([*cmd, *argv], capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout + done.stderr


def _stanza(name: str, version: str, extra: str = "") -> Package:
    fields = dict(line.split(": ", 1) for line in extra.splitlines() if line)
    return Package(name, version, tuple(fields.items()))


def _sim(command: str) -> tuple[int, str]:
    """The same on a simulated node moved into the same state: index NEW, fabric manager held, OLD saved."""
    node = quick_node("gpu01", 0, SCENARIOS["happy"])
    pm = node.packages
    pm.index = [
        _stanza("libnvidia-compute-575", NEW),
        _stanza("nvidia-driver-575", NEW, f"Depends: libnvidia-compute-575 (= {NEW})"),
        _stanza("nvidia-fabricmanager-575", NEW, FM),
    ]
    pm.installed = {"libnvidia-compute-575": "570.0-1", "nvidia-fabricmanager-575": OLD}
    pm.stanzas = {"nvidia-fabricmanager-575": _stanza("nvidia-fabricmanager-575", OLD, FM)}
    pm.held = {"nvidia-fabricmanager-575"}
    node.files["/root/saved/nvidia-driver-575_575.57.08-0ubuntu0.24.04.1_amd64.deb"] = (
        f"Package: nvidia-driver-575\nVersion: {OLD}\nDepends: libnvidia-compute-575 (= {OLD})\n"
    )
    out: list[str] = []
    rc = asyncio.run(node.shell().run(command, out.append, out.append, ""))
    return rc, "".join(out)


def test_a_held_package_that_would_change_is_refused_alike(real_apt: list[str]) -> None:
    rc, real = _real(real_apt, "-s", "-y", "install", "nvidia-fabricmanager-575")
    src, sim = _sim("apt-get -s -y install nvidia-fabricmanager-575")
    words = "E: Held packages were changed and -y was used without --allow-change-held-packages."
    assert (rc, src) == (100, 100)
    assert words in real and words in sim
    assert "The following held packages will be changed:\n  nvidia-fabricmanager-575" in real
    assert "The following held packages will be changed:\n  nvidia-fabricmanager-575" in sim


def test_an_exact_version_dependency_nothing_offers_is_refused_alike(real_apt: list[str]) -> None:
    # the saved metapackage alone: its component at OLD is no longer in the index
    rc, real = _real(real_apt, "-s", "-y", "install", "SAVED/nvidia-driver-575_575.57.08-0ubuntu0.24.04.1_all.deb")
    src, sim = _sim("apt-get -s -y install /root/saved/nvidia-driver-575_575.57.08-0ubuntu0.24.04.1_amd64.deb")
    # apt names the version it keeps: the installed one (570.0-1 here), else the candidate
    unmet = f" nvidia-driver-575 : Depends: libnvidia-compute-575 (= {OLD}) but 570.0-1 is to be installed"
    assert (rc, src) == (100, 100)
    assert unmet in real and unmet in sim
    assert "E: Unable to correct problems, you have held broken packages." in real
    assert "E: Unable to correct problems, you have held broken packages." in sim


def test_a_version_the_index_no_longer_carries_is_not_found_alike(real_apt: list[str]) -> None:
    rc, real = _real(real_apt, "-s", "-y", "install", f"nvidia-driver-575={OLD}")
    src, sim = _sim(f"apt-get -s -y install nvidia-driver-575={OLD}")
    words = f"E: Version '{OLD}' for 'nvidia-driver-575' was not found"
    assert (rc, src) == (100, 100)
    assert words in real and words in sim


def test_a_version_glob_finds_the_index_version_alike(real_apt: list[str]) -> None:
    rc, real = _real(real_apt, "-s", "-y", "install", "nvidia-driver-575=575.64.05*")
    src, sim = _sim("apt-get -s -y install nvidia-driver-575=575.64.05'*'")
    assert (rc, src) == (0, 0)
    assert f"Inst nvidia-driver-575 ({NEW}" in real and f"Inst nvidia-driver-575 ({NEW}" in sim
