"""Replay figures on a long window: scrubbing the interactive replay, jumps, search, and --cast.

Run: ``python benchmarks/replay_bench.py [--events 10000] [--scrubs 100]``. Prints
figures; never fails on speed.

The session is the journal benchmark's synthetic window (the shipped runbook over
as many nodes as the events need, written with the change log's own renderer). The
interactive figures drive the real :class:`screens.replay.ReplayScreen` headless
(Textual's ``run_test``): each step or seek is the player's move plus a full repaint
of every pane, timed until the screen has processed it.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cockpit.changelog.events import parse_event
from cockpit.changelog.journal import (
    read_session,
    render_log,
)
from cockpit.runbook.loader import load
from cockpit.view.cast import write_cast

# journal_bench, beside this script: the checkout on the path, as benchmarks.journal_bench
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import journal_bench


def write_session(folder: Path, events: int) -> tuple[Path, int]:
    loaded = load("driver-upgrade-r580")
    hosts, body = journal_bench.synthetic_window(loaded.runbook, loaded.runbook.defaults(), events)
    start = datetime(2026, 8, 5, 22, tzinfo=UTC)
    header = journal_bench.bench_header(loaded, hosts, "bench-replay", created_at=start)
    path = folder / "bench-replay.toml"
    # a few seconds between events, with an idle hour in the middle (compressed on playback)
    window = []
    for seq, f in enumerate(body, start=1):
        gap = timedelta(seconds=3 * seq + (3600 if seq > len(body) // 2 else 0))
        window.append(parse_event(dict(seq=seq, ts=start + gap, **f)))
    path.write_bytes(render_log(header, window))  # chained, as appending them one by one writes
    return path, len(hosts)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def interactive(path: Path, scrubs: int) -> dict[str, list[float]]:
    """Three layers per move: the player alone (fold), the panes' update (``render_all``),
    and the whole round trip through Textual (key press to repainted screen)."""
    from cockpit.session.review import session_runbook
    from screens.replay import ReplayApp

    t0 = time.perf_counter()
    log = read_session(path)
    app = ReplayApp(log, session_runbook(log.header, path))
    figures: dict[str, list[float]] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        figures["open (read, fold checkpoints, first paint)"] = [time.perf_counter() - t0]
        screen = app.view
        player = screen.player
        rng = random.Random(7)

        def record(name: str, t: float) -> None:
            figures.setdefault(name, []).append(time.perf_counter() - t)

        moves: dict[str, Callable[[], object]] = {
            "step forward": lambda: player.step(1),
            "step back": lambda: player.step(-1),
            "random seek": lambda: player.seek(rng.randint(0, player.last)),
        }
        for label, move in moves.items():
            player.seek(player.last // 2)
            screen.render_all()
            for _ in range(scrubs):
                t = time.perf_counter()
                move()
                player.state  # noqa: B018 - the fold is what is timed
                record(f"{label}: player (fold)", t)
                t = time.perf_counter()
                screen.render_all()
                record(f"{label}: + panes updated", t)
        for _ in range(scrubs):
            t = time.perf_counter()
            await pilot.press("f12")  # bound to nothing: the test harness's own cost
            await pilot.pause()
            record("harness: key press that does nothing", t)
        player.seek(player.last // 2)
        for key, label in (("right", "→ key to repainted screen"), ("left", "← key to repainted screen")):
            for _ in range(scrubs):
                t = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                record(label, t)
        player.seek(0)
        for _ in range(min(scrubs, 50)):
            t = time.perf_counter()
            await pilot.press("n")
            await pilot.pause()
            record("n (next of interest) to repainted screen", t)
        for word in ("smoke", "gpu150", "reboot", "nothing-matches-this"):
            player.seek(player.last // 3)
            t = time.perf_counter()
            player.search(word)
            record("search over every event (player)", t)
        player.seek(0)
        for _ in range(6):
            await pilot.press("plus")
        await pilot.press("space")
        t = time.perf_counter()
        await asyncio.sleep(5.0)
        figures["events shown per second playing at 64x"] = [player.seq / (time.perf_counter() - t)]
        await pilot.press("space", "q")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--scrubs", type=int, default=100)
    parser.add_argument("--cast-events", type=int, default=2_000, help="events rendered to a cast (0: skip)")
    args = parser.parse_args()
    ms = 1000.0
    with tempfile.TemporaryDirectory() as tmp:
        path, nodes = write_session(Path(tmp), args.events)
        print(f"session: {args.events} events over {nodes} nodes, {path.stat().st_size / 1e6:.1f} MB")
        figures = asyncio.run(interactive(path, args.scrubs))
        for name, values in figures.items():
            if len(values) == 1:
                unit = "" if name.startswith("events") else " s"
                print(f"{name}: {values[0]:.1f}{unit}")
            else:
                print(
                    f"{name}: median {statistics.median(values) * ms:.1f} ms, p95 {pct(values, 95) * ms:.1f} ms, "
                    f"max {max(values) * ms:.1f} ms (n={len(values)})"
                )
        if args.cast_events:
            small, _ = write_session(Path(tmp), args.cast_events)
            log = read_session(small)
            from cockpit.session.review import session_runbook

            out = Path(tmp) / "bench.cast"
            t0, c0 = time.perf_counter(), time.process_time()
            summary = write_cast(log, session_runbook(log.header, small).runbook, out)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(
                f"--cast of {summary.events} events: {summary.frames} frames, {summary.markers} markers, "
                f"{out.stat().st_size / 1e6:.1f} MB, {wall:.1f} s wall ({cpu:.1f} s CPU, "
                f"{summary.frames / cpu:.0f} frames/s), plays {summary.duration_s / 60:.1f} min"
            )


if __name__ == "__main__":
    main()
