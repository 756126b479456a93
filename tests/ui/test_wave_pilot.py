"""On the live screen, a person walks the canary and the second node with `n`, then starts
a wave of four simulated nodes with one key (W, the wave's node set typed once); the wave
runs itself under the gate while the pane shows it by stage and what needs the person,
who answers each per-wave item with Y; the wave ends done, in the change log too."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pilot_idle import idle
from textual.widgets import Input

from cockpit.changelog.events import EventKind
from cockpit.engine.actions import StartWave
from cockpit.engine.forecast import StageHistory
from cockpit.engine.state import DONE, CockpitState
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.demo import demo_session
from screens.app import build_app
from screens.modals import ConfirmDestructive
from screens.waves import FORECAST_EVERY_S, WavePane
from screens.widgets import CockpitHeader, NextBar

PARAMS: dict[str, ParamValue] = {"reboot_timeout_s": 5, "drain_timeout_s": 3, "wave_size": 4, "max_parallel": 2}
WAVE = ["gpu03", "gpu04", "gpu05", "gpu06"]


@pytest.mark.timeout(300)
@pytest.mark.slow  # a pilot walk: a whole window on the live screen, ~20 s of CPU
async def test_one_key_starts_a_wave_that_runs_itself_to_the_end(ui, tmp_path: Path) -> None:
    async with demo_session(nodes=6, scenario="happy", sessions_dir=tmp_path, speed=100.0, params=PARAMS) as (
        session,
        _fleet,
    ):
        session.history = StageHistory("CHG-PREV", {"reboot": (3.0,) * 40})  # as `--history` reads one
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(120, 40)) as pilot:

            def at_the_wave(_st: CockpitState) -> bool:
                action = session.next_action(ui.DEMO_REVIEWER)
                return isinstance(action, StartWave) and action.wave == 2

            await ui.press_next_until(pilot, at_the_wave, limit=600)
            await idle(pilot)
            # the wave may run itself: the line says W runs it, as n would walk it by hand
            assert "W runs it itself, [n] walks it by hand" in str(app.main.query_one(NextBar).render())
            by_hand = app.main.actions_started
            app.simulate_key("W")
            for _ in range(500):
                if isinstance(app.screen, ConfirmDestructive) and app.screen.query(Input):
                    break
                await asyncio.sleep(0.01)
            dialog = app.screen
            assert isinstance(dialog, ConfirmDestructive) and dialog.expected == "gpu[03-06]"
            dialog.query_one(Input).focus()
            await ui.settle(pilot)  # types the node set and confirms, as for a destructive step

            # while the wave takes Next for its nodes, `n` does not race it
            assert app.main.wave_running()
            started = app.main.actions_started
            app.simulate_key("n")
            await asyncio.sleep(0.2)
            assert app.main.actions_started == started

            pane = app.main.query_one(WavePane)
            seen_needs = False
            lines: set[str] = set()
            forecasts: set[str] = set()
            for _ in range(3000):
                runner = app.main.wave_runner
                if runner is not None and runner.status().finished:
                    break
                # while the wave runs, the Next line never offers n (the wave takes Next)
                lines.add(str(app.main.query_one(NextBar).render()))
                forecasts.add(str(pane.render()) + str(app.main.query_one(CockpitHeader).render()))
                needs = [] if runner is None else [n for n in runner.status().needs_you if n.action is not None]
                if needs:
                    seen_needs = seen_needs or "needs you" in str(pane.render())
                    note = f"sampled {needs[0].node}: requests answered and workloads pass"
                    await ui.press(pilot, "Y", answer=note)
                await asyncio.sleep(0.05)
            runner = app.main.wave_runner
            assert runner is not None and runner.status().finished and runner.status().halted is None
            await pilot.pause()
            assert all(session.state.nodes[n].current == DONE for n in WAVE)
            assert seen_needs  # the pane listed what the wave needed of the person
            running = [line for line in lines if "wave 3" in line]
            assert running and not [line for line in running if "[n]" in line], lines
            assert any("Y does it" in line for line in running), lines  # what it needs, and the key
            shown = str(pane.render())
            assert "wave 3 (4 nodes): done 4" in shown
            # while the wave ran, the forecast said when the window would end and what it learned from
            assert any("ends ~" in f and "CHG-PREV's stages before them" in f for f in forecasts), forecasts
            await idle(pilot)
            # every wave through: no end is forecast ("0 min left" read as stale)
            assert app.main.wave_forecast(datetime.now(UTC) + timedelta(seconds=FORECAST_EVERY_S)) is None
            app.main.render_all()
            assert "ends ~" not in str(app.main.query_one(CockpitHeader).render())
            # the person's part of the wave besides W: one Y per per-wave item, baseline-workloads
            # alone (the serve and request checks are commands the wave ran on every node)
            assert app.main.actions_started - by_hand == 1
            kinds = [e.kind for e in ui.events(session)]
            assert EventKind.WAVE_DONE in kinds
