"""Gating engine figures: fold 10,000 events, copy the state, judge actions, evaluate triggers.

Run: ``python benchmarks/gating_bench.py [--nodes 16] [--events 10000]``. Prints figures;
it does not fail on speed. The events are a clean change window on the shipped r580
runbook, played through the actions the engine allows, padded with probe events
(the most common kind in a real log) up to the requested count.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from cockpit.changelog.events import Event, EventKind
from cockpit.engine.actions import RunStep
from cockpit.engine.fold import fold
from cockpit.engine.offers import allowed_actions
from cockpit.engine.rules import check_action
from cockpit.engine.triggers import evaluate
from cockpit.runbook.loader import load

# the window is the one the gating test plays (tests/gating_scenarios.py), so both agree
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from gating_scenarios import OP, T0, CleanWindow, probe


def live(node: str, boot: int) -> dict[str, Any]:
    return probe(f"{node}-b{boot}", driver="575.57.08" if boot == 0 else "580.65.06")


def clean_window(hosts: list[str], total: int) -> list[Event]:
    window = CleanWindow(load("driver-upgrade-r580").runbook, hosts, live, seconds_apart=1)
    window.add(EventKind.SESSION_STARTED, facts={"operator": OP})
    pad = max(0, total // 400)  # probes between actions, so the window ends near ``total``
    for _ in window.play(limit=total):
        if len(window.events) >= total:
            break
        for i in range(pad):
            window.probe(hosts[i % len(hosts)])
    while len(window.events) < total:  # the window is over: the rest is probes
        window.probe(hosts[len(window.events) % len(hosts)])
    return window.events[:total]


def best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    hosts = [f"gpu{i:02d}" for i in range(1, args.nodes + 1)]
    t = time.perf_counter()
    events = clean_window(hosts, args.events)
    gen = time.perf_counter() - t
    rb = load("driver-upgrade-r580").runbook
    state = fold(rb, {}, hosts, events)
    done = sum(p.current == "done" for p in state.nodes.values())
    print(
        f"log: {len(events)} events, {args.nodes} nodes ({done} done), {len(state.waves)} waves; "
        f"generated in {gen:.2f} s"
    )
    t_fold = best(lambda: fold(rb, {}, hosts, events), args.repeat)
    print(f"fold {len(events)} events: {t_fold * 1000:.1f} ms ({t_fold / len(events) * 1e6:.1f} us/event)")
    t_copy = best(state.copy, args.repeat)
    print(f"state copy (replay checkpoint): {t_copy * 1000:.2f} ms")
    n = 200
    probe_action = RunStep(stage="upgrade", step="install-driver", node=hosts[-1])
    t_check = best(lambda: [check_action(state, rb, probe_action, OP, operator=OP) for _ in range(n)], 3) / n
    print(f"check_action: {t_check * 1e6:.0f} us")
    t_allowed = best(lambda: allowed_actions(state, rb, OP, OP), args.repeat)
    print(f"allowed_actions ({len(allowed_actions(state, rb, OP, OP))} allowed): {t_allowed * 1000:.2f} ms")
    t_eval = best(lambda: evaluate(rb, state, {}, state.last_at or T0), args.repeat)
    print(f"evaluate {len(rb.triggers)} triggers over {args.nodes} nodes: {t_eval * 1000:.2f} ms")


if __name__ == "__main__":
    main()
