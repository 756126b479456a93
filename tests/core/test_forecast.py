"""The window's forecast: pure arithmetic over measured stage durations, and the fold's
measurements of a real window on the simulated fleet."""

from __future__ import annotations

import math
import random
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from gating_scenarios import take_planned

from cockpit.engine.durations import ASSUMED_CV, fit_stage, node_mean_sigma
from cockpit.engine.forecast import (
    NodeTime,
    declared_end,
    forecast,
    forecast_state,
    mean_error,
    measured,
    ran_so_far_s,
    rolling_s,
    wave_gaps_s,
    wave_s,
)
from cockpit.engine.state import DONE, ItemState, StageState, StepState
from cockpit.errors import BadInput
from cockpit.runbook.model import StepKind, Verify
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session

#: The simulated fleet's speed for the fold's measurements: the drain's 0.5 s eviction takes
#: 1.25 ms here, so every stage's steps add up to more than the millisecond a step's
#: recorded duration is rounded to (at 3000 the drain stage measured 0.0 s).
MEASURED_SPEED = 400.0
T0 = datetime(2026, 12, 5, 22, 0, tzinfo=UTC)
STAGES = {"drain": [60.0] * 10, "upgrade": [180.0] * 10, "reboot": [300.0] * 10}


def test_a_wave_is_slots_that_take_the_next_node_as_the_last_is_through() -> None:
    assert wave_s(10, 10, 600.0, 0.0) == 600.0
    assert wave_s(20, 10, 600.0, 0.0) == 1200.0
    assert wave_s(20, 10, 600.0, 60.0) > 1200.0  # the wave waits for its slowest nodes
    assert wave_s(20, 10, 600.0, 0.0, failures=5) == 2400.0  # five slots held by failed nodes
    # the slots are busy first: two nodes at work for 300 and 100 s more, one node to go
    assert rolling_s(1, 2, NodeTime(600.0, 0.0), busy=[300.0, 100.0]) == 700.0
    # more at work than slots (the bound shrank): the node waits for two to be through
    assert rolling_s(1, 2, NodeTime(600.0, 0.0), busy=[100.0, 200.0, 300.0]) == 800.0
    assert rolling_s(0, 2, NodeTime(600.0, 0.0), busy=[100.0, 300.0]) == 300.0


def test_rolling_slots_beat_rounds_that_wait_for_their_slowest() -> None:
    time = NodeTime(600.0, 120.0)
    rolling = rolling_s(1000, 200, time)
    # five rounds of 200, each waiting for its slowest node (about mean + 2.8 sigma), were the old
    # model: a slot that frees early takes the next node at once
    rounds = 5 * (600.0 + 120.0 * (2 * math.log(200)) ** 0.5)
    assert 5 * 600.0 < rolling < rounds
    assert rolling_s(1000, 200, time) == rolling  # the same measurements, the same forecast


def test_a_node_time_spreads_its_draws_over_its_quantiles() -> None:
    time = NodeTime(600.0, 120.0)
    draws = [time.quantile((i + 0.5) / 2000) for i in range(2000)]
    assert statistics.fmean(draws) == pytest.approx(600.0, rel=0.01)
    assert statistics.pstdev(draws) == pytest.approx(120.0, rel=0.05)
    assert time.quantile(0.5) < 600.0  # skewed: half the nodes are quicker than the mean
    # a node at work for 900 s is among the slow ones: it takes longer than that
    assert all(time.quantile(u, beyond=900.0) >= 900.0 for u in (0.01, 0.5, 0.99))
    assert time.quantile(0.5, beyond=900.0) > time.quantile(0.5)
    assert NodeTime(600.0, 0.0).quantile(0.9) == 600.0


def test_spread_is_added_per_stage_and_pooled_where_too_few_nodes_were_seen() -> None:
    mean, sigma = node_mean_sigma(STAGES)
    assert mean == 540.0 and sigma == 0.0
    # the canary alone: no spread measured anywhere, the assumed one
    mean, sigma = node_mean_sigma({"drain": [60.0], "reboot": [300.0]})
    assert mean == 360.0
    assert sigma == pytest.approx(ASSUMED_CV * (60.0**2 + 300.0**2) ** 0.5)
    # two nodes: the stages' relative variances pooled (one degree of freedom each)
    two = {"drain": [50.0, 70.0], "reboot": [270.0, 330.0]}
    rel = ((200.0 / 60.0**2 + 1800.0 / 300.0**2) / 2) ** 0.5  # sample variances 200 and 1800
    mean, sigma = node_mean_sigma(two)
    assert mean == 360.0
    assert sigma == pytest.approx(rel * (60.0**2 + 300.0**2) ** 0.5, rel=1e-6)
    # a stage seen on enough nodes keeps its own spread
    many = {"drain": [50.0, 70.0] * 5, "reboot": [300.0]}
    _, sigma = node_mean_sigma(many)
    drain_sd = statistics.stdev(many["drain"])  # and lends its relative spread to reboot
    assert sigma == pytest.approx((drain_sd**2 + (300.0 * drain_sd / 60.0) ** 2) ** 0.5)
    # the mean's own error shrinks as nodes are measured
    one = ASSUMED_CV * (60.0**2 + 300.0**2) ** 0.5 / 360.0
    assert mean_error({"drain": [60.0], "reboot": [300.0]}) == pytest.approx(one)
    assert mean_error({"drain": [60.0] * 9 + [61.0], "reboot": [300.0] * 9 + [301.0]}) < one / 10


def test_the_forecast_warns_when_the_waves_left_do_not_fit() -> None:
    left = forecast(
        now=T0,
        stage_s=STAGES,
        running_elapsed_s=[100.0, 200.0],
        running_pending=0,
        waves_left=[10, 10],
        parallel=10,
        wave_gap_s=60.0,
        window_end=T0 + timedelta(minutes=20),
    )
    assert left.per_wave_s == [440.0, 600.0, 600.0]
    assert left.end == T0 + timedelta(seconds=1640)
    assert left.fits is False and left.late_by_s == 440.0
    assert "WILL NOT FIT" in left.words() and "22:27" in left.words()
    roomy = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[], running_pending=0, waves_left=[10], parallel=10,
        window_end=T0 + timedelta(hours=1),
    )  # fmt: skip
    assert roomy.fits is True and "WILL NOT FIT" not in roomy.words()


def cohort(at: float) -> tuple[list[float], list[float], float]:
    """Two hundred nodes entering a stage over 100 s (lognormal durations, mean 300 s, relative
    spread 0.2, spread evenly over their quantiles in a shuffled order), seen ``at`` s after the
    first: the durations of those through, the time so far of those still in it, the true mean."""
    time = NodeTime(300.0, 60.0)
    took = [time.quantile((0.5 + i * 0.6180339887498949) % 1.0) for i in range(200)]
    began = [i * 0.5 for i in range(200)]
    through = [d for b, d in zip(began, took, strict=True) if b + d <= at]
    still = [at - b for b, d in zip(began, took, strict=True) if b + d > at]
    return through, still, statistics.fmean(took)


def test_a_stage_counts_the_nodes_still_in_it_as_taking_at_least_their_time_so_far() -> None:
    # 320 s in: the quick ones are through, most of the cohort still in the stage
    through, still, truth = cohort(320.0)
    assert 20 < len(through) < 150 and still
    assert statistics.fmean(through) < 0.9 * truth  # those through first are the quick ones
    fit = fit_stage(through, still, 0.15)
    assert fit.mean == pytest.approx(truth, rel=0.03)
    assert fit.sd == pytest.approx(60.0, rel=0.2)
    assert fit.seen == len(through) and 0 < fit.se < 0.03 * truth
    # the whole cohort through: its plain mean and spread
    done, none_left, _ = cohort(10_000.0)
    assert not none_left
    whole = fit_stage(done, [], 0.15)
    assert whole.mean == statistics.fmean(done) and whole.sd == statistics.stdev(done)
    # two nodes through (the canary's and the second's): the pooled spread, and the nodes
    # still in it pull the mean up only where they have been in it longer than it says
    two = fit_stage([280.0, 320.0], [], 0.2)
    assert two.mean == 300.0 and two.sd == pytest.approx(60.0)
    early = fit_stage([280.0, 320.0], [30.0] * 100, 0.2)  # just begun: they say nothing yet
    # (the fitted lognormal's mean of the two, a little above their plain mean)
    assert early.mean == pytest.approx(300.0, rel=0.025) and early.se == pytest.approx(two.se, rel=0.05)
    late = fit_stage([280.0, 320.0], [400.0] * 10, 0.2)  # ten still in it after 400 s
    assert late.mean > 400.0 and late.se < two.se


def test_a_stage_keeps_its_own_spread_only_where_its_nodes_pin_it() -> None:
    # six through, all quicker than the 190 still in it at 230 s: a fit, but the quick ones
    # say little of how far the slow ones go (under four nodes' worth): the pooled spread
    quick = [200.0, 205.0, 210.0, 215.0, 220.0, 225.0]
    narrow, wide = fit_stage(quick, [230.0] * 190, 0.2), fit_stage(quick, [230.0] * 190, 0.3)
    assert 230.0 < narrow.mean < wide.mean and narrow.sd < wide.sd
    # the same six, the slow ones through as well and the rest just begun: their own spread
    spread = [150.0, 200.0, 250.0, 300.0, 350.0, 400.0, 450.0, 500.0]
    own = fit_stage(spread, [20.0] * 190, 0.2)
    assert own == fit_stage(spread, [20.0] * 190, 0.3)
    assert own.sd / own.mean > 0.3  # theirs, not the pool's
    # nodes just begun say nothing: as sure of its mean as the eight through alone (whose
    # mean's error takes their spread's own uncertainty in: the fit's, not a pool's)
    assert own.se == pytest.approx(fit_stage(spread, [], 0.2).se, rel=0.1)


def test_a_node_still_in_a_stage_counts_its_steps_run_not_a_persons_time() -> None:
    stage = StageState("reboot", "Reboot", "node", node="gpu03", status="active")
    first = StepState("drain", "Drain", StepKind.COMMAND, True, status="done", started_at=T0, duration_s=40.0)
    # the second step started 100 s after the first (a person's time between them): 30 s in
    second = StepState(
        "reboot", "Reboot", StepKind.REBOOT, True, status="running", started_at=T0 + timedelta(seconds=100)
    )
    stage.steps = {"drain": first, "reboot": second}
    assert ran_so_far_s(stage, T0 + timedelta(seconds=130)) == 70.0
    stage.steps["reboot"] = StepState("reboot", "Reboot", StepKind.REBOOT, True)  # not started: its drain only
    assert ran_so_far_s(stage, T0 + timedelta(seconds=130)) == 40.0
    assert ran_so_far_s(StageState("smoke", "Smoke", "node"), T0) is None  # no step started
    # a command item's run (a smoke's dcgm-diag) is the machines' time in the stage too
    smoke = StageState("smoke", "Smoke", "node", node="gpu03", status="active")
    smoke.items = {"dcgm-diag": ItemState("dcgm-diag", "DCGM diag", Verify.COMMAND, status="done", duration_s=600.0)}
    assert ran_so_far_s(smoke, T0) == 600.0
    smoke.steps = {
        "probe": StepState("probe", "Probe", StepKind.COMMAND, True, status="done", started_at=T0, duration_s=3.0)
    }
    assert ran_so_far_s(smoke, T0) == 603.0


def test_the_nodes_at_work_end_with_the_expected_slowest_of_them() -> None:
    # twelve nodes at work, 0 to 440 s in: the wave ends with the slowest of their rests
    stages = {"drain": [100.0, 140.0] * 50, "reboot": [250.0, 350.0] * 50}
    time = NodeTime(*node_mean_sigma(stages))
    elapsed = [i * 40.0 for i in range(12)]
    rng = random.Random(1)
    expected = statistics.fmean(max(time.quantile(rng.random(), beyond=e) - e for e in elapsed) for _ in range(10_000))
    ahead = forecast(
        now=T0, stage_s=stages, running_elapsed_s=elapsed, running_pending=0, waves_left=[], parallel=20,
    )  # fmt: skip
    assert ahead.per_wave_s[0] == pytest.approx(expected, rel=0.03)
    # one set of draws spread evenly over the nodes in their order hands the slow draws to
    # whichever come first: early
    one = max(time.quantile((0.5 + i * 0.6180339887498949) % 1.0, beyond=e) - e for i, e in enumerate(elapsed))
    assert one < 0.96 * expected


def test_the_header_says_late_against_the_declared_end() -> None:
    late = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[], running_pending=0, waves_left=[10, 10], parallel=5,
        window_end=T0 + timedelta(minutes=30),
    )  # fmt: skip
    assert late.per_wave_s == [1080.0, 1080.0]  # two rounds of five each
    assert late.short() == "ends ~22:36, 6 min LATE"
    on_time = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[], running_pending=0, waves_left=[10, 10], parallel=10,
        window_end=T0 + timedelta(minutes=30),
    )  # fmt: skip
    assert on_time.short() == "ends ~22:18" and on_time.fits is True
    assert forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[], running_pending=0, waves_left=[10], parallel=10,
    ).fits is None  # fmt: skip
    # two hours late reads in hours
    slow = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[], running_pending=0, waves_left=[100], parallel=1,
        window_end=T0 + timedelta(hours=13),
    )  # fmt: skip
    assert slow.short() == "ends ~13:00, 2h00 LATE"


def test_max_unavailable_bounds_the_slots_and_failures_hold_theirs() -> None:
    bounded = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[], running_pending=0, waves_left=[20], parallel=20, limit=5,
    )  # fmt: skip
    assert bounded.per_wave_s == [4 * 540.0]
    held = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[], running_pending=0, waves_left=[20], parallel=10,
        failure_budget=5,
    )  # fmt: skip
    assert held.per_wave_s == [4 * 540.0]
    # the running wave's failed nodes hold their slots: ten to go through five
    failed = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[], running_pending=10, waves_left=[], parallel=10,
        running_held=5,
    )  # fmt: skip
    assert failed.per_wave_s == [2 * 540.0]


def test_a_wave_walked_by_hand_takes_what_the_canary_took_on_the_clock() -> None:
    # the canary took 1500 s by hand (540 of them the machines'); the second node is 600 s in
    ahead = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[600.0], running_pending=0, waves_left=[10], parallel=10,
        by_hand_s=[1500.0], wave_gap_s=60.0,
    )  # fmt: skip
    assert ahead.per_wave_s == [900.0, 600.0]
    machines = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[600.0], running_pending=0, waves_left=[10], parallel=10,
    )  # fmt: skip
    assert machines.per_wave_s[0] == 0.0  # the machines' time alone: past it already


def test_the_band_comes_from_how_few_nodes_were_measured() -> None:
    canary = {"drain": [120.0], "upgrade": [240.0], "reboot": [300.0]}
    ahead = forecast(
        now=T0, stage_s=canary, running_elapsed_s=[], running_pending=0, waves_left=[1000], parallel=200,
    )  # fmt: skip
    sample = ahead.left_s * mean_error(canary)
    # the sample's error, and a little of the walks' own spread: the slowest nodes drawn anew
    assert sample < ahead.spread_s < 1.05 * sample
    # ten thousand nodes measured: the mean is known, the wave's slowest nodes are not
    known = {"drain": [100.0, 140.0] * 5000, "reboot": [250.0, 350.0] * 5000}
    luck = forecast(
        now=T0, stage_s=known, running_elapsed_s=[], running_pending=0, waves_left=[1000], parallel=200,
    )  # fmt: skip
    assert luck.left_s * mean_error(known) < 5.0 < luck.spread_s < 0.05 * luck.left_s
    again = forecast(
        now=T0, stage_s=known, running_elapsed_s=[], running_pending=0, waves_left=[1000], parallel=200,
    )  # fmt: skip
    assert again == luck  # the walks' draws are fixed: the same measurements, the same forecast
    # a wave of like nodes: the walks' mean end and one walk with its draws spread evenly
    # agree within the walks' spread
    mean, sigma = node_mean_sigma(known)
    assert abs(luck.left_s - rolling_s(1000, 200, NodeTime(mean, sigma))) < luck.spread_s / 4
    assert ahead.spread_s > 60 and "±" in ahead.words()
    exact = forecast(
        now=T0, stage_s=STAGES, running_elapsed_s=[], running_pending=0, waves_left=[10], parallel=10,
    )  # fmt: skip
    assert exact.spread_s == 0.0 and "±" not in exact.words()


@pytest.mark.timeout(120)
async def test_the_fold_measures_the_canary_and_forecasts_from_it(tmp_path: Path) -> None:
    params = {"reboot_timeout_s": 5, "drain_timeout_s": 3, "wave_size": 2}
    async with demo_session(
        in_process=True, nodes=4, scenario="happy", sessions_dir=tmp_path, speed=MEASURED_SPEED, params=params
    ) as (
        session,
        _fleet,
    ):
        assert forecast_state(session.state, T0) is None  # nothing measured before the canary
        while session.state.nodes["gpu01"].current != DONE:
            await take_planned(session)
        seen = measured(session.state)
        assert len(seen.node_s) == 1
        # a stage's time is its steps' time, never longer than the stage took on the clock
        for sid in ("drain", "upgrade", "reboot"):
            assert len(seen.stage_s[sid]) == 1 and seen.stage_s[sid][0] > 0
        # the smoke's command items (dcgm-diag, the smallest model served) count as its steps do
        smoke = session.state.nodes["gpu01"].stages["smoke"]
        items = [i.duration_s for i in smoke.items.values() if i.duration_s is not None]
        steps = [s.duration_s for s in smoke.steps.values() if s.duration_s is not None]
        assert len(items) >= 3 and sum(items) > sum(steps)
        assert seen.stage_s["smoke"] == [pytest.approx(sum(steps) + sum(items))]
        now = session.clock()
        ahead = forecast_state(session.state, now)
        assert ahead is not None and ahead.end > now
        assert len(ahead.per_wave_s) == 2  # the second node's wave and the last, waves 2 and 3
        canary_clock = seen.node_s[0]
        assert canary_clock >= sum(v[0] for v in seen.stage_s.values() if v)  # a person's time in it

        # the second node, walked by hand: its wave takes what the canary took on the clock
        while not started_at(session, "gpu02"):
            await take_planned(session)
        now = session.clock()
        by_hand = forecast_state(session.state, now, by_hand_waves=2, wave_gap_s=0.0)
        assert by_hand is not None and len(by_hand.per_wave_s) == 2
        elapsed = (now - started_at(session, "gpu02")[0]).total_seconds()
        assert by_hand.per_wave_s[0] == pytest.approx(max(canary_clock - elapsed, 0.0))
        machines = forecast_state(session.state, now, wave_gap_s=0.0)  # as if the machines alone walked it
        # a person's time between the canary's last stage passed and the second's first step
        canary_passed = max(
            st.passed_at for st in session.state.nodes["gpu01"].stages.values() if st.passed_at is not None
        )
        gap = (started_at(session, "gpu02")[0] - canary_passed).total_seconds()
        assert wave_gaps_s(session.state, 1) == [pytest.approx(max(gap, 0.0))]
        assert wave_gaps_s(session.state, 0) == []
        assert machines is not None and machines.per_wave_s[0] != by_hand.per_wave_s[0]

        # the last wave at work, one at a time: gpu04 waits for gpu03's slot and is counted
        while not started_at(session, "gpu03"):
            await take_planned(session)
        assert not started_at(session, "gpu04")
        now = session.clock()
        # gpu03 is in its first stage: it has run its steps there for a while (its cordon took
        # under a millisecond), no longer than since its first step began; the nodes through
        # (and gpu04, not begun) are not in it
        stage = session.state.nodes["gpu03"].current
        censored = measured(session.state, now).censored_s
        assert [len(v) for v in censored.values()] == [1 if sid == stage else 0 for sid in censored]
        assert 0 <= censored[stage][0] <= (now - started_at(session, "gpu03")[0]).total_seconds()
        assert not any(measured(session.state).censored_s.values())  # no clock, no time so far
        # the gap before the wave that runs itself is its own: the one the waves left will take
        gpu02_passed = max(
            st.passed_at for st in session.state.nodes["gpu02"].stages.values() if st.passed_at is not None
        )
        into_auto = (started_at(session, "gpu03")[0] - gpu02_passed).total_seconds()
        assert wave_gaps_s(session.state, 2, since=2) == [pytest.approx(max(into_auto, 0.0))]
        assert len(wave_gaps_s(session.state, 2)) == 2
        running = forecast_state(session.state, now, parallel=1, by_hand_waves=2, wave_gap_s=0.0)
        mean, _ = node_mean_sigma(measured(session.state).stage_s)
        assert running is not None and len(running.per_wave_s) == 1
        assert running.per_wave_s[0] > mean  # gpu03's rest, then all of gpu04
        both = forecast_state(session.state, now, parallel=2, by_hand_waves=2, wave_gap_s=0.0)
        assert both is not None and both.per_wave_s[0] < running.per_wave_s[0]  # side by side


def started_at(session: Session, node: str) -> list[datetime]:
    """When the node's steps started so far, the first first."""
    stages = session.state.nodes[node].stages.values()
    return sorted(s.started_at for st in stages for s in st.steps.values() if s.started_at is not None)


def test_the_declared_end_is_an_iso_time_or_nothing() -> None:
    assert declared_end({}) is None and declared_end({"window_end": ""}) is None
    assert declared_end({"window_end": "2026-12-06T04:00Z"}) == datetime(2026, 12, 6, 4, 0, tzinfo=UTC)
    assert declared_end({"window_end": "2026-12-06T04:00"}) == datetime(2026, 12, 6, 4, 0, tzinfo=UTC)
    with pytest.raises(BadInput, match="not a time"):
        declared_end({"window_end": "after lunch"})
