"""Gating engine figures: fold 10,000 events, copy the state, judge actions, evaluate triggers.

Run: ``python benchmarks/gating_bench.py [--nodes 16] [--events 10000]``. Prints figures;
it does not fail on speed. The events are a clean change window on the shipped r580
runbook, played through the actions the engine allows, padded with probe events
(the most common kind in a real log) up to the requested count.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from cockpit.changelog.events import Event, EventKind
from cockpit.engine.actions import (
    ActionKind,
    ArmTriggers,
    PassGate,
    RunStep,
    SignOff,
    StartWave,
    TickItem,
    VerifyItem,
)
from cockpit.engine.checks import run_check
from cockpit.engine.fold import (
    Folder,
    fold,
)
from cockpit.engine.offers import allowed_actions
from cockpit.engine.rules import check_action
from cockpit.engine.triggers import evaluate
from cockpit.runbook.loader import load

OP, REV = "alice", "bob"
T0 = datetime(2026, 8, 5, 22, 0, tzinfo=UTC)
ORDER = [
    ActionKind.SIGN_OFF,
    ActionKind.RUN_STEP,
    ActionKind.VERIFY_ITEM,
    ActionKind.TICK_ITEM,
    ActionKind.ARM_TRIGGERS,
    ActionKind.PASS_GATE,
    ActionKind.START_WAVE,
]


def probe(node: str, boot: int) -> dict[str, Any]:
    driver = "575.57.08" if boot == 0 else "580.65.06"
    return {
        "reachable": True,
        "health": "ok",
        "boot_id": f"{node}-b{boot}",
        "driver_version": driver,
        "kernel_module_version": driver,
        "cuda_version": "13.0",
        "driver_package": None,
        "fabric_manager": None,
        "gpu_count": 8,
        "xid_codes": [],
    }


def clean_window(hosts: list[str], total: int) -> list[Event]:
    rb = load("driver-upgrade-r580").runbook
    folder = Folder(rb, {}, hosts)
    events: list[Event] = []
    boots = dict.fromkeys(hosts, 0)

    def add(kind: EventKind, actor: str = OP, **kw: Any) -> None:
        event = Event(seq=len(events) + 1, ts=T0 + timedelta(seconds=len(events)), actor=actor, kind=kind, **kw)
        events.append(event)
        folder.apply(event)

    def stage(a: RunStep | VerifyItem) -> Any:
        st = folder.state
        if a.stage in st.window:
            return st.window[a.stage]
        assert a.node is not None
        return st.nodes[a.node].stages[a.stage]

    add(EventKind.SESSION_STARTED, facts={"operator": OP})
    pad = max(0, total // 400)  # probes between actions, so the window ends near ``total``
    while len(events) < total:
        st = folder.state
        acts = [
            a
            for a in allowed_actions(st, rb, REV, OP) + allowed_actions(st, rb, OP, OP)
            if a.kind in ORDER
            and not (isinstance(a, RunStep) and stage(a).steps[a.step].status == "done")
            and not (isinstance(a, VerifyItem) and stage(a).items[a.item].status == "done")
        ]
        if not acts:
            node = hosts[len(events) % len(hosts)]
            add(EventKind.PROBE, actor="cockpit", node=node, facts=probe(node, boots[node]))
            continue
        a = min(acts, key=lambda a: ORDER.index(a.kind))
        kw: dict[str, Any] = {"stage": getattr(a, "stage", None), "node": getattr(a, "node", None)}
        if isinstance(a, SignOff):
            add(EventKind.SIGNOFF, actor=REV, item=a.item, **kw)
        elif isinstance(a, RunStep):
            kind = stage(a).steps[a.step].kind
            add(EventKind.STEP_STARTED, step=a.step, **kw)
            if a.node and kind == "reboot":
                boots[a.node] += 1
            if a.node and kind in ("reboot", "probe", "record"):
                add(EventKind.PROBE, actor="cockpit", node=a.node, facts=probe(a.node, boots[a.node]))
            if a.node and kind == "record":
                add(EventKind.BASELINE_RECORDED, node=a.node, facts={**probe(a.node, 0), "driver_package": "p"})
            add(EventKind.STEP_FINISHED, step=a.step, facts={"ok": True, "exit_status": 0}, **kw)
        elif isinstance(a, VerifyItem):
            item = stage(a).items[a.item]
            res = run_check(item.check, st, a.node, st.params) if item.check else None
            add(EventKind.ITEM_VERIFIED, item=a.item, facts={"ok": True, "evidence": res.evidence if res else ""}, **kw)
        elif isinstance(a, TickItem):
            add(EventKind.ITEM_TICKED, item=a.item, note="seen", **kw)
        elif isinstance(a, ArmTriggers):
            add(EventKind.TRIGGERS_ARMED, facts={"triggers": [t.id for t in rb.triggers]})
        elif isinstance(a, PassGate):
            add(EventKind.GATE_PASSED, **kw)
        elif isinstance(a, StartWave):
            add(EventKind.WAVE_STARTED, wave=a.wave)
        for i in range(pad):
            node = hosts[i % len(hosts)]
            add(EventKind.PROBE, actor="cockpit", node=node, facts=probe(node, boots[node]))
    return events[:total]


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
