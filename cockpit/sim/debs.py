"""What the simulated apt's lists carry: a repository's real stanzas (:mod:`cockpit.sim.repos`),
the container toolkit beside them, and which driver release a package version installs.

Nothing here states a relation between packages: those are the repositories' own
(``Depends``, ``Provides``, ``Conflicts`` as published), resolved by
:mod:`cockpit.sim.apt_resolve`. A scenario that changes the repository (a mirror whose
fabric manager lags, an index that moved on to a newer point release) changes versions
only, and the stanzas keep their relations with the new version written in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cockpit.sim import repos
from cockpit.sim.debcontrol import Package
from cockpit.sim.smi import DriverRelease

TOOLKIT_VERSION = "1.17.8-1"
TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container1",
    "libnvidia-container-tools",
)
#: the point release that replaced 575.57.08 in an index that keeps only the newest (NVIDIA's 575 branch)
SUPERSEDING_575 = "575.64.05"
#: the older 580 point release a lagging mirror still has (NVIDIA's 580 branch: 580.82.07, then 580.95.05)
OLDER_580 = "580.82.07"

#: the CUDA version each branch's driver supports at most (nvidia-smi's "CUDA Version")
CUDA_CEILING = {"535": "12.2", "550": "12.4", "570": "12.8", "575": "12.9", "580": "13.0", "590": "13.1"}


def upstream(version: str) -> str:
    """The driver's own version in a package version: ``580.95.05-0ubuntu1`` -> ``580.95.05``."""
    return version.split(":", 1)[-1].split("-", 1)[0]


def release_of(version: str) -> DriverRelease | None:
    """The driver release a package version installs, None where it is no driver's version."""
    up = upstream(version)
    if not re.fullmatch(r"\d{3}\.\d+(?:\.\d+)?", up):
        return None
    branch = up.split(".", 1)[0]
    return DriverRelease(up, CUDA_CEILING.get(branch, "13.0"))


def toolkit_packages() -> list[Package]:
    return [
        Package(name, TOOLKIT_VERSION, (("Architecture", "amd64"), ("Source", "libnvidia-container")))
        for name in TOOLKIT_PACKAGES
    ]


def index_of(repository: str) -> list[Package]:
    """Every package version the node's lists offer: the repository's stanzas and the container toolkit."""
    return [*repos.apt_repository(repository), *toolkit_packages()]


def rewritten(pkg: Package, old: str, new: str) -> Package:
    """``pkg`` as the same upload of driver release ``new`` instead of ``old``: its version and every
    relation that names ``old`` (the exact-version Depends of a metapackage) follow."""
    fields = tuple((k, v.replace(old, new)) for k, v in pkg.fields)
    return Package(pkg.name.replace(old, new), pkg.version.replace(old, new), fields)


def with_release(
    packages: Iterable[Package], old: str, new: str, *, names: Iterable[str] | None = None
) -> list[Package]:
    """The index with every package of driver release ``old`` (or only those ``names``) moved to ``new``:
    what a mirror carries once the branch moved on (Ubuntu's -updates keeps only the newest)."""
    only = set(names) if names is not None else None
    return [
        rewritten(p, old, new) if upstream(p.version) == old and (only is None or p.name in only) else p
        for p in packages
    ]
