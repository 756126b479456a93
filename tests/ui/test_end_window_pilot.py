"""A person ends the window on the live screen: at the window's end `n` (or `E` at any
time) asks how it ended, the outcomes picked from the runbook's with the recorded
decision's first; `session-ended` is written by the operator, the lock file goes, the
cockpit exits, and the ticket reads the window as ended.

Real parts only: the simulated fleet behind real SSH, the real screen through the pilot,
the change log and the ticket read back from disk."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from gating_scenarios import take_planned
from textual.widgets import OptionList, Static

from cockpit.changelog.events import SessionEndedEvent
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import RunStep
from cockpit.engine.planner import WINDOW_THROUGH
from cockpit.export import export_text
from cockpit.session.demo import demo_session
from screens.app import CockpitApp, build_app
from screens.modals import PickPrompt
from screens.widgets import KeysFooter, NextBar


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 20) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def _pick_first(app: CockpitApp) -> list[str]:
    """Answer the outcome dialog with its first (suggested) choice; its choices."""
    await _until(lambda: isinstance(app.screen, PickPrompt) and bool(app.screen.query(OptionList)), "the dialog")
    options = app.screen.query_one(OptionList)
    choices = [str(options.get_option_at_index(i).id) for i in range(options.option_count)]
    options.focus()
    await asyncio.sleep(0.3)  # the dialog's settle time: the key that opened it is not an answer
    app.simulate_key("enter")
    return choices


async def _dialog_text(app: CockpitApp) -> str:
    """The words of the outcome dialog once it is open (its explanation included)."""
    await _until(lambda: isinstance(app.screen, PickPrompt) and bool(app.screen.query(OptionList)), "the dialog")
    return "\n".join(str(w.render()) for w in app.screen.query(Static))


@pytest.mark.timeout(180)
async def test_n_at_the_windows_end_ends_it_and_the_ticket_reads_ended(ui: SimpleNamespace, tmp_path: Path) -> None:
    async with demo_session(nodes=2, scenario="happy", sessions_dir=tmp_path, speed=100.0) as (session, _fleet):
        session.executor.reboot_poll_s = 0.05
        for _ in range(900):
            if session.next_plan().person_must == WINDOW_THROUGH:
                break
            await take_planned(session)
        assert session.next_plan().person_must == WINDOW_THROUGH
        decided = session.state.decision
        assert decided is not None
        lock = session.path.with_suffix(".lock")
        assert lock.exists()
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            line = str(app.main.query_one(NextBar).render())
            assert "E ends the window" in line, line
            footer = app.main.query_one(KeysFooter).plain
            assert "E End" in footer, footer  # the key the line names is in the footer too
            app.simulate_key("n")
            assert "left mid-change" not in await _dialog_text(app)  # every node through: nothing to warn of
            choices = await _pick_first(app)
            assert choices[0] == decided.facts.outcome and set(choices) == set(session.runbook.decision_outcomes)
            await _until(lambda: session.ended is not None, "the window to end")
            await _until(lambda: not app.is_running, "the cockpit to exit")
        ended = session.ended
        assert ended is not None and ended.outcome == decided.facts.outcome
        assert not lock.exists()  # released
        words = "\n".join(ended.words())
        assert str(session.path) in words and f"cockpit export {session.path}" in words
        log = read_session(session.path)
        last = log.events[-1]
        assert isinstance(last, SessionEndedEvent) and last.actor == session.operator
        assert last.facts.outcome == decided.facts.outcome
        ticket = export_text(log, "markdown")
        assert "Session not closed" not in ticket
        assert f"Change window closed (outcome: {decided.facts.outcome})" in ticket


@pytest.mark.timeout(120)
async def test_E_mid_window_refuses_while_a_step_runs_then_ends_with_the_picked_outcome(
    ui: SimpleNamespace, tmp_path: Path
) -> None:
    async with demo_session(nodes=2, scenario="happy", sessions_dir=tmp_path, speed=100.0) as (session, fleet):
        step = None
        # into the first wave, the drain of a node next: the simulated `kubectl drain` takes
        # time (0.5 s on its clock) where a cordon answers at once (a step of ~20 ms, which
        # ended before E was read once the screen stopped redrawing for every event)
        for _ in range(80):
            action = session.next_action()
            if isinstance(action, RunStep) and action.node is not None and action.step == "drain":
                step = action
                break
            await take_planned(session)
        assert step is not None
        fleet.speed = 0.05  # the step runs a while (~10 s): time to press E over it
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            said: list[str] = []
            notify = app.main.notify

            def spy(message: str, *args: object, **kwargs: object) -> None:
                said.append(str(message))
                notify(message, *args, **kwargs)  # type: ignore[arg-type]

            app.main.notify = spy  # type: ignore[method-assign]
            running = asyncio.create_task(session.perform(step, confirmation=step.node))
            await _until(lambda: bool(session.running), "the step to run")
            app.simulate_key("E")
            await _until(lambda: bool(said), "the refusal")
            assert "still running" in said[-1] and not isinstance(app.screen, PickPrompt)
            session.steps.request_cancel(step.stage, step.step, step.node)  # as k does
            running.cancel()
            # k's cancel may end the step (recorded cancelled) before the task's own cancel lands
            with contextlib.suppress(asyncio.CancelledError):
                await running
            assert not session.running
            app.simulate_key("E")
            # the node whose drain was cancelled is said before the window ends, as `cockpit end` says it
            words = await _dialog_text(app)
            assert f"{step.node} left mid-change: stopped: drain/drain cancelled" in words, words
            choices = await _pick_first(app)
            assert set(choices) == set(session.runbook.decision_outcomes)
            await _until(lambda: session.ended is not None, "the window to end")
        assert session.ended is not None and session.ended.outcome == choices[0]
        assert not session.path.with_suffix(".lock").exists()
        assert "Session not closed" not in export_text(read_session(session.path), "markdown")
