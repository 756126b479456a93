"""The hash chain and signatures: append p99 with chain + signature + fsync, and
`cockpit verify` of a 100,000-event log.

Run: ``python benchmarks/chain_bench.py [--events 100000] [--appends 1000] [--dir DIR]``.
Prints figures; never fails on speed (targets: append p99 <= 10 ms, verify <= 3 s).

The appends go through :meth:`Journal.append` one by one: half as the operator with an
ed25519 key made by ssh-keygen (chained, signed, fsync'd), half in the cockpit's own name
(chained, fsync'd, unsigned). The 100,000-event log is the synthetic window of
``journal_bench`` (probes, steps, items, sign-offs over as many nodes as it takes),
rendered by the journal's own code and chained; every event a person wrote is signed, as
a window run with a key writes it. Verify is timed as the command runs it (read once,
chain, every signature against an allowed_signers file).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cockpit.changelog.blocks import render_event
from cockpit.changelog.chain import digest
from cockpit.changelog.events import EventKind, parse_event
from cockpit.changelog.identity import is_system
from cockpit.changelog.journal import Journal, read_session, render_header
from cockpit.changelog.sshsig import read_allowed_signers, signer_from_key_file
from cockpit.changelog.verify import verify_file
from cockpit.runbook.loader import load


def _journal_bench() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("journal_bench", Path(__file__).with_name("journal_bench.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["journal_bench"] = module
    spec.loader.exec_module(module)
    return module


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=1_000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    bench = _journal_bench()
    loaded = load("driver-upgrade-r580")
    ms = 1000.0

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp_name:
        tmp = Path(tmp_name)
        keys = {}
        for name in ("alice", "bob"):
            keys[name] = tmp / name
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(keys[name])], check=True
            )
        allowed = tmp / "allowed_signers"
        allowed.write_text(
            "".join(f"{n} {' '.join(k.with_suffix('.pub').read_text().split()[:2])}\n" for n, k in keys.items())
        )
        by_person = {name: signer_from_key_file(k, name) for name, k in keys.items()}
        signer = by_person["alice"]

        # -- appends: chain + signature + fsync, one by one
        header = bench.bench_header(loaded, ["gpu001"], "bench-append", require_signatures=True)
        signed, system = [], []
        with Journal.create(tmp / "append", header, signer=signer) as journal:
            for i in range(args.appends):
                t0 = time.perf_counter()
                if i % 2:
                    journal.append(EventKind.NOTE, note=f"note {i}")
                    signed.append(time.perf_counter() - t0)
                else:
                    journal.append(EventKind.PROBE, actor="cockpit", node="gpu001", facts={"reachable": True})
                    system.append(time.perf_counter() - t0)
        both = signed + system
        print(
            f"append (chain + fsync) {len(both)}: median {statistics.median(both) * ms:.2f} ms, "
            f"p99 {pct(both, 99) * ms:.2f} ms, max {max(both) * ms:.2f} ms; "
            f"signed by a person p99 {pct(signed, 99) * ms:.2f} ms, the cockpit's own p99 {pct(system, 99) * ms:.2f} ms"
        )

        # -- a 100,000-event log, chained and signed where a person wrote
        hosts, body = bench.synthetic_window(loaded.runbook, loaded.runbook.defaults(), args.events)
        big_header = bench.bench_header(
            loaded, hosts, "bench-verify", require_signatures=True, allowed_signers=str(allowed)
        )
        start = datetime(2026, 8, 5, 22, tzinfo=UTC)
        t0 = time.perf_counter()
        out = [render_header(big_header)]
        link = digest(out[0])
        persons = 0
        for seq, fields in enumerate(body, start=1):
            event = parse_event(dict(seq=seq, ts=start + timedelta(seconds=seq), **fields))
            person = not is_system(event.actor)
            persons += person
            block = render_event(event, prev=link, sign=by_person[event.actor].sign if person else None)
            out.append(block)
            link = digest(block)
        path = tmp / "bench-verify.toml"
        path.write_bytes(b"".join(out))
        write_s = time.perf_counter() - t0
        size = path.stat().st_size
        signers = read_allowed_signers(allowed)

        times, cpus = [], []
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()
            verdict, log, _data = verify_file(path, signers)
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        assert verdict.ok and log is not None, verdict.first_failure
        t0, c0 = time.perf_counter(), time.process_time()
        chain_only = read_session(path)  # parse + chain (and the sign-offs' signatures the fold needs)
        chain_s, chain_cpu = time.perf_counter() - t0, time.process_time() - c0
        assert chain_only.chain.ok
        print(
            f"log: {len(body)} events ({persons} written by a person, each signed), {size / 1e6:.1f} MB, "
            f"written in {write_s:.1f} s"
        )
        print(
            f"cockpit verify (read, chain, {len(verdict.signed)} signatures): median {statistics.median(times):.2f} s "
            f"wall, {statistics.median(cpus):.2f} s CPU; {verdict.summary()[:60]}..."
        )
        print(
            f"read_session of it (parse, chain, the sign-offs' signatures): {chain_s:.2f} s wall, {chain_cpu:.2f} s CPU"
        )


if __name__ == "__main__":
    main()
