"""The live screen, driven by `n` alone, walks every simulator scenario to the end the
headless walk expects (one table for both: tests/walk_expectations.py), answering the
dialogs `n` opens as an operator would (the node's name for a destructive step, a note
for a tick, the suggested pick); then Next says the window is through, or, where the
table says a person's Next hands over (a destructive step cut short, a rollback that
cannot run), it says who acts and with which key, and went no further.

At 80×24, the narrowest screen the cockpit promises, and fast: the simulator at
``WALK_SPEED`` with the runbook's reboot and drain timeouts shortened."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from gating_scenarios import take_planned
from walk_expectations import WALK_NODES, WALK_PARAMS, WALK_SCENARIOS, WALK_SPEED, expected_end

from cockpit.changelog.events import DecisionEvent
from cockpit.engine.actions import StartWave
from cockpit.engine.planner import WINDOW_THROUGH
from cockpit.engine.state import FINISHED, CockpitState
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session
from screens.app import build_app
from screens.widgets import NextBar, StagePane

#: Scenarios walked by `n` on the screen from the first key to the last. The others differ
#: from them only in the rollout: the window's own stages before the first wave and after
#: the last node finished (the faults strike the second node) are taken by the same
#: planner headless there, which halves their cost (each key costs the pilot a frame or
#: two, a dialog's mount and dismissal: a tenth of a second of CPU).
FULL_WALKS = ("happy", "gpu-missing")


@pytest.mark.slow
@pytest.mark.timeout(480)  # generous: a case took 28-53 s in a loaded 2-core suite run
@pytest.mark.parametrize("scenario", WALK_SCENARIOS)
async def test_pressing_only_n_ends_every_scenario_as_the_headless_walk_does(
    ui, scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = expected_end(scenario)
    stops = expected.stuck_on or expected.by_hand  # words of a hand-over the table allows
    full = scenario in FULL_WALKS
    started = time.monotonic()
    async with demo_session(
        nodes=WALK_NODES, scenario=scenario, sessions_dir=tmp_path, speed=WALK_SPEED, params=WALK_PARAMS
    ) as (session, _fleet):
        if not full:  # the window's opening stages, as every scenario has them (up to a hand-over there)
            while (opening := session.next_plan(ui.DEMO_REVIEWER).action) is not None and not isinstance(
                opening, StartWave
            ):
                await take_planned(session)
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(80, 24)) as pilot:

            def done(st: CockpitState) -> bool:
                if stops is not None and session.next_plan(ui.DEMO_REVIEWER).action is None:
                    return True  # Next hands over: judged below
                if not full:
                    return all(p.current in FINISHED for p in st.nodes.values())
                return all(st.window[s].closed for s in st.closing)

            presses = await ui.press_next_until(pilot, done, limit=600)
            planned = session.next_plan(ui.DEMO_REVIEWER)
            handed_over = stops is not None and planned.action is None and planned.person_must != WINDOW_THROUGH
            if not handed_over and not full:  # the window's closing stages, headless
                result = await drive(session)
                assert result.stuck_on is None and result.outcome == expected.outcome, result
                planned = session.next_plan(ui.DEMO_REVIEWER)
            await pilot.pause()
            next_bar = str(app.main.query_one(NextBar).render())
            if stops is not None and handed_over:
                # Next stopped for a person: it says so on screen, names the key, and went no further
                assert planned.person_must is not None and stops in planned.person_must, planned
                if expected.by_hand is not None:
                    assert "Enter on its row" in planned.person_must
                assert stops in next_bar
                assert session.state.decision is None
            else:
                assert presses > (100 if full else 40)  # the whole window (or rollout), not a shortcut
                st = session.state
                assert {n: p.current for n, p in st.nodes.items()} == expected.nodes
                decisions = [e for e in ui.events(session) if isinstance(e, DecisionEvent)]
                assert [d.facts.outcome for d in decisions] == [expected.outcome]
                if full:
                    assert planned.person_must == WINDOW_THROUGH
                    assert "every stage is through" in next_bar
                else:
                    assert "Session ended" in next_bar
                if expected.says is not None:  # the screen says why, in plain words
                    gate = str(app.main.query_one(StagePane).query_one("#gate-line").render())
                    assert expected.says in " ".join(gate.split()), gate
    how = f"handed over: {planned.person_must}" if handed_over else "window through"
    walked = "the whole window" if full else "the rollout"
    with capsys.disabled():  # the figure the brief asks for: each case's wall time
        print(
            f"\n[n-only pilot walk] {scenario}: {presses} presses over {walked}, {time.monotonic() - started:.1f} s, {how}"
        )
