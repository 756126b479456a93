"""How the simulated apt-get reads its command line and decides what an install changes.

The decisions and their words follow apt 2.x; what an install changes is decided by
:mod:`cockpit.sim.apt_resolve` over the repositories' real stanzas, and the package
differential (tests/core/test_packages_differential.py) holds both to the real apt-get:

- ``pkg=VERSION`` (a glob is allowed, ``pkg=580.95.05*``) needs that version in the index,
  else ``E: Version 'VERSION' for 'pkg' was not found``;
- an exact-version Depends that nothing offers stops the install ("held broken packages");
- a held package whose version would change stops it under ``-y`` unless
  ``--allow-change-held-packages``; a held package that a Conflicts would remove makes the
  resolver give up (``pkgProblemResolver::Resolve generated breaks``);
- a version going down needs ``--allow-downgrades`` under ``-y``; without ``-y`` and no
  terminal apt asks and reads end of file: ``Abort.``;
- ``--reinstall`` of a version no longer in the index is skipped with apt's notice.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Protocol

from cockpit.sim.apt_resolve import Resolution, Universe, resolve
from cockpit.sim.debcontrol import Package, compare_versions, parse_stanzas
from cockpit.sim.package_base import PackageSite
from cockpit.sim.shell import Io


class PackageManager(Protocol):
    """What the planner reads of the node's package manager."""

    installed: dict[str, str]
    held: set[str]
    local: set[Package]
    site: PackageSite  # its node's files: saved .debs live there as their control fields

    def universe(self) -> Universe: ...

    def offered(self, name: str) -> list[Package]: ...


_FLAGS = {
    "-y": "yes",
    "--yes": "yes",
    "--assume-yes": "yes",
    "-s": "simulate",
    "--simulate": "simulate",
    "--dry-run": "simulate",
    "--just-print": "simulate",
    "--no-act": "simulate",
    "--recon": "simulate",
    "-d": "download_only",
    "--download-only": "download_only",
    "--reinstall": "reinstall",
    "--allow-downgrades": "allow_downgrades",
    "--allow-change-held-packages": "allow_held",
}
_IGNORED = {"-q", "-qq", "--quiet", "--no-install-recommends", "--install-recommends", "-f", "--fix-broken"}


@dataclass
class AptOptions:
    words: list[str] = field(default_factory=list)
    config: dict[str, str] = field(
        default_factory=dict
    )  # -o Key=Value, keys lower-cased (apt's are not case-sensitive)
    yes: bool = False
    simulate: bool = False
    download_only: bool = False
    reinstall: bool = False
    allow_downgrades: bool = False
    allow_held: bool = False
    error: str = ""

    @classmethod
    def parse(cls, args: list[str]) -> AptOptions:
        opts = cls()
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-o", "-c", "-t") or (a.startswith("-o") and len(a) > 2):
                value = a[2:] if len(a) > 2 else (args[i + 1] if i + 1 < len(args) else "")
                i += 1 if len(a) > 2 else 2
                if a.startswith("-o"):
                    key, _, val = value.partition("=")
                    opts.config[key.lower()] = val
                continue
            if a in _FLAGS:
                setattr(opts, _FLAGS[a], True)
            elif a in _IGNORED or re.fullmatch(r"-q+", a):
                pass
            elif a.startswith("-") and a not in ("-", "--"):
                opts.error = f"E: Command line option '{a}' is not understood in combination with the other options.\n"
            else:
                opts.words.append(a)
            i += 1
        return opts

    @property
    def lock_timeout(self) -> float:
        try:
            return float(self.config.get("dpkg::lock::timeout", "0"))
        except ValueError:
            return 0.0

    @property
    def archives(self) -> str:
        path = self.config.get("dir::cache::archives", "/var/cache/apt/archives/")
        return path if path.endswith("/") else path + "/"


@dataclass
class Plan:
    install: list[Package] = field(default_factory=list)  # to unpack and configure, metapackages last
    fetch: list[Package] = field(default_factory=list)  # of those, what comes from the repository
    remove: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    upgraded: list[str] = field(default_factory=list)
    downgraded: list[str] = field(default_factory=list)
    held_changed: list[str] = field(default_factory=list)
    reinstalled: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    previous: dict[str, str] = field(default_factory=dict)  # name -> the installed version it replaces


def _local_path(spec: str) -> str | None:
    if spec.startswith("/"):
        return spec
    if spec.startswith(("./", "../")):
        return "/root/" + spec.removeprefix("./")  # the SSH user's working directory
    return None


def parse_deb(text: str) -> Package | None:
    """A saved .deb's control fields (what stands for the file on a simulated disk), or None."""
    stanzas = parse_stanzas(text)
    if not stanzas or "Package" not in stanzas[0] or "Version" not in stanzas[0]:
        return None
    return Package.of(stanzas[0])


def resolve_specs(pm: PackageManager, specs: list[str], io: Io) -> dict[str, Package] | None:
    """Each ``name``, ``name=version`` (a glob allowed) or ``./file.deb`` as the package version it asks for:
    ``=`` picks any version the index offers; a bare name its candidate (the newest offered)."""
    wanted: dict[str, Package] = {}
    universe = pm.universe()
    for spec in specs:
        path = _local_path(spec)
        if path is not None:
            deb = parse_deb(pm.site.files.get(path, "")) if path.endswith(".deb") else None
            if deb is None:
                io.err(f"E: Unsupported file {spec} given on commandline\n")
                return None
            wanted[deb.name] = deb
            pm.local.add(deb)
            continue
        name, _, version = spec.partition("=")
        offered = pm.offered(name)
        if not offered and name not in pm.installed:
            io.err(f"E: Unable to locate package {name}\n")
            return None
        if version:
            chosen = next((p for p in offered if fnmatch.fnmatchcase(p.version, version)), None)
            if chosen is None:
                io.err(f"E: Version '{version}' for '{name}' was not found\n")
                return None
        else:
            candidate = universe.candidate(name)
            if candidate is None:
                io.err(f"E: Package '{name}' has no installation candidate\n")
                return None
            chosen = candidate
        wanted[name] = chosen
    return wanted


def plan(pm: PackageManager, wanted: dict[str, Package], io: Io, *, reinstall: bool) -> Plan | None:
    """What installing ``wanted`` changes, or None with apt's refusal written to ``io``."""
    resolution = resolve(pm.universe(), wanted)
    if not resolution.ok:
        _cannot(
            io, [u.line() for u in resolution.unmet], "E: Unable to correct problems, you have held broken packages.\n"
        )
        return None
    held_removed = sorted(n for n in resolution.remove if n in pm.held)
    if held_removed:
        lines = [f" {n} : Conflicts or Depends broken by the change" for n in held_removed]
        _cannot(
            io, lines, "E: Error, pkgProblemResolver::Resolve generated breaks, this may be caused by held packages.\n"
        )
        return None
    return changes(pm, resolution, wanted, reinstall=reinstall)


def changes(pm: PackageManager, resolution: Resolution, wanted: dict[str, Package], *, reinstall: bool) -> Plan:
    result = Plan()
    # parts before what depends on them: a package after everything it names (apt configures in that order)
    for pkg in _dependency_order(resolution.install):
        have = pm.installed.get(pkg.name)
        if have == pkg.version and not reinstall:
            if pkg.name in wanted:
                result.notices.append(f"{pkg.name} is already the newest version ({pkg.version}).")
            continue
        if have == pkg.version and not _offered(pm, pkg):
            result.notices.append(f"Reinstallation of {pkg.name} is not possible, it cannot be downloaded.")
            continue
        result.install.append(pkg)
        if pkg not in pm.local:
            result.fetch.append(pkg)
        if have is None:
            result.new.append(pkg.name)
        elif have == pkg.version:
            result.reinstalled.append(pkg.name)
        else:
            (result.downgraded if compare_versions(pkg.version, have) < 0 else result.upgraded).append(pkg.name)
            if pkg.name in pm.held:
                result.held_changed.append(pkg.name)
    result.remove = sorted(resolution.remove)
    result.previous = {n: v for n, v in pm.installed.items() if n in resolution.remove or n in resolution.install}
    return result


def _offered(pm: PackageManager, pkg: Package) -> bool:
    return pkg in pm.local or pkg in pm.offered(pkg.name)


def _dependency_order(packages: dict[str, Package]) -> list[Package]:
    """Depth-first: each package after the packages of the set it depends on."""
    done: dict[str, Package] = {}

    def visit(pkg: Package, seen: set[str]) -> None:
        if pkg.name in done or pkg.name in seen:
            return
        seen.add(pkg.name)
        for group in pkg.depends():
            for rel in group:
                other = packages.get(rel.name)
                if other is not None:
                    visit(other, seen)
        done[pkg.name] = pkg

    for name in sorted(packages):
        visit(packages[name], set())
    return list(done.values())


def report(result: Plan, opts: AptOptions, io: Io) -> int | None:
    """apt's account of the plan; an exit status where it stops here, None to go on."""
    out = [*result.notices]

    def block(title: str, names: list[str]) -> None:
        if names:
            out.extend([title, "  " + " ".join(sorted(names))])

    block("The following packages will be REMOVED:", result.remove)
    block("The following held packages will be changed:", result.held_changed)
    block("The following NEW packages will be installed:", result.new)
    block("The following packages will be upgraded:", result.upgraded)
    block("The following packages will be DOWNGRADED:", result.downgraded)
    out.append(
        f"{len(result.upgraded)} upgraded, {len(result.new)} newly installed, "
        + (f"{len(result.downgraded)} downgraded, " if result.downgraded else "")
        + (f"{len(result.reinstalled)} reinstalled, " if result.reinstalled else "")
        + f"{len(result.remove)} to remove and 0 not upgraded."
    )
    io.out("\n".join(out) + "\n")
    if opts.yes and result.held_changed and not opts.allow_held:
        io.err("E: Held packages were changed and -y was used without --allow-change-held-packages.\n")
        return 100
    if opts.yes and result.downgraded and not opts.allow_downgrades:
        io.err("E: Packages were downgraded and -y was used without --allow-downgrades.\n")
        return 100
    changing = bool(result.install or result.remove)
    if opts.simulate:
        was = result.previous
        io.out("".join(f"Remv {p} [{was[p]}]\n" if p in was else f"Remv {p}\n" for p in result.remove))
        io.out(
            "".join(
                f"Inst {d.name}{f' [{was[d.name]}]' if d.name in was else ''} ({d.version} localhost [amd64])\n"
                for d in result.install
            )
        )
        io.out("".join(f"Conf {d.name} ({d.version} localhost [amd64])\n" for d in result.install))
        return 0
    if changing and not opts.yes:
        io.out("Do you want to continue? [Y/n] Abort.\n")  # no terminal: apt reads end of file
        return 1
    return None


def _cannot(io: Io, lines: list[str], error: str) -> None:
    io.out(
        "Some packages could not be installed. This may mean that you have\n"
        "requested an impossible situation or if you are using the unstable\n"
        "distribution that some required packages have not yet been created\n"
        "or been moved out of Incoming.\n"
        "The following information may help to resolve the situation:\n\n"
        "The following packages have unmet dependencies:\n" + "\n".join(lines) + "\n"
    )
    io.err(error)
