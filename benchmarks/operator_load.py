"""A person's work for a whole ``happy`` window when waves run themselves.

Run: ``python benchmarks/operator_load.py [--sizes 8,64] [--runbook driver-upgrade-r580]``.
Prints one line per figure; it does not fail on a target.

A person takes the window's opening stages, the canary and the second node stage by stage:
where Next is a step or a check, one stage run (``S`` on the screen,
:class:`cockpit.engine.actions.RunStage`; the node's name typed once where the stage holds a
destructive step or a service change, as the screen asks) takes every step and check of that
stage a person need not take, up to its gate; what is theirs (a manual item's note, a gate, a
decision's answers, a path's rationale: one typed text or key each) they do one by one. A
sign-off is the second person's, counted apart. Every later wave is started by one action
(one key, the wave's node set typed once) and run by
:class:`cockpit.session.waves.WaveRunner`; what it queues in "needs you" the person answers
(a per-wave item: one key and its note). The closing stages go stage by stage again.

Measured over the simulated fleet behind real SSH (``cockpit demo``'s, at 100x speed)
for the sizes given (8 and 64 by default). 512 and 2,000 nodes are not run over SSH here
(512 did not finish within 7 minutes on a shared 2-core machine): their figures are the fixed part
measured at the largest size run plus, per wave after the second, the largest per-wave
count measured, times the waves :func:`cockpit.runbook.waves.plan_waves` plans for that
fleet with the same settings; those lines say "projected". The by-hand part is printed by
part of the window and by kind of action.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cockpit.engine import actions
from cockpit.engine.planner import DEMO_REVIEWER, WINDOW_THROUGH
from cockpit.engine.stagerun import StageRunResult, stage_confirmation, stage_of
from cockpit.engine.waverun import confirmation_text, first_auto_wave
from cockpit.runbook.loader import load
from cockpit.runbook.placeholders import ParamValue
from cockpit.runbook.service import changes_service
from cockpit.runbook.waves import plan_waves
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session
from cockpit.session.waves import WaveRunner

SPEED = 100.0


@dataclass
class Load:
    """Person actions (intents), with the key presses and typed texts they took."""

    intents: int = 0
    keys: int = 0
    typed: int = 0
    reviewer: int = 0
    #: person actions by (part of the window, kind): where the by-hand figure goes
    parts: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: steps and checks the stage runs took (each would have been a key press by hand)
    taken_by_runs: int = 0

    def add(self, keys: int, typed: int, part: str = "wave", kind: str = "other") -> None:
        self.intents += 1
        self.keys += keys
        self.typed += typed
        self.parts[(part, kind)] += 1


@dataclass
class WindowLoad:
    nodes: int
    waves: int
    by_hand: Load = field(default_factory=Load)  # opening stages, canary, second node, closing
    per_wave: list[Load] = field(default_factory=list)
    seconds: float = 0.0
    outcome: str = ""

    @property
    def total(self) -> int:
        return self.by_hand.intents + sum(w.intents for w in self.per_wave)


def wave_settings(nodes: int) -> dict[str, ParamValue]:
    """A tenth of the fleet out of service at once, in waves of that size (at least 4)."""
    size = max(4, math.ceil(nodes / 10))
    return {"wave_size": size, "max_parallel": size}


WAITING = "waiting"


def part_of(session: Session, action: actions.Action) -> str:
    """Where in the window ``action`` falls: opening, canary, second, closing (or wave N)."""
    state = session.state
    node = getattr(action, "node", None)
    if isinstance(action, actions.StartWave):
        wave = action.wave
    elif node is not None:
        wave = next(i for i, members in enumerate(state.waves) if node in members)
    else:
        stage = getattr(action, "stage", None) or state.window_current
        if isinstance(action, actions.RecordDecision | actions.ChoosePath | actions.ArmTriggers):
            stage = state.window_current
        return "closing" if stage in state.closing else "opening"
    return {0: "canary", 1: "second"}.get(wave, f"wave {wave + 1}")


def open_steps(session: Session, action: actions.RunStage) -> list[str]:
    stage = stage_of(session.state, action.stage, action.node)
    return [] if stage is None else [s.id for s in stage.steps.values() if s.status == "open"]


def kind_of(session: Session, action: actions.Action) -> str:
    """The kind of person action, for the breakdown."""
    match action:
        case actions.RunStep():
            destructive = session.recorder.step(action.stage, action.step).destructive
            return "step, destructive (node name typed)" if destructive else "step"
        case actions.VerifyItem():
            return "item verified"
        case actions.PassGate():
            return "gate passed"
        case actions.TickItem():
            return "tick with a typed note"
        case actions.RecordDecision() | actions.ChoosePath():
            return "decision / path (typed)"
        case actions.StartWave():
            return "wave started"
        case _:
            return str(action.kind)


async def take_by_hand(session: Session, tally: Load) -> actions.Action | str | None:
    """Take one Next as a person would; return it (None: Next has no action; WAITING: a
    step in flight, nothing taken)."""
    planned = session.next_plan(DEMO_REVIEWER)
    action = planned.action
    if action is None:
        if planned.waiting_for is not None:
            await asyncio.sleep(0.02)
            return WAITING
        return None
    if isinstance(action, actions.SignOff):
        tally.reviewer += 1
        await session.perform(action, actor=DEMO_REVIEWER)
        return action
    if isinstance(action, actions.StartWave) and action.wave >= first_auto_wave(session.runbook):
        return action  # the caller starts it as a wave that runs itself
    typed = 0
    confirm = None
    if isinstance(action, actions.RunStep | actions.VerifyItem):
        # one key runs the stage up to its gate (the node's name typed once where the screen
        # asks it: a destructive step or a service change left in the stage)
        stage_run = actions.RunStage(stage=action.stage, node=action.node)
        confirm = stage_confirmation(session.state, action.stage, action.node)
        asks = confirm is not None or any(
            changes_service(session.runbook, action.stage, s, action.node) for s in open_steps(session, stage_run)
        )
        part = part_of(session, action)
        done = await session.perform(stage_run, confirmation=confirm)
        assert isinstance(done, StageRunResult)
        if not done.ok:
            raise SystemExit(f"stage run stopped at a failure: {done.stopped}")
        tally.add(1, 1 if asks else 0, part, "stage run" + (" (node name typed)" if asks else ""))
        tally.taken_by_runs += done.taken
        return stage_run
    if isinstance(action, actions.RunStep):
        confirm = action.node or action.stage
        typed = 1 if session.recorder.step(action.stage, action.step).destructive else 0
    elif isinstance(action, actions.TickItem | actions.ChoosePath):
        typed = 1  # the note, the rationale
    elif isinstance(action, actions.RecordDecision):
        typed = 1  # the answers
        answers = {"why": "every node passed smoke and the baseline workloads"}
        action = action.model_copy(update={"answers": tuple(answers.items())})
    part, kind = part_of(session, action), kind_of(session, action)
    await session.perform(action, confirmation=confirm)
    tally.add(1, typed, part, kind)
    return action


async def run_wave(session: Session, wave: int) -> Load:
    tally = Load()
    runner = WaveRunner.start(session, confirmation_text(session.state, wave), wave=wave, refresh_s=1.0)
    tally.add(1, 1)  # the key, and the node set typed once
    task = asyncio.create_task(runner.run())
    answered: set[tuple[str, str]] = set()
    while not task.done():
        for need in runner.status().needs_you:
            tick = need.action
            if not isinstance(tick, actions.TickItem) or (tick.stage, tick.item) in answered:
                continue
            stage = session.state.nodes[tick.node or ""].stages.get(tick.stage)
            if stage is None or stage.items[tick.item].status != "open":
                continue
            note = f"sampled {tick.node}: requests answered, workloads pass"
            await session.perform(tick.model_copy(update={"note": note}))
            answered.add((tick.stage, tick.item))
            tally.add(1, 1)
        await asyncio.sleep(0.05)
    status = task.result()
    if status.halted is not None:
        raise SystemExit(f"wave {wave + 1} halted: {status.halted}")
    return tally


async def measure(nodes: int, runbook: str) -> WindowLoad:
    settings = wave_settings(nodes)
    params: dict[str, ParamValue] = {"reboot_timeout_s": 5, "drain_timeout_s": 3, **settings}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="operator-load-") as tmp:
        async with demo_session(
            nodes=nodes, scenario="happy", sessions_dir=Path(tmp), speed=SPEED, params=params, runbook=runbook
        ) as (session, _fleet):
            result = WindowLoad(nodes=nodes, waves=len(session.state.waves))
            last_refresh = 0.0
            for _ in range(20000):
                if time.monotonic() - last_refresh > 1.0:
                    await session.refresh()
                    last_refresh = time.monotonic()
                taken = await take_by_hand(session, result.by_hand)
                if taken is None:
                    break
                if isinstance(taken, actions.StartWave) and taken.wave >= first_auto_wave(session.runbook):
                    result.per_wave.append(await run_wave(session, taken.wave))
            words = session.next_plan(DEMO_REVIEWER).text
            if words != WINDOW_THROUGH:
                raise SystemExit(f"{nodes} nodes: the window stopped short: {words}")
            decision = session.state.decision
            result.outcome = str(decision.facts.outcome if decision is not None else None)
            session.end(result.outcome)
    result.seconds = time.monotonic() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64", help="fleet sizes run over SSH (comma-separated)")
    parser.add_argument("--project", default="512,2000", help="fleet sizes projected from the largest run")
    parser.add_argument("--runbook", default="driver-upgrade-r580")
    args = parser.parse_args()
    runs = [asyncio.run(measure(int(n), args.runbook)) for n in args.sizes.split(",") if n]
    for r in runs:
        auto = r.per_wave
        worst = max((w.intents for w in auto), default=0)
        print(f"operator_load {r.nodes} nodes ({r.waves} waves, measured over SSH): {r.total} person actions")
        print(
            f"operator_load {r.nodes} nodes: {r.by_hand.intents} person actions by hand "
            f"(opening, canary, second, closing; {r.by_hand.keys} keys, {r.by_hand.typed} typed), "
            f"{r.by_hand.reviewer} sign-offs by the second person"
        )
        print(
            f"operator_load {r.nodes} nodes: {worst} person actions per wave at most after the second "
            f"({len(auto)} waves, {sum(w.keys for w in auto)} keys, {sum(w.typed for w in auto)} typed in all)"
        )
        print(f"operator_load {r.nodes} nodes: {r.seconds:.1f} s wall for the window at {SPEED:g}x")
        print(
            f"operator_load {r.nodes} nodes: {r.by_hand.taken_by_runs} steps and checks taken by "
            f"{sum(n for (_, k), n in r.by_hand.parts.items() if k.startswith('stage run'))} stage runs"
        )
        for part in ("opening", "canary", "second", "closing"):
            kinds = sorted((k, n) for (p, k), n in r.by_hand.parts.items() if p == part)
            words = ", ".join(f"{n} {k}" for k, n in kinds)
            print(f"operator_load {r.nodes} nodes by hand, {part}: {sum(n for _, n in kinds)} person actions ({words})")
    base = runs[-1]
    per_wave = max((w.intents for w in base.per_wave), default=0)
    waves_conf = load(args.runbook).runbook.waves
    for n in (int(x) for x in args.project.split(",") if x):
        hosts = [f"gpu{i:04d}" for i in range(1, n + 1)]
        planned = plan_waves(hosts, waves_conf, wave_settings(n))
        later = len(planned) - first_auto_wave(load(args.runbook).runbook)
        total = base.by_hand.intents + later * per_wave
        print(
            f"operator_load {n} nodes ({len(planned)} waves, projected from {base.nodes}): {total} person actions "
            f"({base.by_hand.intents} by hand + {later} waves x {per_wave}); after the second: {later * per_wave}"
        )


if __name__ == "__main__":
    main()
