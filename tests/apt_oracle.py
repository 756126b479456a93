"""An oracle for differential tests: what the REAL apt resolver would do on a node.

The simulator's apt-get (cockpit/sim) is only as good as its agreement with apt-get itself.
``AptOracle`` builds a scratch "node" (a root holding a dpkg status file, /etc/apt with
sources and preferences, saved .deb files) over local ``file:`` repositories written from
Debian control stanzas, and runs the real apt-get, apt-mark and apt-cache on it:

* offline: every source is a ``[trusted=yes] file:`` repository under the scratch folder;
* without root effects: ``APT_CONFIG`` plus ``-o Dir...`` options point apt at the scratch
  root before it reads any host configuration, locking is off, package caches are off
  (a status file rewritten within one second must never be served from a stale cache),
  and ``Dir::Bin::dpkg`` is a wrapper that adds ``--admindir`` of the scratch root, so even
  apt-mark's ``dpkg --set-selections`` can only write the scratch status;
* apt-get never runs dpkg: commands that would change packages run with ``-s``; only
  ``--download-only`` ones run for real (they fetch from file: into the scratch cache).

The repositories' index entries name .deb files that need not exist (``-s`` never reads
them); a download-only command first asks the same with ``-s``, then builds just the .debs
it will fetch (dpkg-deb, in parallel, cached by control hash), rewrites their index entries
with the real size and hashes, and runs ``apt-get update`` again.

Usage::

    repo = parse_stanzas(PACKAGES_TEXT)
    oracle = AptOracle(tmp_path, [Repository(repo, pocket="noble")], installed=parse_stanzas(STATUS))
    answer = oracle.run(["apt-get", "install", "-y", "nvidia-driver-580=580.95.05*"])
    answer.changes  # {"nvidia-driver-580": (None, "580.95.05-0ubuntu1"), ...}
    oracle.apply(answer)  # the scratch status now holds the result, for the next command
"""

from __future__ import annotations

import fnmatch
import getpass
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

# --------------------------------------------------------------------------- stanzas

#: The relation fields a Stanza names as attributes (all fields stay in ``Stanza.fields``).
_NAMED = {
    "package": "Package",
    "version": "Version",
    "architecture": "Architecture",
    "depends": "Depends",
    "pre_depends": "Pre-Depends",
    "provides": "Provides",
    "conflicts": "Conflicts",
    "breaks": "Breaks",
    "replaces": "Replaces",
    "source": "Source",
}
#: Fields that belong to an index or a status file, never to a .deb's control file.
_INDEX_ONLY = {"filename", "size", "md5sum", "sha1", "sha256", "sha512", "status", "description-md5"}


@dataclass(frozen=True)
class Stanza:
    """One package paragraph; named attributes for the fields the resolver reads, ``fields`` for all."""

    package: str
    version: str
    architecture: str = "all"
    depends: str = ""
    pre_depends: str = ""
    provides: str = ""
    conflicts: str = ""
    breaks: str = ""
    replaces: str = ""
    source: str = ""
    #: every field in file order, (name as written, value with continuation lines joined by "\n")
    fields: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, package: str, version: str, architecture: str = "all", **relations: str) -> Stanza:
        """A stanza from keyword fields (``pre_depends=`` for Pre-Depends), as tests write them."""
        pairs = [("Package", package), ("Version", version), ("Architecture", architecture)]
        for attr, value in relations.items():
            name = _NAMED.get(attr) or attr.replace("_", "-").title()
            pairs.append((name, value))
        return _stanza(pairs)

    def get(self, name: str) -> str | None:
        """A field's value by case-insensitive name."""
        low = name.lower()
        return next((value for key, value in self.fields if key.lower() == low), None)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.package, self.version, self.architecture)

    def text(self, *, drop: Iterable[str] = (), first: Sequence[tuple[str, str]] = ()) -> str:
        """The paragraph (no trailing blank line): ``first`` fields after Package, ``drop`` left out."""
        skip = {name.lower() for name in drop} | {name.lower() for name, _ in first}
        lines = [f"Package: {self.package}"]
        lines += [f"{name}: {value}" for name, value in first]
        for name, value in self.fields:
            if name.lower() == "package" or name.lower() in skip:
                continue
            body = value.split("\n")
            lines.append(f"{name}: {body[0]}".rstrip() if body[0] else f"{name}:")
            lines += [f" {line}" if line else " ." for line in body[1:]]
        return "\n".join(lines) + "\n"

    def control(self) -> str:
        """A .deb control file: the stanza less index fields, with the fields dpkg-deb requires."""
        text = self.text(drop=_INDEX_ONLY)
        if self.get("Architecture") is None:
            text += f"Architecture: {self.architecture}\n"
        if self.get("Maintainer") is None:
            text += "Maintainer: apt oracle <oracle@example.invalid>\n"
        if self.get("Description") is None:
            text += "Description: dummy package for the apt oracle\n"
        return text


def _stanza(pairs: Sequence[tuple[str, str]]) -> Stanza:
    values = {key.lower(): value for key, value in pairs}
    kwargs = {attr: " ".join(values.get(name.lower(), "").split()) for attr, name in _NAMED.items()}
    if not kwargs["package"]:
        raise ValueError(f"a stanza needs a Package field: {pairs!r}")
    kwargs["architecture"] = kwargs["architecture"] or "all"
    return Stanza(**kwargs, fields=tuple(pairs))


def parse_stanzas(text: str) -> list[Stanza]:
    """Paragraphs of a Packages or status file (continuation lines kept, '#' comment lines skipped)."""
    stanzas: list[Stanza] = []
    pairs: list[tuple[str, str]] = []
    for raw in [*text.splitlines(), ""]:
        line = raw.rstrip()
        if not line.strip():
            if pairs:
                stanzas.append(_stanza(pairs))
            pairs = []
        elif line.startswith("#"):
            continue
        elif line[0] in " \t":
            if not pairs:
                raise ValueError(f"continuation line before any field: {raw!r}")
            name, value = pairs[-1]
            more = line.strip()
            pairs[-1] = (name, f"{value}\n{'' if more == '.' else more}")
        else:
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"not a field: {raw!r}")
            pairs.append((name.strip(), value.strip()))
    return stanzas


# --------------------------------------------------------------------------- versions


def _order(char: str) -> int:
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _verrevcmp(a: str, b: str) -> int:
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return ac - bc
            i, j = i + 1, j + 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        first = 0
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            first = first or ord(a[i]) - ord(b[j])
            i, j = i + 1, j + 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first:
            return first
    return 0


def compare_versions(a: str, b: str) -> int:
    """dpkg's version order (negative, zero, positive), to tell an upgrade from a downgrade."""

    def split(v: str) -> tuple[int, str, str]:
        epoch, _, rest = v.rpartition(":") if ":" in v else ("0", "", v)
        upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
        return int(epoch or 0), upstream, revision

    ea, ua, ra = split(a)
    eb, ub, rb = split(b)
    if ea != eb:
        return ea - eb
    return _verrevcmp(ua, ub) or _verrevcmp(ra, rb)


# --------------------------------------------------------------------------- answers


class Unmet(NamedTuple):
    """One line of apt's "unmet dependencies" block: ("nvidia-driver-575", "Depends: x (= 1) but 2 is to be installed")."""

    package: str
    relation: str


_INST = re.compile(r"^Inst (?P<name>\S+)(?: \[(?P<old>[^\]]+)\])? \((?P<new>\S+)(?P<rest>[^)]*)\)")
_REMV = re.compile(r"^(?:Remv|Purg) (?P<name>\S+)(?: \[(?P<old>[^\]]+)\])?")
_CONF = re.compile(r"^Conf (?P<name>\S+) \((?P<new>\S+)")
_UNMET_HEAD = "The following packages have unmet dependencies:"
_UNMET_LINE = re.compile(r"^ (?P<pkg>\S+) : (?P<rel>.*)$")
_NOT_FOUND = re.compile(r"Version '(?P<version>[^']*)' for '(?P<package>[^']*)' was not found")
_NO_CANDIDATE = re.compile(r"Package '(?P<package>[^']*)' has no installation candidate")
_GET = re.compile(r"^Get:\d+ \S+ .* (?P<name>\S+) (?P<arch>\S+) (?P<version>\S+) \[[^\]]*\]$", re.M)
_NO_PACKAGE = re.compile(r"Unable to locate package (?P<package>\S+)")


@dataclass(frozen=True)
class AptAnswer:
    """What apt answered, normalised: the transaction from Inst/Remv lines, the refusal from E: lines."""

    argv: tuple[str, ...]  # as the caller wrote it
    command: tuple[str, ...]  # as it ran (scratch paths and options added)
    returncode: int
    stdout: str
    stderr: str
    #: stdout + stderr with the scratch root's prefix taken off paths (so /root/saved/x.deb reads as on a node)
    output: str
    install: dict[str, str] = field(default_factory=dict)  # name -> new version
    upgrade: dict[str, str] = field(default_factory=dict)
    downgrade: dict[str, str] = field(default_factory=dict)
    reinstall: dict[str, str] = field(default_factory=dict)
    remove: dict[str, str] = field(default_factory=dict)  # name -> old version
    configure: tuple[str, ...] = ()  # Conf lines' names, in order
    #: every change merged: name -> (old or None, new or None)
    changes: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    errors: tuple[str, ...] = ()  # E: lines, without "E: "
    warnings: tuple[str, ...] = ()  # W: lines, without "W: "
    unmet: tuple[Unmet, ...] = ()
    held_changed: tuple[str, ...] = ()  # "The following held packages will be changed:"
    not_found: tuple[tuple[str, str], ...] = ()  # (package, version) of "Version 'v' for 'p' was not found"
    no_candidate: tuple[str, ...] = ()
    not_located: tuple[str, ...] = ()  # "Unable to locate package p"
    #: name -> version of each "Get:" line (file: sources are read in place: nothing lands in archives/)
    downloaded: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def held_broken(self) -> bool:
        return "Unable to correct problems, you have held broken packages." in self.errors

    @property
    def failure(self) -> str | None:
        """The first E: line, which names why apt refused."""
        return self.errors[0] if self.errors else None

    @property
    def lines(self) -> list[str]:
        """stdout's lines (apt-mark showhold, apt-cache policy)."""
        return self.stdout.splitlines()


def _block(lines: list[str], head: str) -> list[str]:
    """The names listed under an apt summary heading (indented lines after it)."""
    try:
        at = lines.index(head)
    except ValueError:
        return []
    names: list[str] = []
    for line in lines[at + 1 :]:
        if not line.startswith("  "):
            break
        names += line.split()
    return names


def _unmet(lines: list[str]) -> list[Unmet]:
    try:
        at = lines.index(_UNMET_HEAD)
    except ValueError:
        return []
    found: list[Unmet] = []
    package = ""
    for line in lines[at + 1 :]:
        if not line.startswith(" ") or not line.strip():
            break
        match = _UNMET_LINE.match(line)
        if match:
            package = match["pkg"]
            found.append(Unmet(package, match["rel"].strip()))
        elif found and found[-1].relation.endswith(" or"):
            found[-1] = Unmet(package, f"{found[-1].relation} {line.strip()}")  # the next alternative
        elif package:
            found.append(Unmet(package, line.strip()))  # the same package's next relation
    return found


def parse_answer(
    argv: Sequence[str], command: Sequence[str], rc: int, stdout: str, stderr: str, root: str
) -> AptAnswer:
    """Normalise apt's output (also usable on output captured elsewhere: pass root="")."""
    output = stdout + stderr
    if root:
        output = output.replace(root, "")
    lines = output.splitlines()
    install: dict[str, str] = {}
    upgrade: dict[str, str] = {}
    downgrade: dict[str, str] = {}
    reinstall: dict[str, str] = {}
    remove: dict[str, str] = {}
    changes: dict[str, tuple[str | None, str | None]] = {}
    configure: list[str] = []
    for line in lines:
        if m := _INST.match(line):
            name, old, new = m["name"], m["old"], m["new"]
            if old is None:
                install[name] = new
            else:
                order = compare_versions(new, old)
                (upgrade if order > 0 else downgrade if order < 0 else reinstall)[name] = new
            changes[name] = (old, new)
        elif m := _REMV.match(line):
            remove[m["name"]] = m["old"] or ""
            changes[m["name"]] = (m["old"], None)
        elif m := _CONF.match(line):
            configure.append(m["name"])
    return AptAnswer(
        argv=tuple(argv),
        command=tuple(command),
        returncode=rc,
        stdout=stdout,
        stderr=stderr,
        output=output,
        install=install,
        upgrade=upgrade,
        downgrade=downgrade,
        reinstall=reinstall,
        remove=remove,
        configure=tuple(configure),
        changes=changes,
        errors=tuple(line[3:] for line in lines if line.startswith("E: ")),
        warnings=tuple(line[3:] for line in lines if line.startswith("W: ")),
        unmet=tuple(_unmet(lines)),
        held_changed=tuple(_block(lines, "The following held packages will be changed:")),
        not_found=tuple((m["package"], m["version"]) for m in _NOT_FOUND.finditer(output)),
        no_candidate=tuple(m["package"] for m in _NO_CANDIDATE.finditer(output)),
        not_located=tuple(m["package"] for m in _NO_PACKAGE.finditer(output)),
        downloaded={m["name"]: m["version"] for m in _GET.finditer(output)},
    )


# --------------------------------------------------------------------------- building .debs


def _deb_name(stanza: Stanza) -> str:
    version = stanza.version.split(":", 1)[-1]  # Debian file names carry no epoch
    return f"{stanza.package}_{version}_{stanza.architecture}.deb"


def build_deb(stanza: Stanza, cache: Path) -> Path:
    """A dummy .deb (control file only) for the stanza, built once per control text."""
    control = stanza.control()
    digest = hashlib.sha256(control.encode()).hexdigest()[:24]
    cached = cache / f"{digest}.deb"
    if cached.exists():
        return cached
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as work:
        tree = Path(work) / "tree"
        (tree / "DEBIAN").mkdir(parents=True)
        (tree / "DEBIAN" / "control").write_text(control)
        out = Path(work) / "out.deb"
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(tree), str(out)],
            check=True,
            capture_output=True,
        )
        os.replace(out, cached)
    return cached


def build_debs(stanzas: Sequence[Stanza], cache: Path, workers: int | None = None) -> list[Path]:
    """Many dummy .debs at once (dpkg-deb is a process each: the threads only wait)."""
    if not stanzas:
        return []
    with ThreadPoolExecutor(max_workers=workers or min(32, (os.cpu_count() or 2) * 2)) as pool:
        return list(pool.map(lambda s: build_deb(s, cache), stanzas))


def _place(built: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.unlink(missing_ok=True)
    try:
        os.link(built, dest)
    except OSError:
        shutil.copyfile(built, dest)


# --------------------------------------------------------------------------- the oracle


@dataclass(frozen=True)
class Repository:
    """One apt source: its stanzas, the pocket (suite) it is served as, and an optional pin priority."""

    stanzas: Sequence[Stanza]
    pocket: str = "oracle"
    priority: int | None = None


@dataclass
class _Entry:
    stanza: Stanza
    filename: str  # relative to the repository root
    size: int = 1024
    md5: str = "0" * 32
    sha256: str = "0" * 64
    built: bool = False


_VALUE_OPTIONS = {"-o", "--option", "-c", "--config-file", "-t", "--target-release", "--default-release", "-a"}
_CHANGING = {"install", "remove", "purge", "upgrade", "dist-upgrade", "full-upgrade", "autoremove", "autopurge"}
_SIMULATE = {"-s", "--simulate", "--just-print", "--dry-run", "--recon", "--no-act"}


def _positionals(argv: Sequence[str]) -> list[str]:
    """argv's words that are not options or option values (the subcommand first)."""
    words: list[str] = []
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif not arg.startswith("-") or arg == "-":
            words.append(arg)
    return words


def _short_flags(argv: Sequence[str]) -> set[str]:
    flags: set[str] = set()
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            letters = arg[1:]
            cut = min((letters.index(c) for c in "oct" if c in letters), default=len(letters))
            flags |= set(letters[: cut + 1] if cut < len(letters) else letters)
    return flags


def _option_true(argv: Sequence[str], name: str) -> bool:
    low = name.lower()
    for i, arg in enumerate(argv):
        value = (
            argv[i + 1] if arg in ("-o", "--option") and i + 1 < len(argv) else arg[2:] if arg.startswith("-o") else ""
        )
        key, _, setting = value.partition("=")
        if key.strip().lower() == low and setting.strip().lower() in ("1", "true", "yes", "on"):
            return True
    return False


class AptOracle:
    """A scratch node with apt: repositories, a dpkg status, preferences and saved .debs; run real apt on it."""

    def __init__(
        self,
        base: Path,
        repositories: Sequence[Repository | Sequence[Stanza]],
        *,
        installed: Iterable[Stanza] = (),
        held: Iterable[str] = (),
        auto: Iterable[str] = (),
        preferences: Mapping[str, str] | None = None,
        local_debs: Mapping[str, Stanza] | None = None,
        arch: str | None = None,
        deb_cache: Path | None = None,
        home: str = "/root",
    ) -> None:
        missing = [tool for tool in ("apt-get", "apt-mark", "apt-cache", "dpkg", "dpkg-deb") if not shutil.which(tool)]
        if missing:
            raise RuntimeError(f"the apt oracle needs {', '.join(missing)}")
        self.base = base.resolve()
        self.root = self.base / "node"  # the node's "/"
        self.home = home
        self.arch = (
            arch
            or subprocess.run(
                ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
            ).stdout.strip()
        )
        self.deb_cache = deb_cache or self.base / "deb-cache"
        self.timings: dict[str, float] = {}
        self.repositories = [r if isinstance(r, Repository) else Repository(list(r)) for r in repositories]
        self._entries: list[dict[tuple[str, str, str], _Entry]] = []
        self._local: dict[str, Stanza] = {}
        for d in (
            "etc/apt/sources.list.d",
            "etc/apt/preferences.d",
            "etc/apt/apt.conf.d",
            "var/lib/apt/lists/partial",
            "var/cache/apt/archives/partial",
            "var/lib/dpkg/updates",
            "var/lib/dpkg/info",
            "var/lib/dpkg/triggers",
            "var/log/apt",
            home.lstrip("/"),
        ):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        (self.root / "var/lib/dpkg/available").touch()
        self._write_tools()
        self._write_repositories()
        self.write_status(installed, held=held, auto=auto)
        for name, text in (preferences or {}).items():
            self.set_preferences(name, text)
        if local_debs:
            self.add_local_debs(local_debs)
        self.update()

    # ---------------------------------------------------------------- set-up

    @property
    def status_path(self) -> Path:
        return self.root / "var/lib/dpkg/status"

    @property
    def extended_states_path(self) -> Path:
        return self.root / "var/lib/apt/extended_states"

    def node_path(self, path: str) -> Path:
        """Where a node's absolute path lies in the scratch root."""
        return self.root / path.lstrip("/")

    def _write_tools(self) -> None:
        """A dpkg that can only ever see the scratch admin dir, and apt's configuration read before the host's."""
        bin_dir = self.base / "bin"
        bin_dir.mkdir(exist_ok=True)
        dpkg = bin_dir / "dpkg"
        real = shutil.which("dpkg")
        dpkg.write_text(f'#!/bin/sh\nexec {real} --admindir="{self.root}/var/lib/dpkg" "$@"\n')
        dpkg.chmod(0o755)
        self.options: dict[str, str] = {
            "Dir": f"{self.root}/",
            "Dir::State": "var/lib/apt",
            "Dir::State::status": str(self.status_path),
            "Dir::State::extended_states": str(self.extended_states_path),
            "Dir::Cache": "var/cache/apt",
            "Dir::Cache::pkgcache": "",
            "Dir::Cache::srcpkgcache": "",
            "Dir::Etc": "etc/apt",
            "Dir::Log": "var/log/apt",
            "Dir::Bin::dpkg": str(dpkg),
            "Debug::NoLocking": "1",
            "APT::Sandbox::User": getpass.getuser(),
            "APT::Architecture": self.arch,
            "Acquire::Languages": "none",
            "Acquire::PDiffs": "false",
            "APT::Get::List-Cleanup": "false",
            "DPkg::Use-Pty": "false",
        }
        conf = "".join(f'{key} "{value}";\n' for key, value in self.options.items())
        conf += f'APT::Architectures {{ "{self.arch}"; }};\n'
        self.apt_conf = self.base / "apt.conf"
        self.apt_conf.write_text(conf)
        (self.root / "etc/apt/apt.conf.d/00oracle").write_text(conf)

    def _write_repositories(self) -> None:
        sources: list[str] = []
        pins: list[str] = []
        for i, repo in enumerate(self.repositories):
            entries: dict[tuple[str, str, str], _Entry] = {}
            for stanza in repo.stanzas:
                filename = f"pool/main/{_deb_name(stanza)}"
                entries[stanza.key] = _Entry(stanza, filename)
            self._entries.append(entries)
            self._write_index(i)
            sources.append(f"deb [trusted=yes] file:{self._repo_dir(i)} {repo.pocket} main\n")
            if repo.priority is not None:
                pins.append(f"Package: *\nPin: release l=oracle-r{i}\nPin-Priority: {repo.priority}\n")
        (self.root / "etc/apt/sources.list").write_text("".join(sources))
        if pins:
            (self.root / "etc/apt/preferences.d/00oracle-repositories").write_text("\n".join(pins))

    def _repo_dir(self, i: int) -> Path:
        return self.base / "repos" / f"r{i}"

    def _write_index(self, i: int) -> None:
        """Packages and an unsigned Release (trusted=yes) with the hashes apt checks on update."""
        repo, top = self.repositories[i], self._repo_dir(i)
        rel = f"main/binary-{self.arch}/Packages"
        lines = []
        for entry in self._entries[i].values():
            extra = [
                ("Filename", entry.filename),
                ("Size", str(entry.size)),
                ("MD5sum", entry.md5),
                ("SHA256", entry.sha256),
            ]
            body = entry.stanza.text(drop=_INDEX_ONLY).rstrip("\n")
            lines.append(f"{body}\n" + "".join(f"{k}: {v}\n" for k, v in extra))
        packages = "\n".join(lines).encode()
        index = top / "dists" / repo.pocket / rel
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_bytes(packages)
        (top / "dists" / repo.pocket / "Release").write_text(
            f"Origin: oracle\nLabel: oracle-r{i}\nSuite: {repo.pocket}\nCodename: {repo.pocket}\n"
            f"Date: Thu, 01 Jan 2015 00:00:00 UTC\nArchitectures: {self.arch} all\nComponents: main\n"
            f"MD5Sum:\n {hashlib.md5(packages).hexdigest()} {len(packages)} {rel}\n"
            f"SHA256:\n {hashlib.sha256(packages).hexdigest()} {len(packages)} {rel}\n"
        )

    def update(self) -> AptAnswer:
        """apt-get update over the file: sources (again after an index changes)."""
        started = time.perf_counter()
        answer = self._exec(["apt-get", "update"], ["apt-get", "-q", "update"])
        self.timings["update"] = time.perf_counter() - started
        if not answer.ok or answer.errors or answer.warnings:
            raise RuntimeError(f"apt-get update failed over the oracle's repositories:\n{answer.output}")
        return answer

    def write_status(self, installed: Iterable[Stanza], *, held: Iterable[str] = (), auto: Iterable[str] = ()) -> None:
        """The dpkg status file (``hold ok installed`` for held names or a stanza's own Status) and apt's auto marks."""
        holds = set(held)
        paragraphs = []
        for stanza in installed:
            status = stanza.get("Status") or f"{'hold' if stanza.package in holds else 'install'} ok installed"
            paragraphs.append(stanza.text(drop=_INDEX_ONLY, first=[("Status", status)]))
            if stanza.get("Maintainer") is None:
                paragraphs[-1] += "Maintainer: apt oracle <oracle@example.invalid>\n"
            if stanza.get("Description") is None:
                paragraphs[-1] += "Description: dummy\n"
        self.status_path.write_text("\n".join(paragraphs))
        self._write_auto(set(auto))

    def _write_auto(self, auto: set[str]) -> None:
        self.extended_states_path.write_text(
            "\n".join(f"Package: {name}\nArchitecture: {self.arch}\nAuto-Installed: 1\n" for name in sorted(auto))
        )

    def set_preferences(self, name: str, text: str) -> None:
        """A file in /etc/apt/preferences.d (an NVIDIA pinning package's file, say); empty text removes it."""
        path = self.root / "etc/apt/preferences.d" / name
        if text:
            path.write_text(text)
        else:
            path.unlink(missing_ok=True)

    def add_local_debs(self, debs: Mapping[str, Stanza]) -> None:
        """Real .deb files saved on the node, at the given absolute node paths."""
        started = time.perf_counter()
        built = build_debs(list(debs.values()), self.deb_cache)
        for (path, stanza), deb in zip(debs.items(), built, strict=True):
            _place(deb, self.node_path(path))
            self._local[path] = stanza
        self.timings["build_local_debs"] = time.perf_counter() - started

    # ---------------------------------------------------------------- state

    def installed(self) -> dict[str, str]:
        """name -> version of every package the scratch status says is installed."""
        return {
            s.package: s.version
            for s in parse_stanzas(self.status_path.read_text())
            if (s.get("Status") or "").endswith(" installed")
        }

    def held(self) -> set[str]:
        return {
            s.package
            for s in parse_stanzas(self.status_path.read_text())
            if (s.get("Status") or "").startswith("hold ")
        }

    def auto(self) -> set[str]:
        return {
            s.package for s in parse_stanzas(self.extended_states_path.read_text()) if s.get("Auto-Installed") == "1"
        }

    def _known(self, name: str, version: str) -> Stanza:
        bare = name.split(":", 1)[0]
        for entries in self._entries:
            for entry in entries.values():
                if entry.stanza.package == bare and entry.stanza.version == version:
                    return entry.stanza
        for stanza in self._local.values():
            if stanza.package == bare and stanza.version == version:
                return stanza
        raise KeyError(f"{bare} {version} is in no repository and no saved .deb of the oracle")

    def apply(self, answer: AptAnswer, *, manual: Iterable[str] | None = None) -> None:
        """Make the scratch status what dpkg would leave after the answer's transaction (never running dpkg).

        Holds are kept; a newly installed package is marked automatic unless the command named it
        (or it is in ``manual``), as apt-get does, so a later autoremove sees the same marks."""
        if not answer.ok:
            raise ValueError(f"apt refused; nothing to apply: {answer.failure}")
        current = {s.package: s for s in parse_stanzas(self.status_path.read_text())}
        holds = self.held()
        auto = self.auto()
        named = set(manual) if manual is not None else self._named(answer.argv)
        for name, (_old, new) in answer.changes.items():
            bare = name.split(":", 1)[0]
            if new is None:
                current.pop(bare, None)
                auto.discard(bare)
                continue
            if bare not in current and bare not in named:
                auto.add(bare)
            if bare in named:
                auto.discard(bare)
            current[bare] = self._known(name, new)
        self.write_status(current.values(), held=holds & current.keys(), auto=auto & current.keys())

    def _named(self, argv: Sequence[str]) -> set[str]:
        names: set[str] = set()
        for word in _positionals(argv)[1:]:
            if word.endswith(".deb"):
                names |= {s.package for p, s in self._local.items() if fnmatch.fnmatch(p, self._absolute(word))}
            else:
                names.add(re.split(r"[=/]", word, maxsplit=1)[0].split(":", 1)[0].rstrip("+-"))
        return names

    def _absolute(self, word: str) -> str:
        return word if word.startswith("/") else os.path.normpath(f"{self.home}/{word}")

    # ---------------------------------------------------------------- running

    def _map_args(self, argv: Sequence[str]) -> list[str]:
        """Node paths of saved .debs (globs too, as the node's shell would expand) to their scratch paths."""
        out: list[str] = []
        for arg in argv:
            if arg.endswith(".deb") and not arg.startswith("-"):
                node = self._absolute(arg)
                matches = (
                    sorted(p for p in self._local if fnmatch.fnmatch(p, node)) if any(c in node for c in "*?[") else []
                )
                out += [str(self.node_path(p)) for p in matches] or [str(self.node_path(node))]
            else:
                out.append(arg)
        return out

    def _exec(self, argv: Sequence[str], command: Sequence[str], timeout: float = 120) -> AptAnswer:
        opts = [x for key, value in self.options.items() for x in ("-o", f"{key}={value}")]
        tool, *rest = command
        full = [tool, *opts, *rest]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "APT_CONFIG": str(self.apt_conf),
            "LANG": "C",
            "LC_ALL": "C",
            "DEBIAN_FRONTEND": "noninteractive",
            "HOME": str(self.node_path(self.home)),
        }
        done = subprocess.run(
            full,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=self.node_path(self.home),
            stdin=subprocess.DEVNULL,
        )
        return parse_answer(argv, full, done.returncode, done.stdout, done.stderr, str(self.root))

    def run(self, argv: Sequence[str], *, simulate: bool | None = None, timeout: float = 120) -> AptAnswer:
        """Run an apt-get, apt-mark or apt-cache command as a runbook writes it, on the scratch node.

        apt-get commands that change packages get ``-s`` (apt never runs dpkg here); ``--download-only``
        ones run for real (``simulate=None``), after the .debs they fetch are built."""
        tool = os.path.basename(argv[0])
        if tool not in ("apt-get", "apt-mark", "apt-cache", "apt"):
            raise ValueError(f"not an apt command: {argv[0]}")
        args = self._map_args(argv[1:])
        words = _positionals([tool, *args])
        sub = words[0] if words else ""
        flags = _short_flags([tool, *args])
        simulated = "s" in flags or any(a in _SIMULATE for a in args) or _option_true(args, "APT::Get::Simulate")
        download_only = "d" in flags or "--download-only" in args or _option_true(args, "APT::Get::Download-Only")
        if tool in ("apt-get", "apt") and (sub in _CHANGING or sub == "reinstall"):
            if simulate is None:
                simulate = not download_only
            if simulate and not simulated:
                args = ["-s", *args]
            elif not simulate and not simulated:
                if not download_only:
                    raise ValueError(
                        "the oracle never lets apt-get run dpkg: simulate, or use --download-only, then apply()"
                    )
                probe = self._exec(argv, [tool, "-s", *args], timeout)
                if probe.ok:
                    self._build_for(probe)
        return self._exec(argv, [tool, *args], timeout)

    def _build_for(self, probe: AptAnswer) -> None:
        """Build the .debs a download will fetch and put their true size and hashes in the index."""
        wanted: list[tuple[int, _Entry]] = []
        for name, (_old, new) in probe.changes.items():
            if new is None:
                continue
            bare = name.split(":", 1)[0]
            for i, entries in enumerate(self._entries):
                wanted += [
                    (i, e)
                    for e in entries.values()
                    if e.stanza.package == bare and e.stanza.version == new and not e.built
                ]
        if not wanted:
            return
        started = time.perf_counter()
        self._build(wanted)
        self.timings["build_debs"] = time.perf_counter() - started
        self.timings["build_debs_count"] = len(wanted)

    def build_all(self) -> float:
        """Build every repository .deb now (what a lazy download would do piecemeal); returns the seconds spent."""
        started = time.perf_counter()
        pending = [(i, e) for i, entries in enumerate(self._entries) for e in entries.values() if not e.built]
        if pending:
            self._build(pending)
        return time.perf_counter() - started

    def _build(self, pending: list[tuple[int, _Entry]]) -> None:
        """Build the .debs of ``pending`` (repository index, entry), put them in their repositories
        with their real size and hashes in the index, and let apt read the index again."""
        debs = build_debs([e.stanza for _, e in pending], self.deb_cache)
        for (i, entry), deb in zip(pending, debs, strict=True):
            data = deb.read_bytes()
            _place(deb, self._repo_dir(i) / entry.filename)
            entry.size, entry.md5, entry.sha256 = (
                len(data),
                hashlib.md5(data).hexdigest(),
                hashlib.sha256(data).hexdigest(),
            )
            entry.built = True
        for i in sorted({i for i, _ in pending}):
            self._write_index(i)
        self.update()
