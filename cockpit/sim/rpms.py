"""What the simulated dnf knows about NVIDIA's RPMs on RHEL: names, versions, module streams.

The packages follow NVIDIA's CUDA repository for RHEL 8/9 (developer.download.nvidia.com/
compute/cuda/repos/rhel9/x86_64):

- the driver's parts carry ``Epoch: 3`` and ``Release: 1%{?dist}`` (NVIDIA/yum-packaging-nvidia-driver,
  nvidia-driver.spec): ``nvidia-driver-3:580.95.05-1.el9``; ``nvidia-driver`` requires
  ``nvidia-driver-libs`` and ``nvidia-kmod-common`` at its own version, ``nvidia-driver-cuda``
  (which carries nvidia-smi) ``nvidia-driver-cuda-libs`` and ``nvidia-persistenced`` at its version;
  the kernel module is ``kmod-nvidia-latest-dkms`` (proprietary) or ``kmod-nvidia-open-dkms``
  (open) (NVIDIA/yum-packaging-dkms-nvidia);
- ``nvidia-fabric-manager`` and ``libnvidia-nscq`` name no driver (NVIDIA/yum-packaging-fabric-manager:
  "the version of fabricmanager must match the NVIDIA driver installed"): nothing moves them
  with the driver but the module's ``fm`` profile, which "installs all of the NVIDIA driver
  packages, as well as Fabric Manager and NSCQ: dnf module install nvidia-driver:${stream}/fm";
- the module ``nvidia-driver`` has, per branch, the proprietary DKMS stream (``580-dkms``) and
  the open one (``580-open``), besides the precompiled stream (``580``: kmods built for given
  kernels, which a simulated node never runs: that packaging is proven against the real dnf
  in tests/core/test_real_packages_dnf.py) (cockpit/sim/repos/rhel9/modules.yaml; NVIDIA Driver
  Installation Guide, "Advanced Options": ``dnf module switch-to nvidia-driver:<stream>
  --allowerasing``), with the profiles default, fm, ks and src;
- fabric manager and nscq are ``nvidia-fabric-manager`` and ``libnvidia-nscq-575`` up to 575,
  ``nvidia-fabricmanager`` and ``libnvidia-nscq`` from 580 (cockpit/sim/repos/rhel9/SOURCES.md):
  a switch across them replaces packages, which dnf does only with ``--allowerasing``.

Unlike Ubuntu's -updates pocket, NVIDIA's repository keeps every version of a branch; a
scenario can make it keep only the newer ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.sim.smi import RELEASES, DriverRelease

ARCH = "x86_64"
DIST = "el9"
DRIVER_EPOCH = 3
#: the 580 point release the repository also carries (NVIDIA's 580 branch: 580.82.07, then 580.95.05)
OLDER_580 = DriverRelease("580.82.07", "13.0")
#: the point release that replaced 575.57.08 where the repository keeps only the newest
SUPERSEDING_575 = DriverRelease("575.64.05", "12.9")
TOOLKIT_RPM = ("nvidia-container-toolkit", "1.17.8", "1")

DRIVER_PARTS = (
    "nvidia-driver",
    "nvidia-driver-libs",
    "nvidia-driver-cuda",
    "nvidia-driver-cuda-libs",
    "nvidia-kmod-common",
    "nvidia-persistenced",
)
KMOD = {False: "kmod-nvidia-latest-dkms", True: "kmod-nvidia-open-dkms"}
#: the packages NVIDIA builds as noarch (cockpit/sim/repos/rhel9/packages.txt, SOURCES.md): their files are
#: ``NAME-V-R.noarch.rpm``, the names the runbook's save and rollback steps match files by
NOARCH = frozenset({"nvidia-kmod-common", *KMOD.values()})
#: every name fabric manager and nscq went by (fabric_names gives a branch's)
FABRIC = ("nvidia-fabric-manager", "nvidia-fabricmanager", "libnvidia-nscq")
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
    return name in DRIVER_PARTS or name.startswith("kmod-nvidia-")


def is_fabric(name: str) -> bool:
    return name in FABRIC or name.startswith("libnvidia-nscq-")


def fabric_names(branch: str) -> tuple[str, str]:
    """Fabric manager's and nscq's names on a branch: renamed at 580."""
    if int(branch) < 580:
        return "nvidia-fabric-manager", f"libnvidia-nscq-{branch}"
    return "nvidia-fabricmanager", "libnvidia-nscq"


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


#: the RHEL kernel each branch's precompiled kmod was built for (cockpit/sim/repos/rhel9/packages.txt)
PRECOMPILED_KERNEL = {"575": "5.14.0-570.23.1", "580": "5.14.0-570.49.1"}
#: how the module is packaged in a stream: its name's suffix says
OPEN, DKMS, PRECOMPILED = "open", "dkms", "precompiled"


def stream_kind(stream: str) -> str:
    """``580-open``: open DKMS; ``580-dkms``: proprietary DKMS; ``580``: NVIDIA's precompiled kmods."""
    if stream.endswith("-open"):
        return OPEN
    return DKMS if stream.endswith("-dkms") else PRECOMPILED


def stream_of(release: DriverRelease, kind: str) -> str:
    return release.branch + {OPEN: "-open", DKMS: "-dkms", PRECOMPILED: ""}[kind]


def kmod_rpm(release: DriverRelease, kind: str, stream: str) -> Rpm:
    """The stream's kernel module package: a DKMS one, or the precompiled kmod named after its
    driver and kernel (``kmod-nvidia-580.95.05-5.14.0-570.49.1``, release 3.el9_6)."""
    if kind == PRECOMPILED:
        kernel = PRECOMPILED_KERNEL.get(release.branch, PRECOMPILED_KERNEL["580"])
        return Rpm(f"kmod-nvidia-{release.version}-{kernel}", release.version, "3.el9_6", DRIVER_EPOCH, stream)
    return Rpm(KMOD[kind == OPEN], release.version, f"1.{DIST}", DRIVER_EPOCH, stream)


def stream_rpms(release: DriverRelease, kind: str) -> list[Rpm]:
    """Every package one release offers in its stream: the driver's parts, its module, fabric manager, nscq."""
    stream = stream_of(release, kind)
    rpms = [Rpm(n, release.version, f"1.{DIST}", DRIVER_EPOCH, stream) for n in DRIVER_PARTS]
    rpms.append(kmod_rpm(release, kind, stream))
    return rpms + [Rpm(n, release.version, "1", 0, stream) for n in fabric_names(release.branch)]


def profile_names(profile: str, stream: str, release: DriverRelease) -> list[str]:
    """The packages a profile installs: default the driver and its module, fm adds fabric manager and nscq."""
    names = [*DRIVER_PARTS, kmod_rpm(release, stream_kind(stream), stream).name]
    return [*names, *fabric_names(release.branch)] if profile == "fm" else names


def repository() -> list[Rpm]:
    """Every package version NVIDIA's repository offers: both flavours of each release, older 580 too."""
    rpms: list[Rpm] = []
    for release in (*RELEASES.values(), OLDER_580):
        for kind in (DKMS, OPEN, PRECOMPILED):
            rpms += stream_rpms(release, kind)
    name, version, rel = TOOLKIT_RPM
    return [*rpms, Rpm(name, version, rel)]


def release_of(version: str) -> DriverRelease | None:
    for release in (*RELEASES.values(), OLDER_580, SUPERSEDING_575):
        if release.version == version:
            return release
    return None


def preinstalled_rpms(release: DriverRelease, *, kind: str, nvswitch: bool) -> list[Rpm]:
    """A RHEL node's packages before the change: the fm (or default) profile of its stream, the toolkit."""
    rpms = [r for r in stream_rpms(release, kind) if nvswitch or not is_fabric(r.name)]
    name, version, rel = TOOLKIT_RPM
    return [*rpms, Rpm(name, version, rel)]
