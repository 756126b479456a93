"""The reviewer's view on a live change log: it follows the operator's appends, signs off,
raises a manual trigger and adds notes as the reviewer, and has no key that acts as the operator."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from offline_session import start_minimal
from rendered import rendered_text
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.session.operator import Session
from cockpit.session.review import ReviewerSession
from screens.modals import PickPrompt, TextPrompt
from screens.review import ReviewApp, SignoffTable
from screens.widgets import CockpitHeader, FleetTable, StagePane, TriggerPanel

OPERATOR = "alice"
REVIEWER = "bob"


def start_operator(tmp_path: Path) -> Session:
    return start_minimal(tmp_path, "CHG-REVIEW", OPERATOR)


async def wait_for(pilot: Pilot[int], condition: Callable[[], bool], timeout: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        await pilot.pause()
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def answer_text(pilot: Pilot[int], app: ReviewApp, value: str) -> None:
    await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt))
    field = app.screen.query_one(Input)
    field.value = value
    field.focus()
    await pilot.press("enter")


async def pick(pilot: Pilot[int], app: ReviewApp, option_id: str) -> None:
    await wait_for(pilot, lambda: isinstance(app.screen, PickPrompt))
    options = app.screen.query_one(OptionList)
    options.focus()
    index = next(i for i in range(options.option_count) if options.get_option_at_index(i).id == option_id)
    options.highlighted = index
    await pilot.press("enter")


async def test_reviewer_follows_signs_off_raises_and_notes(tmp_path: Path) -> None:
    session = start_operator(tmp_path)
    app = ReviewApp(ReviewerSession(session.path, REVIEWER), poll_s=0.1)
    try:
        async with app.run_test(size=(150, 44)) as pilot:
            screen = app.view
            table = screen.query_one(SignoffTable)
            assert table.row_count == 1 and "sign off arm/triggers-reviewed" in str(table.get_row_at(0)[0])
            assert "CHG-REVIEW" in rendered_text(screen.query_one(CockpitHeader))
            assert "arm" in rendered_text(screen.query_one("#stage-title", Static))
            integrity = rendered_text(screen.query_one("#integrity", Static))
            assert integrity.startswith("chain: ok;") and "signatures not required" in integrity

            # the operator appends: the view follows within its poll period
            session.note("operator starting the window")
            await wait_for(pilot, lambda: "operator starting the window" in rendered_text(screen.query_one("#recent")))

            # keys that would act as the operator do nothing here: nothing is written
            before = len(read_session(session.path).events)
            for key in ("g", "o", "n", "w", "b", "enter"):
                if key == "enter":
                    screen.query_one(FleetTable).focus()
                await pilot.press(key)
            await pilot.pause()
            assert len(read_session(session.path).events) == before
            table.focus()

            # sign off the two-person item with a note
            await pilot.press("s")
            await answer_text(pilot, app, "read all twelve triggers with alice")
            signoffs = [e for e in read_session(session.path).events if e.kind is EventKind.SIGNOFF]
            assert [(e.actor, e.stage, e.item, e.note) for e in signoffs] == [
                (REVIEWER, "arm", "triggers-reviewed", "read all twelve triggers with alice")
            ]
            await wait_for(pilot, lambda: table.row_count == 0)
            assert "Nothing waits for your sign-off" in rendered_text(screen.query_one("#signoffs-title"))
            assert "rev bob" in rendered_text(screen.query_one(CockpitHeader))

            # the operator's own fold sees it; the gate opens for the operator
            assert any(e.kind is EventKind.SIGNOFF for e in session.absorb_foreign())
            session.arm_triggers()
            session.pass_gate("arm")
            session.start_wave()
            await wait_for(pilot, lambda: "drain on gpu01" in rendered_text(screen.query_one("#stage-title", Static)))
            assert "wave 1/" in rendered_text(screen.query_one(CockpitHeader))

            # raise a manual trigger on gpu01, with what was seen
            await pilot.press("exclamation_mark")
            await pick(pilot, app, "protected-workload-failed")
            await pick(pilot, app, "gpu01")
            await answer_text(pilot, app, "inference canary returns 500s")
            fired = [e for e in read_session(session.path).events if e.kind is EventKind.TRIGGER_FIRED]
            assert [(e.actor, e.trigger, e.node) for e in fired] == [(REVIEWER, "protected-workload-failed", "gpu01")]
            await wait_for(pilot, lambda: "FIRED" in screen.query_one(TriggerPanel).plain)
            assert screen.query_one(CockpitHeader).has_class("alarm")
            assert session.absorb_foreign() and session.state.fired()

            # a note
            await pilot.press("a")
            await answer_text(pilot, app, "paging the inference on-call")
            notes = [e for e in read_session(session.path).events if e.kind is EventKind.NOTE]
            assert (notes[-1].actor, notes[-1].note) == (REVIEWER, "paging the inference on-call")
            assert screen.query_one(StagePane) is not None
            await pilot.press("q")
        assert app.return_code == 0
    finally:
        await session.close()
