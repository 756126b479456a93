"""A simulated node's running kernel: its boot, its log, and the NVIDIA module it loaded.

It answers what comes from the kernel on a real node: ``/proc`` and ``/sys`` files,
``journalctl -k``, ``dmesg``, ``modinfo`` and ``lsmod``.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from cockpit.sim.driver import DriverStack
from cockpit.sim.shell import Io

KERNEL = "6.8.0-60-generic"
GCC = "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)"
BUILD_STAMP = {
    "575": "(dvs-builder@U22-I3-AE18-23-3)  Wed May 21 22:43:45 UTC 2025",
    "580": "(dvs-builder@U22-I3-AF03-09-1)  Sun Sep 28 02:59:23 UTC 2025",
}

XID_TEXT = {
    79: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    48: "pid=41872, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
    "at partition 6, subpartition 0.",
    94: "pid=41872, name=python3, Contained: SM (0x1). RST: No, D-RST: No",
    # a GB200's NVLink error as the driver logs it (leptonai/gpud#1160, from real kmsg)
    149: "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
    13: "pid=41872, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address",
}

NVIDIA_MODULES_LOADED = (
    "nvidia_uvm           2076672  0\n"
    "nvidia_drm            135168  0\n"
    "nvidia_modeset       1638400  1 nvidia_drm\n"
    "nvidia              104878080  2 nvidia_uvm,nvidia_modeset\n"
)


#: lsmod's line for GPUDirect RDMA's module (a real node's: it uses ib_core and nvidia)
PEERMEM_LOADED = "nvidia_peermem         16384  0\n"


class Kernel:
    """Boot identity and uptime, the kernel log of this boot, and the module a boot loads."""

    #: the files this kernel answers for; a missing one reads as absent, never as a file someone wrote
    FILES = frozenset(
        {
            "/proc/driver/nvidia/version",
            "/proc/sys/kernel/random/boot_id",
            "/proc/uptime",
            "/sys/module/nvidia/version",
        }
    )

    def __init__(self, hostname: str, driver: DriverStack) -> None:
        self.hostname = hostname
        self.driver = driver
        self.boot_id = ""
        self.booted_at = 0.0
        self.boot_wallclock = datetime.now(UTC)
        self.uptime_base_s = 0.0  # uptime at the first boot's start: a node that has been up for weeks
        self.reboots = 0
        self.log: list[str] = []
        #: the SSH user may not read the kernel log: a non-root user outside the adm and
        #: systemd-journal groups on a kernel with kernel.dmesg_restrict=1 (Ubuntu's default)
        self.restricted = False
        #: who signed the module DKMS built (modinfo's signer), None: unsigned
        self.signer: str | None = None
        #: Secure Boot on and the signer's key not enrolled: a module built during this change
        #: (any boot after the first) is refused at load
        self.rejects_new_module = False
        #: nvidia_peermem is loaded (lsmod lists it); set by the node at each boot
        self.peermem = False

    def boot(self, boot_id: str, *, first: bool) -> None:
        """Start a boot: a new boot id, the module on disk loaded (if a driver is installed), a fresh log."""
        self.boot_id = boot_id
        self.booted_at = time.monotonic()
        self.boot_wallclock = datetime.now(UTC)
        if not first:
            self.uptime_base_s = 0.0
            self.reboots += 1
        driver = self.driver
        driver.module = driver.module_on_disk if driver.userspace is not None else None
        driver.open_loaded = driver.open_on_disk
        self.log = []
        if not first and self.rejects_new_module and driver.module is not None:
            # kernel/module/signing.c under Secure Boot (lockdown): a module whose signature no
            # trusted key (builtin, db or MOK) verifies is refused, "Loading of module with
            # unavailable key is rejected"; nothing of the driver loads (no /dev/nvidia*, no NVML)
            driver.module = None
            self.log.append("Loading of module with unavailable key is rejected")
        module = driver.module
        if module is not None:
            self.log += [
                "nvidia: loading out-of-tree module taints kernel.",
                "nvidia: module verification failed: signature and/or required key missing - tainting kernel",
                "nvidia-nvlink: Nvlink Core is being initialized, major device number 508",
                f"NVRM: loading {driver.module_line(module)}  " + BUILD_STAMP.get(module.branch, BUILD_STAMP["580"]),
                "nvidia-modeset: Loading NVIDIA UNIX Open Kernel Mode Setting Driver for x86_64  "
                f"{module.version}  Release Build",
            ]

    def log_xid(self, bus: str, code: int) -> None:
        """Log an Xid as NVRM does, for the GPU at PCI ``bus`` ("0000:18:00")."""
        self.log.append(
            f"NVRM: Xid (PCI:{bus}): {code}, {XID_TEXT.get(code, 'pid=0, name=<unknown>, Channel exception')}"
        )

    def log_sxid(self, switch: int, code: int) -> None:
        """Log a fatal NVSwitch SXid as the nvswitch driver does: its data line, then the line
        that says Fatal (tests/fixtures/fabric/sxid_*)."""
        dev = f"0000:{5 + switch:02x}:00.0"
        self.log.append(
            f"nvidia-nvswitch{switch}: SXid (PCI:{dev}): {code}, Data {{0x00000018, 0x00000018, 0x00000000, "
            "0x00000018, 0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}"
        )
        self.log.append(f"nvidia-nvswitch{switch}: SXid (PCI:{dev}): {code}, Fatal, Link 24 LTSSM Fault Up")

    def uptime(self) -> float:
        return self.uptime_base_s + (time.monotonic() - self.booted_at)

    def read_file(self, path: str) -> str | None:
        """One of :attr:`FILES`, or None where it does not exist now (no module loaded)."""
        module = self.driver.module
        if path == "/proc/driver/nvidia/version":
            if module is None:
                return None
            return (
                f"NVRM version: {self.driver.module_line(module)}  "
                f"{BUILD_STAMP.get(module.branch, BUILD_STAMP['580'])}\nGCC version:  {GCC}\n"
            )
        if path == "/proc/sys/kernel/random/boot_id":
            return self.boot_id + "\n"
        if path == "/proc/uptime":
            up = self.uptime()
            return f"{up:.2f} {up * 15.7:.2f}\n"
        if path == "/sys/module/nvidia/version":
            return None if module is None else module.version + "\n"
        return None

    def _lines(self, style: str) -> list[str]:
        start = self.boot_wallclock
        out = []
        for n, line in enumerate(self.log):
            offset = 3.2 + n * 0.41 + (30 if line.startswith("NVRM: Xid") else 0)
            if style == "dmesg":
                out.append(f"[{offset:>12.6f}] {line}")
            else:
                stamp = datetime.fromtimestamp(start.timestamp() + offset, UTC).strftime("%b %d %H:%M:%S")
                out.append(f"{stamp} {self.hostname} kernel: {line}")
        return out

    async def journalctl(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        pattern: str | None = None
        last: int | None = None
        for i, a in enumerate(args):
            if a in ("-g", "--grep") and i + 1 < len(args):
                pattern = args[i + 1]
            elif a.startswith("--grep="):
                pattern = a.split("=", 1)[1]
            elif a in ("-n", "--lines") and i + 1 < len(args) and args[i + 1].isdigit():
                last = int(args[i + 1])
        kernel = "-k" in args or "--dmesg" in args
        if kernel and (self.restricted or not io.root):
            # journalctl(1): a user outside adm/systemd-journal sees only their own journal, which
            # holds no kernel messages; -q drops the "insufficient permissions" hint, so nothing shows
            lines: list[str] = []
        else:
            lines = self._lines("journal") if kernel else ["-- No entries --"]
        if pattern is not None:
            rx = re.compile(pattern, re.IGNORECASE if pattern.islower() else 0)
            lines = [ln for ln in lines if rx.search(ln)]
            if not lines:
                return 1
        if last is not None:
            lines = lines[-last:] if last else []
        io.out("".join(ln + "\n" for ln in lines))
        return 0

    async def dmesg(self, argv: list[str], io: Io) -> int:
        # Ubuntu ships kernel.dmesg_restrict = 1 (/etc/sysctl.d/10-kernel-hardening.conf): a user reads nothing
        if self.restricted or not io.root:
            # util-linux dmesg when syslog(2) refuses SYSLOG_ACTION_READ_ALL (dmesg_restrict=1, no CAP_SYSLOG)
            io.err("dmesg: read kernel buffer failed: Operation not permitted\n")
            return 1
        io.out("".join(ln + "\n" for ln in self._lines("dmesg")))
        return 0

    async def modinfo(self, argv: list[str], io: Io) -> int:
        # modinfo reads the module on disk, not the loaded one: after an upgrade it already shows the new version
        on_disk = self.driver.module_on_disk
        mods = [a for a in argv[1:] if not a.startswith("-") and a != "version"]
        if not mods or mods[0] != "nvidia" or on_disk is None:
            io.err(f"modinfo: ERROR: Module {mods[0] if mods else ''} not found.\n")
            return 1
        # DKMS installs into updates/dkms; linux-restricted-modules ships under kernel/nvidia-BRANCH
        where = f"kernel/nvidia-{on_disk.branch}" if self.driver.precompiled_on_disk else "updates/dkms"
        if "-F" in argv or "--field" in argv:
            io.out(on_disk.version + "\n")
        else:
            io.out(
                f"filename:       /lib/modules/{KERNEL}/{where}/nvidia.ko.zst\n"
                f"version:        {on_disk.version}\n"
                f"license:        {'Dual MIT/GPL' if self.driver.open_on_disk else 'NVIDIA'}\n"
            )
            if self.signer:  # modinfo(8) prints the signature's fields for a signed module
                io.out(f"signer:         {self.signer}\nsig_hashalgo:   sha512\n")
        return 0

    async def modprobe(self, argv: list[str], io: Io) -> int:
        # modprobe nvidia: loads the module on disk; under Secure Boot with its key not enrolled the
        # kernel refuses it and modprobe prints the errno's text (EKEYREJECTED, as Ubuntu's
        # lockdown kernels report it: "Key was rejected by service")
        names = [a for a in argv[1:] if not a.startswith("-")]
        if names[:1] != ["nvidia"] or self.driver.module_on_disk is None:
            io.err(
                f"modprobe: FATAL: Module {names[0] if names else ''} not found in directory /lib/modules/{KERNEL}\n"
            )
            return 1
        if self.driver.module is not None:
            return 0
        if self.rejects_new_module and self.reboots > 0:
            io.err("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n")
            self.log.append("Loading of module with unavailable key is rejected")
            return 1
        self.driver.module = self.driver.module_on_disk
        return 0

    async def lsmod(self, argv: list[str], io: Io) -> int:
        io.out("Module                  Size  Used by\n")
        if self.driver.module is not None:
            io.out(NVIDIA_MODULES_LOADED)
            if self.peermem:
                io.out(PEERMEM_LOADED)
        return 0
