"""`k` pressed while a step's SSH channel is still opening: the step records the operator's
cancel, and the node's command never runs (or is stopped the moment its channel opens),
on a slow link where the channel's open confirmation itself arrives late.

Real parts only: the simulated fleet's `slow` scenario behind real SSH, the session engine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from gating_scenarios import take_planned_until

from cockpit.changelog.events import StepFinishedEvent
from cockpit.changelog.journal import read_session
from cockpit.engine.state import CANCELLED_OUTCOME
from cockpit.session.demo import demo_session

pytestmark = pytest.mark.ssh  # the simulator's SSH server: tests/conftest.py SLOW_MARKS

#: the slow scenario's 0.3 s per reply, stretched for the moment of the cancel: its open
#: confirmation is 1 s late, a window no loaded machine misses
SLOW_LINK_SPEED = 0.3


@pytest.mark.timeout(120)
async def test_a_cancel_while_the_channel_opens_stops_the_install_before_it_runs(tmp_path: Path) -> None:
    async with demo_session(nodes=2, scenario="slow", sessions_dir=tmp_path, speed=100.0) as (session, fleet):
        # Next, fast, up to the canary's install (its first command opens a channel)
        action = await take_planned_until(session, "upgrade", "install")
        node = fleet.nodes["gpu01"]
        packages = dict(node.packages.installed)
        assert session.transport is not None
        conn = session.transport._hosts["gpu01"].conn  # the pooled connection the step will use
        assert conn is not None and not conn.is_closed()
        fleet.speed = SLOW_LINK_SPEED
        task = asyncio.create_task(session.perform(action, confirmation="gpu01"))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not session.running and loop.time() < deadline:
            await asyncio.sleep(0.005)
        assert session.running, "the install never started"
        opening_channels = len(conn._channels)  # asyncssh's open channels (no public way to count them)
        session.steps.request_cancel("upgrade", "install", "gpu01")  # what `k` does
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the late open confirmation, the slow link's delay before the command: both passed
        for _ in range(int(4 / 0.05)):
            await asyncio.sleep(0.05)
            if not conn._channels:
                break
        assert not conn._channels, f"a channel of the cancelled step is left open ({opening_channels} were opening)"
        assert node.packages.installed == packages  # apt-get never ran
        finished = [
            e for e in read_session(session.path).events if isinstance(e, StepFinishedEvent) and e.step == "install"
        ]
        assert len(finished) == 1
        assert finished[0].facts.error_kind == "cancelled" and finished[0].facts.error == CANCELLED_OUTCOME
        fleet.speed = 100.0
