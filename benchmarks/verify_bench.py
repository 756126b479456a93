"""`cockpit verify` of a 100,000-event log with every event signed, the cockpit's own too.

Run: ``python benchmarks/verify_bench.py [--events 100000] [--keep DIR] [--dir DIR] [--profile N]``.
Prints figures, one a line: the wall and CPU of the command, the processes it used, the
machine's load; never fails on speed (target: <= 5 s wall on 2 cores). Verify reads the log
once, in order, in the parent (parse, chain, and the fold with every event judged by the
window's rules), while forked workers (one per core, at nice 10 so the parent keeps a core)
check every signature from the file's bytes, started before the parent imports its reader
(cockpit.changelog.spread; the parent takes a worker's answer for a block only where its
own parse finds the same signed bytes and blob). The figures: the whole command as a
person runs it (a fresh interpreter, wall seconds, and the CPU of it and its workers), and
the same read timed in this process with the parent's own CPU (the part no worker can
take; here the workers start when the read does, not before the imports).

The log is ``journal_bench``'s synthetic window (probes, steps, items, sign-offs over as
many nodes as it takes), rendered by the journal's own code, chained, every event signed:
alice's and the cockpit's with alice's ed25519 key (the cockpit signs as the process
acting for her), bob's sign-offs with his; keys made by ssh-keygen. The machine's load
is printed beside the figures (a shared machine's figures move with it).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cockpit.changelog.blocks import render_event
from cockpit.changelog.chain import digest, worker_count
from cockpit.changelog.events import parse_event
from cockpit.changelog.identity import is_system
from cockpit.changelog.journal import render_header
from cockpit.changelog.sshsig import Signer, read_allowed_signers, signer_from_key_file
from cockpit.changelog.verify import verify_file
from cockpit.runbook.loader import load

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import journal_bench


def write_log(path: Path, header: object, body: list[dict[str, object]], by_person: dict[str, Signer]) -> None:
    """The log as the journal writes it with signatures required: chained, every event signed."""
    start = datetime(2026, 8, 5, 22, tzinfo=UTC)
    out = [render_header(header)]  # type: ignore[arg-type]
    link = digest(out[0])
    for seq, fields in enumerate(body, start=1):
        event = parse_event(dict(seq=seq, ts=start + timedelta(seconds=seq), **fields))
        signer = by_person["alice" if is_system(event.actor) else event.actor]
        block = render_event(event, prev=link, sign=signer.sign)
        out.append(block)
        link = digest(block)
    path.write_bytes(b"".join(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="write the log and keys here; reuse them when there")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=400, help="fleet size (probes fill the rest of the events)")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the reading process's top N functions (stderr)"
    )
    args = parser.parse_args()
    loaded = load("driver-upgrade-r580")

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp_name:
        folder = args.keep or Path(tmp_name)
        folder.mkdir(parents=True, exist_ok=True)
        keys = {}
        for name in ("alice", "bob"):
            keys[name] = folder / name
            if not keys[name].exists():
                subprocess.run(
                    ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(keys[name])], check=True
                )
        allowed = folder / "allowed_signers"
        allowed.write_text(
            "".join(f"{n} {' '.join(k.with_suffix('.pub').read_text().split()[:2])}\n" for n, k in keys.items())
        )
        path = folder / "bench-verify-all.toml"
        if not path.exists():
            by_person = {name: signer_from_key_file(k, name) for name, k in keys.items()}
            hosts, body = journal_bench.synthetic_window(
                loaded.runbook, loaded.runbook.defaults(), args.events, nodes=args.nodes
            )
            header = journal_bench.bench_header(
                loaded, hosts, "bench-verify-all", require_signatures=True, allowed_signers=str(allowed)
            )
            t0 = time.perf_counter()
            write_log(path, header, body, by_person)
            print(f"log written: {time.perf_counter() - t0:.1f} s")
        workers = worker_count()
        print(f"log size: {path.stat().st_size / 1e6:.1f} MB")
        print(f"cores: {os.cpu_count()}")
        print(f"processes: {1 + workers} (1 reading, chaining and judging; {workers} checking signatures)")
        print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}")

        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), *sys.path])}
        env.pop("COCKPIT_SITE_TRUST", None)
        command = [sys.executable, "-m", "cockpit", "verify", str(path), "--allowed-signers", str(allowed)]
        walls, cpus = [], []
        for _ in range(args.runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command and its forked workers
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            if done.returncode != 0:
                print(done.stdout + done.stderr, file=sys.stderr)
                raise SystemExit(f"verify exited {done.returncode}")
        events = next(line for line in done.stdout.splitlines() if line.endswith(" events")).split()[-2]
        print(f"events verified: {events}")
        signed_line = next(line for line in done.stdout.splitlines() if line.startswith("signatures:"))
        print(f"verify said: {signed_line}")
        print(f"cockpit verify wall, whole command (best of {args.runs}): {min(walls):.2f} s")
        print(f"cockpit verify wall, whole command (median of {args.runs}): {sorted(walls)[len(walls) // 2]:.2f} s")
        # what a shared machine cannot take away: the CPU the command needed, all its processes
        best_cpu = min(cpus)
        print(f"cockpit verify CPU, all {1 + workers} processes (best): {best_cpu:.2f} s")
        print(f"cockpit verify CPU, median: {sorted(cpus)[len(cpus) // 2]:.2f} s")
        print(f"that CPU spread over {workers} idle cores (lower bound of the wall): {best_cpu / workers:.2f} s")
        print(f"load average (1 min) after the commands: {os.getloadavg()[0]:.2f}")

        signers = read_allowed_signers(allowed)
        from cockpit.session.judged import JudgedFold

        judged = JudgedFold(path)
        profile = cProfile.Profile() if args.profile else None
        t0, c0 = time.perf_counter(), time.process_time()
        if profile is not None:
            profile.enable()
        verdict, _log, _data = verify_file(path, signers, keep_blocks=False, require=True, fold=judged)
        if profile is not None:
            profile.disable()
        wall, parent = time.perf_counter() - t0, time.process_time() - c0
        assert verdict.ok and len(verdict.signed) == verdict.events, verdict.summary()
        assert judged.unjudged is None and not judged.refused, (judged.unjudged, judged.refused[:3])
        print(f"read once here (chained, judged), {len(verdict.signed)} signatures in workers, wall: {wall:.2f} s")
        print(f"of which this process's own CPU (parse, validate, chain, judged fold): {parent:.2f} s")
        print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
        if profile is not None:  # the reading process only: the workers' time is not in it
            for order in ("cumulative", "tottime"):
                pstats.Stats(profile, stream=sys.stderr).sort_stats(order).print_stats(args.profile)


if __name__ == "__main__":
    main()
