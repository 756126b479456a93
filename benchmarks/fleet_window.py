"""A 2,000-node HGX window in simulated time: how long its waves take, and how good the
forecast is a quarter of the way in.

Run: ``python benchmarks/fleet_window.py [--nodes 2000] [--seed 7]``. Prints one line per
figure; it does not fail on a target.

Simulated time, not the SSH fleet: a discrete-event walk of the wave runner's rules
(:mod:`cockpit.engine.waverun`: a node starts when its wave has a free slot of
``max_parallel`` and the fleet has fewer than ``max_unavailable`` nodes out of service;
waves one after the other; the canary and the second node by hand). Each node's stages
last what a real HGX node takes (drain 2 min, record 0.5, upgrade 1 of apt plus the
install's 3, reboot 5 with POST, smoke 2, expand 0.5), each drawn with a seeded spread
(lognormal, sigma 0.2). A person's action by hand takes ``--person-s`` (the counts are
operator_load's); a wave's start and its per-wave ticks take one person's latency each
(``--person-latency-s``). At 25% and 50% of the window, :func:`cockpit.engine.forecast.forecast`
is given only what was measured by then, gathered as ``forecast_state`` gathers it (stages
passed, the time so far of the nodes still in a stage, nodes at work and their elapsed time,
the by-hand nodes' time on the clock, the gaps between waves seen, waves left) and its end is
compared with the simulated one: for
``--seed``, then the worst and the median error over ``--seeds`` (the seeds the model was
built on), over ``--check-seeds`` (never used while building it) and over ``--fresh-seeds``
(chosen after the forecast learned the nodes still in a stage, never used while changing
it), and how many seeds' real end lies inside the forecast's own two-sigma band.
``--explain`` says for ``--seed`` why: per stage, the nodes through it and still in it, the
estimate against the true mean over the nodes left, and the waves left.

With ``cockpit run --history LOG`` the forecast weighs each stage's mean in an earlier window
as five of its nodes: each set is judged again with the fleet's previous window (the same
fleet and rules, its own draws: seed + :data:`PREVIOUS_WINDOW`) as that history, and with a
previous window whose every stage took ``--history-scale`` times as long (a window that
differs from this one: the cost of a history that misleads).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import math
import random
import statistics
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cockpit.engine.durations import node_mean_sigma, stage_fits
from cockpit.engine.forecast import StageHistory, forecast
from cockpit.runbook.model import Waves
from cockpit.runbook.waves import plan_waves

#: minutes per node stage on an HGX node (the install and the reboot with POST dominate)
STAGE_MIN = {"drain": 2.0, "record": 0.5, "upgrade": 1.0 + 3.0, "reboot": 5.0, "smoke": 2.0, "expand": 0.5}
SPREAD = 0.2
#: the fleet's previous window is the window of seed + this (its own draws, never a seed judged)
PREVIOUS_WINDOW = 100_000


@dataclass(frozen=True)
class ByHand:
    """Person actions by hand: the window's opening stages, the canary's, the second node's."""

    opening: int
    canary: int
    second: int


#: as ``benchmarks/operator_load.py`` measured them on the r580 ``happy`` window over 8 SSH
#: nodes (2026-12-05, with stage runs on the canary and the second node; 79 by hand in all),
#: split by the node each action named: the window's actions before the canary's first are
#: the opening (those after, the closing's mostly, come after the rollout this window
#: measures); ``--measure-by-hand`` counts them again
BY_HAND = ByHand(opening=25, canary=14, second=13)


def measure_by_hand() -> ByHand:
    """Walk operator_load's 8-node window over SSH and count its actions by hand by the node
    each names (about 20 s): opening until the canary's first, then the canary's, the second's."""
    from benchmarks import operator_load  # the SSH fleet and the session: only this path walks a real window

    counts: Counter[str] = Counter()
    take = operator_load.take_by_hand

    async def counting(session: Any, tally: Any) -> Any:
        before = tally.intents
        action = await take(session, tally)
        if tally.intents > before:
            node = getattr(action, "node", None)
            # a window action before any node's is the opening's; after, the rest of the window
            opening = not any(k.startswith("gpu") for k in counts)
            counts[node or ("opening" if opening else "window")] += 1
        return action

    operator_load.take_by_hand = counting
    try:
        asyncio.run(operator_load.measure(8, "driver-upgrade-r580"))
    finally:
        operator_load.take_by_hand = take
    return ByHand(opening=counts["opening"], canary=counts["gpu01"], second=counts["gpu02"])


@dataclass
class Node:
    name: str
    wave: int
    stages: list[float]  # seconds per stage, in STAGE_MIN's order (a person's time included)
    machine: list[float]  # what the steps themselves took: what the cockpit measures of a stage
    start: float | None = None
    end: float | None = None

    @property
    def seconds(self) -> float:
        return sum(self.stages)

    def passed(self, at: float) -> list[tuple[str, float]]:
        """The stages this node passed by ``at``, with their durations."""
        return [(sid, took) for sid, _, took in self.observed(at) if took is not None]

    def observed(self, at: float) -> list[tuple[str, float, float | None]]:
        """The stages this node began by ``at``: when it began each, and what the steps took
        (None: still in it)."""
        if self.start is None:
            return []
        out: list[tuple[str, float, float | None]] = []
        t = self.start
        for i, (sid, d) in enumerate(zip(STAGE_MIN, self.stages, strict=True)):
            if t > at:
                break
            out.append((sid, t, self.machine[i] if t + d <= at else None))
            t += d
        return out


def node_stages(rng: random.Random) -> list[float]:
    return [60 * m * rng.lognormvariate(0, SPREAD) for m in STAGE_MIN.values()]


def simulate(
    nodes: int,
    *,
    seed: int,
    unavailable: float,
    person_s: float,
    latency_s: float,
    wave_size: int,
    by_hand: ByHand = BY_HAND,
) -> tuple[list[Node], float]:
    rng = random.Random(seed)
    limit = max(1, math.floor(nodes * unavailable))
    hosts = [f"gpu{i:04d}" for i in range(1, nodes + 1)]
    plan = plan_waves(hosts, Waves(sizes=[1, 1], rest=wave_size or limit), {})
    fleet: list[Node] = []
    for w, names in enumerate(plan):
        for h in names:
            stages = node_stages(rng)
            fleet.append(Node(h, w, stages, list(stages)))
    for node in fleet:
        if node.wave < 2:  # by hand: a person's actions spread over its stages
            actions = by_hand.canary if node.wave == 0 else by_hand.second
            node.stages = [d + actions * person_s / len(STAGE_MIN) for d in node.stages]
    by_wave: dict[int, list[Node]] = {}
    for node in fleet:
        by_wave.setdefault(node.wave, []).append(node)
    now = by_hand.opening * person_s
    for wave, members in sorted(by_wave.items()):
        if wave < 2:  # the canary and the second node: a person at each step
            node = members[0]
            node.start = now
            node.end = now + node.seconds
            now = node.end
            continue
        now += latency_s  # a person starts the wave: one key, its node set typed
        running: list[tuple[float, int]] = []
        queue = list(members)
        sampled = False
        while queue or running:
            while queue and len(running) < limit:
                node = queue.pop(0)
                node.start = now
                # the first node to reach the per-wave items waits for the person once
                wait = 0.0 if sampled else latency_s
                sampled = True
                node.end = now + node.seconds + wait
                heapq.heappush(running, (node.end, id(node)))
            end, _ = heapq.heappop(running)
            now = max(now, end)
        now = max(n.end or 0.0 for n in members)
    return fleet, now


def previous_window(fleet: list[Node], change_id: str, scale: float = 1.0) -> StageHistory:
    """What ``cockpit run --history`` lends the forecast from an earlier window: what every
    node's steps took through each stage (``scale``: as if each had taken that many times as long)."""
    return StageHistory(change_id, {sid: tuple(n.machine[i] * scale for n in fleet) for i, sid in enumerate(STAGE_MIN)})


def forecast_at(
    fleet: list[Node],
    end_s: float,
    share: float,
    limit: int,
    *,
    known: bool = False,
    history: StageHistory | None = None,
) -> tuple[float, float, float]:
    """The forecast at ``share`` of the window from what the cockpit has measured by then, as
    :func:`cockpit.engine.forecast.forecast_state` gathers it: the forecast's end, its error
    against the simulated end, and its one-sigma band (seconds). ``known``: the stages of every
    node of the fleet given instead, as if their distribution were known: what is left is the
    model's own error, not the sample's."""
    at = end_s * share
    stage_s, censored_s = observations(fleet, at)
    if known:
        stage_s = {sid: [n.machine[i] for n in fleet] for i, sid in enumerate(STAGE_MIN)}
        censored_s = {}
    current = max((n.wave for n in fleet if n.start is not None and n.start <= at), default=0)
    members = [n for n in fleet if n.wave == current]
    elapsed = [at - (n.start or 0) for n in members if n.start is not None and n.start <= at < (n.end or 0)]
    pending = sum(1 for n in members if n.start is None or n.start > at)
    later = sorted({n.wave for n in fleet if n.wave > current})
    # a node walked by hand: what the finished ones took on the clock, a person's time in it
    hand = [(n.end or 0) - (n.start or 0) for n in fleet if n.wave < 2 and (n.end or at + 1) <= at]
    # a person's time between two waves, as measured between the waves begun so far: before
    # the waves that ran themselves once one has (forecast_state's rule), else every gap
    gaps: dict[int, float] = {}
    for w in range(1, current + 1):
        ended = max(n.end or 0 for n in fleet if n.wave == w - 1)
        began = min(n.start or 0 for n in fleet if n.wave == w)
        gaps[w] = max(0.0, began - ended)
    auto = [g for w, g in gaps.items() if w >= 2]
    gap_s = statistics.fmean(auto or list(gaps.values())) if gaps else 0.0
    t0 = datetime(2026, 12, 5, 22, 0, tzinfo=UTC)
    predicted = forecast(
        now=t0 + timedelta(seconds=at),
        stage_s=stage_s,
        running_elapsed_s=elapsed,
        running_pending=pending,
        waves_left=[sum(1 for n in fleet if n.wave == w) for w in later],
        parallel=limit,
        limit=limit,
        wave_gap_s=gap_s,
        by_hand_s=hand if current < 2 else (),
        censored_s=censored_s,
        history=history,
    )
    predicted_s = (predicted.end - t0).total_seconds()
    return predicted_s, (predicted_s - end_s) / end_s, predicted.spread_s


def measured_nodes(fleet: list[Node], at: float) -> int:
    """Nodes with at least one stage passed by ``at``."""
    return sum(1 for n in fleet if n.passed(at))


def observations(fleet: list[Node], at: float) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """What forecast_state's ``measured()`` gathers by ``at``: per stage, the steps' durations of
    every node through it (never a person's time), and how long each node still in it has run
    its steps so far. A node walked by hand has a person's time spread over its stages: what
    its steps ran is counted as at least its time in the stage less all of that person's time
    (a lower bound that holds however the person's time falls in it)."""
    exact: dict[str, list[float]] = {sid: [] for sid in STAGE_MIN}
    censored: dict[str, list[float]] = {sid: [] for sid in STAGE_MIN}
    for n in fleet:
        for i, (sid, began, took) in enumerate(n.observed(at)):
            if took is not None:
                exact[sid].append(took)
            else:
                person = n.stages[i] - n.machine[i]
                ran = at - began - person
                if ran > 0:
                    censored[sid].append(ran)
    return exact, censored


def sample_error(fleet: list[Node], at: float) -> float:
    """How far the node's mean time estimated by ``at`` (the stages' means added, from what was
    measured: :func:`observations`) is from the fleet's: the sample's error, which no model of
    the schedule can take out."""
    mean, _ = node_mean_sigma(*observations(fleet, at))
    return mean / statistics.fmean(sum(n.machine) for n in fleet) - 1


def explain(fleet: list[Node], end_s: float, share: float, seed: int) -> None:
    """Why the forecast at ``share`` is off on this window: per stage, the nodes through it and
    still in it, the stage's estimate against its true mean over the nodes not yet through
    the window (what the forecast has to predict), and the waves left."""
    at = end_s * share
    current = max((n.wave for n in fleet if n.start is not None and n.start <= at), default=0)
    members = [n for n in fleet if n.wave == current]
    running = sum(1 for n in members if n.start is not None and n.start <= at < (n.end or 0))
    through = sum(1 for n in members if n.end is not None and n.end <= at)
    later = [sum(1 for n in fleet if n.wave == w) for w in sorted({n.wave for n in fleet if n.wave > current})]
    print(
        f"fleet_window explain seed {seed} at {share:.0%} ({at / 60:.1f} min): wave {current + 1} of "
        f"{len(members)} nodes, {through} through, {running} at work, "
        f"{len(members) - through - running} not begun; waves left {later}"
    )
    left = [n for n in fleet if n.end is None or n.end > at]
    fits = stage_fits(*observations(fleet, at))
    exact, censored = observations(fleet, at)
    for i, sid in enumerate(STAGE_MIN):
        truth = statistics.fmean(n.machine[i] for n in left)
        fit = fits[sid]
        print(
            f"fleet_window explain seed {seed} at {share:.0%}: {sid} {len(exact[sid])} through, "
            f"{len(censored[sid])} still in it: {fit.mean:.0f} s ±{fit.se:.0f} estimated, {truth:.0f} s true "
            f"({(fit.mean / truth - 1) * 100:+.1f} %)"
        )


def seeds_arg(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--unavailable", type=float, default=0.10, help="max unavailable, a share of the fleet")
    parser.add_argument("--person-s", type=float, default=10.0, help="seconds per person action by hand")
    parser.add_argument("--person-latency-s", type=float, default=60.0, help="a person's answer to the wave")
    parser.add_argument(
        "--wave-size", type=int, default=1000, help="nodes per wave after the second (0: max unavailable)"
    )
    parser.add_argument("--seeds", type=seeds_arg, default=seeds_arg("7-26"), help="seeds the model was built on")
    parser.add_argument(
        "--check-seeds", type=seeds_arg, default=seeds_arg("1007-1026"), help="seeds never used while building it"
    )
    parser.add_argument(
        "--fresh-seeds",
        type=seeds_arg,
        default=seeds_arg("6001-6020"),
        help="seeds chosen after the last change to the forecast, never used while making it",
    )
    parser.add_argument(
        "--shares", default="0.25,0.5", help="shares of the window the forecast is judged at (comma-separated)"
    )
    parser.add_argument(
        "--explain", action="store_true", help="per stage for --seed: what the forecast estimated, against the truth"
    )
    parser.add_argument(
        "--history-scale",
        type=float,
        default=1.25,
        help="a misleading history: the previous window's stages each took this many times as long",
    )
    parser.add_argument(
        "--measure-by-hand", action="store_true", help="count the actions by hand again (operator_load, 8 nodes)"
    )
    args = parser.parse_args()
    by_hand = measure_by_hand() if args.measure_by_hand else BY_HAND
    print(
        f"fleet_window person actions by hand ({'measured now' if args.measure_by_hand else 'measured 2026-12-05'}): "
        f"{by_hand.opening} opening, {by_hand.canary} canary, {by_hand.second} second node"
    )
    shares = [float(x) for x in args.shares.split(",") if x]
    limit = max(1, math.floor(args.nodes * args.unavailable))

    def run(seed: int) -> tuple[list[Node], float]:
        return simulate(
            args.nodes,
            seed=seed,
            unavailable=args.unavailable,
            person_s=args.person_s,
            latency_s=args.person_latency_s,
            wave_size=args.wave_size,
            by_hand=by_hand,
        )

    fleet, end_s = run(args.seed)
    waves = max(n.wave for n in fleet) + 1
    print(f"fleet_window {args.nodes} nodes, {waves} waves, {limit} at once: {end_s / 3600:.2f} h simulated window")
    mean_node = sum(n.seconds for n in fleet) / len(fleet)
    print(f"fleet_window node through its stages: {mean_node / 60:.1f} min mean")
    for share in shares:
        predicted_s, error, band = forecast_at(fleet, end_s, share, limit)
        print(
            f"fleet_window seed {args.seed} forecast at {share:.0%} of the window: {error * 100:+.1f} % error "
            f"({predicted_s / 3600:.2f} h forecast ±{band / 60:.0f} min, {end_s / 3600:.2f} h simulated)"
        )
        if args.explain:
            explain(fleet, end_s, share, args.seed)
    sets = (("model seeds", args.seeds), ("held-out seeds", args.check_seeds), ("fresh seeds", args.fresh_seeds))
    for name, seeds in sets:
        if not seeds:
            continue
        label = f"{name} {seeds.start}-{seeds.stop - 1}"
        runs = [run(seed) for seed in seeds]
        before = [run(seed + PREVIOUS_WINDOW)[0] for seed in seeds]
        histories: list[tuple[str, list[StageHistory | None]]] = [
            ("", [None] * len(runs)),
            (" with the previous window as history", [previous_window(fl, "previous") for fl in before]),
            (
                f" with a history {args.history_scale:g}x as long",
                [previous_window(fl, "misleading", args.history_scale) for fl in before],
            ),
        ]
        for share in shares:
            for told, history in histories:
                got = [forecast_at(fl, e, share, limit, history=h) for (fl, e), h in zip(runs, history, strict=True)]
                errors = [g[1] for g in got]
                worst = max(errors, key=abs)
                inside = sum(1 for (_, err, band), (_, e) in zip(got, runs, strict=True) if abs(err) * e <= 2 * band)
                where = f"fleet_window forecast at {share:.0%}, {label}{told}"
                print(f"{where}: {worst * 100:+.1f} % worst error")
                print(f"{where}: {statistics.median(errors) * 100:+.1f} % median error")
                print(f"{where}: {sum(abs(err) > 0.10 for err in errors)} of {len(got)} seeds beyond ±10 %")
                print(f"{where}: {inside} of {len(got)} seeds inside the forecast's ±2 sigma band")
            known = max((forecast_at(fl, e, share, limit, known=True)[1] for fl, e in runs), key=abs)
            print(
                f"fleet_window forecast at {share:.0%}, {label}: {known * 100:+.1f} % worst error "
                "with the stage distributions known (the model's own error)"
            )
        off = [sample_error(fl, e * 0.25) for fl, e in runs]
        print(
            f"fleet_window {label}: at 25% the node's mean time estimated is off by {max(off, key=abs) * 100:+.1f} % "
            f"at worst ({statistics.median(measured_nodes(fl, e * 0.25) for fl, e in runs):g} nodes measured)"
        )
        # the stages only the two nodes walked by hand are through: their sample is all there is
        alone = sum(1 for fl, e in runs if min(len(v) for v in observations(fl, e * 0.25)[0].values()) <= 2)
        print(
            f"fleet_window {label}: at 25% a stage is through on the by-hand nodes alone in {alone} of "
            f"{len(runs)} seeds"
        )
        print(f"fleet_window {label}: {max(e for _, e in runs) / 3600:.2f} h longest simulated window")


if __name__ == "__main__":
    main()
