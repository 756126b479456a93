"""The window's forecast: pure arithmetic over measured stage durations, and the fold's
measurements of a real window on the simulated fleet."""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from gating_scenarios import take_planned

from cockpit.engine.forecast import (
    ASSUMED_CV,
    NodeTime,
    declared_end,
    fair_sample,
    forecast,
    forecast_state,
    mean_error,
    measured,
    node_mean_sigma,
    rolling_s,
    wave_gaps_s,
    wave_s,
)
from cockpit.engine.state import DONE
from cockpit.errors import BadInput
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


def test_a_stage_counts_only_the_nodes_that_began_it_before_the_first_still_in_it() -> None:
    # the canary's drain long ago; three nodes of a wave began together at 1000 s, two are
    # through (the quick ones), one is still draining: the two would say drains are quick
    seen = [(0.0, 130.0), (1000.0, 100.0), (1000.0, 110.0), (1000.0, None), (1400.0, 90.0)]
    assert fair_sample(seen) == [130.0]
    # once the slow one is through, the whole cohort counts, and the node after it still not
    seen[3] = (1000.0, 200.0)
    seen.append((1500.0, None))
    assert fair_sample(seen) == [130.0, 100.0, 110.0, 200.0, 90.0]
    assert fair_sample([]) == [] and fair_sample([(5.0, None)]) == []


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
    assert ahead.spread_s == pytest.approx(ahead.left_s * mean_error(canary))
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
