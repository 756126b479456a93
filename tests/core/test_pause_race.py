"""A pause that comes while a step's command has come back but waits its turn to be recorded
(:mod:`cockpit.session.pacing`): the outcome is known, so the pause records it, once; the
step is never written both as interrupted and then with its outcome after the pause."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from gating_scenarios import take_planned, take_planned_until
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import EventKind, StepFinishedEvent
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import StartWave
from cockpit.engine.waverun import confirmation_text, first_auto_wave
from cockpit.fleet.executor import ItemCheck
from cockpit.runbook.model import Item
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.demo import demo_session
from cockpit.session.pacing import Pacer
from cockpit.session.waves import WaveRunner


class HeldRecords(Pacer):
    """The real pacer, except that a step's record waits until the test lets it go: the
    moment between a command's return and its record, held open on purpose."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def turn_to_record(self) -> bool:
        self.waiting.set()
        await self.release.wait()
        return await super().turn_to_record()


async def test_a_pause_records_a_returned_steps_outcome_once(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-RACE",
        speed=IN_PROCESS_WALK_SPEED,
    ) as (session, _fleet):  # fmt: skip
        action = await take_planned_until(session, "drain", "cordon")
        held = HeldRecords()
        session.recorder.pacer = held
        task = asyncio.create_task(session.steps.run_step(action.stage, action.step, action.node))
        await held.waiting.wait()  # the command came back; its record waits its turn
        session.pause("paused while a step's record waited")
        held.release.set()
        outcome = await task
        assert outcome.ok, outcome.error
        path = session.path
    events = read_session(path).events
    finished = [
        e
        for e in events
        if isinstance(e, StepFinishedEvent) and (e.stage, e.step, e.node) == ("drain", "cordon", action.node)
    ]
    assert len(finished) == 1, [(e.seq, e.facts.ok, e.facts.error_kind) for e in finished]
    assert finished[0].facts.ok is True and finished[0].facts.error_kind is None
    paused = next(e for e in events if e.kind is EventKind.SESSION_PAUSED)
    assert finished[0].seq < paused.seq  # recorded by the pause, before it


async def test_a_pause_while_the_command_runs_still_records_it_interrupted(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-RACE2",
        speed=IN_PROCESS_WALK_SPEED,
    ) as (session, fleet):  # fmt: skip
        action = await take_planned_until(session, "drain", "drain")
        fleet.speed = 1.0  # the simulated drain takes real time: in flight when paused
        task = asyncio.create_task(session.steps.run_step(action.stage, action.step, action.node))
        while not session.steps.running:
            await asyncio.sleep(0.01)
        session.pause("paused while a step ran")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        path = session.path
    finished = [
        e
        for e in read_session(path).events
        if isinstance(e, StepFinishedEvent) and (e.stage, e.step) == ("drain", "drain")
    ]
    assert [(e.facts.ok, e.facts.error_kind) for e in finished] == [(False, "interrupted")]


class HeldCommandItem:
    """The real executor's command-item run, except that a wave node's smoke ``smallest-serve``
    run is held once it started, until the test lets it go: a check in flight, on purpose."""

    def __init__(self, real: Callable[..., Awaitable[ItemCheck]], item: str) -> None:
        self.real = real
        self.item = item
        self.node: str | None = None
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()
        self.done = asyncio.Event()

    async def __call__(self, spec: Item, node: str | None = None, **kw: Any) -> ItemCheck:
        run = asyncio.ensure_future(self.real(spec, node, **kw))
        if spec.id != self.item or self.waiting.is_set():
            return await run
        self.node = node
        self.waiting.set()
        await self.release.wait()
        try:
            return await run
        finally:
            self.done.set()


@pytest.mark.timeout(240)
async def test_a_pause_while_a_waves_command_item_runs_records_nothing_after_it(tmp_path: Path) -> None:
    params: dict[str, ParamValue] = {"reboot_timeout_s": 5, "drain_timeout_s": 3, "wave_size": 4, "max_parallel": 2}
    async with demo_session(
        in_process=True, nodes=6, scenario="happy", sessions_dir=tmp_path, change_id="CHG-R1",
        speed=IN_PROCESS_WALK_SPEED, params=params,
    ) as (session, fleet):  # fmt: skip
        first = first_auto_wave(session.runbook)
        for _ in range(2000):  # the canary and the second node, walked by hand
            action = session.next_action()
            if isinstance(action, StartWave) and action.wave == first:
                break
            await take_planned(session)
        held = HeldCommandItem(session.executor.verify_item_command, "smallest-serve")
        session.executor.verify_item_command = held  # type: ignore[method-assign,assignment]
        runner = WaveRunner.start(session, confirmation_text(session.state, first), refresh_s=0.5)
        wave = asyncio.create_task(runner.run())
        await asyncio.wait_for(held.waiting.wait(), 120)  # a node's smallest-serve runs
        fleet.speed = 0.01  # the command still runs on the node when its link is cut
        session.pause("q while the wave's command item ran")
        assert session.transport is not None
        await session.transport.close()  # as the quit's close does: the link the command ran on
        held.release.set()
        await asyncio.wait_for(held.done.wait(), 60)
        for _ in range(20):  # whatever its task would write once the command came back
            await asyncio.sleep(0.02)
        try:
            events = read_session(session.path).events
            paused = [e.seq for e in events if e.kind is EventKind.SESSION_PAUSED]
            assert len(paused) == 1 and events[-1].seq == paused[0], [(e.seq, e.kind, e.node) for e in events[-3:]]
            assert held.node is not None
            verdicts = [
                e
                for e in events
                if e.kind is EventKind.ITEM_VERIFIED and (e.item, e.node) == ("smallest-serve", held.node)
            ]
            assert verdicts == []  # cut by the pause: no verdict; Next runs it again on resume
            item = session.state.nodes[held.node].stages["smoke"].items["smallest-serve"]
            assert item.status == "open", (item.status, item.evidence)  # no failed item folded
            await asyncio.wait_for(asyncio.shield(wave), 30)  # a paused session's wave stops by itself
            assert read_session(session.path).events[-1].seq == paused[0]  # and its end writes nothing
        finally:
            wave.cancel()
