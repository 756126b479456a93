"""When the window will end: a pure forecast from the stage durations measured so far.

After the canary, every stage passed says what it took the machines (its steps'
durations, not a person's time between them: :func:`measured`), and every node still in
a stage says it takes at least what its steps have run so far (a right-censored
observation: :func:`~cockpit.engine.durations.fit_stage`). A stage's mean and spread are the lognormal's that fits
both by maximum likelihood, so the nodes through a stage first (its quick ones) do not
pass for the whole stage, and the nodes still in it count for what they show; a stage no
node is still in takes its durations' plain mean. A node's expected time is the stages'
means added, its spread their variances added (a stage seen on few nodes takes the
relative spread pooled over all stages). The waves left are walked as the wave runner
walks them: ``min(parallel, max unavailable)`` slots, each starting the next node the
moment its last is through, every node its own draw from the node's time (lognormal), the
wave ending with its last node; the failure budget's nodes hold their slots. The running
wave's nodes finish their draws among the nodes slower than what they have done. The
waves are walked :data:`TAIL_WALKS` times with fresh draws from one fixed seed (the same
forecast for the same measurements) and the forecast is the walks' mean: the expected
end of a wave that ends with its slowest node. A wave a person walks by hand (the canary,
the second node) takes what the finished ones took on the clock. The forecast carries its
one-sigma band: from the nodes measured (each stage's mean as far as its exact and
censored observations pin it down) and from the walks' own spread; it warns when the
waves left will not fit before the window's declared end. Given an earlier window of the
same fleet (:class:`StageHistory`), each stage starts from a few of its durations
(:func:`~cockpit.engine.durations.history_sample`): a stage only the nodes walked by hand
are through is then not the two of them alone.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cockpit.engine.durations import StageFit, node_time, stage_fits
from cockpit.engine.state import DONE, FINISHED, HELD, PENDING, CockpitState, StageState
from cockpit.engine.waverun import node_failed
from cockpit.errors import BadInput
from cockpit.runbook.model import Verify


@dataclass(frozen=True, slots=True)
class Measured:
    """What the nodes through so far took: per stage, and per node from its first step to done;
    ``censored_s``: per stage, how long each node still in it has run its steps so far."""

    stage_s: dict[str, list[float]]
    node_s: list[float]
    censored_s: dict[str, list[float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StageHistory:
    """An earlier window's measured stages, lent to this window's forecast: the change it
    was (for the person reading the forecast) and, per node stage, what each node's steps
    took through it (:func:`measured`)."""

    change_id: str
    stage_s: Mapping[str, tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class Forecast:
    """The window's expected end; ``late_by_s`` > 0 when it will not fit before ``window_end``."""

    end: datetime
    left_s: float
    per_wave_s: list[float]
    samples: int
    window_end: datetime | None = None
    #: one sigma of the end: from the few nodes measured (the node's mean time is a sample's),
    #: and from the waves' slowest nodes, drawn anew each window
    spread_s: float = 0.0
    #: the earlier window whose stages the forecast started from (None: this window's alone)
    history: str | None = None

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

    def _band(self) -> str:
        return f" ±{_span(self.spread_s)}" if self.spread_s >= 60 else ""

    def words(self) -> str:
        """One header line: the expected end, and the warning when it does not fit."""
        at = self.end.strftime("%H:%M")
        waves, nodes = len(self.per_wave_s), self.samples
        measured = f"{waves} wave{'' if waves == 1 else 's'}, {nodes} node{'' if nodes == 1 else 's'} measured"
        if self.history is not None:
            measured += f", {self.history}'s stages before them"
        text = f"ends ~{at} UTC{self._band()} ({_span(self.left_s)} left, {measured})"
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


def _commands_s(stage: StageState) -> list[float]:
    """What the commands run in a stage took: its steps' and its command items' (a smoke's
    dcgm-diag or burn-in runs for minutes as an item, not a step)."""
    ran = [s.duration_s for s in stage.steps.values() if s.duration_s is not None]
    return ran + _items_s(stage)


def _items_s(stage: StageState) -> list[float]:
    return [i.duration_s for i in stage.items.values() if i.verify is Verify.COMMAND and i.duration_s is not None]


def _machine_s(stage: StageState, span: tuple[datetime, datetime]) -> float:
    """What a passed stage took the machines: its commands' durations added, not a person's
    time between them (the canary walked by hand is slower than a wave that runs itself)."""
    ran = _commands_s(stage)
    return sum(ran) if ran else (span[1] - span[0]).total_seconds()


def ran_so_far_s(stage: StageState, now: datetime) -> float | None:
    """How long a stage a node is still in has run its commands so far (finished steps' and
    command items' durations, and the running steps' time until ``now``; a command item still
    running is not in the fold yet): a lower bound of what the stage will take the machines, a
    person's time between them left out. None: nothing has run yet."""
    items = _items_s(stage)
    ran = sum(items)
    started = bool(items)
    for step in stage.steps.values():
        if step.started_at is None:
            continue
        started = True
        if step.duration_s is not None:
            ran += step.duration_s
        elif step.status == "running":
            ran += max(0.0, (now - step.started_at).total_seconds())
    return ran if started else None


def measured(state: CockpitState, now: datetime | None = None) -> Measured:
    """The duration of every node stage passed so far, on any node, and of every node through
    its stages; with ``now``, how long each node still in a stage has run its steps so far
    (a failed node holds: it is no longer in its stage, and says nothing of its duration)."""
    exact: dict[str, list[float]] = {sid: [] for sid in state.node_stage_order}
    censored: dict[str, list[float]] = {sid: [] for sid in state.node_stage_order}
    node_s: list[float] = []
    for name, progress in state.nodes.items():
        if progress.current == PENDING:
            continue
        spans = []
        for sid in state.node_stage_order:
            stage = progress.stages[sid]
            span = _stage_span(stage)
            if span is not None:
                exact[sid].append(_machine_s(stage, span))
                spans.append(span)
            elif now is not None and sid == progress.current and not node_failed(state, name):
                ran = ran_so_far_s(stage, now)
                if ran is not None:  # (a time of 0 says nothing: the fit leaves it out)
                    censored[sid].append(ran)
        if spans and progress.current == DONE:
            node_s.append((max(e for _, e in spans) - min(b for b, _ in spans)).total_seconds())
    return Measured(stage_s=exact, node_s=node_s, censored_s=censored)


_NORMAL = statistics.NormalDist()


#: How many times the waves left are walked, every node a fresh draw of its time, the forecast
#: their mean: the expected end of a wave that ends with its slowest node. One evenly spread
#: set of draws hands its slow draws to whichever nodes come first in it; where the nodes
#: differ (those at work, each its own time in), the end is the slowest over all of them, and
#: one set of draws put the running wave's end early by up to 2 % in fleet_window. Sixteen
#: walks put the mean's own noise at a quarter of one walk's spread (a few seconds a wave).
TAIL_WALKS = 16


def _golden(i: int) -> float:
    """The ``i``-th point of a low-discrepancy sequence in (0, 1): draws spread evenly over
    the distribution in an order that looks random, the same every time (a pure function)."""
    return (0.5 + i * 0.6180339887498949) % 1.0


@dataclass(frozen=True, slots=True)
class NodeTime:
    """A node's time through its stages: lognormal with the measured mean and spread
    (durations are positive and skewed to the slow side; a sum of such stages is close to one)."""

    mean: float
    sigma: float

    def _log(self) -> tuple[float, float]:
        s2 = math.log1p((self.sigma / self.mean) ** 2)
        return math.log(self.mean) - s2 / 2, math.sqrt(s2)

    def sampler(self) -> Callable[[float], float]:
        """:meth:`quantile` with nothing done yet, its logarithms taken once (a wave draws
        a thousand nodes)."""
        if self.mean <= 0 or self.sigma <= 0:
            return lambda _u: max(self.mean, 0.0)
        mu, s = self._log()
        inv = _NORMAL.inv_cdf
        return lambda u: math.exp(mu + s * inv(min(max(u, 1e-9), 1.0 - 1e-9)))

    def quantile(self, u: float, *, beyond: float = 0.0) -> float:
        """The ``u`` quantile of the time, among the nodes that take longer than ``beyond``."""
        if self.mean <= 0 or self.sigma <= 0:
            return max(self.mean, beyond)
        mu, s = self._log()
        lower = _NORMAL.cdf((math.log(beyond) - mu) / s) if beyond > 0 else 0.0
        q = min(max(lower + (1.0 - lower) * u, 1e-9), 1.0 - 1e-9)
        return max(math.exp(mu + s * _NORMAL.inv_cdf(q)), beyond)


def rolling_s(
    nodes: int, slots: int, time: NodeTime, *, busy: Sequence[float] = (), draw: Callable[[int], float] = _golden
) -> float:
    """How long ``nodes`` take through ``slots`` that each start the next node as soon as the
    last one is through (the wave runner's admission), the slots first ``busy`` for the given
    seconds (the nodes at work); the wave ends with its last node. Each node takes its own
    draw from ``time`` (its ``draw(i)`` quantile), so the wave's tail (its slowest nodes,
    started last) is in it."""
    slots = max(1, slots)
    take = time.sampler()
    running = list(busy)
    heapq.heapify(running)
    last = max(busy, default=0.0)
    at = 0.0
    for i in range(nodes):
        while len(running) >= slots:  # the next node waits for a slot to free
            at = max(at, heapq.heappop(running))
        end = at + take(draw(i))
        last = max(last, end)
        heapq.heappush(running, end)
    return last


def wave_s(nodes: int, parallel: int, mean: float, sigma: float, failures: int = 0) -> float:
    """A wave of ``nodes`` at ``parallel`` at once, the failure budget's nodes holding their slots."""
    if nodes <= 0:
        return 0.0
    return rolling_s(nodes, max(1, parallel - failures), NodeTime(mean, sigma))


def mean_error(
    stage_s: Mapping[str, Sequence[float]], censored_s: Mapping[str, Sequence[float]] | None = None
) -> float:
    """The relative standard error of a node's mean time from the observations behind it: what
    the forecast of the waves left may be off by, one sigma."""
    return _relative_se(stage_fits(stage_s, censored_s))


def _relative_se(fits: Mapping[str, StageFit]) -> float:
    mean = sum(f.mean for f in fits.values())
    return math.sqrt(sum(f.se * f.se for f in fits.values())) / mean if mean > 0 else 0.0


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
    limit: int | None = None,
    by_hand_s: Sequence[float] = (),
    running_held: int = 0,
    censored_s: Mapping[str, Sequence[float]] | None = None,
    history: StageHistory | None = None,
) -> Forecast:
    """The window's end from the stage durations measured so far (``stage_s``).

    ``running_elapsed_s``: how long each node at work in the running wave has been at it;
    ``running_pending``: its nodes not started yet; ``waves_left``: the sizes of the waves
    not started; ``wave_gap_s``: a person's time between two waves (measured or assumed);
    ``limit``: the fleet's max unavailable (None: ``parallel`` alone bounds a wave);
    ``by_hand_s``: when the running wave is walked by a person (the canary, the second
    node), what a node walked by hand took on the clock, a person's time in it;
    ``running_held``: the running wave's failed nodes, holding their slots to its end;
    ``censored_s``: per stage, how long each node still in it has run its steps so far;
    ``history``: an earlier window's stages, lent to each stage measured now.
    """
    own = stage_fits(stage_s, censored_s)
    mean, sigma = node_time(own if history is None else stage_fits(stage_s, censored_s, history.stage_s))
    own_mean, _ = node_time(own)
    history_shift = abs(mean / own_mean - 1) if history is not None and own_mean > 0 else 0.0
    time = NodeTime(mean, sigma)
    slots = parallel if limit is None else max(1, min(parallel, limit))
    held = min(failure_budget, max(0, slots - 1))
    per_wave: list[float] = []
    walked = bool(by_hand_s and (running_elapsed_s or running_pending))
    if walked:
        # a person walks it: what a node took by hand, less what this one has done
        hand = statistics.fmean(by_hand_s)
        left = [max(hand - e, 0.0) for e in running_elapsed_s]
        per_wave.append(max(left, default=0.0) + running_pending * hand)
    running = not walked and bool(running_elapsed_s or running_pending or running_held)
    rng = random.Random(0)  # the same draws every time: the same forecast for the same measurements

    def draw(_: int) -> float:
        return rng.random()

    walks: list[list[float]] = []
    for _ in range(TAIL_WALKS):
        walk: list[float] = []
        if running:
            # the nodes at work finish their draws (among those slower than what they have done)
            busy = [time.quantile(draw(0), beyond=e) - e for e in running_elapsed_s]
            walk.append(rolling_s(running_pending, slots - running_held, time, busy=busy, draw=draw))
        walk.extend(wave_gap_s + rolling_s(size, slots - held, time, draw=draw) for size in waves_left)
        walks.append(walk)
    per_wave.extend(statistics.fmean(w[k] for w in walks) for k in range(len(walks[0])))
    left_s = sum(per_wave)
    machine = sum(per_wave[1:] if walked else per_wave)  # what the node's mean time drives
    # the band: what the node's mean time may be off by, and how the walks' ends spread (the
    # slowest nodes are drawn anew each window: known durations still leave that much). The
    # mean's error is this window's nodes' alone, and an earlier window may mislead by as much
    # as it moved the mean: how far it differs from this one is not known.
    luck = statistics.stdev(sum(w) for w in walks) if walks[0] else 0.0
    return Forecast(
        end=now + timedelta(seconds=left_s),
        left_s=left_s,
        per_wave_s=per_wave,
        samples=max((len(v) for v in stage_s.values()), default=0),
        window_end=window_end,
        spread_s=math.hypot(machine * _relative_se(own), luck, machine * history_shift),
        history=history.change_id if history is not None else None,
    )


def _node_span(state: CockpitState, name: str) -> tuple[datetime, datetime] | None:
    """When a node's first stage began and its last stage passed so far."""
    progress = state.nodes[name]
    spans = [span for sid in state.node_stage_order if (span := _stage_span(progress.stages[sid])) is not None]
    return (min(b for b, _ in spans), max(e for _, e in spans)) if spans else None


def _first_step(state: CockpitState, name: str) -> datetime | None:
    """When a node's first step started (None: none has)."""
    stages = state.nodes[name].stages.values()
    return min((s.started_at for st in stages for s in st.steps.values() if s.started_at is not None), default=None)


def wave_gaps_s(state: CockpitState, upto: int, *, since: int = 1) -> list[float]:
    """A person's time between two waves, as measured: from the last stage passed in a wave
    to the first step of the next, for the waves from ``since`` up to ``upto`` that have begun."""
    gaps: list[float] = []
    for wave in range(max(1, since), min(upto, len(state.waves) - 1) + 1):
        before = [_node_span(state, n) for n in state.waves[wave - 1]]
        after = [at for n in state.waves[wave] if (at := _first_step(state, n)) is not None]
        if not before or None in before or not after:
            continue
        ended = max(span[1] for span in before if span is not None)
        gaps.append(max(0.0, (min(after) - ended).total_seconds()))
    return gaps


def forecast_state(
    state: CockpitState,
    now: datetime,
    *,
    parallel: int | None = None,
    window_end: datetime | None = None,
    wave_gap_s: float | None = None,
    limit: int | None = None,
    by_hand_waves: int = 0,
    history: StageHistory | None = None,
) -> Forecast | None:
    """:func:`forecast` from the folded state; None until the canary is through.

    ``by_hand_waves``: the first waves a person walks step by step (the canary, the second
    node: :func:`cockpit.engine.waverun.first_auto_wave`); ``wave_gap_s``: None measures it
    (the gaps before the waves that ran themselves, once one has; until then every gap);
    ``history``: an earlier window's stages (:func:`stage_history`).
    """
    done = measured(state, now)
    if not done.node_s:  # the canary through its stages first
        return None
    current = state.current_wave
    elapsed: list[float] = []
    pending = 0
    held = 0
    if current is not None:
        for name in state.waves[current]:
            progress = state.nodes[name]
            # through, or never to run (a node of a started wave waits at its first stage)
            if progress.current in FINISHED or progress.current in (HELD, PENDING):
                continue
            if node_failed(state, name):  # it holds its slot, a person's to judge
                held += 1
                continue
            began = _first_step(state, name)
            if began is not None:
                elapsed.append(max(0.0, (now - began).total_seconds()))
            else:
                pending += 1
    later = state.waves if current is None else state.waves[current + 1 :]
    if not (elapsed or pending or held or later):
        return None  # every wave is through: no end to forecast ("0 min left" read as stale)
    by_hand: list[float] = []
    if current is not None and current < by_hand_waves:
        for wave in state.waves[:by_hand_waves]:
            for name in wave:
                span = _node_span(state, name)
                if span is not None and state.nodes[name].current == DONE:
                    by_hand.append((span[1] - span[0]).total_seconds())
    if wave_gap_s is None:
        # a wave left is started as a wave that runs itself is: one person's action, its node
        # set typed; the gaps after the waves walked by hand are a person's next step there
        gaps = wave_gaps_s(state, current or 0, since=max(1, by_hand_waves)) or wave_gaps_s(state, current or 0)
        wave_gap_s = statistics.fmean(gaps) if gaps else 0.0
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
        limit=limit,
        by_hand_s=by_hand,
        running_held=held,
        censored_s=done.censored_s,
        history=history,
    )


def stage_history(change_id: str, state: CockpitState, stages: Sequence[str]) -> StageHistory:
    """What an earlier window (``state``, folded from its log) lends this one's forecast: its
    measured durations of the node stages ``stages`` (this window's runbook's) it has in
    common. Raises :class:`BadInput` when it passed none of them."""
    passed = {sid: tuple(v) for sid, v in measured(state).stage_s.items() if v and sid in stages}
    if not passed:
        ours = ", ".join(stages) or "none"
        raise BadInput(f"window {change_id} passed none of this runbook's node stages ({ours}): nothing to learn from")
    return StageHistory(change_id, passed)


def stage_means(state: CockpitState) -> Mapping[str, float]:
    """The mean measured duration of each node stage (for a person reading the forecast)."""
    return {sid: statistics.fmean(v) for sid, v in measured(state).stage_s.items() if v}
