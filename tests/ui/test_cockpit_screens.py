"""Screen behaviour on an offline session (no transport, frozen clock): layout at several
sizes, themes, the palette, help, refusals and prompts. Fast: no simulator."""

from __future__ import annotations

from pilot_idle import idle as _idle
from textual.app import App
from textual.command import CommandPalette
from textual.widgets import Input

from cockpit.changelog.events import TriggerFiredEvent
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import ActionKind, Override, StartRollback
from cockpit.engine.offers import allowed_actions
from screens.app import build_app
from screens.keys import KEY_KINDS
from screens.messages import ActionDone
from screens.modals import ConfirmDestructive, FormPrompt, HelpScreen, TextPrompt
from screens.widgets import (
    CockpitHeader,
    FleetTable,
    NodeDetail,
    ProgressStrip,
    StagePane,
    TriggerPanel,
)


async def test_main_screen_shows_what_the_session_says(offline, ui) -> None:
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await _idle(pilot)
        main = app.main
        assert main.has_class("-narrow") and main.has_class("-short")
        fleet = main.query_one(FleetTable)
        assert fleet.row_count == 8
        assert [fleet.get_cell(f"gpu0{i}", "wave").plain for i in (1, 2, 3)] == ["1", "2", "3"]
        assert fleet.get_cell("gpu01", "health").plain == "unknown"
        stage = main.query_one(StagePane)
        assert "freeze" in str(stage.query_one("#stage-title").render())
        assert "Gate blocked" in str(stage.query_one("#gate-line").render())
        assert "NOT ARMED" in main.query_one(TriggerPanel).plain
        # the detail pane is folded away at 80 columns and comes back on d
        assert not main.query_one(NodeDetail).display
        await pilot.press("d")
        assert main.query_one(NodeDetail).display and not main.query_one(StagePane).display
        # a resize to a large terminal shows everything side by side
        await pilot.resize_terminal(200, 50)
        await _idle(pilot)
        assert main.has_class("-wide") and main.has_class("-tall")
        assert main.query_one(NodeDetail).display and main.query_one(StagePane).display
        strip = str(main.query_one(ProgressStrip).render())
        assert "drain 0/8" in strip and "expand 0/8" in strip and "freeze ●" in strip


async def test_progress_strip_counts_nodes_and_fits_80_columns(offline, ui) -> None:
    ui.through_opening(offline)
    offline.override("drain", "gpu01", reason="drained by hand before the window")
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await _idle(pilot)
        strip = app.main.query_one(ProgressStrip)
        text = str(strip.render())
        assert "drain 1/8" in text and "record 0/8" in text
        assert len(text) <= 78
        # the stage pane follows the canary into its current stage
        assert "record on gpu01" in str(app.main.query_one("#stage-title").render())
        assert app.main.query_one(FleetTable).get_cell("gpu01", "stage").plain == "record"
        assert "wave 1/" in app.main.query_one(CockpitHeader).render().plain


async def test_refusals_show_the_gates_reasons_and_write_nothing(offline, ui) -> None:
    done: list[ActionDone] = []
    app = build_app(offline, refresh_s=0)
    before = len(read_session(offline.path).events)
    async with app.run_test(
        size=(120, 40), message_hook=lambda m: done.append(m) if isinstance(m, ActionDone) else None
    ) as pilot:
        # keys that cannot apply are not offered (no wave before the opening stages pass, no
        # pass of the shut freeze gate: its override is offered instead)
        main = app.main
        assert main.check_action("start_wave", ()) is False and main.check_action("pass_gate", ()) is False
        assert main.check_action("override", ()) is True
        assert "g" not in main.active_bindings and "w" not in main.active_bindings
        started = main.actions_started
        main.action_pass_gate()  # asked anyway, the gate answers with its reasons
        await ui.settle(pilot, started=started)
        main.action_start_wave()
        await ui.settle(pilot, started=started + 1)
        await _idle(pilot)
    reasons = [m.text for m in done if not m.ok]
    assert any("window stage 'freeze' has not passed" in r for r in reasons)
    assert any("rollback triggers are not armed" in r for r in reasons)
    assert any("pass the freeze gate" in r and "not ticked" in r for r in reasons)
    assert len(read_session(offline.path).events) == before


async def test_manual_trigger_turns_the_cockpit_red_and_clearing_needs_a_reason(offline, ui) -> None:
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await ui.press(pilot, "exclamation_mark", answer="protected inference pods crash-looping on gpu01")
        await _idle(pilot)
        main = app.main
        assert main.query_one(CockpitHeader).has_class("alarm")
        assert "FIRED" in main.query_one(TriggerPanel).plain
        fired = [e for e in ui.events(offline) if isinstance(e, TriggerFiredEvent)]
        assert fired[0].trigger == "protected-workload-failed" and fired[0].actor == "alice"
        assert "crash-looping" in (fired[0].facts.evidence or "")
        # an override does not bypass a fired trigger: not offered, and the gate refuses it
        assert main.check_action("override", ()) is False and "o" not in main.active_bindings
        assert any(
            "does not bypass a fired trigger" in r
            for r in offline.verdict(Override(stage="freeze", reason="x")).reasons
        )
        assert main.check_action("clear_trigger", ()) is True
        # clear it: the reason is required (an empty one keeps the dialog open)
        app.simulate_key("c")
        await _idle(pilot)
        assert isinstance(app.screen, TextPrompt)
        app.simulate_key("enter")
        await _idle(pilot)
        assert isinstance(app.screen, TextPrompt), "an empty reason must not clear a trigger"
        app.screen.query_one(Input).value = "workload owner confirms the crash predates the window"
        await ui.settle(pilot)  # answers the prompt with its Enter (a second Enter of ours could race it)
        assert not main.query_one(CockpitHeader).has_class("alarm")
        cleared = [e for e in ui.events(offline) if e.kind == "trigger-cleared"]
        assert cleared and cleared[0].reason == "workload owner confirms the crash predates the window"


async def test_destructive_step_needs_the_node_name_typed(offline, ui) -> None:
    ui.through_opening(offline)
    # the upgrade's first steps only read and save (lists, holds, rollback packages): past
    # them by hand, the next step is the destructive reboot
    for stage in ("drain", "record", "upgrade"):
        offline.override(stage, "gpu01", reason=f"{stage} done by hand (test fixture)")
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await _idle(pilot)
        assert offline.next_action().step == "reboot"
        app.simulate_key("n")
        await _idle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmDestructive) and dialog.expected == "gpu01"
        command = str(dialog.query_one("#confirm-command").render())
        assert "reboot" in command
        for ch in "gpu02":  # the wrong node: the dialog stays, nothing runs
            app.simulate_key(ch)
        app.simulate_key("enter")
        await _idle(pilot)
        assert app.screen is dialog
        assert not [e for e in ui.events(offline) if e.kind == "step-started"]
        app.simulate_key("escape")
        await _idle(pilot)
        assert not isinstance(app.screen, ConfirmDestructive)
    assert not [e for e in ui.events(offline) if e.kind == "step-started"]


async def test_theme_toggle_help_and_palette(offline, ui) -> None:
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await _idle(pilot)
        assert app.theme == "textual-dark"
        await pilot.press("t")
        assert app.theme == "textual-light"
        await pilot.press("t")
        assert app.theme == "textual-dark"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+p")
        await _idle(pilot)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"note")
        await _idle(pilot, 6)
        await pilot.press("enter")  # "Add a note to the change log [a]"
        await _idle(pilot, 4)
        assert isinstance(app.screen, TextPrompt)
        app.screen.query_one(Input).value = "window opened with the change advisory board on the bridge"
        before = app.main.actions_started
        app.simulate_key("enter")
        await ui.settle(pilot, started=before - 1)
    notes = [e for e in ui.events(offline) if e.kind == "note"]
    assert notes and notes[0].note == "window opened with the change advisory board on the bridge"


async def test_light_theme_and_no_color_start(offline, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = build_app(offline, refresh_s=0, theme="light")
    async with app.run_test(size=(80, 24)) as pilot:
        await _idle(pilot)
        assert app.theme == "textual-light"
        assert app.no_color
        assert app.main.query_one(FleetTable).row_count == 8


def _footer_keys_match_the_engine(main) -> list[str]:
    """Every key the screen offers maps to an action the engine allows on the focus, and
    every key it hides to none; returns the keys offered, for the caller's own checks."""
    s = main.session
    allowed = allowed_actions(s.state, s.runbook, s.operator, s.operator)
    stage, stage_node = main._focus
    sid = None if stage is None else ("rollback" if stage.scope == "rollback" else stage.id)
    node = main.selected_node()

    def on_focus(a) -> bool:
        if a.kind in (ActionKind.PASS_GATE, ActionKind.OVERRIDE):
            return a.stage == sid and a.node == stage_node
        if a.kind is ActionKind.START_ROLLBACK:
            return a.node == node
        return True

    offered = main.active_bindings
    shown = []
    for action_name, kind in KEY_KINDS.items():
        binding = next(b for b in main.BINDINGS if b.action == action_name)
        possible = [a for a in allowed if a.kind is kind and on_focus(a)]
        if binding.key in offered:
            assert possible, f"key {binding.key} ({action_name}) is offered but the engine allows no {kind}"
            shown.append(binding.key)
        else:
            assert not possible, f"key {binding.key} ({action_name}) is hidden but the engine allows {possible[0]}"
    return shown


async def test_keys_offered_are_the_engines_and_a_held_node_has_no_rollback(offline, ui) -> None:
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await _idle(pilot)
        main = app.main
        keys = _footer_keys_match_the_engine(main)
        assert "o" in keys and "g" not in keys and "w" not in keys  # the freeze gate is shut
        ui.through_opening(offline)
        offline.override("drain", "gpu01", reason="drained by hand (test fixture)")
        await _idle(pilot)
        keys = _footer_keys_match_the_engine(main)
        assert "p" not in keys  # the waves have started: the path is chosen
        offline.raise_trigger("protected-workload-failed", "gpu01", note="inference pods crash-looping")
        await _idle(pilot)
        keys = _footer_keys_match_the_engine(main)
        assert "c" in keys and "o" not in keys
        offline.clear_trigger("protected-workload-failed", reason="the owner confirms it predates the window")
        offline.record_decision("roll-back", answers={"why": "test fixture"}, halt_rollout=True)
        fleet = main.query_one(FleetTable)
        fleet.move_cursor(row=fleet.get_row_index("gpu02"))
        await _idle(pilot)
        assert offline.state.nodes["gpu02"].current == "held"
        assert main.selected_node() == "gpu02"
        keys = _footer_keys_match_the_engine(main)
        # the held node: no rollback key, and the engine refuses its rollback
        assert "b" not in keys and main.check_action("rollback", ()) is False
        verdict = offline.verdict(StartRollback(node="gpu02", reason="asked anyway"))
        assert not verdict.allowed and "gpu02 has not started: nothing to roll back" in verdict.reasons


async def test_dialog_buttons_answer_what_enter_would_and_cancel_answers_none() -> None:
    """OK runs each dialog's own submit (the same check Enter runs); Cancel dismisses with None."""
    answers: list[object] = []
    app: App[None] = App()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(TextPrompt(title="Note", label="note", value="  seen  "), answers.append)
        await pilot.pause()
        await pilot.click("#ok")
        await pilot.pause()
        app.push_screen(TextPrompt(title="Reason", label="reason", value=""), answers.append)
        await pilot.pause()
        await pilot.click("#ok")  # an empty required text: the dialog stays open
        await pilot.pause()
        assert isinstance(app.screen, TextPrompt)
        await pilot.click("#cancel")
        await pilot.pause()
        form = FormPrompt(title="Path", fields=[("path", "path", "vendor"), ("owner", "owner", "ops")])
        app.push_screen(form, answers.append)
        await pilot.pause()
        await pilot.click("#ok")
        await pilot.pause()
    assert answers == ["seen", None, {"path": "vendor", "owner": "ops"}]
