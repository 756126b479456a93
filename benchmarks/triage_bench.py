"""The log triage's figures on every real log the project keeps: per class, how many it got
right, how many it named as another class, how many it left ``unknown``; and whether it named the
decisive line. Prints figures; never fails on them.

Run: ``python benchmarks/triage_bench.py [--runs 20] [--classifier-from CHECKOUT]``.

The expected class and line of each log come from ``tests/fixtures/triage-manifest.toml``,
written from each log's provenance (the issue thread it was copied from), never from the
classifier. ``--classifier-from`` scores another checkout's classifier (an older commit, say) on
this checkout's logs and manifest, for a before-and-after.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed passes over all the logs")
    parser.add_argument("--classifier-from", type=Path, help="a checkout whose cockpit.gpu.triage is scored")
    args = parser.parse_args()
    sys.path.insert(0, str((args.classifier_from or REPO).resolve()))
    from cockpit.gpu.triage import triage

    with (FIXTURES / "triage-manifest.toml").open("rb") as f:
        logs = tomllib.load(f)["log"]
    texts = [(FIXTURES / entry["file"]).read_text() for entry in logs]

    tally: dict[str, Counter[str]] = {}
    lines_right = 0
    misses: list[str] = []
    for entry, text in zip(logs, texts, strict=True):
        result = triage(text)
        expected, got = entry["class"], str(result.cls)
        outcome = "right" if got == expected else "unknown" if got == "unknown" else "wrong"
        tally.setdefault(expected, Counter())[outcome] += 1
        if outcome == "right" and result.line == entry["line"]:
            lines_right += 1
        if outcome != "right" or result.line != entry["line"]:
            misses.append(f"{entry['file']}: expected {expected} at line {entry['line']}, got {got} at {result.line}")

    source = args.classifier_from or "this checkout"
    print(f"triage_bench: {len(logs)} real logs, classifier from {source}")
    for cls in sorted(tally):
        counts = tally[cls]
        for outcome in ("right", "wrong", "unknown"):
            print(f"{cls} {outcome}: {counts[outcome]} logs")
    total = Counter[str]()
    for counts in tally.values():
        total.update(counts)
    for outcome in ("right", "wrong", "unknown"):
        print(f"all classes {outcome}: {total[outcome]} logs of {len(logs)}")
    print(f"decisive line right (class right too): {lines_right} logs of {len(logs)}")
    for miss in misses:
        print(f"  miss: {miss}")

    per_log: list[float] = []
    for _ in range(args.runs):
        start = time.perf_counter()
        for text in texts:
            triage(text)
        per_log.append((time.perf_counter() - start) / len(texts) * 1000)
    print(f"triage time per log: {statistics.median(per_log):.3f} ms (median of {args.runs} passes)")


if __name__ == "__main__":
    main()
