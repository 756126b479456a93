"""The live screen, driven by `n` alone: the gpu-missing story on two simulated nodes ends
in the decision to roll back, every step of it the planner's Next, and Next then says the
window is through. (The simulated GPU that fell off the bus stays off after the rollback's
reboot, so the rollback ends failed, saying so.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.changelog.events import DecisionEvent
from cockpit.commands.demo import EXPECTED_OUTCOME
from cockpit.engine.planner import WINDOW_THROUGH
from cockpit.session.demo import demo_session
from screens.app import build_app
from screens.widgets import NextBar


@pytest.mark.slow
async def test_pressing_only_n_ends_gpu_missing_in_the_rollback_decision(ui, tmp_path: Path) -> None:
    async with demo_session(
        nodes=2, scenario="gpu-missing", sessions_dir=tmp_path, change_id="CHG-NONLY", speed=50.0
    ) as (session, _fleet):
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(160, 44)) as pilot:
            closing = session.state.closing
            presses = await ui.press_next_until(pilot, lambda st: all(st.window[s].closed for s in closing), limit=600)
            assert presses > 50
            st = session.state
            assert st.nodes["gpu01"].current == "done"
            assert st.nodes["gpu02"].current == "rollback-failed"
            assert st.nodes["gpu02"].rollback is not None
            assert st.nodes["gpu02"].rollback.items["gpus-visible"].evidence == "gpu02: 7 GPUs, baseline 8"
            decisions = [e for e in ui.events(session) if isinstance(e, DecisionEvent)]
            assert [d.facts.outcome for d in decisions] == [EXPECTED_OUTCOME["gpu-missing"]]
            assert session.next_plan(ui.DEMO_REVIEWER).person_must == WINDOW_THROUGH
            await pilot.pause()
            assert "every stage is through" in str(app.main.query_one(NextBar).render())
