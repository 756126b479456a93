"""The window's forecast: pure arithmetic over measured stage durations, and the fold's
measurements of a real window on the simulated fleet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from gating_scenarios import take_planned

from cockpit.engine.forecast import (
    declared_end,
    expected_round_s,
    forecast,
    forecast_state,
    measured,
    node_mean_sigma,
    wave_s,
)
from cockpit.engine.state import DONE
from cockpit.errors import BadInput
from cockpit.session.demo import demo_session

T0 = datetime(2026, 12, 5, 22, 0, tzinfo=UTC)
STAGES = {"drain": [60.0] * 10, "upgrade": [180.0] * 10, "reboot": [300.0] * 10}


def test_a_wave_is_rounds_of_its_parallelism_plus_its_slowest_slot() -> None:
    assert wave_s(10, 10, 600.0, 0.0) == 600.0
    assert wave_s(20, 10, 600.0, 0.0) == 1200.0
    assert wave_s(20, 10, 600.0, 60.0) > 1200.0  # the slowest of ten slots is late
    assert wave_s(20, 10, 600.0, 0.0, failures=5) == 2400.0  # five slots held by failed nodes
    assert expected_round_s(600.0, 60.0, 1) == 600.0


def test_spread_is_added_per_stage_and_borrowed_where_too_few_nodes_were_seen() -> None:
    mean, sigma = node_mean_sigma(STAGES)
    assert mean == 540.0 and sigma == 0.0
    few = {"drain": [50.0, 70.0] * 5, "reboot": [300.0]}  # drain's spread lends reboot its own
    mean, sigma = node_mean_sigma(few)
    assert mean == 360.0
    assert sigma == pytest.approx(((10.0) ** 2 + (300.0 * 10.0 / 60.0) ** 2) ** 0.5)


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


@pytest.mark.timeout(120)
async def test_the_fold_measures_the_canary_and_forecasts_from_it(tmp_path: Path) -> None:
    params = {"reboot_timeout_s": 5, "drain_timeout_s": 3, "wave_size": 2}
    async with demo_session(
        in_process=True, nodes=4, scenario="happy", sessions_dir=tmp_path, speed=100.0, params=params
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


def test_the_declared_end_is_an_iso_time_or_nothing() -> None:
    assert declared_end({}) is None and declared_end({"window_end": ""}) is None
    assert declared_end({"window_end": "2026-12-06T04:00Z"}) == datetime(2026, 12, 6, 4, 0, tzinfo=UTC)
    assert declared_end({"window_end": "2026-12-06T04:00"}) == datetime(2026, 12, 6, 4, 0, tzinfo=UTC)
    with pytest.raises(BadInput, match="not a time"):
        declared_end({"window_end": "after lunch"})
