"""A damaged change log read for its ticket: what reading past the damage costs against the
strict read of the same log intact. Prints figures; never fails on speed.

Run: ``python benchmarks/damaged_log_bench.py [--events 20000] [--runs 3]``.

The log is big_log_bench's synthetic window of the shipped runbook on 128 nodes. The
damaged copy has one block deleted, two swapped and one edited (its checksum left as it
was), at the middle of the file. Each figure is the median of ``--runs``:

1. *read intact*: ``verify.read_verified`` of the intact log (what export and replay do);
2. *read damaged*: the same of the damaged copy (the strict read fails at the damage, then
   ``reader.salvage_session_bytes`` reads it all again);
3. *export damaged*: that read and the Markdown ticket of what could be read.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_BLOCK = re.compile(rb"\n\[events\.(\d+)\].*?# end of event \d+, crc32 [0-9a-f]{8}\n", re.DOTALL)


def damaged_copy(path: Path, target: Path, middle: int) -> None:
    """``path`` with block ``middle`` deleted, ``middle+2`` and ``middle+3`` swapped, ``middle+5`` edited."""
    data = path.read_bytes()
    spans = {int(m.group(1)): (m.start(), m.end()) for m in _BLOCK.finditer(data)}
    cut = [spans[middle + k] for k in range(6)]
    block = {k: data[s:e] for k, (s, e) in zip(range(6), cut, strict=True)}
    edited = block[5].replace(b"ts = ", b"ts  = ", 1)  # a byte more: the checksum no longer holds
    middle_bytes = block[1] + block[3] + block[2] + block[4] + edited
    target.write_bytes(data[: cut[0][0]] + middle_bytes + data[cut[5][1] :])


def timed(runs: int, job: Callable[[], object]) -> float:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        job()
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from benchmarks.big_log_bench import write_log
    from cockpit.changelog.verify import read_verified
    from cockpit.export import export_text

    with tempfile.TemporaryDirectory() as tmp:
        intact = write_log(Path(tmp), args.events)
        damaged = Path(tmp) / "DAMAGED.toml"
        damaged_copy(intact, damaged, args.events // 2)
        log, _ = read_verified(damaged)
        assert log.damaged, "the copy is damaged"
        print(f"log: {args.events} events, {intact.stat().st_size / 1e6:.1f} MB; damaged seqs: "
              f"{', '.join(str(seq) for seq, _ in log.damaged)}")  # fmt: skip
        print(f"read intact: {timed(args.runs, lambda: read_verified(intact)):.2f} s")
        print(f"read damaged: {timed(args.runs, lambda: read_verified(damaged)):.2f} s")

        def export() -> None:
            log, verification = read_verified(damaged)
            export_text(log, "markdown", None, verification.summary())

        print(f"export damaged: {timed(args.runs, export):.2f} s")


if __name__ == "__main__":
    main()
