"""What the simulated apt knows about packages: their relations, the repository index, saved .deb files.

The relations follow the real packages' control fields:

- ``nvidia-driver-BRANCH`` is a metapackage whose Depends pin each component at its own
  version, ``libnvidia-compute-580 (= 580.173.02-0ubuntu0.24.04.1)`` and so on
  (packages.ubuntu.com/noble-updates/nvidia-driver-580);
- ``nvidia-fabricmanager-BRANCH`` depends on nothing of the driver: ``Depends: ${misc:Depends},
  ${shlibs:Depends}``, ``Provides/Conflicts/Replaces: nvidia-fabricmanager``
  (github.com/canonical/apt-packaging-fabric-manager, debian/templates/control.in), so a
  driver install leaves it where it was, and installing another branch's removes the old one;
- ``libnvidia-nscq-BRANCH`` likewise: ``Depends: ${misc:Depends}``, ``Provides: libnvidia-nscq``,
  no Conflicts (github.com/NVIDIA/apt-packaging-libnvidia-nscq, debian/templates/control.in).

The index holds one version per package, the newest: Ubuntu's -updates pocket keeps only
the latest upload of a branch, so an older version cannot be fetched by name any more
(``E: Version '...' for '...' was not found``). A .deb saved on the node stays installable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cockpit.sim.smi import RELEASES, DriverRelease

TOOLKIT_VERSION = "1.17.8-1"
TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container1",
    "libnvidia-container-tools",
)
#: the point release that replaced 575.57.08 in the index (NVIDIA's 575 branch: 575.57.08, then 575.64.05)
SUPERSEDING_575 = DriverRelease("575.64.05", "12.9")


def driver_components(branch: str) -> list[str]:
    return [
        f"libnvidia-compute-{branch}",
        f"nvidia-utils-{branch}",
        f"nvidia-dkms-{branch}-open",
        f"nvidia-kernel-common-{branch}",
    ]


def driver_packages(branch: str) -> list[str]:
    """The driver's packages of a branch, the metapackage last (it is configured after its parts)."""
    return [*driver_components(branch), f"nvidia-driver-{branch}"]


def fabric_packages(branch: str) -> list[str]:
    return [f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}"]


_BRANCHED = re.compile(
    r"(?P<kind>libnvidia-compute|nvidia-utils|nvidia-dkms|nvidia-kernel-common|nvidia-driver|"
    r"nvidia-fabricmanager|libnvidia-nscq)-(?P<branch>\d+)(?P<flavour>-open|-server|-server-open)?$"
)


def branch_of(name: str) -> tuple[str, str] | None:
    """(kind, branch) of an NVIDIA branch package, or None."""
    m = _BRANCHED.match(name)
    return (m.group("kind"), m.group("branch")) if m else None


def source_of(name: str) -> str:
    """``${source:Package}`` as dpkg-query prints it."""
    kb = branch_of(name)
    if kb is None:
        return "libnvidia-container" if "container" in name else name
    kind, branch = kb
    if kind == "nvidia-fabricmanager":
        return f"fabric-manager-{branch}"
    if kind == "libnvidia-nscq":
        return f"libnvidia-nscq-{branch}"
    return f"nvidia-graphics-drivers-{branch}"


def conflicts(a: str, b: str) -> bool:
    """Whether installing ``a`` removes the installed ``b``: another branch of the same driver part,
    or another branch's fabric manager (both provide and conflict with ``nvidia-fabricmanager``).
    nscq branches do not conflict (no Conflicts field)."""
    ka, kb = branch_of(a), branch_of(b)
    if ka is None or kb is None or a == b:
        return False
    return ka[0] == kb[0] and ka[1] != kb[1] and ka[0] != "libnvidia-nscq"


@dataclass(frozen=True)
class Deb:
    """One package version as the index or a saved file carries it."""

    name: str
    version: str

    @property
    def filename(self) -> str:
        # the pool's file name: NAME_VERSION_ARCH.deb, the epoch's colon escaped (none here)
        return f"{self.name}_{self.version}_amd64.deb"

    def depends(self) -> list[Deb]:
        """Exact-version Depends: the driver metapackage on each of its components."""
        kb = branch_of(self.name)
        if kb is None or kb[0] != "nvidia-driver":
            return []
        return [Deb(p, self.version) for p in driver_components(kb[1])]

    def control(self) -> str:
        """What stands for the file's contents on the simulated disk: its control fields."""
        deps = ", ".join(f"{d.name} (= {d.version})" for d in self.depends())
        return (
            f"Package: {self.name}\nVersion: {self.version}\nArchitecture: amd64\n"
            + (f"Depends: {deps}\n" if deps else "")
            + f"Source: {source_of(self.name)}\n"
        )

    @staticmethod
    def parse(text: str) -> Deb | None:
        fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
        if "Package" not in fields or "Version" not in fields:
            return None
        return Deb(fields["Package"], fields["Version"])


def release_of(version: str) -> DriverRelease | None:
    """The driver release a package version belongs to ("580.95.05-0ubuntu0.24.04.1" -> 580.95.05)."""
    upstream = version.split("-", 1)[0]
    for release in (*RELEASES.values(), SUPERSEDING_575):
        if release.version == upstream:
            return release
    return None


def branch_index(release: DriverRelease) -> dict[str, str]:
    return dict.fromkeys([*driver_packages(release.branch), *fabric_packages(release.branch)], release.package_version)


def full_index() -> dict[str, str]:
    """Every package the simulated mirror offers, at its newest version."""
    index: dict[str, str] = {}
    for release in RELEASES.values():
        index.update(branch_index(release))
    index.update(dict.fromkeys(TOOLKIT_PACKAGES, TOOLKIT_VERSION))
    return index


def upstream(version: str) -> str:
    return version.split("-", 1)[0]
