"""Wave planning: canary first, then the fixed sizes, then waves of ``rest``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.errors import BadInput
from cockpit.runbook.model import Waves
from cockpit.runbook.waves import plan_waves, resolve_int


def hosts(n: int) -> list[str]:
    return [f"gpu{i:02d}" for i in range(1, n + 1)]


def test_canary_then_second_then_rest_from_parameter() -> None:
    plan = plan_waves(hosts(8), Waves(sizes=[1, 1], rest="wave_size"), {"wave_size": 4})
    assert plan == [["gpu01"], ["gpu02"], ["gpu03", "gpu04", "gpu05", "gpu06"], ["gpu07", "gpu08"]]


def test_fewer_hosts_than_fixed_waves_plans_only_what_exists() -> None:
    assert plan_waves(["gpu01"], Waves(sizes=[1, 1], rest=0), {}) == [["gpu01"]]


def test_fleet_not_covered_is_refused() -> None:
    with pytest.raises(BadInput, match="cover only 2"):
        plan_waves(hosts(3), Waves(sizes=[1, 1], rest=0), {})


def test_duplicate_and_empty_fleets_are_refused() -> None:
    with pytest.raises(BadInput, match="twice"):
        plan_waves(["gpu01", "gpu01"], Waves(), {})
    with pytest.raises(BadInput, match="no hosts"):
        plan_waves([], Waves(), {})


def test_resolve_int_takes_ints_parameter_names_and_digit_text() -> None:
    assert resolve_int(3, {}) == 3
    assert resolve_int("wave_size", {"wave_size": 5}) == 5
    assert resolve_int("wave_size", {"wave_size": "6"}) == 6
    with pytest.raises(BadInput, match="no value"):
        resolve_int("wave_size", {})
    with pytest.raises(BadInput, match="must be an integer"):
        resolve_int("wave_size", {"wave_size": "four"})
    with pytest.raises(BadInput, match="must be an integer"):
        resolve_int("flag", {"flag": True})


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=40),
    sizes=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=3),
    rest=st.integers(min_value=1, max_value=6),
)
def test_every_host_lands_in_exactly_one_wave_in_order(n: int, sizes: list[int], rest: int) -> None:
    fleet = hosts(n)
    plan = plan_waves(fleet, Waves(sizes=sizes, rest=rest), {})
    assert [h for wave in plan for h in wave] == fleet
    assert all(wave for wave in plan)
    for i, wave in enumerate(plan[: len(sizes)]):
        assert len(wave) <= sizes[i]
    assert all(len(wave) <= rest for wave in plan[len(sizes) :])
