"""The simulated package manager: dpkg-query, dpkg, apt-get and apt-mark on a node.

As strict as apt on a real Ubuntu node, because it resolves over the repositories' real
stanzas (:mod:`cockpit.sim.repos`: Ubuntu's archive or NVIDIA's CUDA repository, as the
node's profile says) with apt's own rules (:mod:`cockpit.sim.apt_resolve`): a held
package is not changed or removed; ``pkg=VERSION`` needs that version in the index or a
saved .deb; a second apt waits for the dpkg frontend lock only with
``-o DPkg::Lock::Timeout``. The package differential holds every answer to the real
apt-get's over the same stanzas (tests/core/test_packages_differential.py), the wording of
refusals to apt 2.x's (tests/core/test_sim_apt_real.py). Installing a driver replaces the
userspace at once and puts the new kernel module on disk (DKMS builds it, unless the
scenario breaks the build; a precompiled module package carries it); the loaded module
only changes at the next boot.
"""

from __future__ import annotations

import fnmatch
import re

from cockpit.sim import apt_plan, debs
from cockpit.sim.apt_plan import AptOptions, Plan, parse_deb
from cockpit.sim.apt_resolve import Universe, resolve
from cockpit.sim.debcontrol import Package, version_order
from cockpit.sim.debs import OLDER_580, SUPERSEDING_575, TOOLKIT_VERSION, release_of
from cockpit.sim.kernel import KERNEL
from cockpit.sim.package_base import NodePackages, PackageFaults, PackageSite
from cockpit.sim.repos import base_names
from cockpit.sim.shell import Io, stream
from cockpit.sim.smi import DriverRelease

__all__ = ["TOOLKIT_VERSION", "PackageManager"]

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

    def __init__(self, site: PackageSite, faults: PackageFaults, repository: str = "cuda-ubuntu2404") -> None:
        super().__init__(site, faults)
        self.repository = repository
        self.installed: dict[str, str] = {}  # package name -> version
        self.stanzas: dict[str, Package] = {}  # package name -> the installed version's control fields
        self.held: set[str] = set()
        self.installing = False  # dpkg's frontend lock is held
        self.local: set[Package] = set()  # package files named on a command line (./x.deb): installable as they are
        self.index: list[Package] = debs.index_of(repository)  # every version the node's apt lists offer
        self.base = base_names(repository)  # what the base system has (libc6, dkms, the kernel)
        if faults.fabric_manager_lags:
            # the mirror carries the new driver but still the older point release of fabric manager and nscq
            parts = [p.name for p in self.index if re.match(r"(nvidia-fabricmanager|libnvidia-nscq)", p.name)]
            self.index = debs.with_release(self.index, "580.95.05", OLDER_580, names=parts)
        if faults.imex_lags:
            # a mirror that synced the 590 driver but not yet its nvidia-imex
            self.index = [p for p in self.index if not (p.name == "nvidia-imex" and p.version.startswith("590."))]

    def universe(self) -> Universe:
        """What apt resolves over now: the index and the saved files named, the installed packages, the holds."""
        installed = {n: self.stanzas.get(n) or Package(n, v) for n, v in self.installed.items()}
        return Universe([*self.index, *self.local], installed, self.held, assumed=self.base)

    def offered(self, name: str) -> list[Package]:
        """The versions of ``name`` the index offers, newest first."""
        if not any(p.name == name for p in self.index):
            return []
        mine = {p for p in [*self.index, *self.local] if p.name == name}
        return sorted(mine, key=lambda p: version_order(p.version), reverse=True)

    def install_initial(self, requests: list[str]) -> None:
        """The node's packages before the change: ``requests`` (metapackages, pinned ``name=version`` or
        not) and what they depend on, resolved over the index as apt installed them."""
        wanted: dict[str, Package] = {}
        for spec in requests:
            name, _, version = spec.partition("=")
            offered = self.offered(name)
            chosen = next((p for p in offered if not version or fnmatch.fnmatchcase(p.version, version)), None)
            if chosen is None:
                raise ValueError(f"the simulated repository {self.repository} has no {spec}")
            wanted[name] = chosen
        resolution = resolve(self.universe(), wanted)
        if not resolution.ok:
            raise ValueError(f"{self.repository}: {requests} do not install: {[u.line() for u in resolution.unmet]}")
        for pkg in resolution.install.values():
            self.installed[pkg.name] = pkg.version
            self.stanzas[pkg.name] = pkg
        for name in debs.TOOLKIT_PACKAGES:
            self.installed[name] = TOOLKIT_VERSION
        self.installed[f"linux-image-{KERNEL}"] = "6.8.0-60.63"

    def fabric_manager_version(self) -> str | None:
        return next((v for p, v in self.installed.items() if p.startswith("nvidia-fabricmanager")), None)

    def imex_version(self) -> str | None:
        return self.installed.get("nvidia-imex")

    def module_package(self) -> Package | None:
        """The installed package that puts the kernel module on disk: DKMS's or a precompiled one."""
        for name in sorted(self.installed):
            if name.startswith(("nvidia-dkms", "linux-modules-nvidia-")):
                return self.stanzas.get(name)
        return None

    def kernel_common_version(self) -> str | None:
        return next((v for p, v in sorted(self.installed.items()) if p.startswith("nvidia-kernel-common")), None)

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
                    .replace("${source:Package}", self._source(pkg))
                    .replace("${Version}", self.installed[pkg])
                    .replace("${Status}", ("hold" if pkg in self.held else "install") + " ok installed")
                    .replace("${db:Status-Abbrev}", "hi " if pkg in self.held else "ii ")
                    .replace("${Architecture}", "amd64")
                )
        return status

    def _source(self, name: str) -> str:
        stanza = self.stanzas.get(name)
        if stanza is not None:
            return stanza.source
        return "libnvidia-container" if "container" in name else name

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
        given: list[Package] = []
        for path in paths:
            deb = parse_deb(self.site.files.get(path, ""))
            if deb is None:
                io.err(
                    f"dpkg: error: cannot access archive '{path}': No such file or directory\n"
                    if path not in self.site.files
                    else f"dpkg-deb: error: '{path}' is not a Debian format archive\n"
                )
                return 2
            given.append(deb)
            self.local.add(deb)
        after = {n: self.stanzas.get(n) or Package(n, v) for n, v in self.installed.items()}
        after.update({d.name: d for d in given})
        for deb in given:
            for group in deb.depends():
                if any(r.name in self.base or any(p.satisfies(r) for p in after.values()) for r in group):
                    continue
                # dpkg does not resolve: it would leave the package unpacked and unconfigured;
                # the simulator refuses the set instead, with dpkg's words
                have = self.installed.get(group[0].name)
                why = (
                    f"Version of {group[0].name} on system is {have}."
                    if have
                    else f"Package {group[0].name} is not installed."
                )
                io.err(
                    f"dpkg: dependency problems prevent configuration of {deb.name}:\n"
                    f" {deb.name} depends on {' | '.join(map(str, group))}; however:\n  {why}\n\n"
                    f"dpkg: error processing package {deb.name} (--install):\n"
                    " dependency problems - leaving unconfigured\n"
                    f"Errors were encountered while processing:\n {deb.name}\n"
                )
                return 1
        resolution = resolve(self.universe(), {d.name: d for d in given})
        plan = apt_plan.changes(self, resolution, {d.name: d for d in given}, reinstall=True)
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
                    f"  Candidate: {getattr(self.universe().candidate(pkg), 'version', '(none)')}\n"
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
        """Unpack and configure: the userspace follows nvidia-utils, the module on disk its package
        (DKMS builds it; a precompiled package carries it built)."""
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
            self.stanzas.pop(p, None)
            self.held.discard(p)
        for deb in plan.install:
            self.installed[deb.name] = deb.version
            self.stanzas[deb.name] = deb
        setup: list[str] = []
        built = self._update_driver(plan)
        dkms = next((d for d in plan.install if d.name.startswith("nvidia-dkms")), None)
        if dkms is not None and built is not None:
            setup += _dkms_lines(dkms, built, fails=self.module_build_fails)
        setup += [f"Setting up {d.name} ({d.version}) ..." for d in plan.install if d is not dkms]
        if plan.install:
            setup += [
                "Processing triggers for libc-bin (2.39-0ubuntu8.4) ...",
                "Processing triggers for initramfs-tools (0.142ubuntu25.5) ...",
                f"update-initramfs: Generating /boot/initrd.img-{KERNEL}",
            ]
        await stream(io, setup, 1.3, self.site.sleep)
        if self.drops_old_after_install and self._moves_branch(plan):
            # apt-daily.timer refreshes the lists during the window: 575.64.05 has replaced 575.57.08
            self.index = debs.with_release(self.index, "575.57.08", SUPERSEDING_575)
            self.drops_old_after_install = False

    def _update_driver(self, plan: Plan) -> DriverRelease | None:
        """The driver stack after a change: the userspace nvidia-utils installs, the module on disk.
        Returns the release a module package of the plan put (or DKMS built) on disk."""
        utils = next((v for p, v in sorted(self.installed.items()) if p.startswith("nvidia-utils")), None)
        self.site.driver.userspace = release_of(utils) if utils else None
        module = self.module_package()
        if module is None:
            self.site.driver.module_on_disk = None
            return None
        if module not in plan.install:
            return None
        common = self.kernel_common_version()
        release = release_of(common) if common else None
        if release is None:
            return None
        built_by_dkms = module.name.startswith("nvidia-dkms")
        if not (built_by_dkms and self.module_build_fails):
            self.site.driver.module_on_disk = release
            self.site.driver.open_on_disk = "-open" in module.name
            self.site.driver.precompiled_on_disk = not built_by_dkms
        return release

    def _moves_branch(self, plan: Plan) -> bool:
        """Whether the plan installs another driver branch than the one loaded."""
        loaded = self.site.driver.module
        releases = [release_of(d.version) for d in plan.install if not d.name.startswith("linux-")]
        return loaded is not None and any(r is not None and r.branch != loaded.branch for r in releases)

    async def _apt_remove(self, specs: list[str], io: Io) -> int:
        for spec in specs:
            matches = [p for p in self.installed if fnmatch.fnmatchcase(p, spec)]
            held = [p for p in matches if p in self.held]
            if held:
                io.err("E: Held packages were changed and -y was used without --allow-change-held-packages.\n")
                return 100
            for p in matches:
                del self.installed[p]
                self.stanzas.pop(p, None)
                io.out(f"Removing {p} ...\n")
        self._update_driver(Plan())
        return 0


def _url(deb: Package) -> str:
    return "http://archive.ubuntu.com/ubuntu noble-updates/restricted"


def _dkms_lines(dkms: Package, release: DriverRelease, *, fails: bool) -> list[str]:
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
