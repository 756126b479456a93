"""The dnf oracle (tests/dnf_oracle.py) itself: that it builds a repository the real dnf resolves over,
and reads dnf's answers right, before differential tests trust it to judge the simulator."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dnf_oracle import (
    DnfOracle,
    DnfRoot,
    ModuleState,
    RpmStanza,
    default_cache_dir,
    modules_yaml,
    parse_dnf_output,
    parse_rpm_stanzas,
    require_dnf_oracle,
    split_relations,
)

#: two streams of nvidia-driver; the proprietary kmod (575-dkms) and the open one (580-open) conflict
SAMPLE = """
Name: dkms
Version: 3.1.0
Release: 1.el9
Arch: noarch
Stream:

Name: nvidia-driver
Epoch: 3
Version: 575.57.08
Release: 1.el9
Arch: x86_64
Stream: 575-dkms
Requires: nvidia-kmod-common = 3:575.57.08
Provides: nvidia-driver(x86-64) = 3:575.57.08-1.el9

Name: nvidia-kmod-common
Epoch: 3
Version: 575.57.08
Release: 1.el9
Arch: noarch
Stream: 575-dkms
Requires: nvidia-kmod = 3:575.57.08, (kmod-nvidia-latest-dkms or kmod-nvidia-open-dkms)

Name: kmod-nvidia-latest-dkms
Epoch: 3
Version: 575.57.08
Release: 1.el9
Arch: x86_64
Stream: 575-dkms
Requires: dkms
Provides: nvidia-kmod = 3:575.57.08
Conflicts: kmod-nvidia-open-dkms

Name: nvidia-fabric-manager
Version: 575.57.08
Release: 1
Arch: x86_64
Stream: 575-dkms
Requires: nvidia-driver = 3:575.57.08

Name: nvidia-driver
Epoch: 3
Version: 580.82.07
Release: 1.el9
Arch: x86_64
Stream: 580-open
Requires: nvidia-kmod-common = 3:580.82.07

Name: nvidia-kmod-common
Epoch: 3
Version: 580.82.07
Release: 1.el9
Arch: noarch
Stream: 580-open
Requires: nvidia-kmod = 3:580.82.07

Name: kmod-nvidia-open-dkms
Epoch: 3
Version: 580.82.07
Release: 1.el9
Arch: x86_64
Stream: 580-open
Requires: dkms
Provides: nvidia-kmod = 3:580.82.07
Conflicts: kmod-nvidia-latest-dkms

Name: nvidia-fabric-manager
Version: 580.82.07
Release: 1
Arch: x86_64
Stream: 580-open
Requires: nvidia-driver = 3:580.82.07

Name: nvidia-driver
Epoch: 3
Version: 580.95.05
Release: 1.el9
Arch: x86_64
Stream: 580-open
Requires: nvidia-kmod-common = 3:580.95.05

Name: nvidia-kmod-common
Epoch: 3
Version: 580.95.05
Release: 1.el9
Arch: noarch
Stream: 580-open
Requires: nvidia-kmod = 3:580.95.05

Name: kmod-nvidia-open-dkms
Epoch: 3
Version: 580.95.05
Release: 1.el9
Arch: x86_64
Stream: 580-open
Requires: dkms
Provides: nvidia-kmod = 3:580.95.05
Conflicts: kmod-nvidia-latest-dkms

Name: nvidia-fabric-manager
Version: 580.95.05
Release: 1
Arch: x86_64
Stream: 580-open
Requires: nvidia-driver = 3:580.95.05
"""

KMOD = {"575-dkms": "kmod-nvidia-latest-dkms", "580-open": "kmod-nvidia-open-dkms"}
PROFILES = {
    stream: {"default": ["nvidia-driver", kmod], "fm": ["nvidia-driver", kmod, "nvidia-fabric-manager"]}
    for stream, kmod in KMOD.items()
}
STANZAS = parse_rpm_stanzas(SAMPLE)


def _at(version: str) -> list[RpmStanza]:
    """One driver version's packages, plus the non-modular dkms they need."""
    return [s for s in STANZAS if s.version == version or s.name == "dkms"]


@pytest.fixture(scope="module")
def oracle() -> DnfOracle:
    require_dnf_oracle()
    return DnfOracle(STANZAS, modules_yaml(STANZAS, PROFILES), default_cache_dir())


@pytest.fixture
def on_575(oracle: DnfOracle, tmp_path: Path) -> DnfRoot:
    """A node on the proprietary 575-dkms stream with its fm profile installed."""
    return oracle.make_root(tmp_path / "root", installed=_at("575.57.08"), module=ModuleState("575-dkms", ("fm",)))


def test_stanzas_keep_rich_dependencies_whole() -> None:
    """A comma inside ``(a or b)`` must not split the relation: rpm would reject the halves."""
    assert split_relations("a = 1, (b or c), (d if (e, f))") == ("a = 1", "(b or c)", "(d if (e, f))")
    kmod_common = STANZAS[2]
    assert kmod_common.requires == ("nvidia-kmod = 3:575.57.08", "(kmod-nvidia-latest-dkms or kmod-nvidia-open-dkms)")
    assert (kmod_common.nevra, kmod_common.arch, STANZAS[0].evr) == (
        "nvidia-kmod-common-3:575.57.08-1.el9.noarch",
        "noarch",
        "3.1.0-1.el9",
    )
    assert STANZAS[1].streams == ("575-dkms",) and STANZAS[0].streams == ()


def test_table_rows_with_a_wrapped_name_and_an_obsoleted_package() -> None:
    """dnf puts a name too long for its column on a line of its own; ``replacing`` lines name obsoleted ones."""
    out = (
        "Dependencies resolved.\n" + "=" * 80 + "\n"
        " Package                Arch     Version              Repository       Size\n" + "=" * 80 + "\n"
        "Installing:\n"
        " a-very-long-package-name-that-does-not-fit\n"
        "                        x86_64   3:580.95.05-1.el9    oracle          5.7 k\n"
        "     replacing  old-thing.noarch 1-1\n"
        "Removing:\n"
        " gone                   noarch   1-1                  @System             0  \n\n"
        "Transaction Summary\n" + "=" * 80 + "\nOperation aborted.\n"
    )
    answer = parse_dnf_output(["install", "x"], 1, out, "")
    assert answer.transaction == {
        "Installing": {"a-very-long-package-name-that-does-not-fit": "3:580.95.05-1.el9"},
        "Removing": {"gone": "1-1"},
        "Replacing": {"old-thing": "1-1"},
    }
    assert answer.aborted and answer.resolved


@pytest.mark.slow  # the real dnf resolves, as in the differential tests
def test_switch_to_the_conflicting_open_stream_needs_allowerasing(on_575: DnfRoot) -> None:
    """The open kmod conflicts with the installed proprietary one: without --allowerasing dnf refuses."""
    refused = on_575.run(["module", "switch-to", "nvidia-driver:580-open"])
    assert refused.rc == 1 and not refused.resolved
    assert refused.hints_allowerasing
    assert any("conflicts with kmod-nvidia-open-dkms" in p for p in refused.problems), refused.output

    erasing = on_575.run(["module", "switch-to", "nvidia-driver:580-open/fm", "--allowerasing"])
    assert erasing.resolved and erasing.aborted, erasing.output
    assert erasing.names("Upgrading") == {
        "nvidia-driver": "3:580.95.05-1.el9",
        "nvidia-fabric-manager": "580.95.05-1",
        "nvidia-kmod-common": "3:580.95.05-1.el9",
    }
    assert erasing.names("Removing dependent packages") == {"kmod-nvidia-latest-dkms": "3:575.57.08-1.el9"}
    # the open kmod is in the fm profile, so dnf lists it as profile content, not as a dependency
    assert erasing.names("Installing group/module packages") == {"kmod-nvidia-open-dkms": "3:580.95.05-1.el9"}
    assert "Installing dependencies" not in erasing.transaction
    assert erasing.modules["Switching module streams"] == {"nvidia-driver": "575-dkms -> 580-open"}
    # --assumeno applied nothing
    assert on_575.installed()["nvidia-driver"] == "3:575.57.08-1.el9"
    assert on_575.module_state()["stream"] == "575-dkms"


@pytest.mark.slow  # the real dnf resolves, as in the differential tests
def test_a_missing_package_is_named_and_another_streams_is_filtered(on_575: DnfRoot) -> None:
    """``No match for argument`` names what the repo lacks; a disabled stream's package is filtered out."""
    answer = on_575.run(["install", "nvidia-nope", "nvidia-driver-3:580.95.05-1.el9"])
    assert answer.rc == 1
    assert answer.no_match == ("nvidia-nope",)
    assert answer.filtered == {"nvidia-driver-3:580.95.05-1.el9": "modular"}
    assert any("Unable to find a match" in e for e in answer.errors)


@pytest.mark.slow  # the real dnf resolves, as in the differential tests
def test_downgrade_from_local_files_then_apply(oracle: DnfOracle, tmp_path: Path) -> None:
    """``dnf downgrade ./file.rpm`` takes the built rpms from the command line; applying it moves the rpmdb."""
    root = oracle.make_root(tmp_path / "root", installed=_at("580.95.05"), module=ModuleState("580-open", ("fm",)))
    old = [s for s in _at("580.82.07") if s.name != "dkms"]
    for stanza in old:
        shutil.copy(oracle.rpm_path(stanza), root.root)
    files = [f"./{s.filename}" for s in old]
    asked = root.run(["downgrade", *files])
    assert asked.aborted and {r.repo for r in asked.rows} == {"@commandline"}
    assert asked.names("Downgrading") == {s.name: s.evr for s in old}

    done = root.run(["downgrade", *files], apply=True)
    assert done.rc == 0, done.output
    assert root.installed() == {s.name: s.evr for s in _at("580.82.07")}


@pytest.mark.slow  # the real dnf resolves, as in the differential tests
def test_versionlock_downloadonly_and_reset(oracle: DnfOracle, tmp_path: Path) -> None:
    """A versionlock hides the upgrade; deleting it lets --downloadonly fetch without installing."""
    lock = "nvidia-driver-3:580.82.07-1.el9.*"
    root = oracle.make_root(
        tmp_path / "root", installed=_at("580.82.07"), module=ModuleState("580-open", ("fm",)), versionlocks=[lock]
    )
    assert lock in root.run(["versionlock", "list"]).stdout
    locked = root.run(["upgrade", "nvidia-driver"])  # the lock hides the newer build: nothing to do, rc 0
    assert (locked.rc, locked.nothing_to_do, locked.transaction) == (0, True, {}), locked.output

    assert root.run(["versionlock", "delete", "nvidia-driver"]).rc == 0
    assert root.versionlocks() == []
    dest = tmp_path / "dl"
    fetched = root.run(["upgrade", "--downloadonly", f"--destdir={dest}"], apply=True)
    assert fetched.rc == 0, fetched.output
    assert sorted(p.name for p in dest.iterdir()) == sorted(s.filename for s in _at("580.95.05") if s.name != "dkms")
    assert root.installed()["nvidia-driver"] == "3:580.82.07-1.el9"

    reset = root.run(["module", "reset", "nvidia-driver"], apply=True)
    assert reset.modules["Resetting modules"] == {"nvidia-driver": ""}
    assert root.module_state().get("state", "") == ""
