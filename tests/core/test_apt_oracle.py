"""The apt oracle (tests/apt_oracle.py) answers as the real apt-get does, on small made-up stanzas.

Differential tests hold the simulator's apt-get to the oracle's answer, so the oracle itself is
checked here on the situations a driver change window meets: an exact-version metapackage, a
Provides/Conflicts swap between branches, a dependency nothing satisfies, a hold, a rollback
from saved .debs, a pinning preferences file, a download. Everything runs in pytest's tmp dirs
over file: sources; the host's dpkg status and /etc/apt are never written.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from apt_oracle import AptOracle, Repository, Stanza, Unmet, compare_versions, parse_stanzas
from package_cells import require_apt


@pytest.fixture(autouse=True)
def _needs_apt() -> None:
    """Skip where Debian's tools are absent (a Fedora or macOS laptop); in CI they must be there."""
    require_apt()


@pytest.fixture(scope="module")
def deb_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One .deb cache for the module: a dummy package is built once however many tests save it."""
    return tmp_path_factory.mktemp("deb-cache")


REPO = """\
Package: libdrv-compute-580
Version: 580.95.05-0ubuntu1
Architecture: amd64
Source: drv-580

Package: libdrv-compute-580
Version: 580.82.07-0ubuntu1
Architecture: amd64
Source: drv-580

Package: drv-580
Version: 580.95.05-0ubuntu1
Architecture: amd64
Source: drv-580
Depends: libdrv-compute-580 (= 580.95.05-0ubuntu1),
 drv-utils-580 (= 580.95.05-0ubuntu1)
Description: the metapackage
 of the 580 branch.

Package: drv-580
Version: 580.82.07-0ubuntu1
Architecture: amd64
Source: drv-580
Depends: libdrv-compute-580 (= 580.82.07-0ubuntu1), drv-utils-580 (= 580.82.07-0ubuntu1)

Package: drv-utils-580
Version: 580.95.05-0ubuntu1
Architecture: amd64
Source: drv-580

Package: fm-570
Version: 570.172.08-1
Architecture: amd64
Provides: fm
Conflicts: fm
Replaces: fm

Package: fm-580
Version: 580.95.05-1
Architecture: amd64
Provides: fm
Conflicts: fm
Replaces: fm
"""

OLD, NEW = "580.82.07-0ubuntu1", "580.95.05-0ubuntu1"


def test_parse_stanzas_keeps_fields_and_joins_continuations() -> None:
    stanzas = parse_stanzas(REPO)
    assert len(stanzas) == 7
    meta = stanzas[2]
    assert (meta.package, meta.version, meta.architecture, meta.source) == ("drv-580", NEW, "amd64", "drv-580")
    assert meta.depends == f"libdrv-compute-580 (= {NEW}), drv-utils-580 (= {NEW})"
    assert meta.get("description") == "the metapackage\nof the 580 branch."
    assert parse_stanzas(meta.text()) == [meta]  # round trip, continuation lines included
    assert stanzas[5].provides == stanzas[5].conflicts == "fm"


@pytest.mark.parametrize(
    ("a", "b"), [("1.0", "1.0-0"), ("1.0~rc1", "1.0"), ("1:1.0", "2.0"), ("580.95.05-0ubuntu1", "580.9.5-0ubuntu1")]
)
def test_version_order_is_dpkgs(a: str, b: str) -> None:
    order = compare_versions(a, b)
    for op, expected in (("lt", order < 0), ("eq", order == 0), ("gt", order > 0)):
        done = subprocess.run(["dpkg", "--compare-versions", a, op, b], check=False)
        assert (done.returncode == 0) == expected, (a, op, b)


def test_a_metapackage_with_exact_version_depends_resolves(tmp_path: Path, deb_cache: Path) -> None:
    oracle = AptOracle(tmp_path, [parse_stanzas(REPO)], deb_cache=deb_cache)
    answer = oracle.run(["apt-get", "-o", "DPkg::Lock::Timeout=120", "install", "-y", "drv-580=580.95.05*"])
    assert answer.ok, answer.output
    assert answer.install == {"drv-580": NEW, "libdrv-compute-580": NEW, "drv-utils-580": NEW}
    assert answer.changes["drv-580"] == (None, NEW)
    assert answer.command[:1] == ("apt-get",) and "-s" in answer.command  # simulated, never dpkg

    oracle.apply(answer)
    assert oracle.installed() == {"drv-580": NEW, "libdrv-compute-580": NEW, "drv-utils-580": NEW}
    assert oracle.auto() == {"libdrv-compute-580", "drv-utils-580"}  # as apt-get marks what it pulled in
    assert oracle.run(["apt-get", "install", "-y", "drv-580"]).changes == {}  # nothing left to do


def test_a_provides_conflicts_swap_removes_the_other_branch(tmp_path: Path, deb_cache: Path) -> None:
    fm_570 = parse_stanzas(REPO)[5]
    oracle = AptOracle(tmp_path, [parse_stanzas(REPO)], installed=[fm_570], deb_cache=deb_cache)
    answer = oracle.run(["apt-get", "install", "-y", "fm-580"])
    assert answer.ok, answer.output
    assert answer.remove == {"fm-570": "570.172.08-1"}
    assert answer.install == {"fm-580": "580.95.05-1"}
    oracle.apply(answer)
    assert oracle.installed() == {"fm-580": "580.95.05-1"}


def test_an_exact_version_depends_nothing_satisfies_is_refused(tmp_path: Path, deb_cache: Path) -> None:
    # the index no longer carries drv-utils-580 at OLD
    oracle = AptOracle(tmp_path, [parse_stanzas(REPO)], deb_cache=deb_cache)
    answer = oracle.run(["apt-get", "install", "-y", f"drv-580={OLD}"])
    assert answer.returncode == 100
    # apt names every exact Depends it gave up on, even libdrv-compute-580's, which the index could satisfy
    assert answer.unmet == (
        Unmet("drv-580", f"Depends: libdrv-compute-580 (= {OLD}) but {NEW} is to be installed"),
        Unmet("drv-580", f"Depends: drv-utils-580 (= {OLD}) but it is not going to be installed"),
    )
    assert answer.held_broken
    assert answer.failure == "Unable to correct problems, you have held broken packages."

    missing = oracle.run(["apt-get", "install", "-y", "drv-580=1.0"])
    assert missing.not_found == (("drv-580", "1.0"),) and missing.returncode == 100


def test_a_held_package_blocks_under_y(tmp_path: Path, deb_cache: Path) -> None:
    stanzas = parse_stanzas(REPO)
    old_lib = Stanza.of("libdrv-compute-580", OLD, "amd64", source="drv-580")
    oracle = AptOracle(tmp_path, [stanzas], installed=[old_lib], held=["libdrv-compute-580"], deb_cache=deb_cache)
    assert oracle.run(["apt-mark", "showhold"]).lines == ["libdrv-compute-580"]

    answer = oracle.run(["apt-get", "install", "-y", "libdrv-compute-580"])
    assert answer.returncode == 100
    assert answer.held_changed == ("libdrv-compute-580",)
    assert answer.failure == "Held packages were changed and -y was used without --allow-change-held-packages."

    # apt-mark works on the scratch status (through the oracle's dpkg, which only knows the scratch admin dir)
    host = Path("/var/lib/dpkg/status")
    before = hashlib.sha256(host.read_bytes()).hexdigest() if host.exists() else None
    assert oracle.run(["apt-mark", "unhold", "libdrv-compute-580"]).ok
    assert oracle.held() == set()
    assert oracle.run(["apt-get", "install", "-y", "libdrv-compute-580"]).upgrade == {"libdrv-compute-580": NEW}
    assert oracle.run(["apt-mark", "hold", "libdrv-compute-580"]).ok
    assert oracle.held() == {"libdrv-compute-580"}
    assert (hashlib.sha256(host.read_bytes()).hexdigest() if host.exists() else None) == before


def test_a_downgrade_from_saved_debs_needs_allow_downgrades(tmp_path: Path, deb_cache: Path) -> None:
    stanzas = parse_stanzas(REPO)
    saved = {
        f"/root/rollback/{s.package}_{s.version}_amd64.deb": s
        for s in stanzas
        if s.version == OLD and s.package in ("drv-580", "libdrv-compute-580")
    }
    saved["/root/rollback/drv-utils-580_OLD_amd64.deb"] = Stanza.of("drv-utils-580", OLD, "amd64", source="drv-580")
    installed = [s for s in stanzas if s.version == NEW]
    oracle = AptOracle(tmp_path, [stanzas], installed=installed, local_debs=saved, deb_cache=deb_cache)
    assert oracle.node_path("/root/rollback/drv-utils-580_OLD_amd64.deb").is_file()

    refused = oracle.run(["apt-get", "install", "-y", *saved])
    assert refused.returncode == 100
    assert refused.failure == "Packages were downgraded and -y was used without --allow-downgrades."

    answer = oracle.run(["apt-get", "install", "-y", "--allow-downgrades", "/root/rollback/*.deb"])
    assert answer.ok, answer.output
    assert answer.downgrade == {"drv-580": OLD, "libdrv-compute-580": OLD, "drv-utils-580": OLD}
    # the node's glob became the saved files' scratch paths, as the node's shell would expand it
    assert sorted(a for a in answer.command if a.endswith(".deb")) == sorted(str(oracle.node_path(p)) for p in saved)
    oracle.apply(answer)
    assert set(oracle.installed().values()) == {OLD}


def test_a_preferences_pin_restricts_a_glob(tmp_path: Path, deb_cache: Path) -> None:
    branches = [
        Stanza.of("drv", version, "amd64", depends=f"drv-libs (= {version})") for version in ("580.95-1", "590.44-1")
    ] + [Stanza.of("drv-libs", version, "amd64") for version in ("580.95-1", "590.44-1")]
    oracle = AptOracle(tmp_path, [branches], deb_cache=deb_cache)
    assert oracle.run(["apt-get", "install", "drv"]).install == {"drv": "590.44-1", "drv-libs": "590.44-1"}

    oracle.set_preferences("drv-pinning", "Package: drv*\nPin: version 580.*\nPin-Priority: 1000\n")
    assert oracle.run(["apt-get", "install", "drv"]).install == {"drv": "580.95-1", "drv-libs": "580.95-1"}
    policy = oracle.run(["apt-cache", "policy", "drv-libs"]).lines
    assert "  Candidate: 580.95-1" in policy


def test_a_repository_priority_pins_a_pocket(tmp_path: Path, deb_cache: Path) -> None:
    main = [Stanza.of("tool", "1.0-1")]
    proposed = Repository([Stanza.of("tool", "2.0-1")], pocket="noble-proposed", priority=100)
    oracle = AptOracle(tmp_path, [Repository(main, pocket="noble"), proposed], deb_cache=deb_cache)
    assert oracle.run(["apt-get", "install", "tool"]).install == {"tool": "1.0-1"}
    assert oracle.run(["apt-get", "install", "-t", "noble-proposed", "tool"]).install == {"tool": "2.0-1"}


def test_download_only_builds_just_the_debs_it_fetches(tmp_path: Path, deb_cache: Path) -> None:
    stanzas = parse_stanzas(REPO)
    oracle = AptOracle(tmp_path, [stanzas], installed=[s for s in stanzas if s.version == NEW], deb_cache=deb_cache)
    answer = oracle.run(["apt-get", "install", "--reinstall", "--download-only", "-y", "drv-580"])
    assert answer.ok, answer.output
    assert "-s" not in answer.command
    assert answer.downloaded == {"drv-580": NEW}
    assert oracle.timings["build_debs_count"] == 1
    assert "Download complete and in download only mode" in answer.output

    with pytest.raises(ValueError, match="never lets apt-get run dpkg"):
        oracle.run(["apt-get", "install", "-y", "drv-580"], simulate=False)
