"""The simulated package manager of a RHEL node: ``rpm`` and ``dnf`` (4, as RHEL 8/9 ship it).

As strict as dnf on a real RHEL HGX node (packages and streams in :mod:`~cockpit.sim.rpms`):

- only the enabled stream of ``nvidia-driver`` offers packages (modular filtering); enabling
  another stream while one is enabled is refused, ``module switch-to`` changes it;
- nothing moves the fabric manager or nscq with the driver but the ``fm`` profile;
- ``dnf versionlock`` (dnf-plugins-core, plugins/versionlock.py) excludes every other version
  of a locked name from transactions, so an upgrade of a locked package fails to resolve;
- a second dnf waits for the RPM database lock ("Waiting for process with pid N to finish.",
  dnf/lock.py), or with ``--setopt=exit_on_lock=True`` exits 200;
- ``dnf download`` saves the exact NEVRA asked for; ``dnf install`` / ``downgrade`` take saved
  files given by path, subject to the locks, and (the stricter reading) only in their own stream.

Every message is dnf 4's own wording (dnf, dnf-plugins-core, libdnf, their behave tests in
ci-dnf-stack). Installing a driver replaces the userspace at once and builds the new module
with DKMS; the loaded module changes at the next boot.
"""

from __future__ import annotations

import fnmatch
import re

from cockpit.sim import rpms as r
from cockpit.sim.kernel import KERNEL
from cockpit.sim.package_base import NodePackages, PackageFaults, PackageSite
from cockpit.sim.rpms import Rpm
from cockpit.sim.shell import Io, option_value, stream

LOCK_PID = 48213  # the other dnf holding the RPM database lock
REPO_ID = "cuda-rhel9-x86_64"
EXPIRATION = "Last metadata expiration check: 0:12:01 ago on Tue 02 Dec 2025 01:02:44 AM UTC.\n"
RULE = "=" * 100 + "\n"
MODULE = "nvidia-driver"
SUMMARY = {"Installing:": "Install", "Upgrading:": "Upgrade", "Downgrading:": "Downgrade"}
HOME = "/root/"  # where `dnf download` saves without --destdir


class DnfPackageManager(NodePackages):
    """The node's installed RPMs, versionlocks, enabled stream and repository, and the commands on them."""

    def __init__(self, site: PackageSite, faults: PackageFaults) -> None:
        super().__init__(site, faults)  # faults.fabric_manager_lags is an apt mirror's: not simulated here
        self.installed: dict[str, Rpm] = {}
        self.locks: list[str] = []  # versionlock.list entries: NAME-[EPOCH:]VERSION-RELEASE.*
        self.stream: str | None = None  # the enabled nvidia-driver stream
        self.profiles: set[str] = set()  # its installed profiles
        self.repo = r.repository()
        self.busy = False  # another transaction holds the RPM database lock

    def install_initial(self, rpms: list[Rpm], stream: str, profile: str) -> None:
        self.installed = {p.name: p for p in rpms}
        self.stream, self.profiles = stream, {profile}
        # the module on disk and loaded is the installed kmod's flavour and packaging
        self.site.driver.open_on_disk = self.site.driver.open_loaded = r.KMOD[True] in self.installed
        self.site.driver.precompiled_on_disk = r.stream_kind(stream) == r.PRECOMPILED

    def fabric_manager_version(self) -> str | None:
        fm = self.installed.get("nvidia-fabric-manager") or self.installed.get("nvidia-fabricmanager")
        return f"{fm.version}-{fm.release}" if fm else None

    # -- rpm ---------------------------------------------------------------------------

    async def rpm(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        fmt = "%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}\n"
        if "--qf" in args or "--queryformat" in args:
            i = args.index("--qf" if "--qf" in args else "--queryformat")
            fmt = args[i + 1]
            del args[i : i + 2]
        flags = "".join(a.lstrip("-") for a in args if a.startswith("-") and not a.startswith("--"))
        names = [a for a in args if not a.startswith("-")]
        if "q" not in flags:
            io.err("rpm: only queries are simulated\n")
            return 1
        fmt = fmt.replace("\\n", "\n").replace("\\t", "\t")
        if "a" in flags:  # rpm -qa [GLOB...]: every installed package matching one, nothing said of the rest
            for pkg in sorted(self.installed.values()):
                if not names or any(fnmatch.fnmatchcase(pkg.name, g) for g in names):
                    io.out(_format(fmt, pkg))
            return 0
        status = 0
        for name in names:
            found = self.installed.get(name)
            if found is None:
                io.out(f"package {name} is not installed\n")  # rpm says it on stdout, exit 1
                status = 1
            else:
                io.out(_format(fmt, found))
        return status

    # -- dnf ---------------------------------------------------------------------------

    async def dnf(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        yes = any(a in ("-y", "--assumeyes") for a in args)
        quiet = "-q" in args or "--quiet" in args
        download_only = "--downloadonly" in args
        allow_erasing = "--allowerasing" in args
        exit_on_lock = "--setopt=exit_on_lock=True" in args or "--setopt=exit_on_lock=true" in args
        destdir = HOME
        words: list[str] = []
        i = 0
        while i < len(args):
            if (given := option_value(args, i, "--destdir")) is not None:
                destdir, i = given
            elif not args[i].startswith("-"):
                words.append(args[i])
            i += 1
        destdir = destdir.rstrip("/") + "/"
        if not words:
            io.err("usage: dnf [options] COMMAND\n")
            return 1
        cmd, rest = words[0], words[1:]
        if cmd == "makecache":
            await stream(
                io, [f"{REPO_ID:<48}48 kB/s | 3.5 kB     00:00", "Metadata cache created."], 0.6, self.site.sleep
            )
            return 0
        if cmd == "versionlock":
            return self._versionlock(rest, io)
        if cmd == "module" and rest[:1] == ["list"]:
            return self._module_list(rest[1:], "--enabled" in args, quiet, io)
        if cmd == "download":
            return await self._download(rest, destdir, io)
        if not quiet:
            io.out(EXPIRATION)
        if cmd == "module" and rest[:1] in (["enable"], ["switch-to"], ["install"], ["reset"]):
            return await self._module(
                rest[0], rest[1:], yes, download_only, destdir, exit_on_lock, io, allow_erasing=allow_erasing
            )
        if cmd in ("install", "downgrade", "upgrade"):
            wanted = self._resolve_specs(rest, io, downgrade=cmd == "downgrade")
            if wanted is None:
                return 1
            return await self._transaction(wanted, None, yes, download_only, destdir, exit_on_lock, io)
        io.err(f"No such command: {cmd}. Please use /usr/bin/dnf --help\n")
        return 1

    def _versionlock(self, rest: list[str], io: Io) -> int:
        sub, pkgs = (rest[0], rest[1:]) if rest else ("list", [])
        if sub == "list":
            io.out("".join(p + "\n" for p in self.locks))
            return 0
        if sub in ("delete", "del"):
            for entry in [e for e in self.locks if _lock_matches(e, pkgs)]:
                io.out(f"Deleting versionlock for: {entry}\n")
                self.locks.remove(entry)
            return 0
        if sub == "add":
            for pat in pkgs:
                found = [p for p in self.installed.values() if _spec_matches(pat, p)]
                if not found:
                    io.out(f"No package found for: {pat}\n")
                for pkg in found:
                    spec = f"{pkg.name}-{pkg.evr}.*"
                    if spec in self.locks:
                        io.out(f"Package already locked in equivalent form: {spec}\n")
                    else:
                        io.out(f"Adding versionlock on: {spec}\n")
                        self.locks.append(spec)
            return 0
        io.err(f"Error: unknown versionlock subcommand {sub}\n")
        return 1

    def _module_list(self, names: list[str], enabled: bool, quiet: bool, io: Io) -> int:
        streams = sorted({p.stream for p in self.repo if p.stream})
        if enabled:
            streams = [s for s in streams if s == self.stream]
        if (names and not any(fnmatch.fnmatchcase(MODULE, n.split(":")[0]) for n in names)) or not streams:
            io.err("Error: No matching Modules to list\n")
            return 1
        if not quiet:
            io.out(EXPIRATION)
        io.out(f"CUDA {r.DIST} x86_64\nName{'':<11}Stream{'':<7}Profiles{'':<30}Summary\n")
        for s in streams:
            mark = " [e]" if s == self.stream else ""
            profs = ", ".join(
                p + (" [d]" if p == "default" else "") + (" [i]" if s == self.stream and p in self.profiles else "")
                for p in r.PROFILES
            )
            io.out(f"{MODULE:<15}{s + mark:<13}{profs:<38}Nvidia driver for {s} branch\n")
        io.out("\nHint: [d]efault, [e]nabled, [x]disabled, [i]nstalled\n")
        return 0

    # -- module enable / switch-to / install --------------------------------------------

    async def _module(
        self,
        action: str,
        specs: list[str],
        yes: bool,
        download_only: bool,
        destdir: str,
        exit_on_lock: bool,
        io: Io,
        *,
        allow_erasing: bool = False,
    ) -> int:
        if action == "reset":
            io.out("Dependencies resolved.\n" + RULE + " Package  Architecture  Version  Repository  Size\n" + RULE)
            io.out(f"Resetting modules:\n {MODULE}\n\nTransaction Summary\n{RULE}\nComplete!\n")
            self.stream, self.profiles = None, set()
            return 0
        spec = next((s for s in specs if s.split(":")[0] == MODULE), None)
        stream, _, profile = (spec or "").partition(":")[2].partition("/")
        streams = {p.stream for p in self.repo if p.stream}
        if spec is None or stream not in streams or (profile and profile not in r.PROFILES):
            io.err(
                f"No such module: {spec or specs[0] if specs else ''}\nUnable to resolve argument {spec}\n"
                f"Error: Problems in request:\nmissing groups or modules: {spec}\n"
            )
            return 1
        if action in ("enable", "install") and self.stream not in (None, stream):
            io.err(
                f"The operation would result in switching of module '{MODULE}' stream '{self.stream}' to stream "
                f"'{stream}'\nError: It is not possible to switch enabled streams of a module unless explicitly "
                "enabled via configuration option module_stream_switch.\nIt is recommended to rather remove all "
                "installed content from the module, and reset the module using 'dnf module reset <module_name>' "
                "command. After you reset the module, you can install the other stream.\n"
            )
            return 1
        if action == "enable":
            io.out("Dependencies resolved.\n" + RULE + f"Enabling module streams:\n {MODULE:<20}{stream}\n\n")
            io.out(f"Transaction Summary\n{RULE}\nComplete!\n")
            self.stream = stream
            return 0
        # install and switch-to: the profile's packages (switch-to: the installed ones, or the
        # profile named) at the newest version the stream offers
        release = max((p for p in self.repo if p.stream == stream), key=Rpm.key)
        release_of = r.release_of(release.version)
        assert release_of is not None
        names = r.profile_names(profile or "default", stream, release_of) if profile or action == "install" else []
        if action == "switch-to":
            # the installed parts, each as its family is named in the target stream (a precompiled kmod
            # is its own family: dnf installs the new one beside it, as the real dnf does)
            target = {r.family(n): n for n in r.profile_names("fm", stream, release_of)}
            names += [target.get(r.family(n), n) for n in self.installed if r.is_driver_part(n) or r.is_fabric(n)]
        wanted: dict[str, Rpm] = {}
        for name in dict.fromkeys(names):
            # the stream's own build, else a package outside every stream (nscq is not a module artifact)
            offered = [p for p in self.repo if p.name == name and p.stream == stream]
            offered = offered or [p for p in self.repo if p.name == name and p.stream is None]
            if offered:
                wanted[name] = max(offered, key=Rpm.key)
        replaced = sorted(
            old.nevra
            for old in self.installed.values()
            if any(r.family(p.name) == r.family(old.name) and p.name != old.name for p in wanted.values())
        )
        if replaced and not allow_erasing:
            # another kmod flavour, fabric manager renamed at 580: both conflict with what is installed
            # (cockpit/sim/repos/rhel9), and dnf replaces conflicting packages only when allowed to erase
            io.err(
                "Error: \n"
                + "".join(
                    f" Problem {n}: package {old} conflicts with the stream's package of the same kind\n"
                    for n, old in enumerate(replaced, 1)
                )
                + "(try to add '--allowerasing' to command line to replace conflicting packages or '--skip-broken' "
                "to skip uninstallable packages or '--nobest' to use not only best candidate packages)\n"
            )
            return 1
        switch = (self.stream, stream) if self.stream != stream else None
        status = await self._transaction(
            wanted, switch, yes, download_only, destdir, exit_on_lock, io, allow_erasing=allow_erasing
        )
        if status == 0 and not download_only:
            self.stream = stream
            self.profiles = {profile or "default"}
        return status

    # -- install, downgrade, the transaction ---------------------------------------------

    def _resolve_specs(self, specs: list[str], io: Io, *, downgrade: bool) -> dict[str, Rpm] | None:
        wanted: dict[str, Rpm] = {}
        for spec in specs:
            if spec.endswith(".rpm"):  # a file on the node: @commandline
                pkg = Rpm.parse(self.site.files.get(spec, ""))
                if pkg is None:
                    io.err(f"Can not load RPM file: {spec}.\nCould not open: {spec}\n")
                    return None
                if pkg.stream and pkg.stream != self.stream:
                    # the stricter reading: a saved modular package installs in its own stream only
                    io.out(f"All matches were filtered out by modular filtering for argument: {spec}\n")
                    io.err(f"Error: Unable to find a match: {spec}\n")
                    return None
            else:
                matches = [p for p in self.repo if _spec_matches(spec, p)]
                visible = [p for p in matches if p.stream in (None, self.stream)]
                if not matches or not visible:
                    why = (
                        "No match for argument"
                        if not matches
                        else "All matches were filtered out by modular filtering for argument"
                    )
                    io.out(f"{why}: {spec}\n")
                    io.err(f"Error: Unable to find a match: {spec}\n")
                    return None
                pkg = max(visible, key=Rpm.key)
            have = self.installed.get(pkg.name)
            if have is None and downgrade:
                # dnf downgrade never installs: a name the change renamed (nvidia-fabric-manager at
                # 580) is skipped with this line, and the command still exits 0 (the real dnf)
                io.out(f"Package {pkg.name} not installed, cannot downgrade it.\n")
                continue
            if have is not None and downgrade and have.key() <= pkg.key():
                io.out(f"Package {have.nevra} of lowest version already installed, cannot downgrade it.\n")
                continue
            if have is not None and not downgrade and have.key() > pkg.key() and not spec.endswith(".rpm"):
                io.out(f"Package {have.nevra} of higher version already installed, cannot install it.\n")
                continue
            if have == pkg:
                io.out(f"Package {have.nevra} is already installed.\n")
                continue
            wanted[pkg.name] = pkg
        return wanted

    def _problems(self, wanted: dict[str, Rpm]) -> list[str]:
        """Why the set cannot be resolved: a versionlocked name at another version, a package of
        a stream that is not the one being enabled, a driver part left at another version."""
        problems = []
        for pkg in wanted.values():
            locked = [e for e in self.locks if _lock_matches(e, [pkg.name])]
            if locked and not any(_lock_matches(e, [f"{pkg.name}-{pkg.evr}"]) for e in locked):
                problems.append(f"package {pkg.nevra} is filtered out by exclude filtering")
        # nvidia-driver and nvidia-driver-cuda require their parts at their own version
        final = {**{n: p for n, p in self.installed.items()}, **wanted}
        driver = final.get("nvidia-driver")
        for name, pkg in final.items():
            if driver and r.is_driver_part(name) and pkg.version != driver.version and name in wanted:
                problems.append(f"package {pkg.nevra} requires nvidia-driver = {pkg.epoch}:{pkg.version}")
        return problems

    async def _transaction(
        self,
        wanted: dict[str, Rpm],
        switch: tuple[str | None, str] | None,
        yes: bool,
        download_only: bool,
        destdir: str,
        exit_on_lock: bool,
        io: Io,
        *,
        allow_erasing: bool = False,
    ) -> int:
        problems = self._problems(wanted)
        if problems:
            io.err("Error: \n Problem: cannot install the best candidate for the job\n")
            io.err("".join(f"  - {p}\n" for p in problems))
            io.err(
                "(try to add '--skip-broken' to skip uninstallable packages or '--nobest' to use not only best "
                "candidate packages)\n"
            )
            return 1
        if not wanted and switch is None:
            io.out("Dependencies resolved.\nNothing to do.\nComplete!\n")
            return 0
        io.out(
            "Dependencies resolved.\n"
            + RULE
            + f" {'Package':<32}{'Architecture':<14}{'Version':<24}{'Repository':<22}Size\n"
            + RULE
        )
        kinds: dict[str, list[Rpm]] = {"Upgrading:": [], "Downgrading:": [], "Installing:": []}
        for pkg in wanted.values():
            have = self.installed.get(pkg.name)
            kind = "Installing:" if have is None else ("Upgrading:" if have.key() < pkg.key() else "Downgrading:")
            kinds[kind].append(pkg)
        for kind, pkgs in kinds.items():
            if pkgs:
                io.out(kind + "\n")
                for p in sorted(pkgs):
                    io.out(f" {p.name:<32}{p.arch:<14}{p.evr:<24}{REPO_ID:<22}{self.site.rng.uniform(0.1, 90):.0f} M\n")
        if switch is not None:
            io.out(
                f"Switching module streams:\n {MODULE:<46}{switch[0]} -> {switch[1]}\n"
                if switch[0]
                else f"Enabling module streams:\n {MODULE:<46}{switch[1]}\n"
            )
        io.out(f"\nTransaction Summary\n{RULE}")
        for kind, pkgs in kinds.items():
            if pkgs:
                io.out(f"{SUMMARY[kind]}  {len(pkgs)} Packages\n")
        io.out("\n")
        if download_only:
            io.out("DNF will only download packages for the transaction.\n")
        if not yes:
            io.out("Is this ok [y/N]: Operation aborted.\n")
            return 1
        if self.busy:
            if exit_on_lock:
                io.err(f"RPMDB already locked by {LOCK_PID}\n")
                return 200
            while self.busy:  # dnf waits for the lock as long as it takes (dnf/lock.py)
                io.out(f"Waiting for process with pid {LOCK_PID} to finish.\n")
                await self.site.sleep(1.0)
        lines = [
            f"({n}/{len(wanted)}): {p.filename}  37 MB/s |  {self.site.rng.uniform(1, 90):.0f} MB     00:01"
            for n, p in enumerate(wanted.values(), 1)
        ]
        await stream(io, ["Downloading Packages:", *lines], 1.0, self.site.sleep)
        if download_only:
            for p in wanted.values():
                self.site.files[destdir + p.filename] = p.control()
            io.out("Complete!\nThe downloaded packages were saved in cache until the next successful transaction.\n")
            io.out("You can remove cached packages by executing 'dnf clean packages'.\n")
            return 0
        self.busy = True
        try:
            await self._apply(wanted, io)
        finally:
            self.busy = False
        return 0

    async def _apply(self, wanted: dict[str, Rpm], io: Io) -> None:
        lines = [
            "Running transaction check",
            "Transaction check succeeded.",
            "Running transaction test",
            "Transaction test succeeded.",
            "Running transaction",
        ]
        n = len(wanted)
        for i, p in enumerate(sorted(wanted.values()), 1):
            verb = (
                "Installing"
                if p.name not in self.installed
                else ("Upgrading" if self.installed[p.name].key() < p.key() else "Downgrading")
            )
            lines.append(f"  {verb:<17}: {p.nevra:<60}{i}/{n}")
        kmod = next((p for p in wanted.values() if p.name.startswith("kmod-nvidia-")), None)
        precompiled = kmod is not None and kmod.name not in r.KMOD.values()
        if kmod is not None and not precompiled:  # DKMS builds it; a precompiled kmod comes built
            lines += [f"  Running scriptlet: {kmod.nevra}", f"Building for {KERNEL}"]
            if self.module_build_fails:
                lines += [
                    f"Error! Bad return status for module build on kernel: {KERNEL} (x86_64)",
                    f"Consult /var/lib/dkms/nvidia/{kmod.version}/build/make.log for more information.",
                ]
        for p in wanted.values():
            old = self.installed.get(p.name)
            if old is not None:
                lines.append(f"  Cleanup          : {old.nevra}")
        await stream(io, lines, 2.0, self.site.sleep)
        for p in wanted.values():
            # another flavour's kmod, fabric manager or nscq under their older names: replaced (--allowerasing)
            for other in [n for n in self.installed if r.family(n) == r.family(p.name) and n != p.name]:
                del self.installed[other]
            self.installed[p.name] = p
        cuda = self.installed.get("nvidia-driver-cuda")
        self.site.driver.userspace = r.release_of(cuda.version) if cuda else None
        if kmod is not None and (precompiled or not self.module_build_fails):
            self.site.driver.module_on_disk = r.release_of(kmod.version)
            self.site.driver.open_on_disk = kmod.name == r.KMOD[True]
            self.site.driver.precompiled_on_disk = precompiled
        io.out("Upgraded:\n" + "".join(f"  {p.nevra}\n" for p in wanted.values()) + "\nComplete!\n")
        if self.drops_old_after_install and any(p.version.startswith("580.") for p in wanted.values()):
            # the mirror now keeps only the newest release of each branch: 575.57.08 gone, 575.64.05 in
            self.repo = [p for p in self.repo if p.version != "575.57.08"]
            self.repo += r.superseded("575.57.08", r.SUPERSEDING_575.version)
            self.drops_old_after_install = False

    async def _download(self, specs: list[str], destdir: str, io: Io) -> int:
        # dnf download (dnf-plugins-core): the newest of a bare name, the exact version of a NEVR[A];
        # no modular filtering, no versionlock (download does not resolve a transaction)
        found: list[Rpm] = []
        for spec in specs:
            matches = [p for p in self.repo if _spec_matches(spec, p)]
            if not matches:
                io.err(f"No package {spec} available.\nError: No packages available.\n")
                return 1
            # the same file is in both flavours' streams: the one enabled now is where it comes from
            found.append(max(matches, key=lambda p: (p.stream == self.stream, p.key())))
        for n, pkg in enumerate(found, 1):
            size = self.site.rng.uniform(0.1, 90)
            io.out(f"({n}/{len(found)}): {pkg.filename}{'':>8}37 MB/s | {size:.1f} MB     00:01\n")
            self.site.files[destdir + pkg.filename] = pkg.control()
        return 0


def _format(fmt: str, pkg: Rpm) -> str:
    tags = {
        "NAME": pkg.name,
        "VERSION": pkg.version,
        "RELEASE": pkg.release,
        "ARCH": pkg.arch,
        "EPOCH": str(pkg.epoch) if pkg.epoch else "(none)",
    }
    return re.sub(r"%\{(\w+)\}", lambda m: tags.get(m.group(1), "(none)"), fmt)


def _spec_matches(spec: str, pkg: Rpm) -> bool:
    """A dnf package spec: NAME, NAME-[EPOCH:]VERSION, NAME-[EPOCH:]VERSION-RELEASE[.ARCH], globs allowed."""
    forms = {
        pkg.name,
        f"{pkg.name}-{pkg.version}",
        f"{pkg.name}-{pkg.evr}",
        f"{pkg.name}-{pkg.version}-{pkg.release}",
        pkg.nvra,
        pkg.nevra,
        f"{pkg.name}-{pkg.epoch}:{pkg.version}",
    }
    return any(fnmatch.fnmatchcase(f, spec) for f in forms)


def _lock_matches(entry: str, patterns: list[str]) -> bool:
    """Whether a versionlock entry matches one of the patterns, as the plugin's ``_match`` does:
    the entry itself, or one of its name forms against a glob."""
    entry = entry.lstrip("!")
    if entry in patterns:
        return True
    m = re.match(r"^(?P<name>.+)-(?:(?P<epoch>\d+):)?(?P<version>[^-]+)-(?P<release>[^-]+?)\.\*$", entry)
    if m is None:
        return False
    name, epoch, version, release = m.group("name", "epoch", "version", "release")
    forms = [
        name,
        f"{name}-{version}",
        f"{name}-{version}-{release}",
        f"{name}-{epoch or 0}:{version}",
        f"{name}-{epoch or 0}:{version}-{release}",
        f"{name}-{epoch}:{version}" if epoch else f"{name}-{version}",
    ]
    return any(fnmatch.fnmatch(f, p) for f in forms for p in patterns)
