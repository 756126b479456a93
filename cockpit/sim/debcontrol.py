"""Debian control data as dpkg reads it: stanzas, version order, relation fields.

The simulated apt takes its package universe from real ``Packages`` stanzas
(:mod:`cockpit.sim.repos`), so it needs dpkg's own rules, not a likeness of them:

- version order is ``dpkg --compare-versions``: epoch, then the upstream version and the
  revision, each compared as alternating non-digit and digit runs, where ``~`` sorts before
  everything, even the end of the string (deb-version(7));
- a relation field is a comma-separated AND of ``|``-separated alternatives, each
  ``name[:arch] [(op version)]`` with op one of ``<<``, ``<=``, ``=``, ``>=``, ``>>``
  (deb-control(5)); a Provides entry may carry ``(= version)`` and then satisfies a
  versioned relation on that name, an unversioned Provides satisfies only unversioned ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, cmp_to_key, lru_cache

#: The relation fields apt resolves, in the order dpkg lists them.
RELATION_FIELDS = ("Pre-Depends", "Depends", "Conflicts", "Breaks", "Replaces", "Provides")


def parse_stanzas(text: str) -> list[dict[str, str]]:
    """The stanzas of a ``Packages`` or ``status`` file, each field -> its value (folded lines joined)."""
    stanzas: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    last = ""
    for line in text.splitlines():
        if not line.strip():
            if fields:
                stanzas.append(fields)
            fields, last = {}, ""
        elif line.startswith("#"):
            continue
        elif line[0] in " \t" and last:
            fields[last] += " " + line.strip()
        elif ":" in line:
            last, _, value = line.partition(":")
            fields[last] = value.strip()
    if fields:
        stanzas.append(fields)
    return stanzas


def _order(c: str) -> int:
    if c == "~":
        return -1
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _compare_part(a: str, b: str) -> int:
    """dpkg's verrevcmp: non-digit runs by the lexical order above, digit runs numerically."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return -1 if ac < bc else 1
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return -1 if first_diff < 0 else 1
    return 0


def _split(version: str) -> tuple[int, str, str]:
    epoch, _, rest = version.partition(":") if ":" in version else ("0", "", version)  # the first colon
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "0")
    return int(epoch or 0), upstream, revision


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as ``dpkg --compare-versions a lt|eq|gt b``."""
    ea, ua, ra = _split(a)
    eb, ub, rb = _split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ua, ub) or _compare_part(ra, rb)


#: Sorts versions in dpkg's order: ``sorted(versions, key=version_order)``.
version_order = cmp_to_key(compare_versions)

_RELATION = re.compile(
    r"^\s*(?P<name>[a-z0-9][a-z0-9+.-]*)(?::(?P<arch>[a-z0-9-]+))?\s*"
    r"(?:\(\s*(?P<op><<|<=|=|>=|>>|<|>)\s*(?P<version>[^)\s]+)\s*\))?\s*(?:\[[^]]*\])?\s*$"
)


@dataclass(frozen=True)
class Relation:
    """One alternative of a relation field: a package name, and a version bound or none."""

    name: str
    op: str | None = None
    version: str | None = None

    def allows(self, version: str) -> bool:
        """Whether a package (or a versioned Provides) at ``version`` satisfies the bound."""
        if self.op is None or self.version is None:
            return True
        c = compare_versions(version, self.version)
        return {"<<": c < 0, "<=": c <= 0, "=": c == 0, ">=": c >= 0, ">>": c > 0}[self.op]

    def __str__(self) -> str:
        return self.name + (f" ({self.op} {self.version})" if self.op else "")


@lru_cache(maxsize=8192)
def parse_relations(value: str) -> tuple[tuple[Relation, ...], ...]:
    """A relation field as an AND (the outer tuple) of OR groups (the inner ones); cached, as a
    resolve reads the same fields again and again."""
    groups: list[tuple[Relation, ...]] = []
    for clause in filter(str.strip, value.split(",")):
        group = []
        for alternative in clause.split("|"):
            m = _RELATION.match(alternative)
            if m is None:
                raise ValueError(f"not a package relation: {alternative.strip()!r}")
            op = {"<": "<=", ">": ">="}.get(m.group("op") or "", m.group("op"))  # the obsolete forms
            group.append(Relation(m.group("name"), op, m.group("version")))
        groups.append(tuple(group))
    return tuple(groups)


@dataclass(frozen=True)
class Package:
    """One package version as an index, a status file or a .deb file's control carries it."""

    name: str
    version: str
    fields: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, stanza: dict[str, str]) -> Package:
        kept = tuple((k, v) for k, v in stanza.items() if k in RELATION_FIELDS or k in ("Source", "Architecture"))
        return cls(stanza["Package"], stanza["Version"], kept)

    # A resolve asks each package for the same fields again and again (every pair of the end
    # state's packages for a clash): each is read once, kept on the (frozen) package.

    @cached_property
    def _by_name(self) -> dict[str, str]:
        return {k: v for k, v in reversed(self.fields)}  # the first of a repeated field, as next() found it

    @cached_property
    def _negative(self) -> tuple[Relation, ...]:
        return tuple(r for field in ("Conflicts", "Breaks") for group in self.relations(field) for r in group)

    @cached_property
    def _provides(self) -> tuple[Relation, ...]:
        return tuple(r for group in self.relations("Provides") for r in group)

    @cached_property
    def answers_to(self) -> frozenset[str]:
        """The names a relation may name to be met by this package: its own and its Provides."""
        return frozenset({self.name, *(r.name for r in self._provides)})

    def field(self, name: str) -> str:
        return self._by_name.get(name, "")

    def relations(self, name: str) -> tuple[tuple[Relation, ...], ...]:
        return parse_relations(self.field(name))

    def depends(self) -> tuple[tuple[Relation, ...], ...]:
        """Pre-Depends and Depends together: apt installs both before configuring the package."""
        return self.relations("Pre-Depends") + self.relations("Depends")

    def negative(self) -> Iterator[Relation]:
        """Conflicts and Breaks: what may not stay installed beside this package."""
        return iter(self._negative)

    def provides(self) -> list[Relation]:
        return list(self._provides)

    def satisfies(self, relation: Relation) -> bool:
        """Whether this package, by its name or a Provides, satisfies ``relation``."""
        if relation.name not in self.answers_to:
            return False
        if relation.name == self.name and relation.allows(self.version):
            return True
        for p in self._provides:
            if p.name != relation.name:
                continue
            if relation.op is None or (p.version is not None and relation.allows(p.version)):
                return True
        return False

    @property
    def source(self) -> str:
        """``${source:Package}``: the Source field's name, else the package's own."""
        return (self.field("Source") or self.name).split(" ", 1)[0]

    @property
    def filename(self) -> str:
        # the pool's file name: NAME_VERSION_ARCH.deb, an epoch's colon escaped as dpkg-name does
        arch = self.field("Architecture") or "amd64"
        return f"{self.name}_{self.version.replace(':', '%3a')}_{arch}.deb"

    def control(self) -> str:
        """The stanza as a .deb's control file carries it (what stands for the file on a simulated disk)."""
        lines = [f"Package: {self.name}", f"Version: {self.version}"]
        lines += [f"{k}: {v}" for k, v in self.fields]
        return "\n".join(lines) + "\n"
