"""`q` while a wave runs itself and one of its nodes' command items (smoke's smallest-serve)
is running: the cockpit asks first, naming the wave and the check and what becomes of each;
answered y, the wave stops before the pause is written and the check cut by the quit is
recorded neither failed nor at all: the change log ends with session-paused.

Real parts: the simulated fleet over SSH, the real screen through the pilot, the change log
read back from disk. The canary and the second node are walked headless (the planner's Next,
as `n` takes it); the check is held open once it started, so the key comes while it runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from gating_scenarios import take_planned
from pilot_idle import until
from textual.widgets import Input

from cockpit.changelog.events import EventKind
from cockpit.engine.actions import StartWave
from cockpit.engine.waverun import first_auto_wave
from cockpit.fleet.outcomes import ItemCheck
from cockpit.runbook.model import Item
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.demo import demo_session
from screens.app import build_app
from screens.modals import ConfirmDestructive, ConfirmQuit

PARAMS: dict[str, ParamValue] = {"reboot_timeout_s": 5, "drain_timeout_s": 3, "wave_size": 4, "max_parallel": 2}


class HeldItem:
    """The real executor's command-item run; the first ``item`` run is held (running on its
    node) until the test lets it go."""

    def __init__(self, real: Callable[..., Awaitable[ItemCheck]], item: str) -> None:
        self.real, self.item = real, item
        self.node: str | None = None
        self.waiting, self.release = asyncio.Event(), asyncio.Event()

    async def __call__(self, spec: Item, node: str | None = None, **kw: Any) -> ItemCheck:
        run = asyncio.ensure_future(self.real(spec, node, **kw))
        if spec.id == self.item and not self.waiting.is_set():
            self.node = node
            self.waiting.set()
            await self.release.wait()
        return await run


@pytest.mark.timeout(300)
async def test_q_during_a_waves_command_item_asks_and_records_nothing_after_the_pause(ui, tmp_path: Path) -> None:
    async with demo_session(
        nodes=6, scenario="happy", sessions_dir=tmp_path, change_id="CHG-R1", speed=100.0, params=PARAMS
    ) as (session, _fleet):
        first = first_auto_wave(session.runbook)
        for _ in range(2000):  # the canary and the second node, as n walks them
            action = session.next_action(ui.DEMO_REVIEWER)
            if isinstance(action, StartWave) and action.wave == first:
                break
            await take_planned(session)
        held = HeldItem(session.executor.verify_item_command, "smallest-serve")
        session.executor.verify_item_command = held  # type: ignore[method-assign,assignment]
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(120, 40)) as pilot:
            await ui.settle(pilot)
            app.simulate_key("W")
            await until(
                lambda: isinstance(app.screen, ConfirmDestructive) and bool(app.screen.query(Input)),
                "the wave dialog",
                timeout=60,
            )
            app.screen.query_one(Input).focus()
            await ui.settle(pilot)  # types the wave's node set and confirms
            await asyncio.wait_for(held.waiting.wait(), 120)  # a node's smallest-serve runs
            await pilot.press("q")
            await until(lambda: isinstance(app.screen, ConfirmQuit), "the question before quitting", timeout=60)
            question = app.screen
            assert isinstance(question, ConfirmQuit)
            assert any(line.startswith("wave ") and "W takes it on again" in line for line in question.also)
            assert f"verify smoke/smallest-serve on {held.node}: its command is cut" in "\n".join(question.also)
            await pilot.press("y")
            await asyncio.sleep(0.3)  # the quit under way: the wave stops, then the pause
            held.release.set()
            await until(lambda: app.closed_cleanly, "the quit", timeout=60)
    events = ui.events(session)
    paused = [e.seq for e in events if e.kind is EventKind.SESSION_PAUSED]
    assert len(paused) == 1 and events[-1].seq == paused[0], [(e.seq, e.kind, e.node) for e in events[-3:]]
    assert not [
        e for e in events if e.kind is EventKind.ITEM_VERIFIED and (e.item, e.node) == ("smallest-serve", held.node)
    ]
    assert not [e for e in events if e.kind is EventKind.ITEM_VERIFIED and e.facts.ok is False]
    assert EventKind.WAVE_HALTED not in [e.kind for e in events]
