"""When the window will end: a pure forecast from the stage durations measured so far.

After the canary, every stage passed says what it took the machines (its steps'
durations, not a person's time between them: :func:`measured`); a node's expected time
is the stages' means added, its spread their variances added. A wave left is ``parallel``
slots each taking its share of the wave's nodes one after the other; it ends with its
slowest slot, whose expected excess over the mean grows with the number of slots (the
expected maximum of ``k`` normal draws, about ``sigma * sqrt(2 ln k)``); the failure
budget takes its nodes' slots for the rest of a wave (a failed node holds). The running
wave's nodes count with what they have left. Compared with the window's declared end,
the forecast warns when the waves left will not fit.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cockpit.engine.state import DONE, FINISHED, PENDING, CockpitState, StageState
from cockpit.errors import BadInput


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

    def short(self) -> str:
        """A few words for the header: the expected end, and how late when it will not fit."""
        text = f"ends ~{self.end:%H:%M}"
        return text + (f", {_span(self.late_by_s)} LATE" if self.fits is False else "")

    def words(self) -> str:
        """One header line: the expected end, and the warning when it does not fit."""
        at = self.end.strftime("%H:%M")
        text = (
            f"ends ~{at} UTC ({_span(self.left_s)} left, {len(self.per_wave_s)} waves, {self.samples} nodes measured)"
        )
        if self.fits is False and self.window_end is not None:
            text += f"; WILL NOT FIT: {_span(self.late_by_s)} past the window's end {self.window_end:%H:%M}"
        return text


def declared_end(params: Mapping[str, object]) -> datetime | None:
    """The window's declared end, the runbook parameter ``window_end`` (ISO 8601, UTC when it
    names no zone); None when empty or absent. Raises :class:`BadInput` for anything else."""
    raw = str(params.get("window_end") or "").strip()
    if not raw:
        return None
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"window_end {raw[:40]!r} is not a time (ISO 8601, e.g. 2026-12-06T04:00Z)") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


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


def _machine_s(stage: StageState, span: tuple[datetime, datetime]) -> float:
    """What a passed stage took the machines: its steps' durations added, not a person's
    time between them (the canary walked by hand is slower than a wave that runs itself)."""
    ran = [s.duration_s for s in stage.steps.values() if s.duration_s is not None]
    return sum(ran) if ran else (span[1] - span[0]).total_seconds()


def measured(state: CockpitState) -> Measured:
    """The duration of every node stage passed so far, on any node (a wave at work adds its
    drains before its first node is through), and of every node through its stages."""
    stage_s: dict[str, list[float]] = {sid: [] for sid in state.node_stage_order}
    node_s: list[float] = []
    for progress in state.nodes.values():
        if progress.current == PENDING:
            continue
        spans = []
        for sid in state.node_stage_order:
            stage = progress.stages[sid]
            span = _stage_span(stage)
            if span is not None:
                stage_s[sid].append(_machine_s(stage, span))
                spans.append(span)
        if spans and progress.current == DONE:
            node_s.append((max(e for _, e in spans) - min(b for b, _ in spans)).total_seconds())
    return Measured(stage_s=stage_s, node_s=node_s)


#: A stage's relative spread while no stage has been seen on enough nodes to measure one
#: (only the canary and the second node are through): assumed, never zero.
ASSUMED_CV = 0.15
#: Fewer samples of a stage than this and its spread is borrowed from the stages measured more.
MIN_SPREAD_SAMPLES = 5


def node_mean_sigma(stage_s: Mapping[str, Sequence[float]]) -> tuple[float, float]:
    """A node's expected time through its stages and its spread: the stages' means added, their
    variances added (stages independent). A stage seen on few nodes (after the canary, the
    later stages) takes the relative spread pooled over the stages seen on many."""
    seen = {sid: list(v) for sid, v in stage_s.items() if v}
    if not seen:
        raise ValueError("a forecast needs at least one stage measured (the canary's)")
    cvs = [
        statistics.pstdev(v) / statistics.fmean(v)
        for v in seen.values()
        if len(v) >= MIN_SPREAD_SAMPLES and statistics.fmean(v) > 0
    ]
    pooled = statistics.fmean(cvs) if cvs else ASSUMED_CV
    mean = 0.0
    var = 0.0
    for values in seen.values():
        m = statistics.fmean(values)
        sd = statistics.pstdev(values) if len(values) >= MIN_SPREAD_SAMPLES else pooled * m
        mean += m
        var += sd * sd
    return mean, math.sqrt(var)


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
    # each slot takes its nodes one after the other (rounds of them); the wave ends with the
    # slowest slot: the sum of ``rounds`` nodes, whose spread grows with sqrt(rounds)
    return rounds * mean + math.sqrt(rounds) * (expected_round_s(mean, sigma, min(nodes, slots)) - mean)


def forecast(
    *,
    now: datetime,
    stage_s: Mapping[str, Sequence[float]],
    running_elapsed_s: Sequence[float],
    running_pending: int,
    waves_left: Sequence[int],
    parallel: int,
    failure_budget: int = 0,
    wave_gap_s: float = 0.0,
    window_end: datetime | None = None,
) -> Forecast:
    """The window's end from the stage durations measured so far (``stage_s``).

    ``running_elapsed_s``: how long each node at work in the running wave has been at it;
    ``running_pending``: its nodes not started yet; ``waves_left``: the sizes of the waves
    not started; ``wave_gap_s``: a person's time between two waves (measured or assumed).
    """
    mean, sigma = node_mean_sigma(stage_s)
    per_wave: list[float] = []
    if running_elapsed_s or running_pending:
        # the nodes at work: the slowest of them, less what they have done
        left = [max(mean - e, 0.0) for e in running_elapsed_s]
        at_work = max(left, default=0.0) + (expected_round_s(0.0, sigma, len(left)) if left else 0.0)
        # the nodes not started take the slots as the first at work free them
        tail = min(left, default=0.0) + wave_s(running_pending, parallel, mean, sigma) if running_pending else 0.0
        per_wave.append(max(at_work, tail))
    for size in waves_left:
        per_wave.append(wave_gap_s + wave_s(size, parallel, mean, sigma, min(failure_budget, max(0, parallel - 1))))
    left_s = sum(per_wave)
    return Forecast(
        end=now + timedelta(seconds=left_s),
        left_s=left_s,
        per_wave_s=per_wave,
        samples=max((len(v) for v in stage_s.values()), default=0),
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
    if not done.node_s:  # the canary through its stages first
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
        stage_s=done.stage_s,
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
