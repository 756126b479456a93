"""The shipped SSH runbooks' apt procedure, run for real over the real repository metadata.

The upgrade stage (holds, save-rollback, unhold, target-set, target-downloadable, install,
rehold) and the rollback (unhold, reinstall, holds) of checklists/driver-upgrade-r580.toml
are filled exactly as the executor fills them (parameters, the node's recorded facts, and
cockpit.runbook.targets.target_facts) and run with bash against a scratch node of the apt
oracle (tests/apt_oracle.py): the repository is cockpit/sim/repos' Packages of that
release, the start state is what the real apt installed for the start packages, and the
facts are what the probe's own dpkg-query line and parsers read from it.

On the bash PATH, apt-get, apt-mark, apt-cache, dpkg-query and dpkg are wrappers that run
the real tools with the oracle's scratch options (never the host's status, /etc/apt or
the network); an apt-get that would install gets ``-s`` and its answer is applied to the
scratch status afterwards (the oracle never runs dpkg). ``--download-only`` runs for
real: the sources are ``copy:`` instead of ``file:`` so that apt copies the fetched .debs
into Dir::Cache::archives as an http: source would (file: ones are read in place).
``/var/cache/cockpit/`` becomes a per-test folder.

Where the archive data carries 570-server fabric manager, nscq or IMEX (cockpit/sim/repos/ubuntu-archive,
section 5), the archive -server and -server-open starts install them too (an HGX node).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from apt_oracle import AptOracle, Repository, Stanza, Unmet, parse_answer, parse_stanzas

from cockpit.fleet.platform_probe import PLATFORM_SECTIONS
from cockpit.gpu.parsers import platform as p
from cockpit.runbook.conditions import when_holds
from cockpit.runbook.loader import load
from cockpit.runbook.model import Runbook, Step
from cockpit.runbook.placeholders import ParamValue, fill, resolve_parameters
from cockpit.runbook.targets import target_facts

MISSING = [
    tool for tool in ("apt-get", "apt-mark", "apt-cache", "dpkg", "dpkg-query", "dpkg-deb") if not shutil.which(tool)
]
REPOS = Path(__file__).resolve().parents[2] / "cockpit" / "sim" / "repos"
CACHE_ROOT = "/var/cache/cockpit/"
CHANGE_ID = "CHG-4711"
TOOLS = ("apt-get", "apt-mark", "apt-cache", "dpkg-query", "dpkg")
UPGRADE_STEPS = [
    "apt-update",
    "holds",
    "save-rollback",
    "unhold",
    "target-set",
    "target-downloadable",
    "install",
    "rehold",
]
ROLLBACK_STEPS = ["unhold", "reinstall", "holds"]


@pytest.fixture(autouse=True)
def _needs_apt() -> None:
    """Skip where Debian's tools are absent (a Fedora or macOS laptop); in CI they must be there."""
    if MISSING:
        message = f"the real-package apt tests need {', '.join(MISSING)} (Debian/Ubuntu packages apt and dpkg)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module", autouse=True)
def _host_untouched() -> Iterator[None]:
    """The scratch nodes never write the host's dpkg status, apt state or apt configuration."""
    watched = [Path("/var/lib/dpkg/status"), Path("/var/lib/apt/extended_states"), Path("/etc/apt/sources.list")]

    def digest() -> list[str | None]:
        return [hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else None for f in watched]

    before = digest()
    yield
    assert digest() == before


@pytest.fixture(scope="module")
def deb_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One .deb cache for the module: each repository package is built once for every cell."""
    return tmp_path_factory.mktemp("deb-cache")


# --------------------------------------------------------------------------- the platforms


@dataclass(frozen=True)
class Release:
    archive: str  # ubuntu-archive/<archive>.Packages, also the pocket
    cuda: str  # cuda-ubuntu/<cuda>.Packages
    kernel: str  # the kernel the archive's precompiled modules are built for


RELEASES = {
    "24.04": Release("noble", "ubuntu2404", "6.8.0-90-generic"),
    "22.04": Release("jammy", "ubuntu2204", "5.15.0-164-generic"),
}


@cache
def stanzas(path: str) -> tuple[Stanza, ...]:
    return tuple(parse_stanzas((REPOS / path).read_text()))


def base_packages(kernel: str) -> list[Stanza]:
    """What the base system provides: every name the NVIDIA stanzas depend on without a stanza of
    its own. The data has only unversioned or ``>=`` relations on them, so ``99:1`` satisfies all."""
    names = ["libc6", "dkms", "adduser", "libnvidia-egl-wayland1", "ocl-icd-libopencl1", f"linux-image-{kernel}"]
    base = [Stanza.of(name, "99:1", "amd64") for name in names]
    return [*base, Stanza.of("xserver-xorg-core", "99:1", "amd64", provides="xorg-video-abi-25")]


def upstream(version: str) -> str:
    """580.126.20 of 580.126.20-0ubuntu0.24.04.2 (no epoch in this data)."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


def data_version(path: str, package: str) -> str:
    """The upstream version the data carries for a package (one per branch per release)."""
    found = {upstream(s.version) for s in stanzas(path) if s.package == package}
    assert len(found) == 1, (package, found)
    return found.pop()


@dataclass(frozen=True)
class Cell:
    """One platform: the repository, the start packages, the target branch (version from the data)."""

    id: str
    source: str  # "archive" or "cuda"
    start: tuple[str, ...]
    branch: str
    driver: str  # a package of the target driver, whose upstream version is driver_version
    #: start packages where the data has them (the archive's 570 fabric manager and nscq are a late addition)
    optional: tuple[str, ...] = ()

    def path(self, release: Release) -> str:
        if self.source == "archive":
            return f"ubuntu-archive/{release.archive}.Packages"
        return f"cuda-ubuntu/{release.cuda}.Packages"

    def packages(self, release: Release) -> tuple[str, ...]:
        """What the start installs: the start packages, and the optional ones the data carries."""
        names = {s.package for s in stanzas(self.path(release))}
        return (*self.start, *(n for n in self.optional if n in names))


#: an HGX node's 570-server parts in Ubuntu's archive, where the data has them
HGX_570 = ("nvidia-fabricmanager-570", "libnvidia-nscq-570", "nvidia-imex-570")

CELLS = [
    Cell("archive-server", "archive", ("nvidia-driver-570-server",), "580", "nvidia-driver-580-server", HGX_570),
    Cell(
        "archive-server-open",
        "archive",
        ("nvidia-driver-570-server-open",),
        "580",
        "nvidia-driver-580-server-open",
        HGX_570,
    ),
    Cell(
        "archive-precompiled-headless",
        "archive",
        ("nvidia-headless-no-dkms-570-server", "linux-modules-nvidia-570-server-generic"),
        "580",
        "nvidia-headless-no-dkms-580-server",
    ),
    Cell(
        "archive-precompiled-driver",
        "archive",
        ("nvidia-driver-570-server", "linux-modules-nvidia-570-server-generic"),
        "580",
        "nvidia-driver-580-server",
    ),
    Cell(
        "cuda-575-to-580",
        "cuda",
        ("nvidia-driver-575", "nvidia-fabricmanager-575", "libnvidia-nscq-575"),
        "580",
        "nvidia-driver-580",
    ),
    Cell(
        "cuda-580-to-590",
        "cuda",
        (
            "nvidia-driver-580",
            "nvidia-fabricmanager=580.95.05-1",
            "libnvidia-nscq=580.95.05-1",
            "nvidia-imex=580.95.05-1",
        ),
        "590",
        "nvidia-driver",
    ),
    Cell(
        "cuda-575-open-to-580-open",
        "cuda",
        ("nvidia-driver-575-open", "nvidia-fabricmanager-575", "libnvidia-nscq-575"),
        "580",
        "nvidia-driver-580-open",
    ),
    Cell(
        "cuda-580-open-to-590-open",
        "cuda",
        (
            "nvidia-driver-580-open",
            "nvidia-fabricmanager=580.95.05-1",
            "libnvidia-nscq=580.95.05-1",
            "nvidia-imex=580.95.05-1",
        ),
        "590",
        "nvidia-driver-open",
    ),
]

# --------------------------------------------------------------------------- the node

#: The wrapper each tool name on the node's PATH runs: the real tool with the scratch options.
WRAPPER = '''#!{python}
"""The real {{apt-get,apt-mark,apt-cache,dpkg-query,dpkg}} on the oracle's scratch node only."""
import json, os, subprocess, sys

CONF = json.loads({conf!r})
tool = os.path.basename(sys.argv[0])
args = sys.argv[1:]
forced = False
if tool == "dpkg-query" or tool == "dpkg":
    command = [CONF["real"][tool], "--admindir=" + CONF["admindir"], *args]
else:
    words, flags, skip = [], set(), False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-o", "-c", "-t", "-a", "--option", "--config-file", "--target-release"):
            skip = True
        elif arg.startswith("--"):
            flags.add(arg)
        elif arg.startswith("-") and len(arg) > 1:
            flags |= {{"-" + c for c in arg[1:]}}
        else:
            words.append(arg)
    changing = tool == "apt-get" and words[:1] and words[0] in CONF["changing"]
    simulated = bool(flags & {{"-s", "--simulate", "--dry-run", "--just-print", "--recon", "--no-act"}})
    download_only = bool(flags & {{"-d", "--download-only"}})
    if changing and not simulated and not download_only:
        args, forced = ["-s", *args], True  # apt never runs dpkg here: the test applies the answer
    command = [CONF["real"][tool], *CONF["options"], *args]
done = subprocess.run(command, capture_output=True, text=True)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
with open(CONF["log"], "a") as log:
    record = dict(tool=tool, argv=[tool, *sys.argv[1:]], command=command, rc=done.returncode,
                  stdout=done.stdout, stderr=done.stderr, forced=forced)
    log.write(json.dumps(record) + "\\n")
sys.exit(done.returncode)
'''


@dataclass
class Shell:
    """What one filled command did: its exit status and output, and each tool call it made (the wrappers' log)."""

    command: str
    returncode: int
    output: str
    calls: list[dict[str, object]] = field(default_factory=list)


class Node:
    """A scratch node: the oracle's root, tool wrappers on PATH, the change's cache folder."""

    def __init__(self, base: Path, repo: str, pocket: str, kernel: str, deb_cache: Path) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.oracle = AptOracle(
            base / "oracle",
            [Repository(list(stanzas(repo)), pocket=pocket)],
            installed=base_packages(kernel),
            deb_cache=deb_cache,
            arch="amd64",
        )
        # copy: fetches into Dir::Cache::archives as http: would; file: is read in place
        sources = self.oracle.root / "etc/apt/sources.list"
        sources.write_text(sources.read_text().replace("[trusted=yes] file:", "[trusted=yes] copy:"))
        self.oracle.build_all()  # every .deb a download may fetch (cached across the module)
        self.cache = base / "var-cache-cockpit"
        self.cache.mkdir()
        self.log = base / "tools.jsonl"
        self.bin = base / "bin"
        self.bin.mkdir()
        conf = {
            "real": {tool: shutil.which(tool) for tool in TOOLS},
            "admindir": str(self.oracle.root / "var/lib/dpkg"),
            "options": [x for k, v in self.oracle.options.items() for x in ("-o", f"{k}={v}")],
            "changing": ["install", "remove", "purge", "upgrade", "dist-upgrade", "full-upgrade", "autoremove"],
            "log": str(self.log),
        }
        script = self.bin / "wrapper.py"
        script.write_text(WRAPPER.format(python=sys.executable, conf=json.dumps(conf)))
        script.chmod(0o755)
        for tool in TOOLS:
            (self.bin / tool).symlink_to(script)
        self.env = {
            "PATH": f"{self.bin}:/usr/sbin:/usr/bin:/sbin:/bin",
            "APT_CONFIG": str(self.oracle.apt_conf),
            "LANG": "C",
            "LC_ALL": "C",
            "HOME": str(base),
        }

    def sh(self, command: str) -> Shell:
        """Run a filled command with bash; apply every install apt-get simulated for it."""
        seen = len(self.log.read_text().splitlines()) if self.log.exists() else 0
        done = subprocess.run(
            ["bash", "-c", command],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.cache,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        records = [json.loads(line) for line in self.log.read_text().splitlines()[seen:]] if self.log.exists() else []
        for record in records:
            if record["forced"] and record["rc"] == 0:
                answer = parse_answer(
                    record["argv"], record["command"], 0, record["stdout"], record["stderr"], str(self.oracle.root)
                )
                self.oracle.apply(answer)
        return Shell(command, done.returncode, done.stdout + done.stderr, records)

    def installed(self) -> dict[str, str]:
        """Every package the status holds but the dummy base system."""
        return {n: v for n, v in self.oracle.installed().items() if v != "99:1"}


def start_node(base: Path, cell: Cell, release: Release, deb_cache: Path, *, hold: bool = True) -> Node:
    """An empty node where the real apt installed the cell's start packages, held as operators hold them."""
    pocket = release.archive if cell.source == "archive" else release.cuda
    node = Node(base, cell.path(release), pocket, release.kernel, deb_cache)
    start = cell.packages(release)
    answer = node.oracle.run(["apt-get", "install", "-y", *start])
    assert answer.ok, answer.output
    node.oracle.apply(answer)
    if hold:
        names = [word.split("=", 1)[0] for word in start]
        assert node.oracle.run(["apt-mark", "hold", *names]).ok
    return node


def recorded_facts(node: Node, *, cuda_repo: bool, kernel: str) -> dict[str, object]:
    """The facts the record step keeps, from the probe's own dpkg-query line and parsers."""
    printed = node.sh(PLATFORM_SECTIONS["packages"]).output
    packages = p.installed_packages(printed)
    fabric = p.package_version(packages, ("nvidia-fabricmanager", "nvidia-fabric-manager"))
    facts: dict[str, object] = {
        "package_manager": "apt",
        "driver_flavour": p.driver_flavour(packages, None, None),
        "driver_install": p.driver_install(packages, [], cuda_repo),
        "driver_metapackage": p.driver_metapackage(packages),
        "module_packaging": p.module_packaging(packages, None),
        "driver_packages": [f"{k}={v}" for k, v in sorted(packages.items())],
        "fabric_manager_version": fabric,
        "nscq_version": p.package_version(packages, ("libnvidia-nscq",)),
        "imex_version": p.package_version(packages, ("nvidia-imex",)),
        "kernel": kernel,
        "kernel_next": kernel,
        "nvswitch": fabric is not None,
    }
    return {f"recorded_{k}": v for k, v in facts.items() if v is not None}


def placeholder_values(
    runbook: Runbook, params: Mapping[str, str], facts: Mapping[str, object]
) -> dict[str, ParamValue]:
    """What the executor fills a node's command with (cockpit.fleet.executor.Executor.values)."""
    values: dict[str, ParamValue] = {**resolve_parameters(runbook, dict(params)), "change_id": CHANGE_ID}
    values.update({k: v for k, v in facts.items() if isinstance(v, str | int | float | bool)})
    values.update(target_facts({**values, **facts}))
    return values


def node_steps(steps: list[Step], params: Mapping[str, object], facts: Mapping[str, object]) -> list[Step]:
    """The command steps that run on an apt node over SSH (their ``when`` holds)."""
    conditions = {**params, "backend": "ssh"}
    return [s for s in steps if s.run and s.where.value == "node" and when_holds(s.when, conditions, facts)]


@dataclass
class Window:
    """One node's change, step by step: the node, its start, facts, filled commands and outputs."""

    node: Node
    start: dict[str, str]
    start_holds: set[str]
    facts: dict[str, object]
    values: dict[str, ParamValue]
    commands: dict[str, str] = field(default_factory=dict)
    done: dict[str, Shell] = field(default_factory=dict)

    def run(self, step: Step, section: str) -> Shell:
        command = fill(step.run or "", self.values).replace(CACHE_ROOT, f"{self.node.cache}/")
        self.commands[f"{section}:{step.id}"] = command
        shell = self.node.sh(command)
        self.done[f"{section}:{step.id}"] = shell
        return shell


def upgrade_window(base: Path, cell: Cell, release: Release, deb_cache: Path, runbook_name: str) -> Window:
    """Start the node, record it, fill the runbook and run its upgrade stage's apt steps in order."""
    node = start_node(base, cell, release, deb_cache)
    version = data_version(cell.path(release), cell.driver)
    runbook = load(runbook_name).runbook
    params = {"target_branch": cell.branch, "driver_version": version}
    facts = recorded_facts(node, cuda_repo=cell.source == "cuda", kernel=release.kernel)
    window = Window(node, node.installed(), node.oracle.held(), facts, placeholder_values(runbook, params, facts))
    stage = next(s for s in runbook.stages if s.id == "upgrade")
    steps = node_steps(stage.steps, resolve_parameters(runbook, params), facts)
    assert [s.id for s in steps] == UPGRADE_STEPS
    for step in steps:
        shell = window.run(step, "upgrade")
        assert shell.returncode == 0, f"upgrade step {step.id} failed:\n$ {shell.command}\n{shell.output}"
    return window


def rollback(window: Window, runbook_name: str) -> None:
    runbook = load(runbook_name).runbook
    assert runbook.rollback is not None
    params = {
        "target_branch": str(window.values["target_branch"]),
        "driver_version": str(window.values["driver_version"]),
    }
    steps = node_steps(runbook.rollback.steps, resolve_parameters(runbook, params), window.facts)
    apt_steps = [s for s in steps if s.id in ROLLBACK_STEPS]
    assert [s.id for s in apt_steps] == ROLLBACK_STEPS
    for step in apt_steps:
        shell = window.run(step, "rollback")
        assert shell.returncode == 0, f"rollback step {step.id} failed:\n$ {shell.command}\n{shell.output}"


# --------------------------------------------------------------------------- the matrix


def module_packages(installed: Mapping[str, str]) -> list[str]:
    return sorted(n for n in installed if n.startswith(("nvidia-dkms", "linux-modules-nvidia-")))


def is_open(modules: list[str]) -> bool:
    opens = {"-open" in name for name in modules}
    assert len(opens) == 1, modules
    return opens.pop()


PARTS = {
    "fabric manager": ("nvidia-fabricmanager", "nvidia-fabric-manager"),
    "nscq": ("libnvidia-nscq",),
    "imex": ("nvidia-imex",),
}


@pytest.fixture(scope="module")
def windows(tmp_path_factory: pytest.TempPathFactory, deb_cache: Path) -> Callable[[Cell, str], Window]:
    """Each cell's upgraded node, made once: the rollback test goes on from where the upgrade test stopped."""
    made: dict[tuple[str, str], Window] = {}

    def upgraded(cell: Cell, release: str) -> Window:
        key = (cell.id, release)
        if key not in made:
            base = tmp_path_factory.mktemp(f"{cell.id}-{release}")
            made[key] = upgrade_window(base, cell, RELEASES[release], deb_cache, "driver-upgrade-r580")
        return made[key]

    return upgraded


MATRIX = [pytest.param(cell, release, id=f"{cell.id}-{release}") for cell in CELLS for release in RELEASES]


@pytest.mark.parametrize(("cell", "release"), MATRIX)
def test_the_upgrade_stage_moves_the_node(windows: Callable[[Cell, str], Window], cell: Cell, release: str) -> None:
    """The real apt resolves the target set, keeps the module's flavour and packaging, and moves
    fabric manager, nscq and IMEX with the driver."""
    window = windows(cell, release)
    node, start, version = window.node, window.start, str(window.values["driver_version"])
    # (1) the dry run: the real apt resolves the target set at driver_version
    dry = window.done["upgrade:target-downloadable"]
    assert dry.returncode == 0 and "Inst " in dry.output, dry.output
    after = node.installed()
    assert upstream(after[cell.driver]) == version, after
    # (2) the kernel module keeps its flavour and packaging
    before_modules, after_modules = module_packages(start), module_packages(after)
    assert after_modules, after
    assert is_open(after_modules) == is_open(before_modules), (before_modules, after_modules)
    if window.facts["recorded_module_packaging"] == "precompiled":
        assert not [n for n in after if n.startswith("nvidia-dkms")], after
        assert all(n.startswith(f"linux-modules-nvidia-{cell.branch}") for n in after_modules), after_modules
    else:
        assert [upstream(after[n]) for n in after_modules] == [version], after_modules
    # (3) fabric manager, nscq and IMEX, where the start had them, at the driver's version
    for part, prefixes in PARTS.items():
        had = [n for n in start if n.startswith(prefixes)]
        has = [n for n in after if n.startswith(prefixes)]
        if had:
            assert [upstream(after[n]) for n in has] == [version], (part, had, {n: after[n] for n in has})
        else:
            assert not has, (part, has)
    # the new set is held where the old one was
    target = (node.cache / CHANGE_ID / "target").read_text().split()
    assert node.oracle.held() == {w.split("=", 1)[0] for w in target}


@pytest.mark.parametrize(("cell", "release"), MATRIX)
def test_the_rollback_brings_back_the_start(windows: Callable[[Cell, str], Window], cell: Cell, release: str) -> None:
    """(4) The files save-rollback kept bring back every package of the start at its version,
    precompiled modules included, whatever the repository still carries. What the target added
    and nothing of the start conflicts with stays installed, and must be inert there: the
    target's GSP firmware (its own /lib/firmware/nvidia/VERSION), a precompiled module's
    object files without the module package, 590's libnvidia-gpucomp that no 580 library
    loads (the real apt keeps them: reinstalling files removes nothing it need not)."""
    window = windows(cell, release)
    rollback(window, "driver-upgrade-r580")
    now = window.node.installed()
    back = {n: now.get(n) for n in window.start}
    assert back == dict(window.start), _diff(window.start, now)
    left = {n: v for n, v in now.items() if n not in window.start}
    assert all(n.startswith(INERT_LEFTOVERS) for n in left), left
    assert window.node.oracle.held() == window.start_holds


#: what a rollback from saved files leaves of the target: nothing that loads with the old driver
INERT_LEFTOVERS = ("nvidia-firmware-", "linux-objects-nvidia-", "libnvidia-gpucomp")


def _diff(start: Mapping[str, str], now: Mapping[str, str]) -> dict[str, tuple[str | None, str | None]]:
    names = set(start) | set(now)
    return {n: (start.get(n), now.get(n)) for n in sorted(names) if start.get(n) != now.get(n)}


def test_the_routine_runbook_runs_the_same_commands(tmp_path: Path, deb_cache: Path) -> None:
    """driver-upgrade.toml's node stages are a verbatim copy: on a node, they fill to the same commands."""
    cell, release = CELLS[1], RELEASES["24.04"]
    node = start_node(tmp_path, cell, release, deb_cache)
    facts = recorded_facts(node, cuda_repo=False, kernel=release.kernel)
    params = {"target_branch": cell.branch, "driver_version": data_version(cell.path(release), cell.driver)}

    def commands(name: str) -> list[str]:
        runbook = load(name).runbook
        values = placeholder_values(runbook, params, facts)
        stage = next(s for s in runbook.stages if s.id == "upgrade")
        assert runbook.rollback is not None
        steps = [*stage.steps, *runbook.rollback.steps]
        return [fill(s.run or "", values) for s in node_steps(steps, resolve_parameters(runbook, params), facts)]

    assert commands("driver-upgrade") == commands("driver-upgrade-r580")


def test_the_old_command_line_is_refused_on_an_archive_server_node(tmp_path: Path, deb_cache: Path) -> None:
    """Why the runbook names packages per node: the former fixed line (desktop driver, branch-suffixed
    fabric manager and nscq) cannot be installed from Ubuntu's archive on a -server node."""
    cell, release = CELLS[0], RELEASES["24.04"]
    node = start_node(tmp_path, cell, release, deb_cache, hold=False)
    version = data_version(cell.path(release), cell.driver)
    old = ["nvidia-driver-580", "nvidia-fabricmanager-580", "libnvidia-nscq-580"]
    pinned = node.oracle.run(["apt-get", "install", "-y", *(f"{n}={version}*" for n in old)])
    assert pinned.returncode == 100
    assert ("nvidia-driver-580", f"{version}*") in pinned.not_found  # the desktop driver is at another version
    unpinned = node.oracle.run(["apt-get", "install", "-y", *old])  # and at any version, the parts refuse it
    assert unpinned.returncode == 100 and unpinned.held_broken, unpinned.output
    assert set(unpinned.unmet) == {
        Unmet("nvidia-fabricmanager-580", f"Depends: nvidia-kernel-common-580-server-{version}"),
        Unmet("libnvidia-nscq-580", f"Depends: nvidia-kernel-common-580-server-{version}"),
    }


@pytest.mark.parametrize("release", list(RELEASES))
def test_the_archive_parts_follow_the_server_driver_exactly(release: str) -> None:
    """Why fabric manager, nscq and IMEX are named and pinned with the driver on the archive: each
    depends on the server kernel-common of its own upstream version (Launchpad bug 2129682)."""
    path = f"ubuntu-archive/{RELEASES[release].archive}.Packages"
    prefixes = PARTS["fabric manager"] + PARTS["nscq"] + PARTS["imex"]
    parts = [s for s in stanzas(path) if s.package.startswith(prefixes)]
    assert {s.package for s in parts} >= {"nvidia-fabricmanager-580", "libnvidia-nscq-580", "nvidia-imex-580"}
    for part in parts:
        branch = part.package.rsplit("-", 1)[1]
        assert f"nvidia-kernel-common-{branch}-server-{upstream(part.version)}" in part.depends, part
