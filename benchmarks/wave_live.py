"""The cockpit while a wave of ~200 nodes runs steps at once over real SSH: its CPU, its memory,
and how fast the live screen answers a key. Prints figures; never fails on speed.

``cockpit sim --nodes N`` runs in its own process (the loopback fleet behind real SSH, at
``--speed``); the cockpit (session, transport, the live screen in the Textual pilot) in
another. A person's Next walks the opening stages, the canary and the second node (as
``operator_load`` does), then the third wave (the rest of the fleet, ``max_parallel`` as big)
is started as a wave that runs itself. While its nodes are at work, the cursor goes up and
down the fleet table (``_measure.cursor_presses``: each press timed until the node detail
shows the row's node) for ``--seconds``; the steps in flight are counted at each press (the
change log's step-started less step-finished). The client process's CPU over that time and
its peak RSS (VmHWM) are printed beside, and how much the fleet table had to draw: the times
it was laid out anew and the cells it changed in place, per second.

Run: ``python benchmarks/wave_live.py [--nodes 200] [--seconds 30]`` from the checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._measure import cursor_presses, peak_rss_mib, simulated_fleet
from benchmarks.bigfleet_bench import read_targets
from benchmarks.operator_load import take_by_hand

REPO = Path(__file__).resolve().parents[1]
SPEED = 100.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def loop_stalls(stalls: list[float], tick: float = 0.01) -> None:
    """How late the event loop wakes a ``tick`` sleep, over and over: a stall is time the loop
    spent inside one callback (a synchronous fsync, a long fold) where no key is answered."""
    while True:
        t = time.monotonic()
        await asyncio.sleep(tick)
        stalls.append(max(0.0, time.monotonic() - t - tick))


async def child(ssh_config: Path, seconds: float, sessions: Path, profile: Path | None = None) -> dict[str, float]:
    from benchmarks.operator_load import Load
    from cockpit.changelog.events import EventKind
    from cockpit.engine import actions
    from cockpit.engine.waverun import confirmation_text, first_auto_wave
    from cockpit.fleet.targets import TransportOptions
    from cockpit.fleet.transport import Transport
    from cockpit.runbook.loader import load
    from cockpit.session.operator import Session
    from cockpit.session.waves import WaveRunner
    from screens.app import build_app
    from screens.widgets import FleetTable

    targets = read_targets(ssh_config)
    nodes = [t for t in targets if t.name != "control"]
    rest = len(nodes) - 2
    session = Session.start(
        sessions_dir=sessions,
        change_id="BENCH-WAVE-LIVE",
        loaded=load(),
        params={
            "control_host": "control",
            "reboot_timeout_s": 30,
            "drain_timeout_s": 3,
            "wave_size": rest,
            "max_parallel": rest,
        },
        targets=nodes,
        operator="demo-operator",
        transport=Transport(targets, TransportOptions(ssh_config=ssh_config)),
    )
    walk_started = time.monotonic()
    tally = Load()
    last = 0.0
    wave: int | None = None
    for _ in range(20000):
        if time.monotonic() - last > 2.0:
            await session.refresh()
            last = time.monotonic()
        taken = await take_by_hand(session, tally)
        if taken is None:
            raise SystemExit(f"Next stopped before the first wave that runs itself: {session.next_plan().text}")
        if isinstance(taken, actions.StartWave) and taken.wave >= first_auto_wave(session.runbook):
            wave = taken.wave
            break
    assert wave is not None
    walked = time.monotonic() - walk_started

    in_flight: set[str] = set()  # nodes with a step running (a node runs one step at a time)

    def watch(event: object) -> None:
        kind, node = getattr(event, "kind", None), getattr(event, "node", None)
        if kind is EventKind.STEP_STARTED and node:
            in_flight.add(node)
        elif kind is EventKind.STEP_FINISHED and node:
            in_flight.discard(node)

    session.subscribe(watch)
    app = build_app(session, refresh_s=2.0)
    wall: list[float] = []
    cpu: list[float] = []
    steps_seen: list[int] = []
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        runner = WaveRunner.start(session, confirmation_text(session.state, wave), wave=wave, refresh_s=1.0)
        task = asyncio.create_task(runner.run())
        for _ in range(600):  # until the wave's nodes are at work
            if len(in_flight) >= rest // 2:
                break
            await asyncio.sleep(0.05)
        stalls: list[float] = []
        watcher = asyncio.create_task(loop_stalls(stalls))
        # CPU time by default (on a loaded machine wall time is mostly waiting for a core);
        # WAVE_LIVE_PROFILE_WALL=1 counts wall time, which shows what blocks (an fsync)
        timer = time.perf_counter if os.environ.get("WAVE_LIVE_PROFILE_WALL") else time.process_time
        profiler = cProfile.Profile(timer) if profile is not None else None
        if profiler is not None:
            profiler.enable()
        appended0 = session.state.last_seq
        fleet = app.main.query_one(FleetTable)
        rebuilds0, cells0 = fleet.rebuilds, fleet.cell_updates
        cpu0, wall0 = time.process_time(), time.monotonic()
        widest = 0
        while time.monotonic() - wall0 < seconds and not task.done():
            before = len(wall)
            await cursor_presses(app, 10, wall, cpu)
            steps_seen.extend([len(in_flight)] * (len(wall) - before))
            widest = max(widest, len(in_flight), len(runner.status().running))
            await asyncio.sleep(0.05)  # a person's pace, not a stream of presses
        spent, elapsed = time.process_time() - cpu0, time.monotonic() - wall0
        appended = session.state.last_seq - appended0
        rebuilds, cells = fleet.rebuilds - rebuilds0, fleet.cell_updates - cells0
        if profiler is not None and profile is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        watcher.cancel()
        at_work = len(runner.status().running)
        runner.kill()
        await task
        await pilot.press("q")
    await session.close()
    return {
        "nodes": len(nodes),
        "wave_nodes": rest,
        "walk_s": walked,
        "by_hand": tally.intents,
        "elapsed_s": elapsed,
        "process_cpu_pct": 100 * spent / elapsed,
        "presses": len(wall),
        "key_median_ms": 1000 * statistics.median(wall) if wall else -1,
        "key_p95_ms": 1000 * pct(wall, 0.95) if wall else -1,
        "key_max_ms": 1000 * max(wall) if wall else -1,
        "events_per_s": appended / elapsed,
        "cpu_ms_per_event": 1000 * spent / appended if appended else -1,
        "key_cpu_p50_ms": 1000 * statistics.median(cpu) if cpu else -1,
        "key_cpu_p95_ms": 1000 * pct(cpu, 0.95) if cpu else -1,
        "stall_p95_ms": 1000 * pct(stalls, 0.95) if stalls else -1,
        "stall_max_ms": 1000 * max(stalls) if stalls else -1,
        "stalled_pct": 100 * sum(stalls) / elapsed,
        "steps_median": statistics.median(steps_seen) if steps_seen else 0,
        "steps_max": max(steps_seen) if steps_seen else 0,
        "at_work_end": at_work,
        "widest": widest,
        "peak_rss_mib": peak_rss_mib(),
        "table_rebuilds_per_s": rebuilds / elapsed,
        "table_cells_per_s": cells / elapsed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--speed",
        type=float,
        default=SPEED,
        help="the simulator's time compression (100: a wave's events at about 100 times a real wave's rate)",
    )
    parser.add_argument("--profile", type=Path, help="write the cockpit process's cProfile stats here")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        with tempfile.TemporaryDirectory(prefix="wave-live-client-") as d:
            print(json.dumps(asyncio.run(child(args.child, args.seconds, Path(d), args.profile))))
        return 0
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="wave-live-") as d:
        tmp = Path(d)
        with simulated_fleet(args.nodes, tmp / "sim", cwd=REPO, speed=args.speed) as ssh_config:
            run = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    str(ssh_config),
                    "--seconds",
                    str(args.seconds),
                    *(["--profile", str(args.profile.resolve())] if args.profile else []),
                ],
                cwd=tmp,
                capture_output=True,
                text=True,
                check=False,
            )
        if run.returncode != 0:
            raise SystemExit(f"the cockpit's process failed: {run.stderr[-2000:]}")
        f = json.loads(run.stdout.strip().splitlines()[-1])
    load1 = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} cores, load average {load0:.1f} at the start, {load1:.1f} at the end")
    n = f"{f['nodes']:.0f} nodes (sim in its own process, {args.speed:g}x), wave of {f['wave_nodes']:.0f}"
    print(f"wave_live {n}: canary and second by hand in {f['walk_s']:.0f} s ({f['by_hand']:.0f} person actions)")
    print(
        f"wave_live {n}: steps in flight at each key press median {f['steps_median']:.0f}, "
        f"max {f['steps_max']:.0f}; nodes at work at most {f['widest']:.0f}"
    )
    print(
        f"wave_live {n}: key to screen median {f['key_median_ms']:.1f} ms, p95 {f['key_p95_ms']:.1f} ms, "
        f"max {f['key_max_ms']:.1f} ms ({f['presses']:.0f} presses over {f['elapsed_s']:.0f} s)"
    )
    print(f"wave_live {n}: key p50 {f['key_median_ms']:.1f} ms")
    print(f"wave_live {n}: key p95 {f['key_p95_ms']:.1f} ms")
    print(
        f"wave_live {n}: event loop stalls p95 {f['stall_p95_ms']:.1f} ms, max {f['stall_max_ms']:.1f} ms, "
        f"{f['stalled_pct']:.0f}% of the time stalled; {f['events_per_s']:.0f} events appended per s"
    )
    print(
        f"wave_live {n}: process CPU while a key waited p50 {f['key_cpu_p50_ms']:.1f} ms, "
        f"p95 {f['key_cpu_p95_ms']:.1f} ms; {f['cpu_ms_per_event']:.1f} ms CPU per event appended"
    )
    print(f"wave_live {n}: cockpit process CPU {f['process_cpu_pct']:.0f}% of one core")
    print(f"wave_live {n}: cockpit process peak RSS {f['peak_rss_mib']:.0f} MiB")
    print(
        f"wave_live {n}: fleet table laid out anew {f['table_rebuilds_per_s']:.1f} times per s, "
        f"{f['table_cells_per_s']:.0f} cells changed in place per s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
