"""A step whose typed confirmation is still open is not running: the Next line does not say
"running", no `k` is offered (nothing would be cancelled), and once the dialog is dismissed
the footer is as before. Real parts: the simulated fleet over SSH, the real screen through the
pilot, the change log read back from disk (no step-started while the dialog is open)."""

from __future__ import annotations

from pathlib import Path

from gating_scenarios import take_planned
from pilot_idle import until

from cockpit.engine.actions import RunStep, is_destructive
from cockpit.runbook.service import changes_service
from cockpit.session.demo import demo_session
from screens.app import build_app
from screens.modals import ConfirmDestructive
from screens.widgets import KeysFooter, NextBar


async def test_a_step_waiting_for_its_confirmation_is_not_shown_running(ui, tmp_path: Path) -> None:
    async with demo_session(
        nodes=2, scenario="happy", sessions_dir=tmp_path / "sessions", change_id="CHG-ASK", speed=50.0
    ) as (session, _fleet):
        ui.through_opening(session)
        for _ in range(400):  # headless, to the first step n confirms with a typed name
            action = session.next_action()
            if isinstance(action, RunStep) and (
                is_destructive(session.runbook, action)
                or changes_service(session.runbook, action.stage, action.step, action.node)
            ):
                break
            await take_planned(session)
        else:
            raise AssertionError("Next never reached a step that asks for its confirmation")
        app = build_app(session, refresh_s=0, reviewer=None)
        async with app.run_test(size=(160, 40)) as pilot:
            await ui.settle(pilot)
            main = app.main
            assert not main.check_action("cancel_steps", ())
            before = len(ui.events(session))
            await pilot.press("n")
            await until(lambda: isinstance(app.screen, ConfirmDestructive), "the confirmation")
            main.render_all()  # any redraw while the dialog waits (a probe round, a tick)
            line = str(main.query_one(NextBar).render())
            assert "running:" not in line, line
            assert not main.check_action("cancel_steps", ())  # k would cancel nothing
            assert "step-started" not in ui.kinds(session)[before:]
            await pilot.press("escape")
            await until(lambda: app.screen is main and not main._actions, "the dialog to close")
            await ui.settle(pilot)
            assert "running:" not in str(main.query_one(NextBar).render())
            keys = app.active_bindings
            assert "k" not in keys or not keys["k"].enabled, "k is still offered"
            shown = main.query_one(KeysFooter).plain
            assert "Next" in shown and "Cancel" not in shown, shown  # the footer as drawn: no k Cancel
            assert len(ui.events(session)) == before  # the dialog dismissed: nothing written
