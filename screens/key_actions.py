"""What each key of the main screen does: the action it asks for, built from the focus
(the stage pane's row, the node a fault names) and handed to :meth:`MainScreen.start`,
which asks for the words and the confirmation and hands it to the session. The keys
themselves are declared once, in :mod:`screens.keys`; whether one is offered now is
the engine's answer (:meth:`MainScreen.check_action`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker

from cockpit.engine import actions
from cockpit.engine.actions import Action
from cockpit.engine.planner import OUTCOME_ROLLBACK, WINDOW_THROUGH
from cockpit.engine.state import ROLLBACK_STAGE, StageState
from screens import view
from screens.keys import FOLD_ACTION
from screens.modals import HelpScreen, TextScreen
from screens.widgets import FleetTable, NextBar, StageTable, TriggerPanel

if TYPE_CHECKING:
    from cockpit.session.operator import Session


class KeyActions(Screen[None]):
    """The main screen's key actions (``action_*``), apart from how it renders and runs them."""

    session: Session
    reviewer: str | None
    _focus: tuple[StageState | None, str | None]
    _actions: dict[int, tuple[Action, Worker[None]]]
    _handed: set[int]
    expanded: frozenset[str]

    def start(self, action: Action, *, via_next: bool = False) -> Worker[None] | None:
        raise NotImplementedError  # MainScreen's

    def selected_node(self) -> str | None:
        raise NotImplementedError  # MainScreen's

    def target_node(self) -> str | None:
        raise NotImplementedError  # MainScreen's

    def render_all(self) -> None:
        raise NotImplementedError  # MainScreen's

    def _render_detail(self) -> None:
        raise NotImplementedError  # MainScreen's

    def action_next(self) -> None:
        """n: exactly the action the Next line shows now, or nothing. The line's action is
        compared with a fresh plan: when they differ (a step ended, a check's command started
        since the line was drawn), n refuses in one line and the line is drawn again."""
        shown = self.query_one(NextBar).shown
        planned = self.session.next_plan(self.reviewer)
        if planned.action != shown:
            now = view.describe(planned.action) if planned.action is not None else planned.text
            self.notify(f"Not done: the plan changed; Next is now: {now}", severity="warning")
            self.render_all()
            return
        if planned.action is None:
            if planned.person_must == WINDOW_THROUGH:  # the closing stages are done: n ends the window
                self.action_end_window()
                return
            self.notify(view.next_line(planned, self.session.state).plain, severity="warning")
            return
        self.start(planned.action, via_next=True)

    def action_end_window(self) -> None:
        """E: end the window (the outcome picked from the runbook's), as `cockpit end` does."""
        if self.session.running:
            self.notify(
                f"a step is still running ({', '.join(self.running_steps())}): let it finish or k cancels it",
                severity="warning",
            )
            return
        self.run_worker(self._end_window(), group="end", exclusive=True, exit_on_error=False)

    async def _end_window(self) -> None:
        raise NotImplementedError  # MainScreen's

    def _focused_stage(self) -> tuple[str, str | None] | None:
        """The focused stage as actions name it (``rollback`` for a rollback), and its node."""
        stage, node = self._focus
        if stage is None:
            return None
        return (ROLLBACK_STAGE if stage.scope == "rollback" else stage.id), node

    def action_act(self) -> None:
        """Act on the stage pane's selected row: run a step, tick / verify / sign an item."""
        stage, _ = self._focus
        focused = self._focused_stage()
        key = self.query_one(StageTable).selected_key
        if stage is None or focused is None or key is None:
            return
        sid, node = focused
        kind, _, ident = key.partition(":")
        if kind == "step":
            self.start(actions.RunStep(stage=sid, node=node, step=ident))
            return
        item = stage.items[ident]
        if item.verify == "manual":
            self.start(actions.TickItem(stage=sid, node=node, item=ident))
        elif item.verify == "signoff":
            self.start(actions.SignOff(stage=sid, node=node, item=ident))
        elif item.verify == "step" and item.step:
            self.start(actions.RunStep(stage=sid, node=node, step=item.step))
        else:
            self.start(actions.VerifyItem(stage=sid, node=node, item=ident))

    def action_run_stage(self) -> None:
        """S: the focused stage's steps and checks up to its gate, in one action (a stage run)."""
        focused = self._focused_stage()
        if focused is None:
            self.notify("no stage in progress", severity="warning")
            return
        self.start(actions.RunStage(stage=focused[0], node=focused[1]))

    def action_pass_gate(self) -> None:
        focused = self._focused_stage()
        if focused is None:
            self.notify("no stage in progress", severity="warning")
            return
        self.start(actions.PassGate(stage=focused[0], node=focused[1]))

    def action_override(self) -> None:
        focused = self._focused_stage()
        if focused is None:
            self.notify("no stage in progress", severity="warning")
            return
        self.start(actions.Override(stage=focused[0], node=focused[1], reason=""))

    def action_raise_trigger(self) -> None:
        self.start(actions.RaiseTrigger(trigger="", note="", node=self.target_node()))  # the trigger is picked next

    def action_clear_trigger(self) -> None:
        self.start(actions.ClearTrigger(trigger="", reason=""))

    def action_rollback(self) -> None:
        node = self.target_node()
        if node is None:
            self.notify("no node selected", severity="warning")
            return
        self.start(actions.StartRollback(node=node, reason=""))  # the dialog names the node and its evidence

    def action_start_wave(self) -> None:
        state = self.session.state
        self.start(actions.StartWave(wave=0 if state.current_wave is None else state.current_wave + 1))

    def action_choose_path(self) -> None:
        self.start(actions.ChoosePath(path="", rationale="", owner=""))

    def action_decision(self) -> None:
        fired = bool(self.session.state.fired())
        self.start(actions.RecordDecision(outcome=OUTCOME_ROLLBACK if fired else ""))

    def action_note(self) -> None:
        self.start(actions.Note(text="", node=self.selected_node()))

    def running_steps(self) -> list[str]:
        """Each step in flight (the operator's or the autopilot's), as "stage/step on node"."""
        return [
            f"{run.stage}/{run.step}" + (f" on {run.node}" if run.node else "") for run in self.session.running.values()
        ]

    def action_cancel_steps(self) -> None:
        """k: the one way a step records "cancelled by the operator" (a quit interrupts it)."""
        # not one still asking for its typed confirmation: the dialog's Escape is its cancel
        handed = [(a, w) for key, (a, w) in self._actions.items() if key in self._handed]
        steps = [(a, w) for a, w in handed if isinstance(a, actions.RunStep)]
        for action, worker in steps:
            self.session.steps.request_cancel(action.stage, action.step, action.node)
            worker.cancel()
        if steps:
            self.notify(f"cancelling {', '.join(view.describe(a) for a, _ in steps)}", severity="warning")

    def action_toggle_detail(self) -> None:
        """d: the node detail, of the node that needs attention when one does."""
        showing = not self.has_class("show-detail")
        node = self.target_node()
        if showing and node is not None and node != self.selected_node():
            fleet = self.query_one(FleetTable)
            index = fleet.row_index_of(node)
            if index is not None:
                fleet.move_cursor(row=index)
        self.set_class(showing, "show-detail")
        if showing:
            self._render_detail()  # not kept up to date while hidden

    def action_toggle_fold(self) -> None:
        """e: the node set under the cursor shows its nodes, or (on a set shown so, or on
        one of its nodes) folds them back; the cursor stays on the set's row."""
        fleet = self.query_one(FleetTable)
        row = fleet.selected_row
        if row is None or row.fold is None:
            self.notify("not a node set: nothing to expand", severity="warning")
            return
        opened = row.is_set and not row.expanded
        self.expanded = self.expanded | {row.fold} if opened else self.expanded - {row.fold}
        self.render_all()
        if not opened:
            fleet.move_cursor(row=fleet.get_row_index(row.fold))

    def action_toggle_theme(self) -> None:
        self.app.theme = "textual-light" if self.app.theme != "textual-light" else "textual-dark"

    def action_show_triggers(self) -> None:
        self.app.push_screen(TextScreen("Rollback triggers", self.query_one(TriggerPanel).full_text))

    def action_help(self) -> None:
        # the fold key only where the fleet has node sets: the help of a small fleet is as before
        folds = bool(self.check_action(FOLD_ACTION, ()))
        shown = [b for b in self.BINDINGS if folds or not (isinstance(b, Binding) and b.action == FOLD_ACTION)]
        self.app.push_screen(HelpScreen(shown))

    async def action_quit_cockpit(self) -> None:
        await self.app.action_quit()
