"""The repositories' real metadata (README.md beside this file), read once per process.

The simulated apt resolves over these stanzas and nothing else, and the package
differential asks the real apt-get over the same files: the simulator's packaging can
only be what the repositories publish.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from cockpit.sim.debcontrol import Package, parse_stanzas

#: name -> the Packages file (relative to this folder) a simulated Ubuntu node's apt lists carry
APT_REPOSITORIES: dict[str, str] = {
    "cuda-ubuntu2404": "cuda-ubuntu/ubuntu2404.Packages",
    "cuda-ubuntu2204": "cuda-ubuntu/ubuntu2204.Packages",
    "archive-noble": "ubuntu-archive/noble.Packages",
    "archive-jammy": "ubuntu-archive/jammy.Packages",
}

#: names of NVIDIA's packages (a relation on one of these is never met by the base system)
NVIDIA_PREFIXES = ("nvidia-", "libnvidia-", "linux-modules-nvidia-", "linux-objects-nvidia-", "cuda-")
#: ...except these, which Ubuntu builds from other sources (egl-wayland)
NOT_NVIDIA = frozenset({"libnvidia-egl-wayland1"})


def read_text(relative: str) -> str:
    """One of the metadata files, by its path under this folder."""
    return resources.files(__name__).joinpath(relative).read_text(encoding="utf-8")


@cache
def apt_repository(name: str) -> tuple[Package, ...]:
    """Every package version one repository offers, as its stanzas say."""
    return tuple(Package.of(s) for s in parse_stanzas(read_text(APT_REPOSITORIES[name])) if "Version" in s)


@cache
def base_names(name: str) -> frozenset[str]:
    """The names the repository's packages depend on that it does not carry itself (libc6,
    dkms, the kernel): the base system has them, on a simulated node as on the real resolver's
    scratch system."""
    packages = apt_repository(name)
    carried = {p.name for p in packages} | {r.name for p in packages for r in p.provides()}
    wanted = {r.name for p in packages for group in p.depends() for r in group}
    # an NVIDIA name the repository does not carry is missing, not the base system's
    return frozenset(n for n in wanted - carried if n in NOT_NVIDIA or not n.startswith(NVIDIA_PREFIXES))
