"""What resolving the driver change costs: the simulated apt over the repositories' real
stanzas, and the real apt-get and dnf the package differential asks over the same files.

One figure a line, the number beside its unit. The real resolvers run offline over scratch
roots (tests/apt_oracle.py, tests/dnf_oracle.py); dnf only as root and where it is installed.

    python benchmarks/packages_bench.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from cockpit.sim.apt_resolve import Universe, resolve  # noqa: E402
from cockpit.sim.debs import index_of  # noqa: E402
from cockpit.sim.repos import base_names, read_text  # noqa: E402

ROUNDS = 50
#: the default simulated node's change: NVIDIA's repository, open 575 with fabric manager and nscq, to 580
START = ("nvidia-driver-575-open", "nvidia-fabricmanager-575", "libnvidia-nscq-575")
TARGET = ("nvidia-driver-580-open", "nvidia-dkms-580-open", "nvidia-fabricmanager", "libnvidia-nscq")


def simulated_apt() -> None:
    index = index_of("cuda-ubuntu2404")
    base = base_names("cuda-ubuntu2404")
    empty = Universe(index, {}, assumed=base)
    start = resolve(empty, {n: empty.candidate(n) for n in START if empty.candidate(n)}).install  # type: ignore[misc]
    node = Universe(index, start, assumed=base)
    wanted = {n: next(p for p in node.versions[n] if p.version.startswith("580.95.05")) for n in TARGET}
    began = time.perf_counter()
    for _ in range(ROUNDS):
        resolution = resolve(Universe(index, start, assumed=base), wanted)
    per = (time.perf_counter() - began) / ROUNDS
    assert resolution.ok
    print(f"simulated apt, 575 -> 580 resolve: {per * 1000:.2f} ms")
    print(f"simulated apt, packages the change touches: {len(resolution.install) + len(resolution.remove)} packages")


def real_apt() -> None:
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        print("real apt: not measured (no apt-get here)")
        return
    from apt_oracle import AptOracle, Stanza, parse_stanzas

    stanzas = parse_stanzas(read_text("cuda-ubuntu/ubuntu2404.Packages"))
    base = [Stanza.of(n, "99:1", "amd64") for n in sorted(base_names("cuda-ubuntu2404"))]
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        oracle = AptOracle(Path(tmp) / "node", [stanzas, base], installed=base)
        print(f"real apt, scratch node set up: {(time.perf_counter() - began) * 1000:.0f} ms")
        oracle.apply(oracle.run(["apt-get", "install", "-y", *START]))
        argv = ["apt-get", "install", "-s", *(f"{n}=580.95.05*" for n in TARGET)]
        began = time.perf_counter()
        for _ in range(10):
            answer = oracle.run(argv)
        assert answer.ok, answer.output
        print(f"real apt, 575 -> 580 resolve (apt-get -s): {(time.perf_counter() - began) / 10 * 1000:.1f} ms")


def real_dnf() -> None:
    import os

    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("dnf", "createrepo_c", "rpmbuild")):
        print("real dnf: not measured (needs root, dnf, createrepo_c and rpmbuild)")
        return
    from dnf_oracle import DnfOracle, ModuleState, base_os_stub, parse_rpm_stanzas

    stanzas = parse_rpm_stanzas(read_text("rhel9/packages.txt"))
    stub = base_os_stub(stanzas)
    every = [*stanzas, *([stub] if stub else [])]
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        oracle = DnfOracle(every, read_text("rhel9/modules.yaml"), Path(tmp) / "cache")
        print(f"real dnf, repository of {len(every)} empty rpms built: {time.perf_counter() - began:.2f} s")
        start = [s for s in every if "575-dkms" in s.streams or s is stub]
        root = oracle.make_root(Path(tmp) / "root", installed=start, module=ModuleState("575-dkms", ("default",)))
        began = time.perf_counter()
        answer = root.run(["dnf", "module", "switch-to", "nvidia-driver:580-dkms", "--allowerasing"])
        print(f"real dnf, 575-dkms -> 580-dkms resolve: {(time.perf_counter() - began) * 1000:.0f} ms")
        assert answer.rc in (0, 1), answer.stderr  # --assumeno answers 1 once it resolved


if __name__ == "__main__":
    simulated_apt()
    real_apt()
    real_dnf()
