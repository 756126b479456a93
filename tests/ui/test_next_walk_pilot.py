"""The live screen, driven by `n` alone, walks every simulator scenario to the end the
headless walk expects, event for event as the headless walk that takes Next as a person
does (tests/walk_expectations.py's headless_person_walk) (one table for both: tests/walk_expectations.py), answering the
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
from walk_expectations import (
    WALK_NODES,
    WALK_PARAMS,
    WALK_SCENARIOS,
    WALK_SPEED,
    expected_end,
    headless_person_walk,
    walk_sequence,
)

from cockpit.changelog.events import DecisionEvent
from cockpit.engine.planner import WINDOW_THROUGH
from cockpit.engine.state import CockpitState
from cockpit.session.demo import demo_session
from screens import view
from screens.app import build_app
from screens.widgets import NextBar, StagePane


@pytest.mark.slow
@pytest.mark.timeout(480)  # generous: a case took 28-53 s in a loaded 2-core suite run
@pytest.mark.parametrize("scenario", WALK_SCENARIOS)
async def test_pressing_only_n_ends_every_scenario_as_the_headless_walk_does(
    ui, scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = expected_end(scenario)
    stops = expected.stuck_on or expected.by_hand  # words of a hand-over the table allows
    started = time.monotonic()
    async with demo_session(
        nodes=WALK_NODES, scenario=scenario, sessions_dir=tmp_path, speed=WALK_SPEED, params=WALK_PARAMS
    ) as (session, _fleet):
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(80, 24)) as pilot:

            def done(st: CockpitState) -> bool:
                if stops is not None and session.next_plan(ui.DEMO_REVIEWER).action is None:
                    return True  # Next hands over: judged below
                return all(st.window[s].closed for s in st.closing)

            presses = await ui.press_next_until(pilot, done, limit=600)
            planned = session.next_plan(ui.DEMO_REVIEWER)
            handed_over = stops is not None and planned.action is None and planned.person_must != WINDOW_THROUGH
            await pilot.pause()
            bar = app.main.query_one(NextBar)
            next_bar = str(bar.render())
            if stops is not None and handed_over:
                # Next stopped for a person: it says so on screen, names the key, and went no further
                assert planned.person_must is not None and stops in planned.person_must, planned
                if expected.by_hand is not None:
                    assert "Enter on its row" in planned.person_must
                # at 80 columns the bar is the planner's line fitted: its evidence shortened (whole
                # on d, the node's detail), the key that acts kept whole
                assert next_bar == view.next_line(planned, session.state, bar.content_size.width).plain
                assert len(next_bar) <= bar.content_size.width and "Enter on its row" in next_bar
                assert next_bar.startswith(f"Next: {planned.person_must[:24]}"), next_bar  # what failed
                assert session.state.decision is None
            else:
                assert presses > 100  # the whole window, not a shortcut
                st = session.state
                assert {n: p.current for n, p in st.nodes.items()} == expected.nodes
                decisions = [e for e in ui.events(session) if isinstance(e, DecisionEvent)]
                assert [d.facts.outcome for d in decisions] == [expected.outcome]
                assert planned.person_must == WINDOW_THROUGH
                assert "every stage is through" in next_bar
                if expected.says is not None:  # the screen says why, in plain words
                    gate = str(app.main.query_one(StagePane).query_one("#gate-line").render())
                    assert expected.says in " ".join(gate.split()), gate
        pilot_walk = walk_sequence(ui.events(session))
    # the headless walk, taking Next as a person's n takes it, did the same, event for event
    headless = await headless_person_walk(scenario, tmp_path / "headless", ui.DEMO_REVIEWER)
    first = next((i for i, (a, b) in enumerate(zip(pilot_walk, headless, strict=False)) if a != b), None)
    assert pilot_walk == headless, (
        f"the walks part at event {first}: pilot {pilot_walk[first] if first is not None else None}, "
        f"headless {headless[first] if first is not None else None}; lengths {len(pilot_walk)}, {len(headless)}"
    )
    how = f"handed over: {planned.person_must}" if handed_over else "window through"
    with capsys.disabled():  # the figure the brief asks for: each case's wall time
        print(
            f"\n[n-only pilot walk] {scenario}: {presses} presses over the whole window, {time.monotonic() - started:.1f} s, {how}"
        )
