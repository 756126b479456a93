"""Operator safety on the real screens: a step in flight is protected from a quit, drain
and uncordon are confirmed like a change, actions about a fired trigger name the node
that fired, and the words a dialog records are the operator's own.

Every assertion that matters reads the change log back from disk."""

from __future__ import annotations

from pathlib import Path

from pilot_idle import until
from textual.screen import Screen
from textual.widgets import Input, OptionList

from cockpit.changelog.events import DecisionEvent, StepFinishedEvent
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import TickItem
from cockpit.engine.state import CANCELLED_OUTCOME, INTERRUPTED_OUTCOME
from cockpit.session.demo import demo_session
from screens.app import CockpitApp, build_app
from screens.modals import ConfirmDestructive, ConfirmQuit, PickPrompt, TextPrompt
from screens.widgets import FleetTable, NodeDetail, StageTable


async def _start_step(app: CockpitApp, step: str) -> ConfirmDestructive:
    """Enter on the stage pane's row of ``step``: the confirmation it opens."""
    table = app.main.query_one(StageTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(f"step:{step}"))
    await until(lambda: app.main.focused is table and table.selected_key == f"step:{step}", "the row")
    app.simulate_key("enter")
    await until(lambda: isinstance(app.screen, ConfirmDestructive) and bool(app.screen.query(Input)), "the dialog")
    screen = app.screen
    assert isinstance(screen, ConfirmDestructive)
    return screen


async def _confirm(app: CockpitApp, screen: ConfirmDestructive) -> None:
    field = screen.query_one(Input)
    field.focus()
    field.value = screen.expected
    await until(lambda: screen.focused is field, "the field to take keys")
    app.simulate_key("enter")
    await until(lambda: app.screen is not screen, "the confirmation to close")


async def test_drain_is_confirmed_and_a_quit_mid_step_records_interrupted_not_cancelled(ui, tmp_path: Path) -> None:
    # speed 0.05: the simulated kubectl drain takes ten seconds, time to act while it runs
    async with demo_session(
        nodes=2, scenario="happy", sessions_dir=tmp_path / "sessions", change_id="CHG-SAFE", speed=0.05
    ) as (session, _fleet):
        ui.through_opening(session)
        app = build_app(session, refresh_s=0, reviewer=None)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            # cordon and drain take the node out of service: the exact command, where it
            # runs, and the node's name typed, like any destructive step
            dialog = await _start_step(app, "drain")
            assert dialog.expected == "gpu01" and dialog._kind == "Service change"
            assert (
                "kubectl drain gpu01 --ignore-daemonsets" in dialog._command
                and dialog._target == "control, acting on gpu01"
            )
            await _confirm(app, dialog)
            # running on the node (its first output line is in), not still connecting
            await until(lambda: any(run.output for run in session.running.values()), "the drain to run")

            # k is the explicit cancel: only it records "cancelled by the operator"
            await pilot.press("k")
            await until(lambda: not session.running and not app.main._actions, "the cancel")
            cancelled = [e for e in ui.events(session) if isinstance(e, StepFinishedEvent)]
            assert [(e.step, e.facts.error, e.facts.error_kind) for e in cancelled] == [
                ("drain", CANCELLED_OUTCOME, "cancelled")
            ]

            # run it again, then q while it runs: the cockpit asks first, naming the step and node
            await _confirm(app, await _start_step(app, "drain"))
            await until(lambda: any(run.output for run in session.running.values()), "the drain to run again")
            await pilot.press("q")
            await until(lambda: isinstance(app.screen, ConfirmQuit), "the question before quitting")
            assert isinstance(app.screen, ConfirmQuit) and app.screen.running == ["drain/drain on gpu01"]
            await pilot.press("escape")  # stay: nothing is stopped, nothing written
            await until(lambda: not isinstance(app.screen, ConfirmQuit), "the question to close")
            assert session.running and len([e for e in ui.events(session) if e.kind == "step-finished"]) == 1
            await pilot.press("q")
            await until(lambda: isinstance(app.screen, ConfirmQuit), "the question again")
            await pilot.press("y")  # quit anyway
            await until(lambda: app.closed_cleanly, "the quit")
    log = read_session(tmp_path / "sessions" / "CHG-SAFE.toml")
    finished = [e for e in log.events if isinstance(e, StepFinishedEvent)]
    assert [(e.facts.error, e.facts.error_kind) for e in finished] == [
        (CANCELLED_OUTCOME, "cancelled"),
        (INTERRUPTED_OUTCOME, "interrupted"),
    ]
    assert log.events[-1].kind == "session-paused" and log.torn is None


async def _screen(app: CockpitApp, kind: type[Screen[object]]) -> Screen[object]:
    await until(lambda: isinstance(app.screen, kind) and bool(app.screen.query("Input, OptionList")), kind.__name__)
    return app.screen


async def test_raise_and_detail_default_to_the_node_that_fired(offline, ui) -> None:
    ui.through_opening(offline)
    offline.override("drain", "gpu01", reason="drained by hand before the window")
    offline.raise_trigger("protected-workload-failed", "gpu01", note="inference pods crash-looping")
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        main = app.main
        fleet = main.query_one(FleetTable)
        fleet.move_cursor(row=fleet.get_row_index("gpu03"))
        await pilot.pause()
        assert fleet.selected_node == "gpu03" and main.target_node() == "gpu01"
        # d: the detail of the node that fired (the cursor goes there)
        await pilot.press("d")
        assert fleet.selected_node == "gpu01" and main.query_one(NodeDetail).display
        await pilot.press("d")
        fleet.move_cursor(row=fleet.get_row_index("gpu03"))
        await pilot.pause()
        # !: the trigger is picked from the runbook's manual ones, then the prompt names gpu01
        app.simulate_key("exclamation_mark")
        pick = await _screen(app, PickPrompt)
        pick.query_one(OptionList).focus()
        await pilot.press("enter")
        prompt = await _screen(app, TextPrompt)
        assert isinstance(prompt, TextPrompt) and prompt._title.endswith("on gpu01")
        assert prompt.query_one(Input).value == ""
        await pilot.press("escape")


async def test_dialog_fields_start_empty_take_no_stray_key_and_hold_notes_to_the_rule(offline, ui) -> None:
    offline.override("freeze", reason="evidence frozen in INC-1 before the window")
    assert isinstance(offline.next_action(), TickItem)  # the planner's tick (it carries its own demo note)
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        # n, n: one dialog, empty (never pre-filled), the second n dropped instead of typed
        app.simulate_key("n")
        app.simulate_key("n")
        prompt = await _screen(app, TextPrompt)
        app.simulate_key("n")  # a key repeating as the dialog comes up
        await until(lambda: prompt.focused is prompt.query_one(Input), "the field to take keys")
        await pilot.pause()
        assert [type(s) for s in app.screen_stack].count(TextPrompt) == 1
        assert prompt.query_one(Input).value == ""
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, TextPrompt) and not app.main._actions, "the dialog to close")

        # a required note: one letter, or the item's own text, keeps the dialog open
        table = app.main.query_one(StageTable)
        table.focus()
        table.move_cursor(row=table.get_row_index("item:cu130-on-r575"))
        await pilot.pause()
        app.simulate_key("enter")
        prompt = await _screen(app, TextPrompt)
        field = prompt.query_one(Input)
        await until(lambda: prompt.focused is field, "the field to take keys")
        item_text = offline.state.window["compat"].items["cu130-on-r575"].text
        for too_little in ("n", "nnnnnnnnnnnnn", item_text):  # a key pressed on into the dialog, too
            field.value = too_little
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen is prompt, f"{too_little!r} was accepted"
        field.value = "image is cu129; r575 hosts stay out of this window"
        await pilot.press("enter")
        await until(lambda: not app.main._actions, "the tick")
    ticked = [e for e in ui.events(offline) if e.kind == "item-ticked"]
    assert [(e.item, e.note) for e in ticked] == [
        ("cu130-on-r575", "image is cu129; r575 hosts stay out of this window")
    ]
    # the gate holds the same rule: a one-letter note is refused there too
    verdict = offline.verdict(TickItem(stage="compat", item="cu130-on-r580", note="n"))
    assert any("says too little" in r for r in verdict.reasons)
    held = offline.verdict(TickItem(stage="compat", item="cu130-on-r580", note="nnnnnnnnnnnnn"))
    assert any("says nothing" in r for r in held.reasons)


async def test_a_decision_is_picked_from_the_runbooks_outcomes(offline, ui) -> None:
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.simulate_key("D")
        pick = await _screen(app, PickPrompt)
        assert not pick.query(Input)  # nothing to type an outcome into
        options = pick.query_one(OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        assert ids == list(offline.runbook.decision_outcomes)
        await until(lambda: pick.focused is options, "the list to take keys")
        options.highlighted = ids.index("keep-isolated-path")
        await pilot.press("enter")
        why = await _screen(app, TextPrompt)
        await until(lambda: why.focused is why.query_one(Input), "the field to take keys")
        why.query_one(Input).value = "isolated nodes keep serving while r580 is verified"
        await pilot.press("enter")
        await until(lambda: not app.main._actions, "the decision")
    decisions = [e for e in ui.events(offline) if isinstance(e, DecisionEvent)]
    assert [d.facts.outcome for d in decisions] == ["keep-isolated-path"]


async def test_every_health_word_shows_whole_in_the_fleet_table_at_80x24(offline, ui) -> None:
    from cockpit.changelog.events import EventKind
    from cockpit.changelog.facts import ProbeFacts
    from cockpit.engine.state import SYSTEM_ACTOR
    from cockpit.gpu.nodestate import Health
    from cockpit.view.model import HEALTH_SHORT

    # one node per verdict (the session has 8 nodes, Health has 8 values), each row as wide
    # as a probe makes it: a kernel module and a library of different versions, a GPU short
    for node, health in zip(offline.state.nodes, Health, strict=True):
        facts = ProbeFacts(
            reachable=True,
            health=str(health),
            kernel_module_version="580.95.05",
            driver_version="575.57.08",
            cuda_version="12.9",
            gpu_count=7,
        )
        offline.recorder.record(EventKind.PROBE, actor=SYSTEM_ACTOR, node=node, facts=facts)
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        fleet = app.main.query_one(FleetTable)
        assert app.main.has_class("-narrow")
        await until(lambda: fleet.get_cell("gpu01", "health").plain == HEALTH_SHORT[Health.OK], "the probes")
        for row, (node, health) in enumerate(zip(offline.state.nodes, Health, strict=True)):
            word = HEALTH_SHORT[health]
            assert fleet.get_cell(node, "health").plain == word
            # what the terminal shows on that row (line 0 is the header), not only the cell
            shown = "".join(segment.text for segment in fleet.render_line(row + 1))
            assert shown.rstrip().endswith(word) or f" {word} " in shown, (health, shown)
        assert fleet.virtual_size.width <= fleet.size.width  # nothing needs a sideways scroll
        # the long form stays where there is room
        await pilot.resize_terminal(160, 40)
        await until(lambda: fleet.get_cell("gpu02", "health").plain == str(Health.DRIVER_LIBRARY_MISMATCH), "wide")
