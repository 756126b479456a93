"""The simulated package manager: dpkg-query, dpkg, apt-get and apt-mark on a node.

As strict as apt on a real Ubuntu HGX node (relations and index in :mod:`~cockpit.sim.debs`):
nothing moves the fabric manager or nscq with the driver; a held package is not changed
or removed; ``pkg=VERSION`` needs that version in the index or a saved .deb; a second
apt waits for the dpkg frontend lock only with ``-o DPkg::Lock::Timeout``. The wording of
every refusal is real apt 2.x's (checked against apt-get on a scratch root in
tests/core/test_sim_apt_real.py). Installing a driver branch replaces the userspace at
once and builds the new kernel module on disk (unless the scenario breaks the DKMS
build); the loaded module only changes at the next boot.
"""

from __future__ import annotations

import fnmatch

from cockpit.sim import apt_plan
from cockpit.sim.apt_plan import AptOptions, Plan
from cockpit.sim.debs import (
    SUPERSEDING_575,
    TOOLKIT_PACKAGES,
    TOOLKIT_VERSION,
    Deb,
    branch_index,
    driver_packages,
    fabric_packages,
    full_index,
    release_of,
    source_of,
)
from cockpit.sim.kernel import KERNEL
from cockpit.sim.package_base import NodePackages, PackageFaults, PackageSite
from cockpit.sim.shell import Io, stream
from cockpit.sim.smi import RELEASES, DriverRelease

__all__ = ["TOOLKIT_VERSION", "PackageManager", "preinstalled"]

#: the pid apt reports as holding the dpkg frontend lock while another install runs
LOCK_PID = 48213
LOCK_ERROR = (
    f"E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process {LOCK_PID} (apt-get)\n"
    "N: Be aware that removing the lock file is not a solution and may break your system.\n"
    "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?\n"
)
#: what debconf says over SSH without a terminal when DEBIAN_FRONTEND is not noninteractive
DEBCONF_NO_TTY = (
    "debconf: unable to initialize frontend: Dialog\n"
    "debconf: (Dialog frontend will not work on a dumb terminal, an emacs shell buffer, or without "
    "a controlling terminal.)\ndebconf: falling back to frontend: Readline\n"
)
DEFAULT_ARCHIVES = "/var/cache/apt/archives/"
HOME = "/root/"  # where `apt-get download` saves: the SSH user's working directory


class PackageManager(NodePackages):
    """The node's installed packages, holds and repository index, and the commands that read and change them."""

    def __init__(self, site: PackageSite, faults: PackageFaults) -> None:
        super().__init__(site, faults)
        self.installed: dict[str, str] = {}  # package name -> version
        self.held: set[str] = set()
        self.installing = False  # dpkg's frontend lock is held
        self.local: set[Deb] = set()  # package files named on a command line (./x.deb): installable as they are
        self.index = full_index()  # what the node's apt lists offer: one (the newest) version per package
        if faults.fabric_manager_lags:
            # the mirror carries the new driver but still an older fabric manager and nscq
            for name in fabric_packages("580"):
                self.index[name] = RELEASES["580"].package_version.replace("580.95.05", "580.82.07")

    def fabric_manager_version(self) -> str | None:
        return next((v for p, v in self.installed.items() if p.startswith("nvidia-fabricmanager-")), None)

    # -- dpkg-query, dpkg ------------------------------------------------------------

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
                    .replace("${source:Package}", source_of(pkg))
                    .replace("${Version}", self.installed[pkg])
                    .replace("${Status}", ("hold" if pkg in self.held else "install") + " ok installed")
                    .replace("${db:Status-Abbrev}", "hi " if pkg in self.held else "ii ")
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
        if args[:1] in (["-i"], ["--install"]) and len(args) > 1:
            return await self._dpkg_install(args[1:], io)
        io.err("dpkg: error: need an action option\n")
        return 2

    async def _dpkg_install(self, paths: list[str], io: Io) -> int:
        if self.installing:
            io.err("dpkg: error: dpkg frontend lock was locked by another process with pid 48213\n")
            return 2
        debs: list[Deb] = []
        for path in paths:
            deb = Deb.parse(self.site.files.get(path, ""))
            if deb is None:
                io.err(
                    f"dpkg: error: cannot access archive '{path}': No such file or directory\n"
                    if path not in self.site.files
                    else f"dpkg-deb: error: '{path}' is not a Debian format archive\n"
                )
                return 2
            debs.append(deb)
            self.local.add(deb)
        given = {d.name: d.version for d in debs}
        for deb in debs:
            for dep in deb.depends():
                have = given.get(dep.name, self.installed.get(dep.name))
                if have != dep.version:
                    # dpkg does not resolve: it would leave the package unpacked and unconfigured;
                    # the simulator refuses the set instead, with dpkg's words
                    why = (
                        f"Version of {dep.name} on system is {have}."
                        if have
                        else f"Package {dep.name} is not installed."
                    )
                    io.err(
                        f"dpkg: dependency problems prevent configuration of {deb.name}:\n"
                        f" {deb.name} depends on {dep.name} (= {dep.version}); however:\n  {why}\n\n"
                        f"dpkg: error processing package {deb.name} (--install):\n"
                        " dependency problems - leaving unconfigured\n"
                        f"Errors were encountered while processing:\n {deb.name}\n"
                    )
                    return 1
        plan = apt_plan.changes(self, {d.name: d for d in debs}, reinstall=True)
        await self._apply(plan, io, fetched=False)
        return 0

    # -- apt-mark, apt-cache ---------------------------------------------------------

    async def apt_mark(self, argv: list[str], io: Io) -> int:
        args = [a for a in argv[1:] if not a.startswith("-")]
        if not args:
            io.err("E: No command given\n")
            return 100
        action, pkgs = args[0], args[1:]
        if action == "showhold":
            io.out("".join(p + "\n" for p in sorted(self.held) if not pkgs or p in pkgs))
            return 0
        for pkg in pkgs:
            if pkg not in self.installed:
                io.err(f"E: Unable to locate package {pkg}\n")
                return 100
            if action == "hold":
                io.out(f"{pkg} was already set on hold.\n" if pkg in self.held else f"{pkg} set on hold.\n")
                self.held.add(pkg)
            elif action == "unhold":
                io.out(f"Canceled hold on {pkg}.\n" if pkg in self.held else f"{pkg} was already not on hold.\n")
                self.held.discard(pkg)
        return 0

    async def apt_cache(self, argv: list[str], io: Io) -> int:
        args = [a for a in argv[1:] if not a.startswith("-")]
        if args[:1] == ["policy"]:
            for pkg in args[1:]:
                io.out(
                    f"{pkg}:\n  Installed: {self.installed.get(pkg, '(none)')}\n"
                    f"  Candidate: {self.index.get(pkg, '(none)')}\n"
                )
            return 0
        return 0

    # -- apt-get ---------------------------------------------------------------------

    async def apt_get(self, argv: list[str], io: Io) -> int:
        opts = AptOptions.parse(argv[1:])
        if opts.error:
            io.err(opts.error)
            return 100
        if not opts.words:
            io.err("E: No command given\n")
            return 100
        action, specs = opts.words[0], opts.words[1:]
        if action == "update":
            return await self._update(io)
        if action == "download":
            return await self._download(specs, io)
        if action == "check":
            # Debian/apt cmdline/apt-get.cc DoCheck: CacheFile::Open() takes the dpkg lock
            # (WithLock defaults to true), waiting DPkg::Lock::Timeout for it, then CheckDeps
            if not await self._lock(opts, io):
                return 100
            io.out("Reading package lists...\nBuilding dependency tree...\nReading state information...\n")
            return 0
        if action in ("remove", "purge"):
            if not await self._lock(opts, io):
                return 100
            return await self._apt_remove(specs, io)
        if action not in ("install", "reinstall"):
            io.err(f"E: Invalid operation {action}\n")
            return 100
        if not opts.simulate and not opts.download_only and not await self._lock(opts, io):
            return 100
        return await self._install(specs, opts, io, reinstall=opts.reinstall or action == "reinstall")

    async def _lock(self, opts: AptOptions, io: Io) -> bool:
        """Take the dpkg frontend lock, waiting up to ``DPkg::Lock::Timeout`` seconds (apt 1.9.11+)."""
        waited = 0.0
        while self.installing:
            if waited >= opts.lock_timeout:
                io.err(LOCK_ERROR)
                return False
            if waited == 0.0:
                io.err(
                    "Waiting for cache lock: Could not get lock /var/lib/dpkg/lock-frontend. "
                    f"It is held by process {LOCK_PID} (apt-get)...\n"
                )
            await self.site.sleep(1.0)
            waited += 1.0
        return True

    async def _update(self, io: Io) -> int:
        await stream(
            io,
            [
                "Hit:1 http://archive.ubuntu.com/ubuntu noble InRelease",
                "Get:2 http://archive.ubuntu.com/ubuntu noble-updates InRelease [126 kB]",
                "Get:3 http://archive.ubuntu.com/ubuntu noble-updates/restricted amd64 Packages [1,212 kB]",
                "Hit:4 https://nvidia.github.io/libnvidia-container/stable/deb/amd64  InRelease",
                "Fetched 1,338 kB in 2s (669 kB/s)",
                "Reading package lists...",
            ],
            0.8,
            self.site.sleep,
        )
        return 0

    async def _download(self, specs: list[str], io: Io) -> int:
        wanted = apt_plan.resolve_specs(self, specs, io)
        if wanted is None:
            return 100
        for n, deb in enumerate(wanted.values(), 1):
            io.out(f"Get:{n} {_url(deb)} {deb.name} amd64 {deb.version} [{self.site.rng.uniform(0.1, 90):.1f} MB]\n")
            self.site.files[HOME + deb.filename] = deb.control()
        io.out(f"Fetched {len(wanted) * 37} MB in 1s (37.0 MB/s)\n")
        return 0

    async def _install(self, specs: list[str], opts: AptOptions, io: Io, *, reinstall: bool) -> int:
        wanted = apt_plan.resolve_specs(self, specs, io)
        if wanted is None:
            return 100
        io.out("Reading package lists...\nBuilding dependency tree...\nReading state information...\n")
        plan = apt_plan.plan(self, wanted, io, reinstall=reinstall)
        if plan is None:
            return 100
        status = apt_plan.report(plan, opts, io)
        if status is not None:
            return status
        if opts.simulate or not (plan.fetch or plan.remove or plan.install):
            return 0
        if opts.download_only:
            archives = opts.archives
            if archives.rstrip("/") + "/partial" not in self.site.dirs and archives != DEFAULT_ARCHIVES:
                io.err(
                    f"E: Archives directory {archives}partial is missing. - Acquire (2: No such file or directory)\n"
                )
                return 100
            await self._fetch(plan, io)
            for deb in plan.fetch:
                self.site.files[archives + deb.filename] = deb.control()
            io.out("Download complete and in download only mode\n")
            return 0
        if io.env.get("DEBIAN_FRONTEND") != "noninteractive":
            io.err(DEBCONF_NO_TTY)
        self.installing = True
        try:
            await self._fetch(plan, io)
            await self._apply(plan, io, fetched=True)
        finally:
            self.installing = False
        return 0

    async def _fetch(self, plan: Plan, io: Io) -> None:
        lines = [
            f"Get:{n} {_url(d)} {d.name} amd64 {d.version} [{self.site.rng.uniform(0.3, 90):.1f} MB]"
            for n, d in enumerate(plan.fetch, 1)
        ]
        if lines:
            lines.append(f"Fetched {len(lines) * 82} MB in 3s (137 MB/s)")
        await stream(io, lines, 1.2, self.site.sleep)

    async def _apply(self, plan: Plan, io: Io, *, fetched: bool) -> None:
        """Unpack and configure: the userspace follows nvidia-utils, the module on disk follows DKMS."""
        lines = ["(Reading database ... 214512 files and directories currently installed.)"]
        lines += [f"Removing {p} ({self.installed[p]}) ..." for p in plan.remove]
        for deb in plan.install:
            old = self.installed.get(deb.name)
            lines += [
                f"Preparing to unpack .../{deb.filename} ...",
                f"Unpacking {deb.name} ({deb.version})" + (f" over ({old}) ..." if old else " ..."),
            ]
        await stream(io, lines, 1.2, self.site.sleep)
        for p in plan.remove:
            self.installed.pop(p, None)
            self.held.discard(p)
        for deb in plan.install:
            self.installed[deb.name] = deb.version
        utils = next((v for p, v in self.installed.items() if p.startswith("nvidia-utils-")), None)
        self.site.driver.userspace = release_of(utils) if utils else None
        setup: list[str] = []
        dkms = next((d for d in plan.install if d.name.startswith("nvidia-dkms-")), None)
        release = release_of(dkms.version) if dkms else None
        if dkms is not None and release is not None:
            setup += _dkms_lines(dkms, release, fails=self.module_build_fails)
            if not self.module_build_fails:
                self.site.driver.module_on_disk = release
        elif not any(p.startswith("nvidia-dkms-") for p in self.installed):
            self.site.driver.module_on_disk = None
        setup += [f"Setting up {d.name} ({d.version}) ..." for d in plan.install if d is not dkms]
        if plan.install:
            setup += [
                "Processing triggers for libc-bin (2.39-0ubuntu8.4) ...",
                "Processing triggers for initramfs-tools (0.142ubuntu25.5) ...",
                f"update-initramfs: Generating /boot/initrd.img-{KERNEL}",
            ]
        await stream(io, setup, 1.3, self.site.sleep)
        if self.drops_old_after_install and any(d.name.startswith("nvidia-driver-580") for d in plan.install):
            # apt-daily.timer refreshes the lists during the window: 575.64.05 has replaced 575.57.08
            self.index.update(branch_index(SUPERSEDING_575))
            self.drops_old_after_install = False

    async def _apt_remove(self, specs: list[str], io: Io) -> int:
        for spec in specs:
            matches = [p for p in self.installed if fnmatch.fnmatchcase(p, spec)]
            held = [p for p in matches if p in self.held]
            if held:
                io.err("E: Held packages were changed and -y was used without --allow-change-held-packages.\n")
                return 100
            for p in matches:
                del self.installed[p]
                io.out(f"Removing {p} ...\n")
        utils = next((v for p, v in self.installed.items() if p.startswith("nvidia-utils-")), None)
        self.site.driver.userspace = release_of(utils) if utils else None
        if not any(p.startswith("nvidia-dkms-") for p in self.installed):
            self.site.driver.module_on_disk = None
        return 0


def _url(deb: Deb) -> str:
    return "http://archive.ubuntu.com/ubuntu noble-updates/restricted"


def _dkms_lines(dkms: Deb, release: DriverRelease, *, fails: bool) -> list[str]:
    lines = [
        f"Setting up {dkms.name} ({dkms.version}) ...",
        f"Loading new nvidia-{release.version} DKMS files...",
        f"Building for {KERNEL}",
        f"Building initial module for {KERNEL}",
    ]
    if fails:
        return [
            *lines,
            f"Error! Bad return status for module build on kernel: {KERNEL} (x86_64)",
            f"Consult /var/lib/dkms/nvidia/{release.version}/build/make.log for more information.",
        ]
    return [
        *lines,
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


def preinstalled(release: DriverRelease) -> dict[str, str]:
    """A node's packages before the change: the driver branch with its fabric manager and nscq at the
    same version (an HGX node), the container toolkit, the kernel."""
    packages = dict.fromkeys(
        [*driver_packages(release.branch), *fabric_packages(release.branch)], release.package_version
    )
    packages.update(dict.fromkeys(TOOLKIT_PACKAGES, TOOLKIT_VERSION))
    packages[f"linux-image-{KERNEL}"] = "6.8.0-60.63"
    return packages
