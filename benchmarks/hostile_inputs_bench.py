"""Hostile-input figures (issue 28): what the bounds cost an honest input, and how soon a
hostile one is refused.

Run: ``python benchmarks/hostile_inputs_bench.py [--names 100000] [--mb 5]``. Prints figures;
it does not fail on speed. Files go to a temporary folder (the RAM disk when there is one).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cockpit.errors import BadInput
from cockpit.fleet.inventory import load_inventory, parse_host_spec
from cockpit.fleet.redact import redact
from cockpit.runbook.loader import parse_runbook
from cockpit.runbook.regexes import search


def timed(what: str, fn: Callable[[], object], unit: str = "s") -> float:
    start = time.perf_counter()
    try:
        fn()
        said = ""
    except BadInput as exc:
        said = f"  (refused: {str(exc)[:70]})"
    took = time.perf_counter() - start
    print(f"{what}: {took * 1000:.1f} ms{said}" if unit == "ms" else f"{what}: {took:.3f} s{said}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=100_000, help="names in the honest inventory (default 100000)")
    parser.add_argument("--mb", type=int, default=5, help="megabytes of output to redact (default 5)")
    args = parser.parse_args()
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        folder = Path(tmp)
        lines = max(1, args.names // 10_000)
        plain = folder / "fleet.txt"
        plain.write_text("".join(f"r{i}-gpu[0000-{min(args.names, 10_000) - 1:04d}]\n" for i in range(lines)))
        timed(f"inventory of {lines * min(args.names, 10_000):,} names, load", lambda: load_inventory(plain))
        product = folder / "product.ini"
        product.write_text("[gpu]\nn[0:9999]x[0:9999]\n")
        timed("INI n[0:9999]x[0:9999], refusal", lambda: load_inventory(product), "ms")
        spec = ",".join(f"s{i}-[0-9999]" for i in range(50))
        timed("--hosts of 50 sets of 10,000, refusal", lambda: parse_host_spec(spec))
        bomb = folder / "bomb.yml"
        bomb.write_text(
            "x: &a0 [y, y, y, y, y, y, y, y, y, y]\n"
            + "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
            + "all:\n  hosts:\n    gpu01:\n      cockpit_node_name: *a8\n"
        )
        timed("YAML alias bomb (10**9 values), refusal", lambda: load_inventory(bomb))
    dotted = (".".join(["a"] * 20_000) + " = 1\n").encode()
    timed("runbook with a 20,000-part dotted key, refusal", lambda: parse_runbook(dotted, "deep.toml"), "ms")
    evil = "a" * 100_000 + "b"
    timed("output check ^(a|aa)+$ over 100,001 characters (RE2)", lambda: search(r"^(a|aa)+$", evil), "ms")
    line = "GPU 0: NVIDIA H200 (UUID: GPU-4f3c2a1b) 580.95.05 Driver Version: 580.95.05 ok\n"
    text = line * (args.mb * 1024 * 1024 // len(line))
    took = timed(f"redact {len(text) / 1e6:.1f} MB of honest output", lambda: redact(text))
    print(f"redaction rate: {len(text) / 1e6 / took:.2f} MB/s")


if __name__ == "__main__":
    main()
