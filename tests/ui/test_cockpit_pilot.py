"""Pilot tests: the real cockpit screens on a real session over the in-process simulator.

Every assertion that matters reads the change log back from disk: the screen only shows
what the session recorded.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from textual.widgets import Input

from cockpit.changelog.events import DecisionEvent, OverrideEvent, StepFinishedEvent
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import SignOff
from cockpit.engine.state import ROLLBACK_FAILED, ROLLING_BACK
from cockpit.session.operator import Session
from cockpit.view import richtext
from screens.app import build_app
from screens.main import REDRAW_EVERY_S
from screens.messages import ActionDone
from screens.modals import TextPrompt
from screens.widgets import CockpitHeader, FleetTable, TriggerPanel


@pytest.mark.slow
async def test_canary_through_expand_then_trigger_rollback_quit_and_resume(sim_session, ui, tmp_path) -> None:
    session = sim_session
    done: list[ActionDone] = []

    def hook(message: object) -> None:
        if isinstance(message, ActionDone):
            done.append(message)

    app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
    async with app.run_test(size=(140, 44), message_hook=hook) as pilot:
        # the operator's own sign-off is refused by the gate; the screen offers no key for it
        assert "s" not in app.main.active_bindings
        assert "sign-off needs a second person" in " ".join(session.verdict(SignOff(stage="arm")).reasons)
        assert "signoff" not in ui.kinds(session)

        # override the freeze gate with a reason: recorded with what it bypassed
        await ui.press(pilot, "o", answer="evidence already frozen in ticket INC-1 before the window")
        override = [e for e in ui.events(session) if isinstance(e, OverrideEvent)]
        assert len(override) == 1 and override[0].stage == "freeze"
        assert override[0].reason == "evidence already frozen in ticket INC-1 before the window"
        assert override[0].facts.blocked_by, "the override records the blockers it bypassed"

        # Next leads through the window stages and the canary, to the end of expand
        await ui.press_next_until(pilot, lambda st: st.nodes["gpu01"].stages["expand"].closed)
        assert any(e.kind == "gate-passed" and e.stage == "expand" and e.node == "gpu01" for e in ui.events(session))
        assert any(e.kind == "triggers-armed" for e in ui.events(session))
        # a destructive step was confirmed by typing the node name, and ran
        installs = [e for e in ui.events(session) if isinstance(e, StepFinishedEvent) and e.step == "install"]
        assert installs and installs[0].node == "gpu01" and installs[0].facts.ok is True
        fleet = app.main.query_one(FleetTable)
        assert fleet.get_cell("gpu01", "stage").plain == "done"
        assert "580.95.05" in fleet.get_cell("gpu01", "driver").plain

        # the second node comes back from its reboot one GPU short: the trigger fires
        await ui.press_next_until(pilot, lambda st: bool(st.fired()))
        fired = [e for e in ui.events(session) if e.kind == "trigger-fired"]
        assert any(e.trigger == "gpu-missing" and e.node == "gpu02" for e in fired)
        await pilot.pause()
        assert app.main.query_one(CockpitHeader).has_class("alarm")
        panel = app.main.query_one(TriggerPanel)
        assert panel.has_class("fired") and "gpu-missing FIRED on gpu02" in panel.plain

        # a destructive action while a trigger is fired: no key for it, and the gate refuses it
        # when asked anyway (as the palette's "Do:" list would never offer it)
        assert app.main.check_action("start_wave", ()) is False and "w" not in app.main.active_bindings
        before = len(ui.events(session))
        count = app.main.actions_started
        app.main.action_start_wave()
        await ui.settle(pilot, started=count)
        assert any(not m.ok and "trigger 'gpu-missing' fired" in m.text for m in done)
        assert "wave-started" not in [str(e.kind) for e in ui.events(session)[before:]]

        # b rolls back the node that fired, not the row under the cursor (gpu01); the
        # dialog names gpu02 and its evidence, and its reason field starts empty
        fleet.move_cursor(row=fleet.get_row_index("gpu01"))
        await pilot.pause()
        before = app.main.actions_started
        app.simulate_key("b")
        for _ in range(500):
            if isinstance(app.screen, TextPrompt) and app.screen.query(Input):
                break
            await asyncio.sleep(0.01)
        prompt = app.screen
        assert isinstance(prompt, TextPrompt) and prompt._title == "Roll back gpu02"
        assert "gpu-missing fired on gpu02" in prompt._explanation and prompt.query_one(Input).value == ""
        await ui.settle(pilot, started=before, answer="gpu-missing on gpu02: 7 of 8 GPUs after the reboot")
        started = [e for e in ui.events(session) if e.kind == "rollback-started"]
        assert started and started[0].node == "gpu02" and "gpu-missing" in (started[0].reason or "")
        assert session.state.nodes["gpu02"].current == ROLLING_BACK
        # Next runs the rollback procedure (its destructive steps confirmed by typing gpu02)
        await ui.press_next_until(pilot, lambda st: st.nodes["gpu02"].rollback_ok is not None)
        rb_steps = [e for e in ui.events(session) if e.kind == "step-started" and e.stage == "rollback"]
        assert rb_steps and all(e.node == "gpu02" for e in rb_steps)
        finished = [e for e in ui.events(session) if e.kind == "rollback-finished"]
        assert finished and finished[0].node == "gpu02"
        # the GPU is physically gone: restoring the driver cannot bring it back, and the
        # cockpit says so rather than calling the node rolled back
        assert session.state.nodes["gpu02"].current == ROLLBACK_FAILED
        assert fleet.get_cell("gpu02", "stage").plain == "rollback FAILED"
        assert fleet.get_cell("gpu02", "stage").style == richtext.style("alarm")

        # then Next asks for the decision: roll back, which halts the rollout
        await ui.press_next_until(pilot, lambda st: st.decision is not None)
        decision = [e for e in ui.events(session) if isinstance(e, DecisionEvent)]
        assert decision[0].facts.outcome == "roll-back" and decision[0].facts.halt_rollout is True

        # q: the session is paused, then closed; nothing torn
        await pilot.press("q")
        await pilot.pause()
    log = read_session(session.path)
    assert log.torn is None
    assert log.events[-1].kind == "session-paused"
    assert app.closed_cleanly

    # resume: the same window, exactly where it stopped
    resumed = Session.resume(session.path, operator=session.operator, transport_factory=lambda hosts: None)
    app2 = build_app(resumed, refresh_s=0)
    async with app2.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        assert app2.main.query_one(CockpitHeader).has_class("alarm")
        assert app2.main.query_one(FleetTable).get_cell("gpu02", "stage").plain == "rollback FAILED"
        assert app2.main.query_one(FleetTable).get_cell("gpu01", "stage").plain == "done"
        await pilot.press("q")
        await pilot.pause()
    kinds = [str(e.kind) for e in read_session(session.path).events]
    assert kinds[-2:] == ["session-resumed", "session-paused"]


async def test_a_burst_of_events_is_drawn_once_with_the_last_of_them(sim_session, tmp_path) -> None:
    # each acknowledged event asks the screen to redraw; a burst that arrives before the
    # first redraw rides on it, and what is drawn is the state after the burst's last event
    session = sim_session
    app = build_app(session, refresh_s=0)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        drawn: list[int] = []
        render_all = app.main.render_all

        def counting_render() -> None:
            drawn.append(session.state.last_seq)
            render_all()

        app.main.render_all = counting_render  # type: ignore[method-assign]
        notes = [session.note(f"burst {i}", actor=session.operator) for i in range(40)]
        await session.journal.durable()
        # drawn at once, or (a redraw less than REDRAW_EVERY_S before) once that much has passed
        for _ in range(200):
            await pilot.pause()
            if drawn and max(drawn) == notes[-1].seq:
                break
            await asyncio.sleep(0.01)
        assert drawn and max(drawn) == notes[-1].seq
        assert len(drawn) < len(notes) / 4, f"{len(drawn)} redraws for {len(notes)} events"


async def test_a_stream_of_events_is_drawn_a_few_times_a_second_and_its_last_soon(sim_session, tmp_path) -> None:
    # a wave records ~80 events a second, one at a time: each asks for a redraw, and the
    # screen draws at most one per REDRAW_EVERY_S, the last event within that time of it
    session = sim_session
    app = build_app(session, refresh_s=0)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        drawn: list[tuple[float, int]] = []
        render_all = app.main.render_all
        loop = asyncio.get_running_loop()

        def counting_render() -> None:
            drawn.append((loop.time(), session.state.last_seq))
            render_all()

        app.main.render_all = counting_render  # type: ignore[method-assign]
        started = loop.time()
        for i in range(60):
            last = session.note(f"stream {i}", actor=session.operator)
            await asyncio.sleep(0.01)
        ended = loop.time()
        while loop.time() - ended < 5 and not (drawn and drawn[-1][1] == last.seq):
            await asyncio.sleep(0.01)
        assert drawn and drawn[-1][1] == last.seq
        assert drawn[-1][0] - ended <= REDRAW_EVERY_S + 0.5  # the last event drawn soon after it
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(drawn)]
        assert all(gap >= REDRAW_EVERY_S - 0.01 for gap in gaps), gaps
        assert len(drawn) <= (drawn[-1][0] - started) / REDRAW_EVERY_S + 2


async def test_the_node_detail_follows_the_cursor_in_the_keys_own_callback(sim_session, tmp_path) -> None:
    # the detail is shown when the cursor moves, not when RowHighlighted has bubbled up from
    # the table through its containers to the screen (each hop a pass of a busy event loop);
    # the message, when it arrives, finds the node shown and draws nothing again
    session = sim_session
    app = build_app(session, refresh_s=0)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        fleet = app.main.query_one(FleetTable)
        facts = app.main.query_one("#node-facts")
        assert fleet.row_count >= 3
        details: list[str | None] = []
        render_detail = app.main._render_detail

        def counting() -> None:
            details.append(app.main.selected_node())
            render_detail()

        app.main._render_detail = counting  # type: ignore[method-assign]
        for row in (2, 1, 2):
            fleet.move_cursor(row=row)  # no await: nothing else has run since
            node = fleet.selected_node
            assert node is not None and str(facts.render()).startswith(node), (row, str(facts.render()))
        await pilot.pause()
        assert str(facts.render()).startswith(str(fleet.selected_node))
        assert details == [fleet.get_row_at(r)[0].plain for r in (2, 1, 2)], details
