"""The fault matrix: every known way a node comes back broken, injected on one node of a
simulated window that Next alone walks, and N clean windows that must not stop.

Run: ``python benchmarks/fault_matrix.py [--clean 50] [--only SCENARIO ...]``. Prints, per
fault, where it was caught (stage, the trigger or item), whether that names the injected
cause and whether the node ever went back into service on the new driver; then the false
passes, the false stops and the time each walk took. It does not fail: the test
(tests/core/test_fault_matrix.py) holds the matrix to 0 false passes and 0 false stops.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from cockpit.session.fault_matrix import FAULTS, render, run_matrix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", type=int, default=50, help="clean windows to walk (default 50)")
    parser.add_argument("--only", nargs="*", default=None, help="only these fault scenarios")
    args = parser.parse_args()
    faults = [f for f in FAULTS if args.only is None or f.scenario in args.only]
    started = time.monotonic()
    rows, runs = asyncio.run(run_matrix(faults, clean=args.clean))
    took = time.monotonic() - started
    print(render(rows, runs))
    walks = len(rows) + len(runs)
    print(f"walks: {walks} in {took:.1f} s")
    print(f"mean walk: {took / max(walks, 1):.2f} s")


if __name__ == "__main__":
    main()
