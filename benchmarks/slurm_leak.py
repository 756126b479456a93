"""How many jobs land on a node between its reboot and its smoke test passing, on a real Slurm.

A saturated queue of short jobs (each ``sleep`` a second, and first writes its node and start
time to a file) keeps every idle CPU busy. The cockpit's Slurm backend then takes the nodes,
several at once, through drain, reboot, a smoke test (a pause standing for the runbook's smoke
stage) and resume, again and again, and a job counts as leaked when it started on a node
after that node's reboot was asked for and before its smoke test passed. Three times, on the
same cluster: holding the node (``nextstate=DOWN`` and the cockpit's drain, the default; or
the cockpit's maintenance reservation) and returning it at once (``nextstate=RESUME``, round
2's way).

Needs what the tests marked ``slurm`` need (:mod:`cockpit.sim.slurm_cluster`: Debian's
slurmctld, slurmd and munge, run as root). One figure a line, the number beside its unit.

    python benchmarks/slurm_leak.py [--reboots 30] [--nodes 3] [--smoke-s 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from cockpit.fleet.backends.base import BackendAction, ReleaseRequest  # noqa: E402
from cockpit.fleet.backends.runners import local_runner  # noqa: E402
from cockpit.fleet.backends.slurm import Hold, SlurmBackend  # noqa: E402
from cockpit.sim import slurm_cluster  # noqa: E402
from cockpit.sim.slurm_cluster import SlurmCluster  # noqa: E402

#: pending jobs the feeder keeps queued: more than the cluster's CPUs, so an idle CPU never waits
QUEUE_DEPTH = 60
#: a node's window of exposure: from its reboot being asked to its smoke test passing
Window = tuple[str, float, float]


@dataclass
class Run:
    hold: Hold
    windows: list[Window]
    failed: list[str]
    seconds: float


def job_script(starts: Path) -> str:
    # slurmd sets SLURMD_NODENAME in the job's environment; the clock is the one host's
    return f'echo "$SLURMD_NODENAME $(date +%s.%N)" >> {starts}; sleep 1'


def feed(cluster: SlurmCluster, starts: Path, stop: threading.Event) -> None:
    """Keep QUEUE_DEPTH short jobs pending until ``stop``: the saturated queue."""
    while not stop.wait(0.5):
        pending = cluster.client("squeue", "-h", "-t", "PENDING", "-o", "%i", check=False).stdout.split()
        missing = QUEUE_DEPTH - len(pending)
        if missing > 0:
            cluster.client(
                "sbatch", "--parsable", f"--array=0-{missing - 1}", "-J", "leak", f"--chdir={cluster.workdir}",
                "--output=/dev/null", "--wrap", job_script(starts), check=False,
            )  # fmt: skip


async def cycle_node(slurm: SlurmBackend, node: str, rounds: int, smoke_s: float, run: Run) -> None:
    for i in range(rounds):
        reason = f"cockpit LEAK-{i}: reboot"
        [drained] = await slurm.release(ReleaseRequest(BackendAction.DRAIN, (node,), reason=reason, timeout_s=60))
        asked = time.time()
        [rebooted] = await slurm.release(ReleaseRequest(BackendAction.REBOOT, (node,), reason=reason, timeout_s=90))
        if not (drained.ok and rebooted.ok):
            run.failed.append(f"{node} round {i}: {drained.error or rebooted.error}")
            return
        await asyncio.sleep(smoke_s)  # the runbook's smoke stage, over SSH, while Slurm holds the node (or not)
        passed = time.time()
        run.windows.append((node, asked, passed))
        [resumed] = await slurm.release(ReleaseRequest(BackendAction.RESUME, (node,), reason=reason, timeout_s=90))
        if not resumed.ok:
            run.failed.append(f"{node} round {i}: resume: {resumed.error}")
            return


def leaked(starts: Path, windows: list[Window]) -> tuple[int, int]:
    """Jobs that started inside a node's window, and jobs started in all (the queue was saturated)."""
    seen = []
    for line in starts.read_text().splitlines() if starts.exists() else []:
        node, _, at = line.partition(" ")
        try:
            seen.append((node, float(at)))
        except ValueError:
            continue  # a line two jobs wrote at once: not a start this can place
    inside = sum(1 for node, at in seen for n, begin, end in windows if node == n and begin <= at <= end)
    return inside, len(seen)


async def measure(cluster: SlurmCluster, hold: Hold, reboots: int, smoke_s: float) -> tuple[Run, tuple[int, int]]:
    starts = cluster.workdir / f"starts-{hold}"
    stop = threading.Event()
    feeder = threading.Thread(target=feed, args=(cluster, starts, stop), daemon=True)
    feeder.start()
    await asyncio.sleep(3)  # the queue fills and every CPU is busy before the first drain
    slurm = SlurmBackend(local_runner(), poll_s=0.5, command_timeout_s=20, hold=hold)
    run = Run(hold=hold, windows=[], failed=[], seconds=0.0)
    nodes = cluster.nodes
    began = time.monotonic()
    rounds = [reboots // len(nodes) + (1 if i < reboots % len(nodes) else 0) for i in range(len(nodes))]
    await asyncio.gather(*(cycle_node(slurm, n, r, smoke_s, run) for n, r in zip(nodes, rounds, strict=True)))
    run.seconds = time.monotonic() - began
    stop.set()
    feeder.join(timeout=10)
    cluster.client("scancel", "--user=root", check=False)
    await asyncio.sleep(2)
    return run, leaked(starts, run.windows)


async def main(args: argparse.Namespace) -> int:
    why = slurm_cluster.slurm_available()
    if why:
        print(f"slurm leak: not measured ({why})")
        return 2
    nodes = tuple(f"gpu{i:02d}" for i in range(1, args.nodes + 1))
    cluster = slurm_cluster.start_slurm(nodes, reboot_pause_s=0.5)
    try:
        os.environ["SLURM_CONF"] = str(cluster.conf)
        names: dict[Hold, str] = {
            "down": "nextstate=DOWN, held until the smoke test",
            "reservation": "maintenance reservation until the smoke test",
            "resume": "nextstate=RESUME",
        }
        for hold, name in names.items():
            run, (jobs, started) = await measure(cluster, hold, args.reboots, args.smoke_s)
            print(f"slurm leak, {name}: {jobs} jobs over {len(run.windows)} reboots")
            print(f"slurm leak, {name}, jobs started meanwhile on all nodes: {started} jobs")
            print(f"slurm leak, {name}, one node's cycle: {run.seconds * len(nodes) / max(1, len(run.windows)):.1f} s")
            for failure in run.failed:
                print(f"slurm leak, {name}: failed: {failure}")
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reboots", type=int, default=30, help="reboots in all, shared among the nodes")
    parser.add_argument("--nodes", type=int, default=3, help="nodes rebooted at once")
    parser.add_argument("--smoke-s", type=float, default=3.0, help="how long the stand-in smoke test takes")
    sys.exit(asyncio.run(main(parser.parse_args())))
