"""Big change logs: ``resume`` of a 100,000-event log to its first frame, and the reviewer's
first append on it. Prints figures; never fails on speed.

Run: ``python benchmarks/big_log_bench.py [--events 100000] [--runs 3] [--dir DIR]``.

The log is a synthetic window of the shipped runbook on 128 nodes
(``journal_bench.synthetic_window``, rendered by the journal's own code), left open so it
can be resumed. Each figure is measured in a fresh child process (imports included) that
reports its own peak RSS (``VmHWM``); the log is written by a child as well, so the
parent never holds it and the readers inherit nothing big before their exec:

1. *resume to first frame*: ``Session.resume`` (no transport: what the log costs, not the
   network) and the live Textual screen in the pilot until its fleet table has a row for
   every node, timed from the child's start;
2. *reviewer*: ``ReviewerSession`` opened on the log (read, fold), then its first note
   appended, timed alone (it used to reread the whole file, on the UI thread), then a second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

STARTED = time.perf_counter()
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def write_log(directory: Path, events: int, nodes: int = 128) -> Path:
    """A resumable window of ``events`` events on ``nodes`` nodes (probes fill the budget, as a
    long window's probe rounds do), left open (no session-ended), written in bulk."""
    from benchmarks import journal_bench
    from cockpit.changelog.blocks import render_log
    from cockpit.changelog.events import EventKind, parse_event
    from cockpit.runbook.loader import load

    loaded = load("driver-upgrade-r580")
    hosts, body = journal_bench.synthetic_window(loaded.runbook, loaded.runbook.defaults(), events + 1, nodes)
    body = [f for f in body if f["kind"] is not EventKind.SESSION_ENDED]
    header = journal_bench.bench_header(loaded, hosts, "BIG")
    start = datetime(2026, 8, 5, 22, tzinfo=UTC)
    events_ = [
        parse_event(dict(seq=seq, ts=start + timedelta(seconds=seq), **fields)) for seq, fields in enumerate(body, 1)
    ]
    path = directory / "BIG.toml"
    path.write_bytes(render_log(header, events_))  # chained, as the journal writes it
    return path


def count_events(path: Path) -> int:
    """The last seq, from the last trailer (no parse: this process stays small)."""
    with path.open("rb") as fh:
        fh.seek(-200, os.SEEK_END)
        tail = fh.read().decode(errors="replace")
    return int(tail.rsplit("# end of event ", 1)[1].split(",", 1)[0])


def child_resume(path: Path) -> dict[str, float]:
    from cockpit.session.operator import Session
    from screens.app import build_app

    async def main() -> dict[str, float]:
        t0 = time.perf_counter()
        session = Session.resume(path, operator="alice", transport_factory=None)
        opened = time.perf_counter() - t0
        app = build_app(session, refresh_s=0)
        async with app.run_test(size=(200, 50)) as pilot:
            fleet = app.main.query_one("#fleet")
            # the first frame's fleet rows (a big fleet folds alike nodes into node-set rows)
            while not getattr(fleet, "row_count", 0):
                await asyncio.sleep(0.01)
            frame = time.perf_counter() - STARTED
            cpu = time.process_time()
            await pilot.press("q")
        await session.close()
        return {"opened_s": opened, "first_frame_s": frame, "cpu_s": cpu}

    return asyncio.run(main())


def child_review(path: Path) -> dict[str, float]:
    from cockpit.session.review import ReviewerSession

    t0 = time.perf_counter()
    review = ReviewerSession(path, "bob")
    opened = time.perf_counter() - t0
    t0 = time.perf_counter()
    review.note("benchmark: first append")
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    review.note("benchmark: second append")
    second = time.perf_counter() - t0
    review.close()
    return {"opened_s": opened, "first_append_s": first, "second_append_s": second, "cpu_s": time.process_time()}


def run_child(*args: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{args[0]} child failed: {done.stderr.strip().splitlines()[-1:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="children per figure (median)")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, where = args.child
        if mode == "write":
            print(json.dumps({"path": str(write_log(Path(where), args.events))}))
            return
        out = child_resume(Path(where)) if mode == "resume" else child_review(Path(where))
        from benchmarks._measure import peak_rss_mib

        out["peak_mib"] = peak_rss_mib()
        print(json.dumps(out))
        return

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--events", str(args.events), "--child", "write", tmp],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        path = Path(json.loads(done.stdout.strip().splitlines()[-1])["path"])
        written = time.perf_counter() - t0
        print(f"log: {count_events(path)} events, {path.stat().st_size / 1e6:.1f} MB (written in {written:.1f} s)")
        resumes = [run_child("resume", str(path)) for _ in range(args.runs)]
        print(
            f"resume to first frame: median {statistics.median(r['first_frame_s'] for r in resumes):.2f} s wall "
            f"from process start, {statistics.median(r['cpu_s'] for r in resumes):.2f} s CPU "
            f"(Session.resume {statistics.median(r['opened_s'] for r in resumes):.2f} s); "
            f"peak RSS {max(r['peak_mib'] for r in resumes):.0f} MiB"
        )
        reviews = [run_child("review", str(path)) for _ in range(args.runs)]
        print(
            f"reviewer: open {statistics.median(r['opened_s'] for r in reviews):.2f} s, "
            f"first append {statistics.median(r['first_append_s'] for r in reviews) * 1000:.0f} ms, "
            f"second {statistics.median(r['second_append_s'] for r in reviews) * 1000:.1f} ms "
            f"(median of {args.runs}); peak RSS {max(r['peak_mib'] for r in reviews):.0f} MiB"
        )


if __name__ == "__main__":
    main()
