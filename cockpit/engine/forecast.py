"""When the window will end: a pure forecast from the stage durations measured so far.

After the canary, every node that went through its stages says how long each took
(:func:`measured`). The waves left are then rounds of ``parallel`` nodes: a round lasts
as long as its slowest node, whose expected excess over the mean grows with the number of
nodes in the round (the expected maximum of ``k`` normal draws, about ``sigma *
sqrt(2 ln k)``); the failure budget takes its nodes' slots for the rest of a wave (a
failed node holds). The running wave's nodes count with what they have left. Compared
with the window's declared end, the forecast warns when the waves left will not fit.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cockpit.engine.state import DONE, FINISHED, PENDING, CockpitState, StageState


@dataclass(frozen=True, slots=True)
class Measured:
    """What the nodes through so far took: per stage, and per node from its first step to done."""

    stage_s: dict[str, list[float]]
    node_s: list[float]


@dataclass(frozen=True, slots=True)
class Forecast:
    """The window's expected end; ``late_by_s`` > 0 when it will not fit before ``window_end``."""

    end: datetime
    left_s: float
    per_wave_s: list[float]
    samples: int
    window_end: datetime | None = None

    @property
    def late_by_s(self) -> float:
        return 0.0 if self.window_end is None else (self.end - self.window_end).total_seconds()

    @property
    def fits(self) -> bool | None:
        return None if self.window_end is None else self.late_by_s <= 0

    def words(self) -> str:
        """One header line: the expected end, and the warning when it does not fit."""
        at = self.end.strftime("%H:%M")
        text = (
            f"ends ~{at} UTC ({_span(self.left_s)} left, {len(self.per_wave_s)} waves, {self.samples} nodes measured)"
        )
        if self.fits is False and self.window_end is not None:
            text += f"; WILL NOT FIT: {_span(self.late_by_s)} past the window's end {self.window_end:%H:%M}"
        return text


def _span(seconds: float) -> str:
    minutes = max(0, round(seconds / 60))
    return f"{minutes // 60}h{minutes % 60:02d}" if minutes >= 60 else f"{minutes} min"


def _stage_span(stage: StageState) -> tuple[datetime, datetime] | None:
    """When a passed stage began (its first step, else when it was entered) and passed."""
    if stage.passed_at is None:
        return None
    starts = [s.started_at for s in stage.steps.values() if s.started_at is not None]
    begun = min(starts) if starts else stage.entered_at
    return None if begun is None else (begun, stage.passed_at)


def measured(state: CockpitState) -> Measured:
    """The stage and node durations of every node through its stages (done)."""
    stage_s: dict[str, list[float]] = {sid: [] for sid in state.node_stage_order}
    node_s: list[float] = []
    for progress in state.nodes.values():
        if progress.current != DONE:
            continue
        spans = []
        for sid in state.node_stage_order:
            span = _stage_span(progress.stages[sid])
            if span is not None:
                stage_s[sid].append((span[1] - span[0]).total_seconds())
                spans.append(span)
        if spans:
            node_s.append((max(e for _, e in spans) - min(b for b, _ in spans)).total_seconds())
    return Measured(stage_s=stage_s, node_s=node_s)


def expected_round_s(mean: float, sigma: float, k: int) -> float:
    """Expected length of a round of ``k`` nodes started together: its slowest node."""
    if k <= 1:
        return mean
    return mean + sigma * math.sqrt(2 * math.log(k))


def wave_s(nodes: int, parallel: int, mean: float, sigma: float, failures: int = 0) -> float:
    """A wave of ``nodes`` at ``parallel`` at once, the failure budget's nodes holding their slots."""
    if nodes <= 0:
        return 0.0
    slots = max(1, parallel - failures)
    rounds = math.ceil(nodes / slots)
    # rolling slots: the rounds before the last go at the mean pace, the last waits for its slowest node
    return (rounds - 1) * mean + expected_round_s(mean, sigma, min(nodes, slots))


def forecast(
    *,
    now: datetime,
    node_s: Sequence[float],
    running_elapsed_s: Sequence[float],
    running_pending: int,
    waves_left: Sequence[int],
    parallel: int,
    failure_budget: int = 0,
    wave_gap_s: float = 0.0,
    window_end: datetime | None = None,
) -> Forecast:
    """The window's end from node durations measured so far (``node_s``, at least one).

    ``running_elapsed_s``: how long each node at work in the running wave has been at it;
    ``running_pending``: its nodes not started yet; ``waves_left``: the sizes of the waves
    not started; ``wave_gap_s``: a person's time between two waves (measured or assumed).
    """
    if not node_s:
        raise ValueError("a forecast needs at least one node measured (the canary)")
    mean = statistics.fmean(node_s)
    sigma = statistics.pstdev(node_s) if len(node_s) > 1 else 0.0
    per_wave: list[float] = []
    if running_elapsed_s or running_pending:
        at_work = max((max(mean - e, 0.0) for e in running_elapsed_s), default=0.0)
        tail = wave_s(running_pending, parallel, mean, sigma) if running_pending else 0.0
        per_wave.append(max(at_work, tail + min((max(mean - e, 0.0) for e in running_elapsed_s), default=0.0)))
    for size in waves_left:
        per_wave.append(wave_gap_s + wave_s(size, parallel, mean, sigma, min(failure_budget, max(0, parallel - 1))))
    left = sum(per_wave)
    return Forecast(
        end=now + timedelta(seconds=left),
        left_s=left,
        per_wave_s=per_wave,
        samples=len(node_s),
        window_end=window_end,
    )


def forecast_state(
    state: CockpitState,
    now: datetime,
    *,
    parallel: int | None = None,
    window_end: datetime | None = None,
    wave_gap_s: float = 0.0,
) -> Forecast | None:
    """:func:`forecast` from the folded state; None until the canary is through."""
    done = measured(state)
    if not done.node_s:
        return None
    current = state.current_wave
    elapsed: list[float] = []
    pending = 0
    if current is not None:
        for name in state.waves[current]:
            progress = state.nodes[name]
            if progress.current in FINISHED or progress.current == PENDING:
                continue
            starts = [
                s.started_at for st in progress.stages.values() for s in st.steps.values() if s.started_at is not None
            ]
            if starts:
                elapsed.append(max(0.0, (now - min(starts)).total_seconds()))
            else:
                pending += 1
    later = [] if current is None else state.waves[current + 1 :]
    if current is None:
        later = state.waves
    return forecast(
        now=now,
        node_s=done.node_s,
        running_elapsed_s=elapsed,
        running_pending=pending,
        waves_left=[len(w) for w in later],
        parallel=parallel or state.max_parallel,
        failure_budget=state.failure_budget,
        wave_gap_s=wave_gap_s,
        window_end=window_end,
    )


def stage_means(state: CockpitState) -> Mapping[str, float]:
    """The mean measured duration of each node stage (for a person reading the forecast)."""
    return {sid: statistics.fmean(v) for sid, v in measured(state).stage_s.items() if v}
