"""Ask the real dnf, offline, what a dnf command would do: the oracle the dnf simulator is held to.

The simulator (cockpit/sim/dnf.py) answers ``dnf module switch-to``, ``dnf install`` and friends from
its own model of the resolver. Differential tests need the real resolver's answer for the same repository
and the same starting state, so this module builds that repository for real: one empty rpm per metadata
stanza (``rpmbuild``), repodata by ``createrepo_c``, ``modules.yaml`` injected with ``modifyrepo_c``, and
an installroot whose rpmdb, module state and versionlocks are the starting state. ``DnfRoot.run`` then runs
the real ``dnf --installroot`` (with ``--assumeno`` unless asked to apply) and normalises what it printed.

Nothing here touches the host: rpm's database path is set through a private ``HOME`` (Debian's rpm keeps
it in ``~/.rpmdb``), dnf gets its config, repos and plugin config from inside the installroot, and the only
repository is a ``file://`` one. Everything is written under the cache dir or the caller's root dir.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

#: bumped when the build recipe changes, so an old cache entry is not reused
_RECIPE = "dnf-oracle-1"
#: the Debian packages that provide the tools (``rpmbuild`` ships in ``rpm``, the versionlock plugin in
#: ``dnf-plugins-core``)
DEBIAN_PACKAGES = ("dnf", "dnf-plugins-core", "createrepo-c", "rpm")
_TOOLS = ("dnf", "rpm", "rpmbuild", "createrepo_c", "modifyrepo_c")
_REPO_ID = "oracle"
#: what the rpm macros say on RHEL; Debian's rpm puts the database in ``~/.rpmdb``
_DBPATH = "/var/lib/rpm"
_RPM_TIMEOUT = 300.0


def default_cache_dir() -> Path:
    """Where built repositories are kept between runs (keyed by a hash of their input, so never stale)."""
    return Path(tempfile.gettempdir()) / "cockpit-dnf-oracle"


def require_dnf_oracle() -> None:
    """Skip the calling test when a tool is missing; with ``CI=true`` fail instead (CI installs them)."""
    import pytest

    missing = missing_tools()
    if not missing:
        return
    why = f"the dnf oracle needs {', '.join(missing)} (apt-get install {' '.join(DEBIAN_PACKAGES)})"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {why}")
    pytest.skip(why)


def missing_tools() -> list[str]:
    """Name what the oracle cannot run without, so a test can skip (or fail in CI) saying why."""
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    plugins = [*Path("/usr/lib").glob("python3*/*-packages/dnf-plugins/versionlock.py")]
    if not plugins and shutil.which("dnf"):
        missing.append("dnf versionlock plugin (dnf-plugins-core)")
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        missing.append("root (dnf refuses transactions, even --assumeno ones, to other users)")
    return missing


# --------------------------------------------------------------------------------------------- stanzas


@dataclass(frozen=True)
class RpmStanza:
    """One package's metadata as the repository listing gives it: enough to build an empty rpm with."""

    name: str
    epoch: int
    version: str
    release: str
    arch: str
    streams: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    obsoletes: tuple[str, ...] = ()

    @property
    def evr(self) -> str:
        """EVR the way dnf prints it: no ``0:`` epoch."""
        base = f"{self.version}-{self.release}"
        return f"{self.epoch}:{base}" if self.epoch else base

    @property
    def nevra(self) -> str:
        """``name-[epoch:]version-release.arch``, a spec ``dnf install`` accepts."""
        return f"{self.name}-{self.evr}.{self.arch}"

    @property
    def artifact(self) -> str:
        """The NEVRA as modulemd's ``artifacts.rpms`` lists it (epoch always written)."""
        return f"{self.name}-{self.epoch}:{self.version}-{self.release}.{self.arch}"

    @property
    def filename(self) -> str:
        """The built rpm's file name (rpm's default ``name-version-release.arch.rpm``)."""
        return f"{self.name}-{self.version}-{self.release}.{self.arch}.rpm"


_FIELDS = {
    "name": "name",
    "epoch": "epoch",
    "version": "version",
    "release": "release",
    "arch": "arch",
    "stream": "streams",
    "streams": "streams",
    "requires": "requires",
    "provides": "provides",
    "conflicts": "conflicts",
    "obsoletes": "obsoletes",
}


def split_relations(value: str) -> tuple[str, ...]:
    """Split a comma-separated relation list, keeping rich deps ``(a or b, ...)`` whole."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in value:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return tuple(part.strip() for part in parts if part.strip())


def parse_rpm_stanzas(text: str) -> list[RpmStanza]:
    """Parse blank-line-separated ``Field: value`` stanzas (``#`` lines are comments; unknown fields ignored)."""
    stanzas: list[RpmStanza] = []
    for number, block in enumerate(re.split(r"\n\s*\n", text), start=1):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"stanza {number}: not a 'Field: value' line: {line!r}")
            attr = _FIELDS.get(key.strip().lower())
            if attr is not None:
                fields[attr] = value.strip()
        if not fields:
            continue
        for required in ("name", "version", "release", "arch"):
            if not fields.get(required):
                raise ValueError(f"stanza {number}: no {required.capitalize()}: {fields}")
        stanzas.append(
            RpmStanza(
                name=fields["name"],
                epoch=int(fields.get("epoch") or 0),
                version=fields["version"],
                release=fields["release"],
                arch=fields["arch"],
                streams=split_relations(fields.get("streams", "")),
                requires=split_relations(fields.get("requires", "")),
                provides=split_relations(fields.get("provides", "")),
                conflicts=split_relations(fields.get("conflicts", "")),
                obsoletes=split_relations(fields.get("obsoletes", "")),
            )
        )
    return stanzas


def base_os_stub(stanzas: Iterable[RpmStanza], name: str = "oracle-base-os") -> RpmStanza | None:
    """One package providing, unversioned, every capability the stanzas require but none provides.

    The listings name what the base OS gives (``egl-wayland(x86-64) >= 1.1``, ``/bin/sh``); without a
    provider dnf would answer "nothing provides" for what is no part of the question. An unversioned
    provide satisfies any versioned requirement. Rich (boolean) requirements are left alone.
    """
    stanzas = list(stanzas)
    provided = {s.name for s in stanzas} | {p.split()[0] for s in stanzas for p in s.provides}
    needed = {r.split()[0] for s in stanzas for r in s.requires if not r.startswith("(")} - provided
    if not needed:
        return None
    return RpmStanza(name=name, epoch=0, version="1", release="1.el9", arch="noarch", provides=tuple(sorted(needed)))


def modules_yaml(
    stanzas: Iterable[RpmStanza],
    profiles: Mapping[str, Mapping[str, Sequence[str]]],
    *,
    module: str = "nvidia-driver",
    defaults: Mapping[str, str] | None = None,
) -> str:
    """Write modulemd v2 documents (one per stream) from the stanzas' ``Stream:`` fields, for sample repos.

    ``profiles`` maps stream -> profile -> package names. ``defaults`` (stream -> default profile) adds a
    modulemd-defaults document naming the first stream as the default stream, as RHEL's repos have.
    """
    by_stream: dict[str, list[RpmStanza]] = {}
    for stanza in stanzas:
        for stream in stanza.streams:
            by_stream.setdefault(stream, []).append(stanza)
    docs: list[str] = []
    for index, stream in enumerate(sorted(set(by_stream) | set(profiles))):
        pkgs = by_stream.get(stream, [])
        lines = [
            "---",
            "document: modulemd",
            "version: 2",
            "data:",
            f"  name: {module}",
            f'  stream: "{stream}"',
            f"  version: {9000020250101000000 + index}",
            "  context: 00000000",
            "  arch: x86_64",
            f"  summary: {module} {stream}",
            "  description: >-",
            f"    {module} stream {stream} (dnf oracle sample)",
            "  license:",
            "    module: [MIT]",
            "  dependencies:",
            "  - buildrequires:",
            "      platform: [el9]",
            "    requires:",
            "      platform: [el9]",
            "  profiles:",
        ]
        for profile, names in sorted(profiles.get(stream, {}).items()):
            lines += [f"    {profile}:", "      rpms:"] + [f"      - {name}" for name in names]
        lines += ["  artifacts:", "    rpms:"] + [f"    - {pkg.artifact}" for pkg in sorted(pkgs, key=_sort_key)]
        lines.append("...")
        docs.append("\n".join(lines))
    if defaults:
        first = next(iter(defaults))
        lines = ["---", "document: modulemd-defaults", "version: 1", "data:", f"  module: {module}"]
        lines += [f'  stream: "{first}"', "  profiles:"]
        lines += [f'    "{stream}": [{profile}]' for stream, profile in defaults.items()]
        lines.append("...")
        docs.append("\n".join(lines))
    return "\n".join(docs) + "\n"


def _sort_key(stanza: RpmStanza) -> tuple[str, str]:
    return (stanza.name, stanza.artifact)


# --------------------------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class TxRow:
    """One row of dnf's transaction table, under the section it appeared in (``Installing`` ...)."""

    action: str
    name: str
    arch: str
    evr: str
    repo: str
    replacing: tuple[str, ...] = ()


@dataclass(frozen=True)
class DnfAnswer:
    """What the real dnf said, normalised so a test can compare it with the simulator's answer."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str
    #: section -> package name -> EVR, e.g. ``{"Upgrading": {"nvidia-driver": "3:580.95.05-1.el9"}}``
    transaction: dict[str, dict[str, str]]
    rows: tuple[TxRow, ...]
    #: module sections: ``{"Switching module streams": {"nvidia-driver": "575-dkms -> 580-open"}}``,
    #: ``{"Installing module profiles": {"nvidia-driver/fm": ""}}``
    modules: dict[str, dict[str, str]]
    #: ``Problem:`` / ``Problem N:`` blocks, each with its `` - `` lines joined by newlines
    problems: tuple[str, ...]
    #: the arguments of ``No match for argument: X`` (and ``No package X available.``)
    no_match: tuple[str, ...]
    #: argument -> filter (``modular``, ``exclude``: versionlock) from ``All matches were filtered out by ...``
    filtered: dict[str, str]
    #: the ``Problem`` blocks under ``Modular dependency problem(s):`` (dnf goes on despite them)
    modular_problems: tuple[str, ...]
    #: the ``Error: ...`` lines
    errors: tuple[str, ...]
    #: dnf suggested ``--allowerasing`` (a conflict with an installed package)
    hints_allowerasing: bool
    #: dnf printed a transaction and stopped at ``--assumeno`` (``Operation aborted.``)
    aborted: bool
    #: dnf printed ``Nothing to do.`` / ``Dependencies resolved.`` with an empty transaction
    nothing_to_do: bool

    @property
    def output(self) -> str:
        """Everything dnf printed, stdout first (dnf splits its messages between the two)."""
        return self.stdout + self.stderr

    @property
    def resolved(self) -> bool:
        """dnf found a transaction (or nothing to do): it failed only by ``--assumeno``, if at all."""
        return not (self.problems or self.no_match or self.filtered or self.errors_other_than_abort)

    @property
    def errors_other_than_abort(self) -> tuple[str, ...]:
        """The ``Error:`` lines, less the one ``--assumeno`` causes."""
        return tuple(e for e in self.errors if "Operation aborted" not in e)

    def names(self, action: str) -> dict[str, str]:
        """Packages of one section, ``{}`` when it is absent."""
        return self.transaction.get(action, {})


_SIZE_UNITS = {"k", "M", "G", "T", "B"}
_SECTION = re.compile(r"^([A-Z][A-Za-z /-]*?):\s*$")
#: "Installing module profiles", "Switching module streams", "Resetting modules" (not "group/module packages")
_MODULE_SECTION = re.compile(r"(module (profiles|streams)|modules)$")


def parse_dnf_output(argv: Sequence[str], rc: int, stdout: str, stderr: str) -> DnfAnswer:
    """Normalise dnf's printed transaction table and failure messages (terminal width 80, wrapped names)."""
    text = stdout + "\n" + stderr
    lines = text.splitlines()
    rows: list[TxRow] = []
    transaction: dict[str, dict[str, str]] = {}
    modules: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    no_match: list[str] = []
    modular: list[str] = []
    errors: list[str] = []

    in_table = False
    section: str | None = None
    pending_name: str | None = None
    filtered: dict[str, str] = {}
    current_problem: list[str] | None = None
    problem_target = problems

    def close_problem() -> None:
        nonlocal current_problem
        if current_problem is not None:
            problem_target.append("\n".join(current_problem))
            current_problem = None

    for raw in lines:
        line = raw.rstrip()
        stripped = line.strip()
        # -------- the transaction table: between the header ruler and "Transaction Summary"
        if re.match(r"^ Package\s+Arch\w*\s+Version\s+Repo", line):
            in_table = True
            section = None
            continue
        if in_table:
            if stripped.startswith("Transaction Summary") or stripped.startswith("Nothing to do"):
                in_table = False
                section = None
                continue
            if not stripped or set(stripped) <= {"="}:
                continue
            match = _SECTION.match(line)
            if match and not line.startswith(" "):
                section = match.group(1)
                pending_name = None
                continue
            if section is None:
                continue
            if _MODULE_SECTION.search(section):
                tokens = stripped.split(None, 1)
                modules.setdefault(section, {})[tokens[0]] = tokens[1].strip() if len(tokens) > 1 else ""
                continue
            if stripped.startswith("replacing "):
                replaced = stripped.split(None, 1)[1].strip()
                if rows:
                    last = rows[-1]
                    rows[-1] = TxRow(
                        last.action, last.name, last.arch, last.evr, last.repo, (*last.replacing, replaced)
                    )
                continue
            tokens = stripped.split()
            if pending_name is not None:
                tokens = [pending_name, *tokens]
                pending_name = None
            if len(tokens) == 1:
                pending_name = tokens[0]  # a long name: dnf puts the rest of the row on the next line
                continue
            if len(tokens) >= 4:
                size_tokens = 2 if len(tokens) >= 6 and tokens[-1] in _SIZE_UNITS else 1
                name, arch, evr, repo = tokens[0], tokens[1], tokens[2], " ".join(tokens[3 : len(tokens) - size_tokens])
                rows.append(TxRow(section, name, arch, evr, repo or tokens[3]))
                transaction.setdefault(section, {})[name] = evr
            continue
        # -------- failures
        if stripped.startswith("Modular dependency problem"):
            close_problem()
            problem_target = modular
            continue
        match_nm = re.match(r"^No match for argument:\s*(.+)$", stripped)
        if match_nm:
            no_match.append(match_nm.group(1).strip())
            continue
        match_na = re.match(r"^No package (.+) available\.$", stripped)
        if match_na:
            no_match.append(match_na.group(1).strip())
            continue
        match_filtered = re.match(r"^All matches were filtered out by (\w+) filtering for argument:\s*(.+)$", stripped)
        if match_filtered:
            filtered[match_filtered.group(2).strip()] = match_filtered.group(1)
            continue
        if re.match(r"^Problem( \d+)?:", stripped):
            close_problem()
            current_problem = [stripped]
            continue
        if current_problem is not None and stripped.startswith("- "):
            current_problem.append(stripped)
            continue
        if not stripped and problem_target is modular and current_problem is None:
            continue  # the blank line between "Modular dependency problems:" and its first Problem
        close_problem()
        problem_target = problems
        if stripped.startswith("Error:"):
            errors.append(stripped)
    close_problem()

    hint = "--allowerasing" in text and "try to add" in text
    aborted = "Operation aborted." in text
    nothing = "Nothing to do." in text
    for row in rows:
        for replaced in row.replacing:  # "old-thing.noarch 1-1": obsoleted by the row's package
            name_arch, _, evr = replaced.partition(" ")
            transaction.setdefault("Replacing", {})[name_arch.rsplit(".", 1)[0]] = evr.strip()
    return DnfAnswer(
        argv=tuple(argv),
        rc=rc,
        stdout=stdout,
        stderr=stderr,
        transaction={k: dict(sorted(v.items())) for k, v in transaction.items()},
        rows=tuple(rows),
        modules=modules,
        problems=tuple(problems),
        no_match=tuple(no_match),
        filtered=filtered,
        modular_problems=tuple(modular),
        errors=tuple(errors),
        hints_allowerasing=hint,
        aborted=aborted,
        nothing_to_do=nothing,
    )


# --------------------------------------------------------------------------------------------- oracle


@dataclass(frozen=True)
class ModuleState:
    """The starting state of one module, as dnf keeps it in ``/etc/dnf/modules.d/<name>.module``."""

    stream: str
    profiles: tuple[str, ...] = ()
    state: str = "enabled"
    name: str = "nvidia-driver"

    def render(self) -> str:
        return (
            f"[{self.name}]\nname={self.name}\nstream={self.stream}\n"
            f"profiles={','.join(self.profiles)}\nstate={self.state}\n"
        )


@dataclass
class BuildTimings:
    """How long the repository build took, so the slow part stays visible."""

    rpms: int = 0
    rpmbuild_s: float = 0.0
    createrepo_s: float = 0.0
    cached: bool = False


class DnfOracle:
    """A local dnf repository built from stanzas (cached by their hash) and the roots that use it."""

    def __init__(
        self,
        stanzas: Sequence[RpmStanza],
        modules_yaml_text: str | None,
        cache_dir: Path,
        *,
        jobs: int | None = None,
    ) -> None:
        self.stanzas = list(stanzas)
        self.modules_yaml_text = modules_yaml_text
        seen: dict[str, RpmStanza] = {}
        for stanza in self.stanzas:
            if stanza.nevra in seen and seen[stanza.nevra] != stanza:
                raise ValueError(f"two different stanzas for {stanza.nevra}")
            seen[stanza.nevra] = stanza
        self._unique = list(seen.values())
        payload = json.dumps(
            [_RECIPE, [asdict(s) for s in self._unique], modules_yaml_text or ""], sort_keys=True
        ).encode()
        self.key = hashlib.sha256(payload).hexdigest()[:20]
        self.cache_dir = Path(cache_dir)
        self.dir = self.cache_dir / self.key
        self.repo = self.dir / "repo"
        self.home = self.dir / "home"
        self.timings = BuildTimings(rpms=len(self._unique))
        self._jobs = jobs or max(1, min(8, os.cpu_count() or 1))
        self._build()

    # ------------------------------------------------------------------ build

    def env(self) -> dict[str, str]:
        """Environment for rpm, rpmbuild and dnf: a private HOME whose ``.rpmmacros`` puts the rpmdb in
        ``/var/lib/rpm`` (relative to ``--root``), the C locale for stable messages, no Python leaking in."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LC_", "LANG", "VIRTUAL_ENV"))}
        env.update({"HOME": str(self.home), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "TZ": "UTC"})
        env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
        return env

    def rpm_path(self, stanza: RpmStanza) -> Path:
        """The built rpm of one stanza (for ``dnf downgrade ./file.rpm`` and ``rpm -i``)."""
        return self.repo / stanza.arch / stanza.filename

    def _build(self) -> None:
        if (self.dir / "done").exists():
            self.timings.cached = True
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"{self.key}.", dir=self.cache_dir))
        work.chmod(0o755)
        try:
            self._build_into(work)
            (work / "done").write_text(json.dumps(asdict(self.timings)))
            try:
                work.rename(self.dir)
            except OSError:
                if not (self.dir / "done").exists():  # not another worker's finished build: a real error
                    raise
                shutil.rmtree(work, ignore_errors=True)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise

    def _build_into(self, work: Path) -> None:
        home = work / "home"
        home.mkdir()
        # the rpmdb path is absolute in the dnf root; the HOME is where rpm will read it from at run time
        (home / ".rpmmacros").write_text(f"%_dbpath {_DBPATH}\n")
        specs = work / "specs"
        specs.mkdir()
        repo = work / "repo"
        repo.mkdir()
        by_target: dict[str, list[Path]] = {}
        for index, stanza in enumerate(self._unique):
            spec = specs / f"{index:05d}-{stanza.name}.spec"
            spec.write_text(_spec(stanza))
            target = "x86_64" if stanza.arch == "noarch" else stanza.arch
            by_target.setdefault(target, []).append(spec)
        started = time.monotonic()
        env = {**self.env(), "HOME": str(home)}
        batches: list[tuple[str, list[Path], int]] = []
        for target, paths in by_target.items():
            size = max(1, -(-len(paths) // self._jobs))
            for offset in range(0, len(paths), size):
                batches.append((target, paths[offset : offset + size], len(batches)))

        def build(batch: tuple[str, list[Path], int]) -> None:
            target, paths, number = batch
            top = work / f"top{number}"
            cmd = [
                "rpmbuild",
                "-bb",
                "--quiet",
                "--target",
                target,
                "--define",
                f"_topdir {top}",
                "--define",
                f"_rpmdir {repo}",
                "--define",
                f"_buildrootdir {top}/BUILDROOT",
                *map(str, paths),
            ]
            _check(cmd, env=env)

        with ThreadPoolExecutor(max_workers=self._jobs) as pool:
            list(pool.map(build, batches))
        for number in range(len(batches)):
            shutil.rmtree(work / f"top{number}", ignore_errors=True)
        self.timings.rpmbuild_s = time.monotonic() - started
        started = time.monotonic()
        _check(["createrepo_c", "--quiet", "--no-database", str(repo)], env=env)
        if self.modules_yaml_text:
            yaml = work / "modules.yaml"
            yaml.write_text(self.modules_yaml_text)
            _check(["modifyrepo_c", "--mdtype=modules", str(yaml), str(repo / "repodata")], env=env)
        self.timings.createrepo_s = time.monotonic() - started
        missing = [s.nevra for s in self._unique if not (repo / s.arch / s.filename).exists()]
        if missing:
            raise RuntimeError(f"rpmbuild did not produce: {missing}")

    # ------------------------------------------------------------------ roots

    def find(self, spec: str) -> RpmStanza:
        """The stanza a NEVRA (``name-[E:]V-R.arch``, with or without the arch) names."""
        for stanza in self._unique:
            if spec in (stanza.nevra, f"{stanza.name}-{stanza.evr}", stanza.artifact):
                return stanza
        raise KeyError(f"no stanza {spec}")

    def make_root(
        self,
        root: Path,
        *,
        installed: Iterable[RpmStanza | str] = (),
        module: ModuleState | None = None,
        versionlocks: Iterable[str] = (),
        dnf_conf: Mapping[str, str] | None = None,
    ) -> DnfRoot:
        """An installroot in a starting state: ``installed`` in its rpmdb (``rpm --justdb --nodeps``, so the
        state need not be consistent), ``module`` written to modules.d, ``versionlocks`` as raw lines of the
        versionlock plugin's list (``nvidia-driver-3:580.95.05-1.el9.*``, ``!pattern`` for excludes)."""
        root = Path(root).resolve()
        for sub in ("etc/yum.repos.d", "etc/dnf/plugins", "etc/dnf/modules.d", "var/lib/rpm", "var/cache/dnf"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        conf = {
            # RHEL 9's /etc/dnf/dnf.conf, plus what keeps the oracle offline and local
            "gpgcheck": "1",
            "installonly_limit": "3",
            "clean_requirements_on_remove": "True",
            "best": "True",
            "skip_if_unavailable": "False",
            "localpkg_gpgcheck": "0",
            "keepcache": "0",
            "module_platform_id": "platform:el9",
            "zchunk": "False",
            "install_weak_deps": "True",
            "metadata_expire": "-1",
        }
        conf.update(dnf_conf or {})
        (root / "etc/dnf/dnf.conf").write_text("[main]\n" + "".join(f"{k}={v}\n" for k, v in conf.items()))
        (root / "etc/yum.repos.d" / f"{_REPO_ID}.repo").write_text(
            f"[{_REPO_ID}]\nname=dnf oracle\nbaseurl=file://{self.repo}\nenabled=1\ngpgcheck=0\n"
            "repo_gpgcheck=0\nskip_if_unavailable=0\nmetadata_expire=-1\n"
        )
        locklist = root / "etc/dnf/plugins/versionlock.list"
        locklist.write_text("".join(f"{line}\n" for line in versionlocks))
        (root / "etc/dnf/plugins/versionlock.conf").write_text(f"[main]\nenabled=1\nlocklist={locklist}\n")
        if module is not None:
            (root / f"etc/dnf/modules.d/{module.name}.module").write_text(module.render())
        dnf_root = DnfRoot(self, root)
        _check(["rpm", "--root", str(root), "--dbpath", _DBPATH, "--initdb"], env=self.env())
        files = [str(self.rpm_path(p if isinstance(p, RpmStanza) else self.find(p))) for p in installed]
        if files:
            cmd = ["rpm", "--root", str(root), "--dbpath", _DBPATH, "-i", "--justdb", "--nodeps", "--noscripts"]
            _check([*cmd, "--nosignature", "--nodigest", "--ignorearch", *files], env=self.env())
        return dnf_root


class DnfRoot:
    """One installroot; ``run`` asks the real dnf, ``installed``/``module_state`` read the state back."""

    def __init__(self, oracle: DnfOracle, root: Path) -> None:
        self.oracle = oracle
        self.root = root

    def dnf_argv(self, argv: Sequence[str], *, apply: bool = False) -> list[str]:
        """The full command line: the root's own config, repo dir and plugin config, never the host's."""
        base = [
            "dnf",
            f"--installroot={self.root}",
            f"--config={self.root / 'etc/dnf/dnf.conf'}",
            f"--setopt=reposdir={self.root / 'etc/yum.repos.d'}",
            f"--setopt=pluginconfpath={self.root / 'etc/dnf/plugins'}",
            "--setopt=*.skip_if_unavailable=0",
            "--setopt=module_platform_id=platform:el9",
            "--releasever=9",
            "--forcearch=x86_64",
            "--nogpgcheck",
        ]
        answer_flags = {"-y", "--assumeyes", "--assumeno"}
        if not answer_flags & set(argv):
            base.append("-y" if apply else "--assumeno")
        return [*base, *argv]

    def run(
        self, argv: Sequence[str], *, apply: bool = False, cwd: Path | None = None, timeout: float = 120.0
    ) -> DnfAnswer:
        """Run ``dnf ARGV`` in this root: resolve only (``--assumeno``) unless ``apply`` (``-y``).

        ``--downloadonly`` needs ``apply=True``: under ``--assumeno`` dnf stops before downloading. Relative
        paths (``./file.rpm``) are relative to ``cwd``, the root itself by default.
        """
        cmd = self.dnf_argv(argv, apply=apply)
        proc = subprocess.run(
            cmd,
            cwd=cwd or self.root,
            env=self.oracle.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return parse_dnf_output(argv, proc.returncode, proc.stdout, proc.stderr)

    def installed(self) -> dict[str, str]:
        """name -> EVR of what the root's rpmdb holds (one per name; installonly duplicates joined by ``,``)."""
        proc = _check(
            [
                "rpm",
                "--root",
                str(self.root),
                "--dbpath",
                _DBPATH,
                "-qa",
                "--qf",
                "%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE}\n",
            ],
            env=self.oracle.env(),
        )
        result: dict[str, str] = {}
        for line in sorted(proc.stdout.splitlines()):
            name, evr = line.split()
            evr = evr.removeprefix("0:")
            result[name] = f"{result[name]},{evr}" if name in result else evr
        return result

    def module_state(self, name: str = "nvidia-driver") -> dict[str, str]:
        """The root's ``modules.d/<name>.module`` as a dict (``{}`` when dnf has none)."""
        path = self.root / f"etc/dnf/modules.d/{name}.module"
        if not path.exists():
            return {}
        result: dict[str, str] = {}
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                result[key.strip()] = value.strip()
        return result

    def versionlocks(self) -> list[str]:
        """The lines of the root's versionlock list (comments dropped)."""
        path = self.root / "etc/dnf/plugins/versionlock.list"
        return [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def _spec(stanza: RpmStanza) -> str:
    """An empty package with exactly the stanza's relations: no files, no build, no automatic deps."""

    def esc(value: str) -> str:
        return value.replace("%", "%%")

    lines = [
        "%global __os_install_post %{nil}",
        "%global _build_id_links none",
        "%global debug_package %{nil}",
        "%global _binary_payload w0.ufdio",
        f"Name: {esc(stanza.name)}",
        f"Version: {esc(stanza.version)}",
        f"Release: {esc(stanza.release)}",
        "Summary: dnf oracle package",
        "License: none",
        "AutoReqProv: no",
    ]
    if stanza.epoch:
        lines.insert(5, f"Epoch: {stanza.epoch}")
    if stanza.arch == "noarch":
        lines.append("BuildArch: noarch")
    for tag, values in (
        ("Requires", stanza.requires),
        ("Provides", stanza.provides),
        ("Conflicts", stanza.conflicts),
        ("Obsoletes", stanza.obsoletes),
    ):
        lines += [f"{tag}: {esc(value)}" for value in values]
    lines += ["%description", f"{esc(stanza.nevra)} for the dnf oracle", "%files", ""]
    return "\n".join(lines)


def _check(cmd: list[str], *, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd, env=dict(env), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=_RPM_TIMEOUT, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc
