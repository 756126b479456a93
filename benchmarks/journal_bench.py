"""Change-log figures: append latency with fsync, load, replay scrub, follower, size per event.

Run: ``python benchmarks/journal_bench.py [--events 10000] [--appends 1000] [--dir DIR]``.
Prints figures; never fails on speed. ``--dir`` picks the file system to measure
(fsync cost depends on it entirely); the default is a temporary folder.

The 10,000-event session follows the shipped runbook over enough nodes: window
stages ticked and signed, triggers armed, then every node through drain, record,
upgrade, reboot, smoke and expand in its wave, with probes and step outputs. The
first ``--appends`` events go through :meth:`Journal.append` (measured one by
one); the rest are rendered by the same code and written in bulk, which gives the
same bytes without spending minutes in fsync.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cockpit.changelog.events import EventKind, parse_event
from cockpit.changelog.journal import (
    Journal,
    JournalFollower,
    SessionHeader,
    read_session,
    render_log,
)
from cockpit.runbook.backends import with_backend
from cockpit.runbook.conditions import when_holds
from cockpit.runbook.loader import LoadedRunbook, load
from cockpit.runbook.model import Item, ItemScope, Runbook, Step, Verify
from cockpit.runbook.waves import plan_waves
from cockpit.view.replay import Replay

K = EventKind


def probe(node: str | None, driver: str, **facts: Any) -> dict[str, Any]:
    """The fields of a healthy node's probe: 8 GPUs on ``driver``, no XID, and ``facts``."""
    return {
        "kind": K.PROBE,
        "actor": "cockpit",
        "node": node,
        "facts": {
            "reachable": True,
            "health": "ok",
            "driver_version": driver,
            "gpu_count": 8,
            **facts,
            "xid_codes": [],
        },
    }


#: the baseline every synthetic node records
BASELINE: dict[str, Any] = {
    "driver_package": "nvidia-driver-575=575.57.08-0ubuntu1",
    "driver_version": "575.57.08",
    "boot_id": "boot",
    "gpu_count": 8,
}


def synthetic_fields(
    runbook: Runbook, hosts: list[str], params: dict[str, Any], *, extra_probes: int = 0
) -> Iterator[dict[str, Any]]:
    """Event fields (no seq/ts) of a whole change window that follows ``runbook``.

    ``extra_probes``: probe events per node stage besides those of reboot/probe/record
    steps (a probe is recorded whenever a node's facts change, e.g. while it drains).
    """
    yield {"kind": K.SESSION_STARTED, "actor": "alice", "facts": {"operator": "alice"}}
    merged = with_backend({**runbook.defaults(), **params}, None)

    def applies(part: Step | Item, node: str | None) -> bool:
        """What the fold does not skip: the rules refuse a step or item that does not apply."""
        facts = BASELINE if node else None
        return when_holds(part.when, merged, facts) is not False

    def stage_events(stage_id: str, node: str | None) -> Iterator[dict[str, Any]]:
        stage = runbook.stage(stage_id)
        for i in range(extra_probes if node else 0):
            yield probe(node, "575.57.08", utilization_pct=[i % 100] * 8)
        for step in (s for s in stage.steps if applies(s, node)):
            yield {
                "kind": K.STEP_STARTED,
                "actor": "alice",
                "stage": stage_id,
                "step": step.id,
                "node": node,
                "facts": {"command": step.run or step.kind, "where": str(step.where)},
            }
            if step.kind in ("reboot", "probe", "record") and node:
                yield probe(node, "580.65.06", boot_id=f"{node}-{stage_id}")
            if step.kind == "record" and node:
                yield {
                    "kind": K.BASELINE_RECORDED,
                    "actor": "alice",  # the operator records a baseline, as the session does
                    "node": node,
                    "facts": BASELINE,
                }
            yield {
                "kind": K.STEP_FINISHED,
                "actor": "alice",
                "stage": stage_id,
                "step": step.id,
                "node": node,
                "facts": {
                    "command": step.run or str(step.kind),
                    "where": str(step.where),
                    "exit_status": 0,
                    "ok": True,
                    "duration_s": 3.5,
                    "stdout": "Reading package lists... Done\nBuilding dependency tree... Done\n",
                },
            }
        for item in (i for i in stage.items if applies(i, node)):
            if item.verify is Verify.SIGNOFF:
                yield {"kind": K.SIGNOFF, "actor": "bob", "stage": stage_id, "item": item.id, "node": node}
            elif item.verify is Verify.MANUAL:
                if item.scope is not ItemScope.NODE and node is not None:
                    # a per-wave (per-window) item of a node stage is ticked once for its wave
                    # (the window), its note naming the nodes sampled
                    once = wave_ticked if item.scope is ItemScope.WAVE else window_ticked
                    if (stage_id, item.id) in once:
                        continue
                    once.add((stage_id, item.id))
                yield {
                    "kind": K.ITEM_TICKED,
                    "actor": "alice",
                    "stage": stage_id,
                    "item": item.id,
                    "node": node,
                    "note": f"checked on {', '.join(members)}" if node is not None else "checked",
                }
            elif item.verify is not Verify.STEP:
                yield {
                    "kind": K.ITEM_VERIFIED,
                    "actor": "cockpit",
                    "stage": stage_id,
                    "item": item.id,
                    "node": node,
                    "facts": {"ok": True, "evidence": "holds"},
                }
        if stage.arms_triggers:  # armed once the stage's items hold, before its gate (as the rules ask)
            yield {"kind": K.TRIGGERS_ARMED, "actor": "alice", "facts": {"triggers": [t.id for t in runbook.triggers]}}
        yield {"kind": K.GATE_PASSED, "actor": "alice", "stage": stage_id, "node": node}

    wave_ticked: set[tuple[str, str]] = set()  # the per-wave items ticked for the running wave
    window_ticked: set[tuple[str, str]] = set()  # the per-window items of node stages ticked
    members: list[str] = []
    for stage in runbook.opening_stages:
        yield from stage_events(stage.id, None)
    for wave, members in enumerate(plan_waves(hosts, runbook.waves, params)):
        wave_ticked.clear()
        yield {"kind": K.WAVE_STARTED, "actor": "alice", "wave": wave, "facts": {"nodes": members}}
        for node in members:
            for stage in runbook.node_stages:
                yield from stage_events(stage.id, node)
    for stage in runbook.closing_stages:
        yield from stage_events(stage.id, None)
    yield {"kind": K.SESSION_ENDED, "actor": "alice"}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def synthetic_window(
    runbook: Runbook, params: dict[str, Any], events: int, nodes: int = 0
) -> tuple[list[str], list[dict[str, Any]]]:
    """Hosts and event fields of a synthetic window of about ``events`` events: on ``nodes``
    nodes with extra probes to fill the budget, or (0) on as many nodes as the budget holds."""
    extra = 0
    if nodes:
        hosts = [f"gpu{i:03d}" for i in range(1, nodes + 1)]
        base = len(list(synthetic_fields(runbook, hosts, params)))
        extra = max(0, (events - base) // (nodes * len(runbook.node_stages)))
    else:  # as many nodes as fit in the event budget: every host of the header takes part
        many = [f"gpu{i:03d}" for i in range(1, 1000)]
        used = {f.get("node") for f in list(synthetic_fields(runbook, many, params))[: events - 1]}
        hosts = [h for h in many if h in used]
    fields = list(synthetic_fields(runbook, hosts, params, extra_probes=extra))
    return hosts, [*fields[: events - 1], fields[-1]]  # the waves that fit, then the window closes


def bench_header(loaded: LoadedRunbook, hosts: list[str], change_id: str, **extra: Any) -> SessionHeader:
    return SessionHeader(
        change_id=change_id,
        runbook_id=loaded.runbook.id,
        runbook_sha256=loaded.sha256,
        runbook_path=loaded.path,
        operator="alice",
        hosts=hosts,
        parameters=loaded.runbook.defaults(),
        **extra,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--appends", type=int, default=1_000, help="events appended one by one with fsync")
    parser.add_argument("--scrubs", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--nodes", type=int, default=0, help="fleet size (default: as many as the events need)")
    args = parser.parse_args()

    loaded = load("driver-upgrade-r580")
    runbook = loaded.runbook
    params = runbook.defaults()
    hosts, body = synthetic_window(runbook, params, args.events, args.nodes)
    nodes_used = len(hosts)
    n_probes = sum(f["kind"] == EventKind.PROBE for f in body)

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        start = datetime(2026, 8, 5, 22, tzinfo=UTC)
        header = bench_header(loaded, hosts, "bench")
        journal = Journal.create(tmp, header)
        latencies = []
        for f in body[: args.appends]:
            f = dict(f)
            kind = f.pop("kind")
            t0 = time.perf_counter()
            journal.append(kind, **f)
            latencies.append(time.perf_counter() - t0)
        first_bulk = journal.last_seq + 1
        journal.close()
        bulk = [
            parse_event(dict(seq=first_bulk + offset, ts=start + timedelta(seconds=first_bulk + offset), **f))
            for offset, f in enumerate(body[args.appends :])
        ]
        with open(journal.path, "ab") as fh:  # chained on from the appended head, as appends would write them
            fh.write(render_log(header, bulk, prev=read_session(journal.path).chain.head))
        path = journal.path
        size = path.stat().st_size

        # CPU time beside wall time: on a shared machine the wall clock also counts
        # other people's work; the process's CPU time is what a quiet machine would see
        loads, loads_cpu = [], []
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()
            log = read_session(path)
            loads.append(time.perf_counter() - t0)
            loads_cpu.append(time.process_time() - c0)
        n = len(log.events)

        t0, c0 = time.perf_counter(), time.process_time()
        replay = Replay.for_session(log, runbook)
        build, build_cpu = time.perf_counter() - t0, time.process_time() - c0

        rng = random.Random(7)
        scrubs = []
        c0 = time.process_time()
        for _ in range(args.scrubs):
            seq = rng.randint(0, n)
            t0 = time.perf_counter()
            replay.state_at(seq)
            scrubs.append(time.perf_counter() - t0)
        scrub_cpu = (time.process_time() - c0) / args.scrubs
        t0 = time.perf_counter()
        replay.state_at_time(start + timedelta(seconds=n // 2))
        by_time = time.perf_counter() - t0
        views = []
        for _ in range(args.scrubs):
            seq = rng.randint(0, n)
            t0 = time.perf_counter()
            replay.view_at(seq)
            views.append(time.perf_counter() - t0)
        steps = []
        for seq in range(n // 2, min(n, n // 2 + 1000)):
            t0 = time.perf_counter()
            replay.view_at(seq)
            steps.append(time.perf_counter() - t0)

        follower = JournalFollower(path)
        t0 = time.perf_counter()
        follower.poll()
        follow_first = time.perf_counter() - t0
        with Journal.open_for_append(path, "bob", exclusive=False) as reviewer:
            reviewer.append(K.NOTE, note="following")
            t0 = time.perf_counter()
            new = follower.poll()
            follow_new = time.perf_counter() - t0
            t0 = time.perf_counter()
            follower.poll()
            follow_idle = time.perf_counter() - t0
        assert len(new) == 1

    ms = 1000.0
    print(
        f"change log: {n} events over {nodes_used} nodes ({n_probes} probes), "
        f"{size / 1e6:.2f} MB, {size / n:.0f} bytes/event on disk"
    )
    print(
        f"append+fsync ({len(latencies)} appends): median {statistics.median(latencies) * ms:.2f} ms, "
        f"p99 {percentile(latencies, 99) * ms:.2f} ms, max {max(latencies) * ms:.2f} ms"
    )
    print(
        f"load (read_session, {n} events): median {statistics.median(loads) * ms:.0f} ms wall, "
        f"{statistics.median(loads_cpu) * ms:.0f} ms CPU"
    )
    print(
        f"replay build (fold + checkpoint every {replay.every}): {build * ms:.0f} ms wall, "
        f"{build_cpu * ms:.0f} ms CPU; "
        f"load + build {(statistics.median(loads) + build) * ms:.0f} ms wall, "
        f"{(statistics.median(loads_cpu) + build_cpu) * ms:.0f} ms CPU"
    )
    print(
        f"scrub to a random seq ({len(scrubs)}): median {statistics.median(scrubs) * ms:.1f} ms, "
        f"p99 {percentile(scrubs, 99) * ms:.1f} ms, max {max(scrubs) * ms:.1f} ms wall; "
        f"mean {scrub_cpu * ms:.1f} ms CPU; "
        f"by time {by_time * ms:.1f} ms"
    )
    print(
        f"view (cursor) at a random seq: median {statistics.median(views) * ms:.1f} ms, "
        f"p99 {percentile(views, 99) * ms:.1f} ms; "
        f"playing forward one event: median {statistics.median(steps) * ms:.3f} ms, max {max(steps) * ms:.1f} ms"
    )
    print(
        f"follower: first poll {follow_first * ms:.0f} ms, one new event {follow_new * ms:.2f} ms, "
        f"nothing new {follow_idle * ms:.3f} ms"
    )


if __name__ == "__main__":
    main()
