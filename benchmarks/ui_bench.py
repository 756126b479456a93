"""UI benchmark: prints figures, asserts nothing about speed.

1. start to first frame: ``cockpit demo`` in a private tmux server, until the fleet and the
   Next line show (the median of several starts: one start on a shared machine says little);
2. the app's own CPU with N simulated nodes refreshing every 2 s (time inside the main
   screen's handlers over wall time; the simulator and SSH share the process, so the
   whole process's CPU is printed beside it), and fleet cells updated per round (rows are
   updated in place, never rebuilt);
3. key press to screen update: cursor down the fleet table's rows and back up, until the
   node detail shows the row's node (median and p95 over many presses);
4. text captures of the main screen at 80x24 and 200x50 (for the README).

Run: ``python benchmarks/ui_bench.py [--nodes 256] [--seconds 20] [--starts 5]`` from the checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the offline session is the UI tests' (tests/offline_session.py)
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))

from offline_session import start_offline

from benchmarks._measure import cursor_presses, handler_cpu, tmux_first_frame

REPO = Path(__file__).resolve().parents[1]


def first_frame(tmp: Path) -> float | None:
    if shutil.which("tmux") is None:
        return None
    sock = f"ui-bench-{os.getpid()}"
    cmd = (
        f"cd {REPO} && exec env -u COLUMNS -u LINES {sys.executable} -m cockpit demo --nodes 8 "
        f"--sessions {tmp / 'ff'} --change-id BENCH-FF"
    )
    return tmux_first_frame(cmd, ("gpu08", "Next:"), sock=sock, timeout_s=60, quit_wait_s=1.0)


async def refresh_cpu(nodes: int, seconds: float, tmp: Path) -> dict[str, float]:
    from cockpit.session.demo import demo_session
    from screens.app import build_app
    from screens.main import MainScreen
    from screens.widgets import FleetTable

    names = ("render_all", "_refresh_done", "_tick", "_session_changed")
    with handler_cpu(MainScreen, names) as spent:
        async with demo_session(nodes=nodes, sessions_dir=tmp / "cpu", change_id="BENCH-CPU") as (session, _):
            app = build_app(session, refresh_s=2.0)
            async with app.run_test(size=(200, 50)) as pilot:
                main = app.main
                while main.refresh_rounds < 1:  # the first round connects to every node
                    await asyncio.sleep(0.1)
                fleet = main.query_one(FleetTable)
                rows_before, updates_before, rounds_before = fleet.row_count, fleet.cell_updates, main.refresh_rounds
                spent[0] = 0.0
                cpu0, wall0 = time.process_time(), time.monotonic()
                await asyncio.sleep(seconds)
                cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
                rounds = main.refresh_rounds - rounds_before
                await pilot.press("q")
            return {
                "ui_cpu_pct": 100 * spent[0] / wall,
                "process_cpu_pct": 100 * cpu / wall,
                "rounds": rounds,
                "cells_updated": fleet.cell_updates - updates_before,
                "rows": fleet.row_count,
                "rows_before": rows_before,
            }


async def key_latency(nodes: int, presses: int, tmp: Path, cpu: list[float] | None = None) -> list[float]:
    """Wall seconds per key press; ``cpu`` receives this process's CPU seconds per press
    (a wall time far above the CPU time is the machine being busy, not the app)."""
    cpu = [] if cpu is None else cpu
    from screens.app import build_app

    names = [f"gpu{i:03d}" for i in range(1, nodes + 1)]
    session = start_offline(tmp / "keys", names, change_id=f"BENCH-{nodes}", control_host="c")
    app = build_app(session, refresh_s=0)
    out: list[float] = []
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        # alike nodes fold into node-set rows: the cursor goes down the rows and back up
        await cursor_presses(app, presses, out, cpu)
        await pilot.press("q")
    await session.close()
    return out


async def captures(tmp: Path) -> dict[str, str]:
    """Text of the main screen of a running demo at both sizes, via tmux."""
    out: dict[str, str] = {}
    if shutil.which("tmux") is None:
        return out
    for w, h in ((80, 24), (200, 50)):
        sock = f"ui-bench-cap-{os.getpid()}-{w}"
        tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
        cmd = (
            f"cd {REPO} && exec env -u COLUMNS -u LINES {sys.executable} -m cockpit demo --nodes 8 "
            f"--sessions {tmp / f'cap{w}'} --change-id CHG-1234 --speed 10"
        )
        subprocess.run([*tmux, "new-session", "-d", "-x", str(w), "-y", str(h), "-s", "c", cmd], check=True)
        subprocess.run([*tmux, "set-option", "-g", "window-size", "manual"], check=True)
        subprocess.run([*tmux, "resize-window", "-t", "c", "-x", str(w), "-y", str(h)], check=True)
        try:
            time.sleep(5)
            for _ in range(3):
                subprocess.run([*tmux, "send-keys", "-t", "c", "n"], check=True)
                time.sleep(1.5)
            out[f"{w}x{h}"] = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "c"], capture_output=True, text=True
            ).stdout
        finally:
            subprocess.run([*tmux, "send-keys", "-t", "c", "q"], capture_output=True)
            time.sleep(1.0)
            subprocess.run([*tmux, "kill-server"], capture_output=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument("--starts", type=int, default=5, help="demo starts timed for the first frame (median)")
    parser.add_argument("--no-captures", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ui-bench-") as d:
        tmp = Path(d)
        starts = [first_frame(tmp / f"start{i}") for i in range(args.starts)]
        shown = sorted(x for x in starts if x is not None)
        frame = "n/a"
        if shown:
            frame = f"median {statistics.median(shown):.2f} s of {len(shown)} starts ({shown[0]:.2f}-{shown[-1]:.2f} s)"
            if len(shown) < len(starts):
                frame += f"; {len(starts) - len(shown)} never showed it"
        print(f"start to first frame (cockpit demo, 8 nodes, 80x24): {frame}")
        cpu = asyncio.run(refresh_cpu(args.nodes, args.seconds, tmp))
        print(
            f"{args.nodes} nodes, refresh every 2 s, {args.seconds:.0f} s: UI handlers {cpu['ui_cpu_pct']:.1f}% "
            f"of one core (whole process incl. simulator + SSH {cpu['process_cpu_pct']:.1f}%); "
            f"{cpu['rounds']:.0f} rounds, {cpu['cells_updated']:.0f} cells updated in place, "
            f"rows {cpu['rows_before']:.0f} -> {cpu['rows']:.0f}"
        )
        cpu_s: list[float] = []
        lat = asyncio.run(key_latency(args.nodes, args.presses, tmp, cpu_s))
        if not lat:
            print(f"key press to screen update: not measured ({args.nodes} node(s): one fleet row)")
        else:
            lat_ms = sorted(x * 1000 for x in lat)
            cpu_ms = sorted(x * 1000 for x in cpu_s)
            p95 = lat_ms[int(0.95 * (len(lat_ms) - 1))]
            cpu95 = cpu_ms[int(0.95 * (len(cpu_ms) - 1))]
            print(
                f"key press to screen update ({args.nodes} nodes, cursor down and up -> node detail): "
                f"median {statistics.median(lat_ms):.1f} ms, p95 {p95:.1f} ms, max {lat_ms[-1]:.1f} ms wall; "
                f"CPU per press median {statistics.median(cpu_ms):.1f} ms, p95 {cpu95:.1f} ms "
                f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
            )
        if not args.no_captures:
            for size, text in asyncio.run(captures(tmp)).items():
                print(f"\n--- main screen at {size} ---\n{text.rstrip()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
