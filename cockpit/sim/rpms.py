"""What the simulated dnf knows about NVIDIA's RPMs on RHEL: names, versions, module streams.

The repository is NVIDIA's CUDA repository for RHEL 9 as cockpit/sim/repos/rhel9 records
it (:mod:`cockpit.sim.rhel_repo`): every package version, the streams that carry it, and
each stream's profiles come from those files, so the simulator cannot offer a package,
a stream or a profile the repository does not. What this module adds is how to read them:

- the module ``nvidia-driver`` has, per branch, the precompiled stream (``580``: kmods built
  for given kernels), the proprietary DKMS one (``580-dkms``) and the open one (``580-open``);
  a precompiled stream's profiles name no kmod (nvidia-kmod-common requires one: the
  stream's own is it);
- fabric manager and nscq are ``nvidia-fabric-manager`` and ``libnvidia-nscq-575`` up to 575,
  ``nvidia-fabricmanager`` and ``libnvidia-nscq`` from 580, what each branch's ``fm`` profile
  adds to its default; a switch across them, or across kmod flavours, replaces packages,
  which dnf does only with ``--allowerasing`` (NVIDIA Driver Installation Guide, "Advanced
  Options"); nscq is no module artifact (a package outside every stream).

The simulator resolves no Requires: it installs a profile's packages. The package
differential (tests/core/test_dnf_differential.py) holds what it installs, step by step of
the runbook, to the real dnf over the same files. NVIDIA's repository keeps every version of
a branch; a scenario can make it keep only the newer ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from cockpit.sim import rhel_repo
from cockpit.sim.smi import RELEASES, DriverRelease

ARCH = "x86_64"
DIST = "el9"
DRIVER_EPOCH = 3
#: the point release that replaced 575.57.08 where the repository keeps only the newest
SUPERSEDING_575 = DriverRelease("575.64.05", "12.9")
TOOLKIT_RPM = ("nvidia-container-toolkit", "1.17.8", "1")

KMOD = {False: "kmod-nvidia-latest-dkms", True: "kmod-nvidia-open-dkms"}
#: the packages NVIDIA builds as noarch (cockpit/sim/repos/rhel9/packages.txt, SOURCES.md): their files are
#: ``NAME-V-R.noarch.rpm``, the names the runbook's save and rollback steps match files by
NOARCH = frozenset(e.name for e in rhel_repo.packages() if e.arch == "noarch")
#: every name fabric manager and nscq went by (fabric_names gives a branch's)
FABRIC = ("nvidia-fabric-manager", "nvidia-fabricmanager", "libnvidia-nscq")
#: the driver's own packages: what any stream's default profile installs (the kmods besides)
DRIVER_SET = frozenset(n for streams in rhel_repo.profiles().values() for n in streams.get("default", ()))
PROFILES = ("default", "fm", "ks", "src")


@dataclass(frozen=True, order=True)
class Rpm:
    """One package version as the repository or a downloaded file carries it."""

    name: str
    version: str  # upstream, 580.95.05
    release: str  # 1.el9 for the driver, 1 for the fabric manager
    epoch: int = 0
    stream: str | None = None  # the module stream that carries it (None: not modular)

    @property
    def arch(self) -> str:
        """``noarch`` for the packages NVIDIA builds so, else the node's architecture."""
        return "noarch" if self.name in NOARCH else ARCH

    @property
    def evr(self) -> str:
        return (f"{self.epoch}:" if self.epoch else "") + f"{self.version}-{self.release}"

    @property
    def nevra(self) -> str:
        return f"{self.name}-{self.evr}.{self.arch}"

    @property
    def nvra(self) -> str:
        return f"{self.name}-{self.version}-{self.release}.{self.arch}"

    @property
    def filename(self) -> str:
        return self.nvra + ".rpm"

    def control(self) -> str:
        """What stands for the file's contents on the simulated disk: its header fields."""
        return (
            f"Name: {self.name}\nEpoch: {self.epoch}\nVersion: {self.version}\nRelease: {self.release}\n"
            f"Stream: {self.stream or ''}\n"
        )

    @staticmethod
    def parse(text: str) -> Rpm | None:
        fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
        if not {"Name", "Version", "Release"} <= fields.keys():
            return None
        return Rpm(
            fields["Name"], fields["Version"], fields["Release"], int(fields.get("Epoch", "0")), fields.get("Stream")
        )

    def key(self) -> tuple[tuple[int, ...], str]:
        return tuple(int(x) for x in self.version.split(".")), self.release


def is_driver_part(name: str) -> bool:
    return name in DRIVER_SET or name.startswith("kmod-nvidia-")


def is_fabric(name: str) -> bool:
    return name in FABRIC or name.startswith("libnvidia-nscq-")


def fabric_names(branch: str) -> tuple[str, ...]:
    """Fabric manager's and nscq's names on a branch, as its fm profile adds them to the default
    (renamed at 580: nvidia-fabricmanager and libnvidia-nscq)."""
    streams = rhel_repo.profiles()
    profiles = streams.get(f"{branch}-dkms") or streams.get(branch) or {}
    default = set(profiles.get("default", ()))
    return tuple(n for n in profiles.get("fm", ()) if n not in default)


def family(name: str) -> str:
    """What a package is, whatever it is called on a branch or flavour: the kmod, fabric manager,
    nscq, or itself (a newer one replaces an installed member of its family)."""
    if name in KMOD.values():
        return "kmod"
    if name in ("nvidia-fabric-manager", "nvidia-fabricmanager"):
        return "fabric-manager"
    if name.startswith("libnvidia-nscq"):
        return "nscq"
    return name


#: how the module is packaged in a stream: its name's suffix says
OPEN, DKMS, PRECOMPILED = "open", "dkms", "precompiled"


def stream_kind(stream: str) -> str:
    """``580-open``: open DKMS; ``580-dkms``: proprietary DKMS; ``580``: NVIDIA's precompiled kmods."""
    if stream.endswith("-open"):
        return OPEN
    return DKMS if stream.endswith("-dkms") else PRECOMPILED


def stream_of(release: DriverRelease, kind: str) -> str:
    return release.branch + {OPEN: "-open", DKMS: "-dkms", PRECOMPILED: ""}[kind]


def _rpms(entries: Iterable[rhel_repo.RpmEntry]) -> list[Rpm]:
    """The repository's entries as the package versions each of their streams offers."""
    return [Rpm(e.name, e.version, e.release, e.epoch, stream) for e in entries for stream in (e.streams or (None,))]


def stream_rpms(stream: str) -> list[Rpm]:
    """Every package the stream offers (its artifacts)."""
    return [p for p in repository() if p.stream == stream]


def profile_names(profile: str, stream: str, release: DriverRelease) -> list[str]:
    """The packages a profile installs, as modules.yaml lists them; on a precompiled stream the
    profile names no kmod (nvidia-kmod-common requires one, and the stream's kmod is it)."""
    names = list(rhel_repo.profiles().get(stream, {}).get(profile, ()))
    if stream_kind(stream) == PRECOMPILED:
        names += sorted({p.name for p in stream_rpms(stream) if p.name.startswith("kmod-nvidia-")})
    return names


def repository() -> list[Rpm]:
    """Every package version NVIDIA's repository offers (cockpit/sim/repos/rhel9), and the container toolkit."""
    name, version, rel = TOOLKIT_RPM
    return [*_rpms(rhel_repo.packages()), Rpm(name, version, rel)]


def superseded(old: str, new: str) -> list[Rpm]:
    """The repository's packages of release ``old`` as the same builds of ``new``: what a mirror
    carries once it keeps only the newest point release."""
    moved = [replace(e, name=e.name.replace(old, new), version=new) for e in rhel_repo.packages() if e.version == old]
    return _rpms(moved)


def release_of(version: str) -> DriverRelease | None:
    for release in (*RELEASES.values(), SUPERSEDING_575):
        if release.version == version:
            return release
    return None


def preinstalled_rpms(release: DriverRelease, *, kind: str, nvswitch: bool) -> list[Rpm]:
    """A RHEL node's packages before the change: the fm (or default) profile of its stream, the toolkit."""
    stream = stream_of(release, kind)
    names = set(profile_names("fm" if nvswitch else "default", stream, release))
    rpms = [p for p in stream_rpms(stream) if p.name in names]
    # what the profile names outside every stream (nscq is no module artifact), at its newest
    outside = [p for p in repository() if p.stream is None and p.name in names - {q.name for q in rpms}]
    rpms += [max((p for p in outside if p.name == n), key=Rpm.key) for n in sorted({p.name for p in outside})]
    name, version, rel = TOOLKIT_RPM
    return [*rpms, Rpm(name, version, rel)]
