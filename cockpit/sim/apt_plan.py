"""How the simulated apt-get reads its command line and decides what an install changes.

The decisions and their words follow apt 2.x, checked against the real apt-get on a
scratch root with dummy packages (tests/core/test_sim_apt_real.py):

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

from cockpit.sim.debs import Deb, conflicts
from cockpit.sim.package_base import PackageSite
from cockpit.sim.shell import Io


class PackageManager(Protocol):
    """What the planner reads of the node's package manager."""

    index: dict[str, str]
    installed: dict[str, str]
    held: set[str]
    local: set[Deb]
    site: PackageSite  # its node's files: saved .debs live there as their control fields


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
    install: list[Deb] = field(default_factory=list)  # to unpack and configure, the metapackage last
    fetch: list[Deb] = field(default_factory=list)  # of those, what comes from the repository
    remove: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    upgraded: list[str] = field(default_factory=list)
    downgraded: list[str] = field(default_factory=list)
    held_changed: list[str] = field(default_factory=list)
    reinstalled: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def _local_path(spec: str) -> str | None:
    if spec.startswith("/"):
        return spec
    if spec.startswith(("./", "../")):
        return "/root/" + spec.removeprefix("./")  # the SSH user's working directory
    return None


def resolve_specs(pm: PackageManager, specs: list[str], io: Io) -> dict[str, Deb] | None:
    """Each ``name``, ``name=version`` or ``./file.deb`` as the package version it asks for."""
    wanted: dict[str, Deb] = {}
    for spec in specs:
        path = _local_path(spec)
        if path is not None:
            deb = Deb.parse(pm.site.files.get(path, "")) if path.endswith(".deb") else None
            if deb is None:
                io.err(f"E: Unsupported file {spec} given on commandline\n")
                return None
            wanted[deb.name] = deb
            pm.local.add(deb)
            continue
        name, _, version = spec.partition("=")
        if name not in pm.index and name not in pm.installed:
            io.err(f"E: Unable to locate package {name}\n")
            return None
        candidate = pm.index.get(name)
        if version and (candidate is None or not fnmatch.fnmatchcase(candidate, version)):
            io.err(f"E: Version '{version}' for '{name}' was not found\n")
            return None
        if candidate is None:
            candidate = pm.installed[name]
        wanted[name] = Deb(name, candidate)
    return wanted


def _offered(pm: PackageManager, deb: Deb) -> bool:
    return deb in pm.local or pm.index.get(deb.name) == deb.version


def plan(pm: PackageManager, wanted: dict[str, Deb], io: Io, *, reinstall: bool) -> Plan | None:
    """What installing ``wanted`` changes, or None with apt's refusal written to ``io``."""
    closure = dict(wanted)
    unmet: list[str] = []
    queue = list(wanted.values())
    while queue:
        deb = queue.pop()
        for dep in deb.depends():
            chosen = closure.get(dep.name)
            if chosen is not None:
                if chosen.version != dep.version:
                    unmet.append(
                        f" {deb.name} : Depends: {dep.name} (= {dep.version}) but {chosen.version} is to be installed"
                    )
                continue
            if pm.installed.get(dep.name) == dep.version:
                continue
            if _offered(pm, dep):
                closure[dep.name] = dep
                queue.append(dep)
                continue
            cand = pm.installed.get(dep.name) or pm.index.get(dep.name)  # apt names the version it keeps
            tail = f"but {cand} is to be installed" if cand else "but it is not installable"
            unmet.append(f" {deb.name} : Depends: {dep.name} (= {dep.version}) {tail}")
    if unmet:
        _cannot(io, unmet, "E: Unable to correct problems, you have held broken packages.\n")
        return None
    result = changes(pm, closure, reinstall=reinstall)
    held_removed = [p for p in result.remove if p in pm.held]
    if held_removed:
        lines = []
        for p in held_removed:
            by = next(d.name for d in result.install if conflicts(d.name, p))
            what = "nvidia-fabricmanager" if p.startswith("nvidia-fabricmanager-") else by
            lines += [f" {p} : Conflicts: {what}", f" {by} : Conflicts: {what if what != by else p}"]
        _cannot(
            io, lines, "E: Error, pkgProblemResolver::Resolve generated breaks, this may be caused by held packages.\n"
        )
        return None
    return result


def changes(pm: PackageManager, debs: dict[str, Deb], *, reinstall: bool) -> Plan:
    result = Plan()
    for deb in sorted(debs.values(), key=lambda d: d.name.startswith("nvidia-driver-")):
        have = pm.installed.get(deb.name)
        if have == deb.version and not reinstall:
            result.notices.append(f"{deb.name} is already the newest version ({deb.version}).")
            continue
        if have == deb.version and not _offered(pm, deb):
            result.notices.append(f"Reinstallation of {deb.name} is not possible, it cannot be downloaded.")
            continue
        result.install.append(deb)
        if deb not in pm.local:
            result.fetch.append(deb)
        if have is None:
            result.new.append(deb.name)
        elif have == deb.version:
            result.reinstalled.append(deb.name)
        elif have != deb.version:
            (result.downgraded if version_key(deb.version) < version_key(have) else result.upgraded).append(deb.name)
            if deb.name in pm.held:
                result.held_changed.append(deb.name)
    result.remove = sorted(
        p for p in pm.installed if p not in debs and any(conflicts(d.name, p) for d in result.install)
    )
    return result


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
        io.out("".join(f"Remv {p}\n" for p in result.remove))
        io.out("".join(f"Inst {d.name} ({d.version} localhost [amd64])\n" for d in result.install))
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


def version_key(version: str) -> list[tuple[int, int | str]]:
    """A sort key close to dpkg's version order for the versions the simulator uses."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|[^\d]+", version)]
