"""Where the test suite's CPU goes: runs pytest (pyproject's options, then any arguments given)
with a small plugin that records, per test, the CPU of the worker running it and of the
children it waited for, then prints the total against what a wall-clock target allows on
this machine's cores, and the test files that cost the most.

The suite is CPU-bound on 2 cores (four workers keep both busy), so its wall time cannot
fall below (CPU of the tests + the workers' own start) / cores; this says which files a
faster suite has to make cheaper. Daemons the tests start (sshd, slurmd, tmux) are not
children a test waits for: their CPU shows only in the machine's total.

    python benchmarks/suite_cpu.py                       # the whole suite
    python benchmarks/suite_cpu.py tests/ui -n 2 --top 5 # a part of it
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The plugin each pytest worker loads (``-p``): one JSON line per test to the file the
#: environment names. Written out at run time so the benchmark stays one file.
PLUGIN = """
import json, os, time
import pytest

_out = open(os.environ["COCKPIT_SUITE_CPU_OUT"] + f".{os.getpid()}", "a")

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, cpu, wall = os.times(), time.process_time(), time.monotonic()
    yield
    after = os.times()
    children = after.children_user + after.children_system - before.children_user - before.children_system
    _out.write(json.dumps({"id": item.nodeid, "cpu": time.process_time() - cpu + children,
                           "wall": time.monotonic() - wall}) + "\\n")
    _out.flush()
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15, help="how many test files to list (default 15)")
    parser.add_argument("--target", type=float, default=180.0, metavar="S", help="wall target (default 180 s)")
    args, pytest_args = parser.parse_known_args()
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, "cockpit_suite_cpu.py").write_text(PLUGIN)
        out = Path(scratch, "cpu")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [scratch, os.environ.get("PYTHONPATH")])),
            "COCKPIT_SUITE_CPU_OUT": str(out),
        }
        started, before = time.monotonic(), os.times()
        command = [sys.executable, "-m", "pytest", "-q", "-p", "cockpit_suite_cpu", *pytest_args]
        rc = subprocess.run(command, cwd=REPO, env=env, check=False).returncode
        wall = time.monotonic() - started
        after = os.times()
        rows = [json.loads(line) for part in Path(scratch).glob("cpu.*") for line in part.read_text().splitlines()]
    total = after.children_user + after.children_system - before.children_user - before.children_system
    in_tests = sum(r["cpu"] for r in rows)
    by_file: Counter[str] = Counter()
    for r in rows:
        by_file[r["id"].split("::")[0]] += r["cpu"]
    print(f"\n[suite_cpu] {len(rows)} tests, {wall:.0f} s wall on {cores} cores (pytest exit {rc})")
    print(f"[suite_cpu] CPU: {total:.0f} s in all (pytest and its children), {in_tests:.0f} s inside the tests")
    print(f"[suite_cpu] a {args.target:.0f} s wall target allows at most {args.target * cores:.0f} s of CPU here")
    for path, cpu in by_file.most_common(args.top):
        print(f"[suite_cpu] {cpu:7.1f} s {100 * cpu / max(in_tests, 1e-9):5.1f}%  {path}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
