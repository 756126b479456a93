"""Fleet probe benchmark: cockpit's probe vs a bare asyncssh loop (and clush), over the simulator.

For each fleet size the simulator runs in its OWN process (``cockpit sim``), so the
client figures are the client's alone. Every client method runs in a fresh child
process, so its CPU seconds and peak RSS are its own:

* cockpit cold: Transport connect + auth + the batched probe + parsing, every node;
* cockpit warm: the same probe round again over the open connections (mean of rounds);
* bare asyncssh: connect to every node, run ``nvidia-smi --query-gpu`` (the probe's
  query, nothing else, no parsing), then warm rounds over the open connections;
* clush -f 64 (when installed): the same query through OpenSSH, one ssh per node.

Prints a table of figures. Never fails on speed: the targets are for reading.

    python benchmarks/probe_bench.py [--sizes 16,64,256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.fleet.targets import HostTarget

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._measure import simulated_fleet  # noqa: E402  (the checkout on sys.path first)


def _usage() -> tuple[float, float]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0  # CPU s, peak RSS MiB (Linux: KiB)


async def _cockpit_worker(ssh_config: Path, names: list[str], rounds: int) -> dict[str, float]:
    from cockpit.fleet.probes import probe_fleet
    from cockpit.fleet.transport import Transport, TransportOptions
    from cockpit.gpu.nodestate import Health

    figures: dict[str, float] = {}
    async with Transport([_target(n) for n in names], TransportOptions(ssh_config=ssh_config, fanout=64)) as t:
        cpu0, _ = _usage()
        t0 = time.perf_counter()
        states = await probe_fleet(t, names)
        figures["cold_s"] = time.perf_counter() - t0
        figures["cold_cpu_s"] = _usage()[0] - cpu0
        figures["ok"] = sum(s.health is Health.OK for s in states.values())
        walls, cpus = [], []
        for _ in range(rounds):
            cpu0 = _usage()[0]
            t0 = time.perf_counter()
            await probe_fleet(t, names)
            walls.append(time.perf_counter() - t0)
            cpus.append(_usage()[0] - cpu0)
        figures["warm_s"] = sum(walls) / len(walls)
        figures["warm_cpu_s"] = sum(cpus) / len(cpus)
    figures["peak_rss_mib"] = _usage()[1]
    return figures


def _target(name: str) -> HostTarget:
    from cockpit.fleet.targets import HostTarget

    return HostTarget(name=name)


async def _bare_worker(ssh_config: Path, names: list[str], rounds: int) -> dict[str, float]:
    import asyncssh

    from cockpit.gpu.parsers.query_gpu import probe_query_command

    command = shlex.join(probe_query_command())
    slots = asyncio.Semaphore(64)

    async def connect(name: str) -> asyncssh.SSHClientConnection:
        async with slots:
            return await asyncssh.connect(name, config=[str(ssh_config)])

    async def one(conn: asyncssh.SSHClientConnection) -> int:
        result = await conn.run(command)
        return 0 if result.exit_status == 0 else 1

    figures: dict[str, float] = {}
    cpu0 = _usage()[0]
    t0 = time.perf_counter()
    conns = await asyncio.gather(*(connect(n) for n in names))
    failures = sum(await asyncio.gather(*(one(c) for c in conns)))
    figures["cold_s"] = time.perf_counter() - t0
    figures["cold_cpu_s"] = _usage()[0] - cpu0
    figures["ok"] = len(names) - failures
    walls, cpus = [], []
    for _ in range(rounds):
        cpu0 = _usage()[0]
        t0 = time.perf_counter()
        await asyncio.gather(*(one(c) for c in conns))
        walls.append(time.perf_counter() - t0)
        cpus.append(_usage()[0] - cpu0)
    figures["warm_s"] = sum(walls) / len(walls)
    figures["warm_cpu_s"] = sum(cpus) / len(cpus)
    for c in conns:
        c.close()
    figures["peak_rss_mib"] = _usage()[1]
    return figures


def _clush(ssh_config: Path, names: list[str]) -> dict[str, float] | None:
    if shutil.which("clush") is None:
        return None
    from cockpit.fleet.nodeset import fold_nodeset
    from cockpit.gpu.parsers.query_gpu import probe_query_command

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            "clush",
            "-f",
            "64",
            "-w",
            fold_nodeset(names),
            "-o",
            f"-F {ssh_config}",
            "-b",
            "-S",
            "--",
            shlex.join(probe_query_command()),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "cold_s": wall,
        "cold_cpu_s": cpu,  # clush and every ssh it started
        "ok": len(names) if proc.returncode == 0 else -1,
        "peak_rss_mib": after.ru_maxrss / 1024.0,  # the largest single child (clush or one ssh)
    }


def _run_worker(kind: str, ssh_config: Path, names: list[str], rounds: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            kind,
            "--ssh-config",
            str(ssh_config),
            "--names",
            ",".join(names),
            "--rounds",
            str(rounds),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} worker failed: {out.stderr.strip().splitlines()[-1:]}")
    figures: dict[str, float] = json.loads(out.stdout)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="16,64,256")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", choices=["cockpit", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--ssh-config", help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        names = args.names.split(",")
        worker = _cockpit_worker if args.worker == "cockpit" else _bare_worker
        print(json.dumps(asyncio.run(worker(Path(args.ssh_config), names, args.rounds))))
        return 0

    rows = []
    with tempfile.TemporaryDirectory(prefix="probe-bench-") as tmp:
        os.environ["HOME"] = tmp  # no developer ssh config or agent leaks in
        for n in (int(x) for x in args.sizes.split(",")):
            directory = Path(tmp) / f"sim{n}"
            with simulated_fleet(n, directory, cwd=ROOT) as ssh_config:
                from cockpit.sim import node_names

                names = node_names(n)
                results = {
                    "cockpit": _run_worker("cockpit", ssh_config, names, args.rounds),
                    "asyncssh": _run_worker("bare", ssh_config, names, args.rounds),
                }
                clush = _clush(ssh_config, names)
                if clush is not None:
                    results["clush -f 64"] = clush
            for method, f in results.items():
                rows.append((n, method, f))

    header = (
        f"{'nodes':>5}  {'client':<12} {'ok':>4} {'cold s':>7} {'cold cpu':>8} "
        f"{'warm s':>7} {'warm cpu':>8} {'peak RSS':>9}"
    )
    print(header)
    print("-" * len(header))
    for n, method, f in rows:
        warm = f"{f['warm_s']:7.3f}" if "warm_s" in f else f"{'-':>7}"
        warm_cpu = f"{f['warm_cpu_s']:8.3f}" if "warm_cpu_s" in f else f"{'-':>8}"
        print(
            f"{n:>5}  {method:<12} {int(f['ok']):>4} {f['cold_s']:7.3f} {f['cold_cpu_s']:8.3f} "
            f"{warm} {warm_cpu} {f['peak_rss_mib']:7.1f} M"
        )
    print("\ncold: connect + auth + probe (+ parse for cockpit); warm: one more round over open connections (mean);")
    print(
        "cpu: client CPU seconds (user + system); clush cpu includes its ssh children; "
        "the simulator runs in its own process."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
