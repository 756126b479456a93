"""The simulated package manager: dpkg-query, dpkg, apt-get and apt-mark on a node.

Installing a driver branch replaces the userspace at once and builds the new kernel
module on disk (unless the scenario breaks the DKMS build); the loaded module only
changes at the next boot.
"""

from __future__ import annotations

import fnmatch
import random
import re

from cockpit.sim.driver import DriverStack
from cockpit.sim.kernel import KERNEL
from cockpit.sim.shell import Io, Sleep, stream
from cockpit.sim.smi import RELEASES, DriverRelease

TOOLKIT_VERSION = "1.17.8-1"


def driver_packages(branch: str) -> list[str]:
    return [
        f"libnvidia-compute-{branch}",
        f"nvidia-utils-{branch}",
        f"nvidia-dkms-{branch}-open",
        f"nvidia-kernel-common-{branch}",
        f"nvidia-driver-{branch}",
    ]


class PackageManager:
    """The node's installed packages and holds, and the dpkg/apt commands that read and change them."""

    def __init__(self, driver: DriverStack, rng: random.Random, sleep: Sleep, *, module_build_fails: bool) -> None:
        self.driver = driver
        self.rng = rng  # the node's generator: download sizes draw from the same sequence as its boot ids
        self.sleep = sleep
        self.module_build_fails = module_build_fails  # the mismatch scenario: DKMS fails to build the new module
        self.installed: dict[str, str] = {}  # package name -> version
        self.held: set[str] = set()
        self.installing = False  # dpkg's frontend lock is held

    async def dpkg_query(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        fmt = "${Package}\t${Version}\n"
        patterns: list[str] = []
        show = False
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-W", "--show"):
                show = True
            elif a in ("-f", "--showformat"):
                i += 1
                fmt = args[i]
            elif a.startswith("--showformat="):
                fmt = a.split("=", 1)[1]
            elif a.startswith("-f") and len(a) > 2:
                fmt = a[2:].removeprefix("=")  # dpkg accepts -f=FORMAT
            elif a in ("-l", "--list"):
                return await self.dpkg(["dpkg", "-l", *args[i + 1 :]], io)
            elif a.startswith("-"):
                pass
            else:
                patterns.append(a)
            i += 1
        if not show:
            io.err("dpkg-query: need an action option\n")
            return 2
        status = 0
        fmt = fmt.replace("\\n", "\n").replace("\\t", "\t")
        for pattern in patterns or ["*"]:
            matches = sorted(p for p in self.installed if fnmatch.fnmatchcase(p, pattern))
            if not matches:
                io.err(f"dpkg-query: no packages found matching {pattern}\n")
                status = 1
            for pkg in matches:
                io.out(
                    fmt.replace("${Package}", pkg)
                    .replace("${binary:Package}", pkg + ":amd64")
                    .replace("${Version}", self.installed[pkg])
                    .replace("${Status}", "install ok installed")
                    .replace("${db:Status-Abbrev}", "ii ")
                    .replace("${Architecture}", "amd64")
                )
        return status

    async def dpkg(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        if args[:1] in (["-l"], ["--list"]):
            patterns = args[1:] or ["*"]
            io.out(
                "Desired=Unknown/Install/Remove/Purge/Hold\n"
                "| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n"
                "|/ Err?=(none)/Reinst-required (Conf/Files/Unpack/Failed-cfg/Half-conf)\n"
                "||/ Name                              Version                      Architecture Description\n"
                "+++-=================================-============================-============-===============================\n"
            )
            found = False
            for pkg in sorted(self.installed):
                if any(fnmatch.fnmatchcase(pkg, p) for p in patterns):
                    found = True
                    mark = "hi" if pkg in self.held else "ii"
                    io.out(f"{mark}  {pkg:<33} {self.installed[pkg]:<28} amd64        NVIDIA/system package\n")
            if not found:
                io.err(f"dpkg-query: no packages found matching {' '.join(patterns)}\n")
                return 1
            return 0
        if args[:1] in (["-s"], ["--status"]) and len(args) > 1:
            pkg = args[1]
            if pkg not in self.installed:
                io.err(f"dpkg-query: package '{pkg}' is not installed and no information is available\n")
                return 1
            io.out(
                f"Package: {pkg}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {self.installed[pkg]}\n"
            )
            return 0
        io.err("dpkg: error: need an action option\n")
        return 2

    async def apt_mark(self, argv: list[str], io: Io) -> int:
        args = [a for a in argv[1:] if not a.startswith("-")]
        if not args:
            io.err("E: No command given\n")
            return 100
        action, pkgs = args[0], args[1:]
        if action == "showhold":
            io.out("".join(p + "\n" for p in sorted(self.held)))
            return 0
        for pkg in pkgs:
            if pkg not in self.installed:
                io.err(f"E: Unable to locate package {pkg}\n")
                return 100
            if action == "hold":
                self.held.add(pkg)
                io.out(f"{pkg} set on hold.\n")
            elif action == "unhold":
                if pkg in self.held:
                    self.held.discard(pkg)
                    io.out(f"Canceled hold on {pkg}.\n")
                else:
                    io.out(f"{pkg} was already not on hold.\n")
        return 0

    async def apt_cache(self, argv: list[str], io: Io) -> int:
        args = [a for a in argv[1:] if not a.startswith("-")]
        if args[:1] == ["policy"]:
            for pkg in args[1:]:
                m = re.fullmatch(r"nvidia-driver-(\d+)(?:-server|-open)?", pkg)
                cand = RELEASES[m.group(1)].package_version if m and m.group(1) in RELEASES else "(none)"
                io.out(f"{pkg}:\n  Installed: {self.installed.get(pkg, '(none)')}\n  Candidate: {cand}\n")
            return 0
        return 0

    async def apt_get(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        words = []
        skip = False
        for a in args:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c", "-t"):
                skip = True
            elif not a.startswith("-"):
                words.append(a)
        if not words:
            io.err("E: No command given\n")
            return 100
        action, specs = words[0], words[1:]
        if action in ("update",):
            await stream(
                io,
                [
                    "Hit:1 http://archive.ubuntu.com/ubuntu noble InRelease",
                    "Hit:2 http://archive.ubuntu.com/ubuntu noble-updates InRelease",
                    "Hit:3 https://nvidia.github.io/libnvidia-container/stable/deb/amd64  InRelease",
                    "Reading package lists...",
                ],
                0.6,
                self.sleep,
            )
            return 0
        if action not in ("install", "reinstall"):
            if action in ("remove", "purge"):
                return await self._apt_remove(specs, io)
            io.err(f"E: Invalid operation {action}\n")
            return 100
        return await self._apt_install(specs, "--allow-downgrades" in args, io)

    async def _apt_install(self, specs: list[str], allow_downgrades: bool, io: Io) -> int:
        if self.installing:
            io.err("E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 48213 (apt-get)\n")
            return 100
        target: DriverRelease | None = None
        extra: list[str] = []
        for spec in specs:
            name, _, version = spec.partition("=")
            m = re.fullmatch(r"nvidia-driver-(\d+)(?:-server|-open|-server-open)?", name)
            fm = re.fullmatch(r"nvidia-fabricmanager-(\d+)", name)
            branch = m.group(1) if m else fm.group(1) if fm else None
            if branch is not None:
                if branch not in RELEASES:
                    io.err(f"E: Unable to locate package {name}\n")
                    return 100
                release = RELEASES[branch]
                if version and version not in (release.package_version, release.version):
                    io.err(f"E: Version '{version}' for '{name}' was not found\n")
                    return 100
                if m:
                    target = release
                continue
            if name in self.installed or name.startswith("nvidia-container-toolkit"):
                extra.append(name)
                continue
            io.err(f"E: Unable to locate package {name}\n")
            return 100
        io.out("Reading package lists...\nBuilding dependency tree...\nReading state information...\n")
        if target is None:
            io.out(
                "".join(
                    f"{n} is already the newest version ({self.installed.get(n, TOOLKIT_VERSION)}).\n" for n in extra
                )
            )
            io.out("0 upgraded, 0 newly installed, 0 to remove and 12 not upgraded.\n")
            return 0
        current = self.driver.userspace
        if current is not None and current.version == target.version:
            io.out(f"nvidia-driver-{target.branch} is already the newest version ({target.package_version}).\n")
            io.out("0 upgraded, 0 newly installed, 0 to remove and 12 not upgraded.\n")
            return 0
        old_branch = current.branch if current else None
        held = [p for p in self.held if old_branch and p.endswith(f"-{old_branch}")]
        if held:
            io.out(f"The following held packages will be changed:\n  {' '.join(sorted(held))}\n")
            io.err("E: Held packages were changed and -y was used without --allow-change-held-packages.\n")
            return 100
        if current is not None and int(target.branch) < int(current.branch) and not allow_downgrades:
            io.err("E: Packages were downgraded and -y was used without --allow-downgrades.\n")
            return 100
        self.installing = True
        try:
            new_pkgs = driver_packages(target.branch)
            old_pkgs = [
                p
                for p in self.installed
                if (old_branch and p.endswith(f"-{old_branch}")) or (old_branch and f"-{old_branch}-" in p)
            ]
            fm_old = [p for p in old_pkgs if p.startswith("nvidia-fabricmanager-")]
            if fm_old:
                new_pkgs.append(f"nvidia-fabricmanager-{target.branch}")
            lines = []
            if old_pkgs:
                lines += ["The following packages will be REMOVED:", "  " + " ".join(sorted(old_pkgs))]
            lines += [
                "The following NEW packages will be installed:",
                "  " + " ".join(new_pkgs),
                f"0 upgraded, {len(new_pkgs)} newly installed, {len(old_pkgs)} to remove and 12 not upgraded.",
                "Need to get 412 MB of archives.",
                "After this operation, 28.4 MB of additional disk space will be used.",
            ]
            for n, pkg in enumerate(new_pkgs, 1):
                lines.append(
                    f"Get:{n} http://archive.ubuntu.com/ubuntu noble-updates/restricted amd64 {pkg} amd64 "
                    f"{target.package_version} [{self.rng.uniform(0.3, 90):.1f} MB]"
                )
            lines += [
                "Fetched 412 MB in 3s (137 MB/s)",
                "(Reading database ... 214512 files and directories currently installed.)",
            ]
            lines += [f"Removing {p} ({self.installed[p]}) ..." for p in sorted(old_pkgs)]
            for pkg in new_pkgs:
                lines += [
                    f"Selecting previously unselected package {pkg}.",
                    f"Preparing to unpack .../{pkg}_{target.package_version}_amd64.deb ...",
                    f"Unpacking {pkg} ({target.package_version}) ...",
                ]
            await stream(io, lines, 1.2, self.sleep)
            # the userspace is replaced now: from here on NVML sees a mismatch until reboot
            for p in old_pkgs:
                self.installed.pop(p, None)
                self.held.discard(p)
            for p in new_pkgs:
                self.installed[p] = target.package_version
            self.driver.userspace = target
            dkms = [
                f"Setting up nvidia-dkms-{target.branch}-open ({target.package_version}) ...",
                f"Loading new nvidia-{target.version} DKMS files...",
                f"Building for {KERNEL}",
                f"Building initial module for {KERNEL}",
            ]
            if self.module_build_fails:
                dkms += [
                    "Error! Bad return status for module build on kernel: 6.8.0-60-generic (x86_64)",
                    f"Consult /var/lib/dkms/nvidia/{target.version}/build/make.log for more information.",
                ]
            else:
                dkms += [
                    "Done.",
                    "",
                    "nvidia.ko:",
                    "Running module version sanity check.",
                    " - Original module",
                    "   - No original module exists within this kernel",
                    " - Installation",
                    f"   - Installing to /lib/modules/{KERNEL}/updates/dkms/",
                    "depmod....",
                ]
                self.driver.module_on_disk = target
            dkms += [f"Setting up {p} ({target.package_version}) ..." for p in new_pkgs if "dkms" not in p]
            dkms += [
                "Processing triggers for libc-bin (2.39-0ubuntu8.4) ...",
                "Processing triggers for initramfs-tools (0.142ubuntu25.5) ...",
                f"update-initramfs: Generating /boot/initrd.img-{KERNEL}",
            ]
            await stream(io, dkms, 1.3, self.sleep)
        finally:
            self.installing = False
        return 0

    async def _apt_remove(self, specs: list[str], io: Io) -> int:
        for spec in specs:
            matches = [p for p in self.installed if fnmatch.fnmatchcase(p, spec)]
            for p in matches:
                del self.installed[p]
                io.out(f"Removing {p} ...\n")
            m = re.fullmatch(r"nvidia-driver-(\d+).*", spec)
            if m and self.driver.userspace and self.driver.userspace.branch == m.group(1):
                self.driver.userspace = None
                self.driver.module_on_disk = None
        return 0


def preinstalled(release: DriverRelease) -> dict[str, str]:
    """A node's packages before the change: the driver branch with fabric manager, the container toolkit, the kernel."""
    packages = dict.fromkeys(driver_packages(release.branch), release.package_version)
    packages[f"nvidia-fabricmanager-{release.branch}"] = release.package_version
    for pkg in (
        "nvidia-container-toolkit",
        "nvidia-container-toolkit-base",
        "libnvidia-container1",
        "libnvidia-container-tools",
    ):
        packages[pkg] = TOOLKIT_VERSION
    packages[f"linux-image-{KERNEL}"] = "6.8.0-60.63"
    return packages
