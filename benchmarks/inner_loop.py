"""The inner loop's time: ``pytest -m "not slow"`` (what a contributor runs while working) with two
xdist workers, optionally serially too, and optionally the full suite as CI runs it; the wall and
CPU seconds of each (pytest and its children: the machine is shared, so CPU is the figure that
does not depend on the neighbours), and the test files that cost the inner loop the most CPU.

    python benchmarks/inner_loop.py                  # the inner loop on 2 workers
    python benchmarks/inner_loop.py --serial --full  # and serially, and the whole suite (-n auto)

The target is 60 s wall on 2 cores (issue 30). Per-test CPU is recorded as
``benchmarks/suite_cpu.py`` records it (the same plugin).

Python's bytecode caches are on, as on a contributor's machine, whatever PYTHONDONTWRITEBYTECODE
says (``--no-bytecode-cache`` keeps it): a collect-only run first writes them (not timed), so the
figure is a contributor's second run, not the first after a checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.suite_cpu import PLUGIN  # the checkout on sys.path first

REPO = Path(__file__).resolve().parents[1]
INNER = ("-m", "not slow")


@dataclass(frozen=True)
class Run:
    tests: int
    wall_s: float
    cpu_s: float  # pytest and every child it waited for (workers, subprocesses)
    rc: int
    by_file: Counter[str]
    by_test: Counter[str]  # wall seconds of each test: what may deserve the slow mark
    failed: list[str]  # pytest's FAILED and ERROR lines: a figure from a red run says so


def run(args: list[str], *, bytecode: bool = True) -> Run:
    """One pytest run with pyproject's options then ``args``, measured."""
    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, "cockpit_suite_cpu.py").write_text(PLUGIN)
        out = Path(scratch, "cpu")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [scratch, str(REPO), os.environ.get("PYTHONPATH")])),
            "COCKPIT_SUITE_CPU_OUT": str(out),
        }
        if bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "cockpit_suite_cpu", *args]
        started, before = time.monotonic(), os.times()
        done = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True, check=False)
        rc = done.returncode
        wall = time.monotonic() - started
        after = os.times()
        rows = [json.loads(line) for part in Path(scratch).glob("cpu.*") for line in part.read_text().splitlines()]
    by_file: Counter[str] = Counter()
    by_test: Counter[str] = Counter()
    for r in rows:
        by_file[r["id"].split("::")[0]] += r["cpu"]
        by_test[r["id"]] += r["wall"]
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return Run(len(rows), wall, cpu, rc, by_file, by_test, failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2", help="xdist workers for the inner loop (default 2)")
    parser.add_argument("--serial", action="store_true", help="also run the inner loop serially (-n 0)")
    parser.add_argument("--full", action="store_true", help="also run the full suite as CI does (-n auto)")
    parser.add_argument("--top", type=int, default=10, help="test files (by CPU) and tests (by wall) to list")
    parser.add_argument(
        "--no-bytecode-cache", action="store_true", help="leave PYTHONDONTWRITEBYTECODE as the environment sets it"
    )
    args, extra = parser.parse_known_args()
    bytecode = not args.no_bytecode_cache
    cores = len(os.sched_getaffinity(0))
    print(f"[inner_loop] {cores} cores; load average {os.getloadavg()[0]:.1f} at the start")
    if bytecode:  # a contributor's second run: the caches written, untimed
        run(["--collect-only", *INNER, "-n", "0", *extra])
    cached = bytecode or not os.environ.get("PYTHONDONTWRITEBYTECODE")
    print(f"[inner_loop] bytecode caches: {'on' if cached else 'off (PYTHONDONTWRITEBYTECODE)'}")
    rcs = []
    inner = run([*INNER, "-n", args.workers, *extra], bytecode=bytecode)
    rcs.append(inner.rc)
    label = f'-m "not slow" -n {args.workers}'
    print(f"[inner_loop] inner loop ({label}): exit {inner.rc}")
    for line in inner.failed:
        print(f"[inner_loop] {line}")
    print(f"[inner_loop] inner loop tests: {inner.tests}")
    print(f"[inner_loop] inner loop wall: {inner.wall_s:.1f} s")
    print(f"[inner_loop] inner loop CPU: {inner.cpu_s:.1f} s")
    if args.serial:
        serial = run([*INNER, "-n", "0", *extra], bytecode=bytecode)
        rcs.append(serial.rc)
        for line in serial.failed:
            print(f"[inner_loop] {line}")
        print(f"[inner_loop] inner loop serial (-n 0) wall: {serial.wall_s:.1f} s")
        print(f"[inner_loop] inner loop serial CPU: {serial.cpu_s:.1f} s")
    if args.full:
        full = run(extra, bytecode=bytecode)
        rcs.append(full.rc)
        print(f"[inner_loop] full suite (-n auto): exit {full.rc}")
        for line in full.failed:
            print(f"[inner_loop] {line}")
        print(f"[inner_loop] full suite tests: {full.tests}")
        print(f"[inner_loop] full suite wall: {full.wall_s:.1f} s")
        print(f"[inner_loop] full suite CPU: {full.cpu_s:.1f} s")
    in_tests = sum(inner.by_file.values())
    for path, cpu in inner.by_file.most_common(args.top):
        print(f"[inner_loop] inner loop file CPU: {cpu:6.1f} s {100 * cpu / max(in_tests, 1e-9):4.1f}%  {path}")
    for test, wall in inner.by_test.most_common(args.top):
        print(f"[inner_loop] inner loop test wall: {wall:6.1f} s  {test}")
    return max(rcs)


if __name__ == "__main__":
    sys.exit(main())
