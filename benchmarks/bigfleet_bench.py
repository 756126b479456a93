"""Big fleets: the cockpit with 2,000 simulated nodes. Prints figures; never fails on speed.

1. *fold*: a synthetic window of 100,000 events on 2,000 nodes (``journal_bench``'s, the
   shipped runbook) folded from scratch (``engine.fold.fold``), best of ``--repeat``;
2. *first frame*: ``cockpit demo --nodes 2000`` in a private tmux server (80x24), from the
   command's start until the fleet's first row and the Next line show (median of ``--starts``);
3. *key to screen*: an offline session on 2,000 nodes with its first wave started (the
   canary on its own row, the rest folded into a node set), in the Textual pilot: cursor
   up/down over the folded rows, then over an expanded set, until the node detail shows the
   row's node; and ``e`` (expand, fold back) until the table's rows changed (median, p95);
4. *refresh*: ``cockpit sim --nodes 2000`` in its own process and the cockpit (session,
   transport, the live screen in the pilot, refresh every 2 s) in another: the UI's own
   handlers' CPU over ``--seconds`` of wall time after the first probe round (the probe
   rounds' SSH work beside it, as the whole client process's CPU), and the client
   process's own peak RSS (``VmHWM``: ``ru_maxrss`` would carry the parent's across exec).

Run: ``python benchmarks/bigfleet_bench.py [--nodes 2000] [--events 100000] [--seconds 30]``
from the checkout (``--skip fold,frame,keys,refresh`` leaves parts out).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the offline session is the UI tests' (tests/offline_session.py)
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))

from offline_session import start_offline, through_opening

from benchmarks import journal_bench
from benchmarks._measure import cursor_presses, handler_cpu, peak_rss_mib, simulated_fleet, tmux_first_frame

REPO = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --------------------------------------------------------------------------- 1. fold


def fold_figures(nodes: int, events: int, repeat: int) -> str:
    from cockpit.changelog.events import parse_event
    from cockpit.engine.fold import fold
    from cockpit.runbook.loader import load

    rb = load("driver-upgrade-r580").runbook
    t = time.perf_counter()
    hosts, body = journal_bench.synthetic_window(rb, rb.defaults(), events, nodes)
    start = datetime(2026, 8, 5, 22, tzinfo=UTC)
    log = [parse_event(dict(seq=seq, ts=start + timedelta(seconds=seq), **f)) for seq, f in enumerate(body, 1)]
    made = time.perf_counter() - t
    times, cpu = [], []
    state = None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        state = fold(rb, rb.defaults(), hosts, log, operator="alice")
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    assert state is not None
    done = sum(p.current == "done" for p in state.nodes.values())
    return (
        f"fold {len(log)} events on {len(hosts)} nodes ({done} through, {len(state.waves)} waves; "
        f"made in {made:.1f} s): best {min(times):.2f} s wall, {min(cpu):.2f} s CPU of {repeat}, "
        f"{min(cpu) / len(log) * 1e6:.1f} us CPU/event"
    )


# --------------------------------------------------------------------------- 2. first frame


def first_frame(nodes: int, tmp: Path) -> float | None:
    sock = f"bigfleet-bench-{os.getpid()}"
    width = max(2, len(str(nodes)))
    first = f"gpu{1:0{width}d}"
    cmd = (
        f"cd {REPO} && exec env -u COLUMNS -u LINES {sys.executable} -m cockpit demo --nodes {nodes} "
        f"--sessions {tmp} --change-id BENCH-FF"
    )
    return tmux_first_frame(cmd, (first, "Next:"), sock=sock, timeout_s=120, quit_wait_s=2.0)


FRAME_CHILD = """
import asyncio, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, {repo!r})
async def main():
    from cockpit.session.demo import demo_session
    from screens.app import build_app
    from screens.widgets import FleetTable
    async with demo_session(nodes={nodes}, sessions_dir=Path(tempfile.mkdtemp())) as (session, _):
        app = build_app(session, refresh_s=0)
        async with app.run_test(size=(80, 24)) as pilot:
            while not app.main.query_one(FleetTable).row_count:
                await asyncio.sleep(0)
            await pilot.pause()
            print(time.perf_counter() - {started}, time.process_time())
            app.exit()
asyncio.run(main())
"""


def first_frame_cpu(nodes: int) -> tuple[float, float]:
    """``cockpit demo``'s way to its first frame (imports, the fleet bound, the session started, the
    screen painted) in a fresh process, in the pilot: (wall, CPU) seconds; the wall time from the
    child's start as the child sees it (``time.perf_counter`` is system-wide), no terminal."""
    started = time.perf_counter()
    code = FRAME_CHILD.format(repo=str(REPO), nodes=nodes, started=started)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    wall, cpu = (float(x) for x in out.stdout.split()[-2:])
    return wall, cpu


# --------------------------------------------------------------------------- 3. keys


def offline_session(directory: Path, nodes: int) -> Any:
    from cockpit.sim.fleet import node_names

    s = start_offline(directory, node_names(nodes), change_id=f"BENCH-{nodes}", control_host="c")
    through_opening(s, why="benchmark")
    return s


async def key_latency(nodes: int, presses: int, tmp: Path) -> dict[str, list[float]]:
    from screens.app import build_app
    from screens.widgets import FleetTable

    session = offline_session(tmp / "keys", nodes)
    app = build_app(session, refresh_s=0)
    out: dict[str, list[float]] = {"folded": [], "expanded": [], "expand": []}
    cpu: dict[str, list[float]] = {k: [] for k in out}
    async with app.run_test(size=(200, 50)) as pilot:
        main = app.main
        await pilot.pause()
        fleet = main.query_one(FleetTable)
        await cursor_presses(app, presses, out["folded"], cpu["folded"])
        rows_folded = fleet.row_count
        if fleet.folds:  # a small fleet shows its nodes one a row: no set to expand
            fleet.move_cursor(row=1)  # the node set of the nodes still pending
            await pilot.pause()
            for _ in range(max(2, presses // 10)):  # expand it and fold it back
                before = fleet.row_count
                t, c = time.perf_counter(), time.process_time()
                app.simulate_key("e")
                while fleet.row_count == before:
                    await asyncio.sleep(0)
                out["expand"].append(time.perf_counter() - t)
                cpu["expand"].append(time.process_time() - c)
                await pilot.pause()
            if fleet.row_count == rows_folded:
                app.simulate_key("e")
                await pilot.pause()
            fleet.move_cursor(row=2)  # the first of its chunks, in a set big enough to have them: open it too
            await pilot.pause()
            row = fleet.selected_row
            if row is not None and row.members and not row.expanded:
                app.simulate_key("e")
                await pilot.pause()
            await cursor_presses(app, presses, out["expanded"], cpu["expanded"])
        out["rows"] = [float(rows_folded), float(fleet.row_count)]
        for kind, values in cpu.items():
            out[f"{kind}_cpu"] = values
        await pilot.press("q")
    await session.close()
    return out


# --------------------------------------------------------------------------- 4. refresh


def read_targets(ssh_config: Path) -> list[Any]:
    """The sim's hosts as its ssh_config names them (Host, HostName, Port, User)."""
    from cockpit.fleet.targets import HostTarget

    out = []
    for block in re.split(r"^Host ", ssh_config.read_text(encoding="utf-8"), flags=re.M)[1:]:
        name, _, rest = block.partition("\n")
        fields = dict(line.split(None, 1) for line in rest.strip().splitlines() if line.strip())
        if name.strip() == "*":
            continue
        out.append(
            HostTarget(
                name=name.strip(),
                address=fields["HostName"],
                port=int(fields["Port"]),
                user=fields.get("User", "operator"),
            )
        )
    return out


async def refresh_child(ssh_config: Path, seconds: float, sessions: Path) -> dict[str, float]:
    """In the child: the live screen on the sim's fleet, refreshing every 2 s."""
    from screens.main import MainScreen

    names = ("render_all", "_refresh_done", "_tick", "_session_changed", "_node_highlighted")
    with handler_cpu(MainScreen, names) as spent:
        return await _refresh_measured(ssh_config, seconds, sessions, spent)


async def _refresh_measured(ssh_config: Path, seconds: float, sessions: Path, spent: list[float]) -> dict[str, float]:
    from cockpit.fleet.targets import TransportOptions
    from cockpit.fleet.transport import Transport
    from cockpit.runbook.loader import load
    from cockpit.session.operator import Session
    from screens.app import build_app
    from screens.widgets import FleetTable

    targets = read_targets(ssh_config)
    nodes = [t for t in targets if t.name != "control"]
    transport = Transport(targets, TransportOptions(ssh_config=ssh_config))
    started = time.perf_counter()
    session = Session.start(
        sessions_dir=sessions,
        change_id="BENCH-REFRESH",
        loaded=load(),
        params={"control_host": "control"},
        targets=nodes,
        operator="demo-operator",
        transport=transport,
    )
    app = build_app(session, refresh_s=2.0)
    async with app.run_test(size=(200, 50)) as pilot:
        main = app.main
        while main.refresh_rounds < 1:  # the first round connects to every node
            await asyncio.sleep(0.1)
        first_round = time.perf_counter() - started
        fleet = main.query_one(FleetTable)
        updates0, rounds0 = fleet.cell_updates, main.refresh_rounds
        spent[0] = 0.0
        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        rounds = main.refresh_rounds - rounds0
        rows = fleet.row_count
        await pilot.press("q")
    await session.close()
    return {
        "nodes": len(nodes),
        "first_round_s": first_round,
        "ui_cpu_pct": 100 * spent[0] / wall,
        "process_cpu_pct": 100 * cpu / wall,
        "rounds": rounds,
        "cells_updated": fleet.cell_updates - updates0,
        "rows": rows,
        "peak_rss_mib": peak_rss_mib(),
    }


def refresh_figures(nodes: int, seconds: float, tmp: Path) -> dict[str, float]:
    with simulated_fleet(nodes, tmp / "sim", cwd=REPO) as ssh_config:
        child = subprocess.run(
            [sys.executable, __file__, "--refresh-child", str(ssh_config), "--seconds", str(seconds)],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
    if child.returncode != 0:
        raise RuntimeError(f"the cockpit's process failed: {child.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(child.stdout.strip().splitlines()[-1])
    return figures


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma-separated: fold, frame, keys, refresh")
    parser.add_argument("--refresh-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.refresh_child is not None:
        with tempfile.TemporaryDirectory(prefix="bigfleet-client-") as d:
            print(json.dumps(asyncio.run(refresh_child(args.refresh_child, args.seconds, Path(d)))))
        return 0
    skip = set(filter(None, args.skip.split(",")))
    # Starts are timed as a user's machine runs them, from compiled bytecode (pip writes it on
    # install, Python on the first run); where PYTHONDONTWRITEBYTECODE is set, as on some CI
    # images, every start would compile the package again (~0.2 s), so compile it once here.
    for package in ("cockpit", "screens"):
        compileall.compile_dir(REPO / package, quiet=1)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory(prefix="bigfleet-bench-") as d:
        tmp = Path(d)
        if "fold" not in skip:
            print(fold_figures(args.nodes, args.events, args.repeat), flush=True)
        if "frame" not in skip and shutil.which("tmux"):
            starts = [first_frame(args.nodes, tmp / f"ff{i}") for i in range(args.starts)]
            shown = sorted(x for x in starts if x is not None)
            text = (
                "never shown"
                if not shown
                else f"median {statistics.median(shown):.2f} s ({shown[0]:.2f}-{shown[-1]:.2f} s)"
            )
            print(f"start to first frame (cockpit demo --nodes {args.nodes}, 80x24, {len(starts)} starts): {text}")
        if "frame" not in skip:
            runs = [first_frame_cpu(args.nodes) for _ in range(args.starts)]
            walls, cpus = sorted(w for w, _ in runs), sorted(c for _, c in runs)
            print(
                f"first frame in the pilot, fresh process, {args.nodes} nodes: "
                f"wall median {statistics.median(walls):.2f} s, "
                f"CPU median {statistics.median(cpus):.2f} s ({len(runs)} starts)",
                flush=True,
            )
        if "keys" not in skip:
            lat = asyncio.run(key_latency(args.nodes, args.presses, tmp))
            folded, expanded = lat.pop("rows")
            for kind, what in (
                ("folded", f"cursor over the folded fleet ({folded:.0f} rows)"),
                ("expanded", f"cursor over an expanded set ({expanded:.0f} rows)"),
                ("expand", "e: expand a node set / fold it back"),
            ):
                if not lat[kind]:
                    print(f"key to screen, {args.nodes} nodes, {what}: not measured (no node sets at this size)")
                    continue
                ms = [x * 1000 for x in lat[kind]]
                cms = [x * 1000 for x in lat[f"{kind}_cpu"]]
                print(
                    f"key to screen, {args.nodes} nodes, {what}: median {statistics.median(ms):.1f} ms, "
                    f"p95 {pct(ms, 0.95):.1f} ms, max {max(ms):.1f} ms wall; CPU per press median "
                    f"{statistics.median(cms):.1f} ms, p95 {pct(cms, 0.95):.1f} ms ({len(ms)} presses)",
                    flush=True,
                )
        if "refresh" not in skip:
            f = refresh_figures(args.nodes, args.seconds, tmp)
            print(
                f"{f['nodes']:.0f} simulated nodes (sim in its own process), refresh every 2 s, {args.seconds:.0f} s "
                f"after the first round ({f['first_round_s']:.0f} s from start): UI handlers {f['ui_cpu_pct']:.1f}% "
                f"of one core; whole client process {f['process_cpu_pct']:.0f}% (probe rounds' SSH); "
                f"{f['rounds']:.0f} rounds, {f['cells_updated']:.0f} cells updated, {f['rows']:.0f} rows; "
                f"client peak RSS {f['peak_rss_mib']:.0f} MiB"
            )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
