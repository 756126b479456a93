"""A simulated node's platform: its profile (OS, firmware, what holds the GPUs) and the
read-only tools the record step's probe asks about it: ``mokutil``, ``dkms``, ``ls``,
``fuser``, ``apt-config``.

Each answers as the real tool does, cited per command. The shell here does not expand
globs, so ``ls`` and ``fuser`` match their ``*`` arguments against the node's files
themselves, as the shell would have before running them (a glob that matches nothing
stays literal, as in sh).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cockpit.sim.driver import DriverStack
from cockpit.sim.kernel import KERNEL
from cockpit.sim.privilege import ROOT, Login
from cockpit.sim.shell import Io

UBUNTU_2404 = (
    'PRETTY_NAME="Ubuntu 24.04.2 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\n'
    'VERSION="24.04.2 LTS (Noble Numbat)"\nVERSION_CODENAME=noble\n'
    "ID=ubuntu\nID_LIKE=debian\n"
)
#: /etc/os-release of RHEL 9.6 as redhat-release ships it, blank line included (the same text
#: `cat /etc/os-release` prints on an EC2 RHEL 9.6 host and in registry.access.redhat.com/ubi9/ubi),
#: and RHEL 8.10's in the same layout
RHEL_96 = (
    'NAME="Red Hat Enterprise Linux"\nVERSION="9.6 (Plow)"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="9.6"\n'
    'PLATFORM_ID="platform:el9"\nPRETTY_NAME="Red Hat Enterprise Linux 9.6 (Plow)"\nANSI_COLOR="0;31"\n'
    'LOGO="fedora-logo-icon"\nCPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"\n'
    'HOME_URL="https://www.redhat.com/"\n'
    'DOCUMENTATION_URL="https://access.redhat.com/documentation/en-us/red_hat_enterprise_linux/9"\n'
    'BUG_REPORT_URL="https://issues.redhat.com/"\n\n'
    'REDHAT_BUGZILLA_PRODUCT="Red Hat Enterprise Linux 9"\nREDHAT_BUGZILLA_PRODUCT_VERSION=9.6\n'
    'REDHAT_SUPPORT_PRODUCT="Red Hat Enterprise Linux"\nREDHAT_SUPPORT_PRODUCT_VERSION="9.6"\n'
)
RHEL_810 = (
    'NAME="Red Hat Enterprise Linux"\nVERSION="8.10 (Ootpa)"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="8.10"\n'
    'PLATFORM_ID="platform:el8"\nPRETTY_NAME="Red Hat Enterprise Linux 8.10 (Ootpa)"\nANSI_COLOR="0;31"\n'
    'CPE_NAME="cpe:/o:redhat:enterprise_linux:8::baseos"\nHOME_URL="https://www.redhat.com/"\n'
    'DOCUMENTATION_URL="https://access.redhat.com/documentation/en-us/red_hat_enterprise_linux/8"\n'
    'BUG_REPORT_URL="https://bugzilla.redhat.com/"\n\n'
    'REDHAT_BUGZILLA_PRODUCT="Red Hat Enterprise Linux 8"\nREDHAT_BUGZILLA_PRODUCT_VERSION=8.10\n'
    'REDHAT_SUPPORT_PRODUCT="Red Hat Enterprise Linux"\nREDHAT_SUPPORT_PRODUCT_VERSION="8.10"\n'
)
#: nvidia-persistenced's pid on every simulated node (it holds /dev/nvidia* open while it runs)
PERSISTENCED_PID = 2114


@dataclass(frozen=True)
class Holder:
    """A process holding the GPU device files open."""

    pid: int
    command: str  # as fuser shows it: the first 15 characters of the name (the kernel's comm)
    unit: str | None = None  # the systemd unit it runs in


@dataclass(frozen=True)
class NodeProfile:
    """What kind of machine a simulated node is. Ubuntu 24.04 on an HGX H100 by default;
    RHEL 9 and 8 (:data:`RHEL9_PROFILE`, :data:`RHEL8_PROFILE`) answer dnf and rpm, not apt."""

    name: str = "ubuntu-24.04-hgx"
    os_release: str = UBUNTU_2404
    #: None: a BIOS boot, where mokutil finds no EFI variables
    secure_boot: bool | None = False
    nvswitch: bool = True  # an HGX baseboard: /dev/nvidia-nvswitchctl once the driver is loaded
    #: unattended-upgrades.service: "enabled", "disabled", or None when not installed
    unattended_upgrades: str | None = "enabled"
    apt_periodic_unattended: str = "1"  # APT::Periodic::Unattended-Upgrade, as Ubuntu's 20auto-upgrades sets it
    #: query-gpu fields this node's nvidia-smi does not know (an older driver)
    smi_unknown_fields: frozenset[str] = frozenset()
    # -- the pre-change gate's profiles (secure-boot, gpu-holders, containerd-only) --------------
    #: kernels whose headers are installed (linux-headers-K: /lib/modules/K/build -> its Makefile)
    kernel_headers: tuple[str, ...] = (KERNEL,)
    #: who signs the modules DKMS builds (modinfo's signer:), None: unsigned
    module_signer: str | None = None
    #: whether that key is in shim's MOK list (mokutil --list-enrolled); never, on these profiles
    signer_enrolled: bool = False
    #: the container engines installed: a containerd-only Kubernetes node has nerdctl and no docker
    container_engines: tuple[str, ...] = ("docker",)
    #: where a CDI spec was generated at install (nvidia-ctk cdi generate --output=...); None: none
    cdi_spec: str | None = None
    holders: tuple[Holder, ...] = (Holder(PERSISTENCED_PID, "nvidia-persiste", "nvidia-persistenced.service"),)
    extra_files: dict[str, str] = field(default_factory=dict)
    #: apt (dpkg, apt-get, apt-mark: cockpit.sim.packages) or dnf (rpm, dnf: cockpit.sim.dnf);
    #: a node has only its own package manager's commands, the others are "command not found"
    package_manager: str = "apt"
    #: the apt repository its lists carry (cockpit.sim.repos.APT_REPOSITORIES): NVIDIA's CUDA
    #: repository by default, Ubuntu's own archive on the archive profiles
    apt_repository: str = "cuda-ubuntu2404"
    #: what the driver was installed with (apt-get install ...), resolved over that repository
    driver_install: tuple[str, ...] = ("nvidia-driver-575-open",)
    #: what an NVSwitch node installed besides: fabric manager and nscq of the driver's branch
    fabric_install: tuple[str, ...] = ("nvidia-fabricmanager-575", "libnvidia-nscq-575")
    #: on RHEL: the nvidia-driver stream the driver was installed from (575-dkms, 575-open, 575 precompiled)
    dnf_stream: str = "575-dkms"
    #: the GPUs' model, as nvidia-smi names it
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    #: the SSH login: root by default; a user with passwordless sudo, sudo wanting a password, or none
    login: Login = ROOT

    @property
    def module_rejected(self) -> bool:
        """Whether the kernel refuses a newly built module: Secure Boot on, its key not enrolled."""
        return self.secure_boot is True and not self.signer_enrolled


#: NVIDIA's repository in sources.list.d, as its cuda-keyring package writes it (the probe greps for it)
CUDA_SOURCES = (
    "/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list",
    "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
    "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/ /\n",
)

DEFAULT_PROFILE = NodeProfile(extra_files=dict([CUDA_SOURCES]))
#: RHEL 9 on an HGX H100, the driver from NVIDIA's CUDA repository's module stream (fm profile);
#: no unattended-upgrades (dnf-automatic is not installed by default); bash is the login shell
RHEL9_PROFILE = NodeProfile(
    name="rhel-9-hgx", os_release=RHEL_96, unattended_upgrades=None, apt_periodic_unattended="", package_manager="dnf"
)
#: RHEL 9 with NVIDIA's precompiled kmods (stream 575): no DKMS, a kmod built for the kernel
RHEL9_PRECOMPILED_PROFILE = NodeProfile(
    name="rhel-9-hgx-precompiled",
    os_release=RHEL_96,
    unattended_upgrades=None,
    apt_periodic_unattended="",
    package_manager="dnf",
    dnf_stream="575",
)
RHEL8_PROFILE = NodeProfile(
    name="rhel-8-hgx", os_release=RHEL_810, unattended_upgrades=None, apt_periodic_unattended="", package_manager="dnf"
)
#: dcgm-exporter's pid on the gpu-holders profile: it keeps /dev/nvidia* open to read the GPUs' fields
DCGM_EXPORTER_PID = 3377
#: the pids of fabric manager and of two DaemonSet pods' processes on the k8s-holders profile
FABRIC_MANAGER_PID = 3228  # cockpit.sim.services.FM_PID: the pid its journal lines name
DEVICE_PLUGIN_PID = 5521
DCGM_EXPORTER_POD_PID = 5604
#: the pre-change gate's machines: Secure Boot on with the DKMS signing key not enrolled (MokListRT
#: empty), a DCGM exporter holding the GPUs, a containerd-only Kubernetes node (nerdctl, no docker)
GATE_PROFILES: tuple[NodeProfile, ...] = (
    NodeProfile(
        name="ubuntu-24.04-hgx-secure-boot",
        secure_boot=True,
        module_signer="DKMS module signing key",
        extra_files=dict([CUDA_SOURCES]),
    ),
    NodeProfile(
        name="ubuntu-24.04-hgx-dcgm-exporter",
        extra_files=dict([CUDA_SOURCES]),
        holders=(
            Holder(PERSISTENCED_PID, "nvidia-persiste", "nvidia-persistenced.service"),
            Holder(DCGM_EXPORTER_PID, "dcgm-exporter", "dcgm-exporter.service"),
        ),
    ),
    NodeProfile(name="ubuntu-24.04-hgx-containerd", container_engines=("nerdctl",), extra_files=dict([CUDA_SOURCES])),
    # podman takes GPUs through CDI only: its spec generated at install, in /etc/cdi (the
    # toolkit's documented path) or in /var/run/cdi (where its nvidia-cdi-refresh unit writes it)
    NodeProfile(
        name="ubuntu-24.04-hgx-podman",
        container_engines=("podman",),
        cdi_spec="/etc/cdi/nvidia.yaml",
        extra_files=dict([CUDA_SOURCES]),
    ),
    NodeProfile(
        name="ubuntu-24.04-hgx-podman-run-cdi",
        container_engines=("podman",),
        cdi_spec="/var/run/cdi/nvidia.yaml",
        extra_files=dict([CUDA_SOURCES]),
    ),
    # a Kubernetes HGX node after `kubectl drain --ignore-daemonsets`: fabric manager and the
    # device plugin's and dcgm-exporter's DaemonSet pods (no systemd unit of their own) hold the GPUs
    NodeProfile(
        name="ubuntu-24.04-hgx-k8s-holders",
        extra_files=dict([CUDA_SOURCES]),
        holders=(
            Holder(PERSISTENCED_PID, "nvidia-persiste", "nvidia-persistenced.service"),
            Holder(FABRIC_MANAGER_PID, "nv-fabricmanage", "nvidia-fabricmanager.service"),
            Holder(DEVICE_PLUGIN_PID, "nvidia-device-p"),
            Holder(DCGM_EXPORTER_POD_PID, "dcgm-exporter"),
        ),
    ),
)
#: the packaging the change must keep (cockpit/sim/repos): Ubuntu's own archive with its datacenter
#: drivers (-server-open; fabric manager there depends on the -server kernel-common), the same with
#: precompiled kernel modules (linux-restricted-modules, no DKMS), NVIDIA's repository on the 580
#: branch (the move to 590 renames every package), and a Blackwell node (open modules only)
PACKAGING_PROFILES: tuple[NodeProfile, ...] = (
    NodeProfile(
        name="ubuntu-24.04-archive-hgx",
        apt_repository="archive-noble",
        driver_install=("nvidia-driver-570-server-open",),
        fabric_install=("nvidia-fabricmanager-570", "libnvidia-nscq-570"),
    ),
    NodeProfile(
        name="ubuntu-24.04-archive-precompiled",
        apt_repository="archive-noble",
        driver_install=("nvidia-driver-570-server", "linux-modules-nvidia-570-server-generic"),
        fabric_install=("nvidia-fabricmanager-570", "libnvidia-nscq-570"),
    ),
    NodeProfile(
        name="ubuntu-24.04-cuda-580",
        driver_install=("nvidia-driver-580-open",),
        fabric_install=("nvidia-fabricmanager=580.95.05*", "libnvidia-nscq=580.95.05*"),
        extra_files=dict([CUDA_SOURCES]),
    ),
    NodeProfile(name="ubuntu-24.04-blackwell", gpu_model="NVIDIA B200", extra_files=dict([CUDA_SOURCES])),
    # the same with nvidia-imex beside the driver, at its version (GB200 NVL compute trays run IMEX)
    NodeProfile(
        name="ubuntu-24.04-cuda-580-imex",
        driver_install=("nvidia-driver-580-open",),
        fabric_install=("nvidia-fabricmanager=580.95.05*", "libnvidia-nscq=580.95.05*", "nvidia-imex=580.95.05*"),
        extra_files=dict([CUDA_SOURCES]),
    ),
)

PROFILES: dict[str, NodeProfile] = {
    p.name: p
    for p in (
        DEFAULT_PROFILE,
        RHEL9_PROFILE,
        RHEL9_PRECOMPILED_PROFILE,
        RHEL8_PROFILE,
        *GATE_PROFILES,
        *PACKAGING_PROFILES,
    )
}


class Platform:
    """The profile's tools on one node; ``exists`` is the node's own file lookup."""

    def __init__(
        self,
        profile: NodeProfile,
        driver: DriverStack,
        written: Callable[[], Iterable[str]],
        readable: Callable[[str], bool],
    ) -> None:
        self.profile = profile
        self.driver = driver
        self.written = written  # paths commands wrote on the node
        self.readable = readable  # the node's own file lookup (/etc/os-release, /proc, ...)
        #: whether a systemd unit runs now (a holder whose unit was stopped holds nothing)
        self.running: Callable[[str], bool] = lambda unit: True

    def exists(self, path: str) -> bool:
        return path in self.files() or path in set(self.written()) or self.readable(path)

    def files(self) -> list[str]:
        """Paths this profile has besides what commands wrote."""
        paths = [f"/boot/vmlinuz-{KERNEL}", "/boot/vmlinuz-6.8.0-57-generic"]
        paths += [f"/lib/modules/{k}/build/Makefile" for k in self.profile.kernel_headers]
        if self.driver.module is not None:
            paths += [f"/dev/nvidia{i}" for i in range(8)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]
            if self.profile.nvswitch:
                paths.append("/dev/nvidia-nvswitchctl")
        return paths + list(self.profile.extra_files)

    def expand(self, pattern: str) -> list[str]:
        if "*" not in pattern and "?" not in pattern:
            return [pattern]
        hits = sorted(p for p in {*self.files(), *self.written()} if fnmatch.fnmatchcase(p, pattern))
        return hits or [pattern]

    async def mokutil(self, argv: list[str], io: Io) -> int:
        # mokutil(1): --sb-state prints "SecureBoot enabled|disabled"; on a BIOS boot it says
        # "EFI variables are not supported on this system" and exits 1
        sb = self.profile.secure_boot
        if sb is None:
            io.err("EFI variables are not supported on this system\n")
            return 1
        if "--sb-state" in argv:
            io.out(f"SecureBoot {'enabled' if sb else 'disabled'}\n")
            return 0
        if "--list-enrolled" in argv:
            # shim's own MOK list is empty on a node nobody enrolled a key on
            io.err("MokListRT is empty\n")
            return 1
        io.err("mokutil: unrecognized option\n")
        return 1

    async def dkms(self, argv: list[str], io: Io) -> int:
        # dkms 3 (Ubuntu 24.04): "nvidia/VERSION, KERNEL, ARCH: installed"
        if argv[1:2] != ["status"]:
            io.err("Error! Unsupported action in the simulator\n")
            return 1
        on_disk = self.driver.module_on_disk
        if on_disk is not None and not self.driver.precompiled_on_disk:  # a precompiled module is no DKMS module
            io.out(f"nvidia/{on_disk.version}, {KERNEL}, x86_64: installed\n")
        return 0

    async def fuser(self, argv: list[str], io: Io) -> int:
        # psmisc fuser -v: the table goes to stderr, "USER PID ACCESS COMMAND", one row per
        # process per file; exit 1 when no process uses any of the files
        files = [f for a in argv[1:] if not a.startswith("-") for f in self.expand(a)]
        present = [f for f in files if self.exists(f)]
        verbose = any(a.startswith("-") and "v" in a for a in argv[1:])
        holders = [h for h in self.profile.holders if h.unit is None or self.running(h.unit)]
        holders = holders if self.driver.module is not None else []
        if not io.root:
            holders = []  # a user sees only its own processes' open files (proc(5): /proc/PID/fd is the owner's)
        if not present or not holders:
            return 1
        if verbose:
            io.err(f"{'':21}USER        PID ACCESS COMMAND\n")
            for path in present:
                for n, h in enumerate(holders):
                    head = f"{path}:" if n == 0 else ""
                    io.err(f"{head:<21}root {h.pid:>10} F.... {h.command}\n")
        else:
            io.out("".join(f" {h.pid}" for h in holders for _ in present))
        return 0

    async def apt_config(self, argv: list[str], io: Io) -> int:
        # apt-config dump NAME: 'NAME "VALUE";' for a set option, nothing for an unset one
        if argv[1:2] != ["dump"]:
            io.err("E: Invalid operation in the simulator\n")
            return 100
        wanted = argv[2:]
        options = {"APT::Periodic::Unattended-Upgrade": self.profile.apt_periodic_unattended}
        for name, value in options.items():
            if not wanted or name in wanted:
                io.out(f'{name} "{value}";\n')
        return 0

    async def ls(self, argv: list[str], io: Io) -> int:
        # GNU ls -d: each path that exists; "cannot access" on stderr, exit 2, for the rest
        status = 0
        for arg in [a for a in argv[1:] if not a.startswith("-")]:
            for path in self.expand(arg):
                if self.exists(path):
                    io.out(path + "\n")
                else:
                    io.err(f"ls: cannot access '{path}': No such file or directory\n")
                    status = 2
        return status

    def unit_pids(self) -> dict[str, int]:
        """The holders' systemd units and their main pids, for ``systemctl show -p MainPID``."""
        if self.driver.module is None:
            return {}
        return {h.unit: h.pid for h in self.profile.holders if h.unit and self.running(h.unit)}
