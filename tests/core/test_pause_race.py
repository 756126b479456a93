"""A pause that comes while a step's command has come back but waits its turn to be recorded
(:mod:`cockpit.session.pacing`): the outcome is known, so the pause records it, once; the
step is never written both as interrupted and then with its outcome after the pause."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from gating_scenarios import take_planned_until
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import EventKind, StepFinishedEvent
from cockpit.changelog.journal import read_session
from cockpit.session.demo import demo_session
from cockpit.session.pacing import Pacer


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
