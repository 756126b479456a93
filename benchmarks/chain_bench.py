"""The hash chain and signatures: append p99 with chain + signature + fsync, and
`cockpit verify` of a 100,000-event log.

Run: ``python benchmarks/chain_bench.py [--events 100000] [--appends 1000] [--dir DIR]``.
Prints figures; never fails on speed (targets: append p99 <= 10 ms, verify <= 3 s). The
CPU figure of verify counts the parent only (the forked readers' CPU is not in it): its
wall time is the figure.

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
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cockpit.changelog.blocks import render_event
from cockpit.changelog.chain import digest
from cockpit.changelog.events import EventKind, parse_event
from cockpit.changelog.identity import is_system
from cockpit.changelog.journal import Journal, read_session, render_header
from cockpit.changelog.sshsig import Signer, read_allowed_signers, signer_from_key_file
from cockpit.changelog.verify import verify_file
from cockpit.runbook.loader import load

# journal_bench, beside this script: the checkout on the path, as benchmarks.journal_bench
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import journal_bench


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def write_log(
    path: Path, header: object, body: list[dict[str, object]], start: datetime, by_person: dict[str, Signer]
) -> None:
    """The log as the journal writes it: chained, and signed wherever a person wrote."""
    out = [render_header(header)]  # type: ignore[arg-type]
    link = digest(out[0])
    for seq, fields in enumerate(body, start=1):
        event = parse_event(dict(seq=seq, ts=start + timedelta(seconds=seq), **fields))
        person = not is_system(event.actor)
        block = render_event(event, prev=link, sign=by_person[event.actor].sign if person else None)
        out.append(block)
        link = digest(block)
    path.write_bytes(b"".join(out))


def fsync_times(path: Path, n: int) -> list[float]:
    """``n`` bare appends of 600 bytes, each fsync'd: what the disk alone costs."""
    out = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 600)
            os.fsync(fd)
            out.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
    return out


def ed25519_us() -> float:
    """CPU microseconds of one Ed25519 verification (cryptography's) here now: a gauge of the
    machine and its load, to compare runs by."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    public, message = key.public_key(), b"x" * 600
    sig = key.sign(message)
    c0 = time.process_time()
    for _ in range(2000):
        public.verify(sig, message)
    return (time.process_time() - c0) / 2000 * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=1_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument(
        "--keep", type=Path, default=None, help="write the log and keys here, and reuse them when already there"
    )
    args = parser.parse_args()
    loaded = load("driver-upgrade-r580")
    ms = 1000.0

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp_name:
        tmp = Path(tmp_name)
        kept = args.keep
        if kept is not None:
            kept.mkdir(parents=True, exist_ok=True)
        keys = {}
        for name in ("alice", "bob"):
            keys[name] = (kept or tmp) / name
            if keys[name].exists():
                continue
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(keys[name])], check=True
            )
        allowed = (kept or tmp) / "allowed_signers"
        allowed.write_text(
            "".join(f"{n} {' '.join(k.with_suffix('.pub').read_text().split()[:2])}\n" for n, k in keys.items())
        )
        by_person = {name: signer_from_key_file(k, name) for name, k in keys.items()}
        signer = by_person["alice"]

        # -- a 100,000-event log, chained and signed where a person wrote
        hosts, body = journal_bench.synthetic_window(loaded.runbook, loaded.runbook.defaults(), args.events)
        big_header = journal_bench.bench_header(
            loaded, hosts, "bench-verify", require_signatures=True, allowed_signers=str(allowed)
        )
        start = datetime(2026, 8, 5, 22, tzinfo=UTC)
        t0 = time.perf_counter()
        path = (kept or tmp) / "bench-verify.toml"
        persons = sum(not is_system(fields["actor"]) for fields in body)
        if not path.exists() or not kept:
            write_log(path, big_header, body, start, by_person)
        write_s = time.perf_counter() - t0
        size = path.stat().st_size
        signers = read_allowed_signers(allowed)
        # -- appends: chain + signature + fsync, one by one, with the big window's events held
        # in memory as a live cockpit holds its state (the collector's passes over a big heap
        # were the tail of an append's latency)
        held = read_session(path)
        header = journal_bench.bench_header(loaded, ["gpu001"], "bench-append", require_signatures=True)
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
                _garbage = [[{"x": j}] for j in range(200)]  # what a live cockpit makes between appends
        both = signed + system
        fsyncs = fsync_times(tmp / "fsync-probe", args.appends)
        print(
            f"append (chain + fsync) {len(both)} with {len(held.events)} events held: median "
            f"{statistics.median(both) * ms:.2f} ms, p99 {pct(both, 99) * ms:.2f} ms, max {max(both) * ms:.2f} ms; "
            f"signed by a person p99 {pct(signed, 99) * ms:.2f} ms, "
            f"the cockpit's own p99 {pct(system, 99) * ms:.2f} ms; "
            f"a bare write+fsync of 600 bytes on this disk: median {statistics.median(fsyncs) * ms:.2f} ms, "
            f"p99 {pct(fsyncs, 99) * ms:.2f} ms (the floor)"
        )
        del held

        times, cpus = [], []
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()
            verdict, log, _data = verify_file(path, signers)
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        assert verdict.ok and log is not None, verdict.first_failure
        commands = []
        for _ in range(3):
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "cockpit", "verify", str(path), "--allowed-signers", str(allowed)],
                capture_output=True,
                text=True,
                check=False,
            )
            commands.append(time.perf_counter() - t0)
            assert done.returncode == 0, done.stderr
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
            f"wall in process, {statistics.median(cpus):.2f} s CPU in the parent; the command (a fresh process, "
            f"imports included): median {statistics.median(commands):.2f} s wall; {verdict.summary()[:40]}..."
        )
        print(
            f"read_session of it (parse, chain, the sign-offs' signatures): {chain_s:.2f} s wall, {chain_cpu:.2f} s CPU"
        )
        print(f"gauge: one Ed25519 verification (cryptography's) here now takes {ed25519_us():.0f} us CPU")


if __name__ == "__main__":
    main()
