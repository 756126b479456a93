"""What an apt install changes, decided over real control stanzas the way apt's classic solver does.

The simulated apt-get hands this module the packages a command line asks for; it answers
with what would be installed, upgraded, downgraded and removed, or with the relations
nothing can satisfy. The rules are apt 2.x's (apt-pkg's pkgDepCache::MarkInstall and
pkgProblemResolver), and a differential test (tests/core/test_packages_differential.py)
holds every answer to the real apt-get's over the same stanzas:

- a dependency is met by a package already installed or marked, by name or by Provides;
  otherwise apt marks the *candidate* of the first alternative that can satisfy it (the
  newest version the index offers, or the file named on the command line). apt never
  reaches for an older version: an exact-version Depends that the candidate does not meet
  is unmet ("but 580.105.08-1 is to be installed"), the trap of version-pinned installs
  from a repository that keeps every point release;
- a marked package removes every installed one its Conflicts or Breaks name (and that
  names it), unless the same name is being replaced by the marked version;
- an installed package whose dependencies the change breaks is moved to its candidate
  where that mends it, else removed: fabric manager goes when the kernel-common package
  it pins is replaced;
- a held package that would change or go stops the change (the caller words it).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cockpit.sim.debcontrol import Package, Relation, compare_versions, version_order


@dataclass(frozen=True)
class Unmet:
    """A dependency nothing can satisfy, in apt's words' parts."""

    package: str
    field: str  # Depends, Pre-Depends, Conflicts, Breaks
    relation: str  # the group as written, alternatives joined with " | "
    why: str  # "but 580.105.08-1 is to be installed", "but it is not installable", ...

    def line(self) -> str:
        return f" {self.package} : {self.field}: {self.relation} {self.why}".rstrip()


@dataclass
class Resolution:
    """The end state apt would reach: the packages marked for install and those removed."""

    install: dict[str, Package] = field(default_factory=dict)  # name -> the version to unpack
    remove: dict[str, Package] = field(default_factory=dict)  # name -> the installed version going
    unmet: list[Unmet] = field(default_factory=list)
    held_changed: list[str] = field(default_factory=list)  # held packages the change would touch

    @property
    def ok(self) -> bool:
        return not self.unmet


class Universe:
    """What apt sees: the index (every version the lists offer), the installed packages, the holds."""

    def __init__(
        self,
        index: Iterable[Package],
        installed: Mapping[str, Package],
        held: Iterable[str] = (),
        pins: Mapping[str, str] | None = None,
        assumed: Iterable[str] = (),
    ) -> None:
        self.versions: dict[str, list[Package]] = {}
        for p in index:
            self.versions.setdefault(p.name, []).append(p)
        for versions in self.versions.values():
            versions.sort(key=lambda p: version_order(p.version), reverse=True)
        self.installed = dict(installed)
        self.held = set(held)
        #: name -> version glob apt's preferences pin (priority 1001 in effect): the candidate is restricted to it
        self.pins = dict(pins or {})
        #: names the base system has (libc6, dkms, the kernel): any relation on them holds
        self.assumed = frozenset(assumed)
        self.providers: dict[str, list[Package]] = {}
        for p in [*index, *self.installed.values()]:
            for provided in p.provides():
                self.providers.setdefault(provided.name, []).append(p)

    def candidate(self, name: str) -> Package | None:
        """apt's candidate: the newest version offered (within a pin), else the installed one."""
        offered = self.versions.get(name, [])
        pin = self.pins.get(name)
        if pin is not None:
            offered = [p for p in offered if fnmatch.fnmatchcase(p.version, pin)]
        installed = self.installed.get(name)
        best = offered[0] if offered else None
        if installed is not None and (best is None or compare_versions(installed.version, best.version) > 0):
            # an installed version newer than anything offered stays the candidate (a local .deb)
            return installed
        return best

    def is_virtual(self, name: str) -> bool:
        return name not in self.versions and name not in self.installed and name in self.providers


def _group_text(group: Sequence[Relation]) -> str:
    return " | ".join(str(r) for r in group)


def resolve(universe: Universe, requests: Mapping[str, Package]) -> Resolution:
    """The end state of ``apt-get install`` of ``requests`` (name -> the version asked for)."""
    result = Resolution()
    marked: dict[str, Package] = {}  # what the end state holds where it differs from installed
    removed: dict[str, Package] = {}

    def present(name: str) -> Package | None:
        if name in removed:
            return None
        return marked.get(name) or universe.installed.get(name)

    def satisfied(relation: Relation) -> bool:
        if relation.name in universe.assumed:
            return True
        p = present(relation.name)
        if p is not None and p.satisfies(relation):
            return True
        for provider in universe.providers.get(relation.name, []):
            have = present(provider.name)
            if have is not None and have.version == provider.version and have.satisfies(relation):
                return True
        return any(m.satisfies(relation) for m in marked.values())

    def mark(pkg: Package, queue: list[Package]) -> None:
        if universe.installed.get(pkg.name) == pkg and pkg.name not in requests:
            return
        marked[pkg.name] = pkg
        removed.pop(pkg.name, None)
        queue.append(pkg)

    def install_depends(queue: list[Package]) -> None:
        while queue:
            pkg = queue.pop(0)
            if marked.get(pkg.name) is not pkg:
                continue
            for fieldname in ("Pre-Depends", "Depends"):
                for group in pkg.relations(fieldname):
                    if any(satisfied(r) for r in group):
                        continue
                    chosen = _choose(universe, group)
                    if chosen is not None:
                        mark(chosen, queue)
                        continue
                    result.unmet.append(Unmet(pkg.name, fieldname, _group_text(group), _why(universe, group)))

    queue: list[Package] = []
    for pkg in requests.values():
        mark(pkg, queue)
    install_depends(queue)
    if result.unmet:
        return result

    # Conflicts and Breaks between the end state's packages: the installed side goes
    for _ in range(len(universe.installed) + len(marked) + 1):
        changed = False
        for pkg in list(marked.values()):
            for other in list(universe.installed.values()):
                if other.name in removed or other.name in marked or other.name == pkg.name:
                    continue
                if _clash(pkg, other):
                    removed[other.name] = other
                    changed = True
        # installed packages whose dependencies no longer hold: their candidate, else out
        for other in list(universe.installed.values()):
            if other.name in removed or other.name in marked:
                continue
            if all(any(satisfied(r) for r in g) for g in other.depends()):
                continue
            candidate = universe.candidate(other.name)
            if candidate is not None and candidate.version != other.version:
                queue = []
                mark(candidate, queue)
                install_depends(queue)
                if result.unmet:
                    return result
            else:
                removed[other.name] = other
            changed = True
        if not changed:
            break

    for a in marked.values():
        for b in marked.values():
            if a.name < b.name and (_clash(a, b) or _clash(b, a)):
                result.unmet.append(Unmet(a.name, "Conflicts", b.name, ""))
    result.install = {n: p for n, p in marked.items() if universe.installed.get(n) != p or n in requests}
    result.remove = removed
    result.held_changed = sorted(
        n
        for n in universe.held
        if n in removed or (n in result.install and result.install[n].version != _installed_version(universe, n))
    )
    return result


def _installed_version(universe: Universe, name: str) -> str | None:
    p = universe.installed.get(name)
    return p.version if p else None


def _clash(pkg: Package, other: Package) -> bool:
    """Whether ``pkg``'s Conflicts or Breaks name ``other`` (by name or Provides), or the reverse."""
    if any(other.satisfies(r) for r in pkg.negative() if r.name != pkg.name):
        return True
    return any(pkg.satisfies(r) for r in other.negative() if r.name != other.name)


def _choose(universe: Universe, group: Sequence[Relation]) -> Package | None:
    """The candidate apt marks for an unmet group: the first alternative whose candidate satisfies it,
    or the only provider of a virtual name (several: none, stricter than apt's pick)."""
    for relation in group:
        candidate = universe.candidate(relation.name)
        if candidate is not None:
            if candidate.satisfies(relation):
                return candidate
            continue
        providers = [
            p
            for p in universe.providers.get(relation.name, [])
            if universe.candidate(p.name) == p and p.satisfies(relation)
        ]
        if len(providers) == 1:
            return providers[0]
    return None


def _why(universe: Universe, group: Sequence[Relation]) -> str:
    """apt's tail of an unmet line: the version it would install instead, or that nothing can be."""
    relation = group[0]
    # apt names the version its plan keeps: the installed one (a candidate that cannot meet the
    # relation is not marked), else the candidate
    kept = universe.installed.get(relation.name) or universe.candidate(relation.name)
    if kept is not None:
        return f"but {kept.version} is to be installed"
    if universe.is_virtual(relation.name):
        return "but it is a virtual package"
    if relation.name in universe.versions:
        return "but it is not installable"
    return "but it is not installable"
