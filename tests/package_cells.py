"""The package cells both real-package apt tests run: the platforms, the scratch node of the
real apt (tests/apt_oracle.py) with tool wrappers on its PATH, the record step's facts and the
runbook's filled steps.

tests/core/test_real_packages_apt.py runs the shipped runbook's apt steps on these nodes and
checks what the real apt did; tests/core/test_packages_differential.py runs the same steps on
a simulated node beside each and holds the simulator to the real apt's answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from apt_oracle import AptOracle, Repository, Stanza, parse_answer, parse_stanzas

from cockpit.fleet.platform_probe import PLATFORM_SECTIONS
from cockpit.gpu.parsers import platform as p
from cockpit.runbook.conditions import when_holds
from cockpit.runbook.model import Runbook, Step
from cockpit.runbook.placeholders import ParamValue, resolve_parameters
from cockpit.runbook.targets import target_facts

MISSING = [
    tool for tool in ("apt-get", "apt-mark", "apt-cache", "dpkg", "dpkg-query", "dpkg-deb") if not shutil.which(tool)
]
REPOS = Path(__file__).resolve().parents[1] / "cockpit" / "sim" / "repos"
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


def require_apt() -> None:
    """Skip where Debian's tools are absent (a Fedora or macOS laptop); in CI they must be there."""
    if MISSING:
        message = f"the real-package apt tests need {', '.join(MISSING)} (Debian/Ubuntu packages apt and dpkg)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


#: what the scratch nodes must never write: the host's dpkg status, apt state and apt configuration
WATCHED = (Path("/var/lib/dpkg/status"), Path("/var/lib/apt/extended_states"), Path("/etc/apt/sources.list"))


def host_digest() -> list[str | None]:
    return [hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else None for f in WATCHED]


def shared_deb_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The .deb cache of the whole test run (one per xdist worker): each repository package is
    built once, for every cell of every module that starts a scratch node."""
    folder = tmp_path_factory.getbasetemp() / "package-debs"
    folder.mkdir(exist_ok=True)
    return folder


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
    return facts_of(node.sh(PLATFORM_SECTIONS["packages"]).output, cuda_repo=cuda_repo, kernel=kernel)


def facts_of(printed: str, *, cuda_repo: bool, kernel: str) -> dict[str, object]:
    """The record step's facts from what the probe's dpkg-query line printed (on any node)."""
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


@pytest.fixture(autouse=True)
def needs_apt() -> None:
    """Skip where Debian's tools are absent (a Fedora or macOS laptop); in CI they must be there.
    Autouse in every module that imports it."""
    require_apt()


@pytest.fixture(scope="module", autouse=True)
def host_untouched() -> Iterator[None]:
    """The scratch nodes never write the host's dpkg status, apt state or apt configuration."""
    before = host_digest()
    yield
    assert host_digest() == before
