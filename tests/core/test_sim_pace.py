"""The simulated fleet's pace: ``speed`` times real time, also for waits shorter than the
event loop keeps (a millisecond: epoll rounds a timeout up), which are owed per task and
slept together instead of each taking a whole millisecond."""

from __future__ import annotations

import asyncio

import pytest

from cockpit.sim.fleet import MIN_REAL_WAIT_S, SimFleet


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[float]]:
    """The real waits each task asked the event loop for, through the fleet (0: a yield)."""
    asked: dict[str, list[float]] = {}
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        task = asyncio.current_task()
        asked.setdefault(task.get_name() if task else "", []).append(delay)
        await real_sleep(0)  # the test is about what is asked, not the clock

    monkeypatch.setattr(asyncio, "sleep", sleep)  # the fleet module's asyncio is this one
    return asked


async def test_short_waits_are_owed_per_task_and_slept_together(slept: dict[str, list[float]]) -> None:
    fleet = SimFleet(1, speed=1000.0)

    async def stream(lines: int, each_s: float) -> None:
        for _ in range(lines):
            await fleet.sleep(each_s)  # 0.3 ms of real time each at this speed

    await asyncio.gather(asyncio.create_task(stream(20, 0.3), name="a"), asyncio.create_task(stream(5, 0.3), name="b"))
    a, b = slept["a"], slept["b"]
    assert len(a) == 20 and len(b) == 5  # every wait yields to the others
    waits = [d for d in a if d > 0]
    assert all(d >= MIN_REAL_WAIT_S for d in waits)  # never a wait the loop would round up
    # all but the last few owed tenths of a millisecond slept: 20 x 0.3 ms, to within one wait
    assert sum(waits) == pytest.approx(0.006, abs=MIN_REAL_WAIT_S)
    assert sum(b) == pytest.approx(0.0012)  # the other task's account is its own (4 x 0.3 ms, then 1.2)


async def test_a_wait_the_loop_keeps_is_slept_as_asked(slept: dict[str, list[float]]) -> None:
    fleet = SimFleet(1, speed=100.0)

    async def one() -> None:
        await fleet.sleep(0.5)  # 5 ms

    await asyncio.create_task(one(), name="c")
    assert slept["c"] == [pytest.approx(0.005)]
