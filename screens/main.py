"""The main screen: header, progress strip, fleet, node detail, stage pane, triggers, footer.

It renders ``session.state`` (the fold of the change log) and forwards intent: every key
becomes an :class:`~cockpit.engine.actions.Action` handed to the session, which checks the gate,
writes the change log and acts. Refusals come back as the gate's reasons. Long work
(steps, probe rounds) runs in async workers on the app's loop (asyncssh lives there).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer
from textual.worker import Worker, WorkerState

from cockpit.engine.actions import (
    Action,
    ActionKind,
    is_destructive,
)
from cockpit.engine.gates import gate_blockers
from cockpit.engine.state import (
    PENDING,
    ROLLED_BACK,
    ROLLING_BACK,
    NodeProgress,
    StageState,
)
from cockpit.errors import CockpitError
from cockpit.fleet.executor import RebootProgress
from cockpit.runbook.model import TriggerMode
from screens import view
from screens.messages import (
    ActionDone,
    RebootTick,
    RefreshDone,
    SessionChanged,
    StepOutput,
)
from screens.modals import (
    ConfirmDestructive,
    FormPrompt,
    HelpScreen,
    PickPrompt,
    TextPrompt,
)
from screens.widgets import (
    CockpitHeader,
    FleetTable,
    NextBar,
    NodeDetail,
    ProgressStrip,
    StagePane,
    StageTable,
    TriggerPanel,
)

if TYPE_CHECKING:
    from cockpit.session.operator import Session


class Cancelled(Exception):
    """The operator closed a dialog: nothing was asked of the session."""


class MainScreen(Screen[None]):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 - Textual declares it an instance variable
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]  # noqa: RUF012 - Textual declares it an instance variable

    BINDINGS: ClassVar[list[Any]] = [
        Binding("n", "next", "Next"),
        Binding("g", "pass_gate", "Pass gate"),
        Binding("o", "override", "Override"),
        Binding("s", "sign_off", "Sign off", show=False),
        Binding("exclamation_mark", "raise_trigger", "Raise trig.", key_display="!"),
        Binding("c", "clear_trigger", "Clear trig."),
        Binding("b", "rollback", "Rollback"),
        Binding("w", "start_wave", "Wave"),
        Binding("p", "choose_path", "Path"),
        Binding("D", "decision", "Decision"),
        Binding("a", "note", "Note", show=False),
        Binding("k", "cancel_steps", "Cancel step"),
        Binding("d", "toggle_detail", "Detail", show=False),
        Binding("t", "toggle_theme", "Theme", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit_cockpit", "Quit"),
    ]

    def __init__(
        self, session: Session, *, refresh_s: float = 2.0, reviewer: str | None = None, autopilot: bool = False
    ) -> None:
        super().__init__()
        self.autopilot = autopilot
        self.session = session
        self.refresh_s = refresh_s
        self.reviewer = reviewer  # the demo's simulated second person; None in a real window
        self._actions: dict[int, tuple[Action, Worker[None]]] = {}
        self._ticks: dict[str, RebootProgress] = {}
        self._focus: tuple[StageState | None, str | None] = (None, None)
        self._last_refresh_error: str | None = None
        self.refresh_rounds = 0
        self.actions_started = 0  # for tests and the benchmark: each key that became an action

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield CockpitHeader(id="header")
        yield ProgressStrip(id="strip")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield FleetTable(id="fleet")
                yield NodeDetail(id="detail")
            yield StagePane(id="stage")
        yield TriggerPanel(id="triggers")
        yield NextBar(id="next")
        yield Footer()

    def on_mount(self) -> None:
        self.session.subscribe(self._on_event)
        self.render_all()
        self.query_one(FleetTable).focus()
        self.set_interval(1.0, self._tick, name="clock")
        if self.refresh_s > 0:
            # after the first frame: the first round's SSH (asyncssh's import, the handshakes) waits for it
            self.call_after_refresh(
                lambda: self.run_worker(self._poll(), group="poll", exclusive=True, exit_on_error=False, name="poller")
            )
        if self.autopilot:
            self.run_worker(self._autopilot(), group="autopilot", exclusive=True, exit_on_error=False)

    async def _autopilot(self) -> None:
        """The demo autopilot drives; the screen follows the change log like a reviewer would."""
        from cockpit.session.autopilot import drive

        result = await drive(self.session, reviewer=self.reviewer or "demo-reviewer")
        self.notify(
            f"autopilot finished: {result.outcome}" + (f" ({result.stuck_on})" if result.stuck_on else ""), timeout=30
        )

    # ------------------------------------------------------------------ session -> screen

    def _on_event(self, event: object) -> None:
        # called by the session after each durable append; the handler re-reads the state
        self.post_message(SessionChanged())

    @property
    def now(self) -> datetime:
        return self.session.clock()

    def selected_node(self) -> str | None:
        node = self.query_one(FleetTable).selected_node
        if node is None and self.session.state.nodes:
            return next(iter(self.session.state.nodes))
        return node

    def render_all(self) -> None:
        s = self.session
        state = s.state
        now = self.now
        self.query_one(CockpitHeader).show_view(
            view.header_view(state, change_id=s.change_id, runbook_id=s.runbook.id, operator=s.operator, now=now)
        )
        self.query_one(ProgressStrip).show_segments(view.progress_segments(state))
        self.query_one(FleetTable).sync(state.nodes, s.live, now)
        self._focus = view.focus_stage(state, self.selected_node())
        stage, node = self._focus
        self.query_one(StagePane).show_stage(state, stage, node)
        self.query_one(TriggerPanel).show_triggers(state, compact=self.has_class("-short"))
        self.set_class(bool(state.fired()), "alarm")
        self._render_next()
        self._render_detail()
        self._sync_bindings()

    def _render_next(self) -> None:
        state = self.session.state
        text = view.next_line(self.session.next_action(), state)
        running = [a for a, _ in self._actions.values() if a.kind is ActionKind.RUN_STEP]
        if running:
            text.append(f"   running: {', '.join(view.describe(a) for a in running)} (k cancels)", style="yellow")
        if self._last_refresh_error:
            text.append(f"   probe: {self._last_refresh_error}", style="red")
        self.query_one(NextBar).update(text)

    def _running_for(self, node: str | None) -> tuple[str, Any] | None:
        for key, run in self.session.running.items():
            if run.node == node or (node is not None and key.endswith(f"/{node}")):
                return key, run
        return None

    def _render_detail(self) -> None:
        s = self.session
        node = self.selected_node()
        progress: NodeProgress | None = s.state.nodes.get(node or "")
        found = self._running_for(node)
        outcome = s.last_outcomes.get(node or "")
        if found is not None:
            key, run = found
            lines, source, label = list(run.output), key, f"{run.stage}/{run.step}"
            tick = run.progress or self._ticks.get(key)
        else:
            tick, label = None, None
            if outcome is not None:
                lines = (outcome.stdout + (("\n" + outcome.stderr) if outcome.stderr else "")).splitlines()
                source = f"done:{node}:{outcome.step}:{id(outcome)}"
            else:
                lines, source = [], f"none:{node}"
        self.query_one(NodeDetail).show_node(
            node, progress, s.live.get(node or ""), outcome, label, lines, tick, source
        )

    def _tick(self) -> None:
        s = self.session
        s.absorb_foreign()  # a reviewer's sign-off shows within a second, not at the next probe round
        state = s.state
        now = self.now
        self.query_one(CockpitHeader).show_view(
            view.header_view(state, change_id=s.change_id, runbook_id=s.runbook.id, operator=s.operator, now=now)
        )
        self.query_one(FleetTable).sync(state.nodes, s.live, now)
        if s.running:
            self._render_detail()

    def on_resize(self) -> None:
        # the breakpoint classes (-narrow/-short) decide how much the trigger panel may say
        self.call_after_refresh(self.render_all)

    @on(SessionChanged)
    def _session_changed(self) -> None:
        self.render_all()

    @on(RefreshDone)
    def _refresh_done(self, message: RefreshDone) -> None:
        self.refresh_rounds += 1
        self._last_refresh_error = message.error
        s = self.session
        self.query_one(FleetTable).sync(s.state.nodes, s.live, self.now)
        self._render_detail()
        if message.error:
            self._render_next()

    @on(StepOutput)
    def _step_output(self, message: StepOutput) -> None:
        self._render_detail()

    @on(RebootTick)
    def _reboot_tick(self, message: RebootTick) -> None:
        self._ticks[message.key] = message.progress
        self._render_detail()

    @on(ActionDone)
    def _action_done(self, message: ActionDone) -> None:
        if message.ok:
            self.notify(message.text, timeout=3)
        else:
            self.notify(message.text, severity="error", timeout=8)
        self.render_all()

    @on(DataTable.RowHighlighted, "#fleet")
    def _node_highlighted(self) -> None:
        state = self.session.state
        self._focus = view.focus_stage(state, self.selected_node())
        stage, node = self._focus
        self.query_one(StagePane).show_stage(state, stage, node)
        self._render_detail()
        self._sync_bindings()

    @on(DataTable.RowSelected, "#stage-table")
    def _stage_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_act()

    # ------------------------------------------------------------------ poller

    async def _poll(self) -> None:
        """One probe round, then a pause, then the next: rounds never overlap."""
        while True:
            error = None
            try:
                await self.session.refresh()
            except asyncio.CancelledError:
                raise
            except CockpitError as exc:
                error = str(exc)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            self.post_message(RefreshDone(error))
            await asyncio.sleep(self.refresh_s)

    # ------------------------------------------------------------------ acting

    def start(self, action: Action, *, via_next: bool = False) -> Worker[None]:
        """Complete the action with the operator's words, then hand it to the session."""
        worker = self.run_worker(
            self._act(action, via_next), group="actions", exit_on_error=False, description=view.describe(action)
        )
        self._actions[id(worker)] = (action, worker)
        self.actions_started += 1
        return worker

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            entry = self._actions.pop(id(event.worker), None)
            if entry is not None:
                if event.state is WorkerState.ERROR:
                    self.notify(f"{view.describe(entry[0])}: {event.worker.error}", severity="error", timeout=10)
                self._render_next()
                self._sync_bindings()

    async def stop_workers(self, timeout: float = 10.0) -> None:
        """Cancel the poller and any running action (a running step records its
        cancellation in the change log), and wait for them to finish."""
        workers = [w for w in self.workers if w.group in ("poll", "actions", "autopilot")]
        for worker in workers:
            worker.cancel()
        tasks = [w._task for w in workers if w._task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def _actor(self, action: Action, via_next: bool) -> str:
        if action.kind is ActionKind.SIGN_OFF and via_next and self.reviewer:
            return self.reviewer
        return self.session.operator

    def _refused(self, action: Action, actor: str) -> list[str]:
        """The gate's reasons, asked with placeholder words so a missing reason is not one."""
        if action.kind in (ActionKind.RAISE_TRIGGER, ActionKind.CLEAR_TRIGGER) and action.trigger is None:
            return []  # asked once the operator picked the trigger
        probe = action.model_copy(update={k: (getattr(action, k) or "…") for k in ("reason", "note")})
        if action.kind is ActionKind.CHOOSE_PATH:
            probe = probe.model_copy(update={"path": action.path or "…", "rationale": action.rationale or "…"})
        if action.kind is ActionKind.RECORD_DECISION:
            probe = probe.model_copy(update={"outcome": action.outcome or "…"})
        return self.session.verdict(probe, actor).reasons

    async def _act(self, action: Action, via_next: bool) -> None:
        actor = self._actor(action, via_next)
        reasons = self._refused(action, actor)
        if reasons:
            self.post_message(ActionDone(action, False, f"Refused: {view.describe(action)}: " + "; ".join(reasons)))
            return
        try:
            action, confirmation = await self._complete(action, via_next)
        except Cancelled:
            return
        from cockpit.engine.actions import ActionRefused

        key = None
        if action.kind is ActionKind.RUN_STEP:
            from cockpit.session.operator import step_key

            key = step_key(action.stage or "", action.step or "", action.node)

        def on_output(stream: str, text: str) -> None:
            self.post_message(StepOutput(key or ""))

        def on_progress(tick: RebootProgress) -> None:
            self.post_message(RebootTick(key or "", tick))

        try:
            result = await self.session.perform(
                action, actor=actor, confirmation=confirmation, on_output=on_output, on_progress=on_progress
            )
        except ActionRefused as exc:
            self.post_message(ActionDone(action, False, f"Refused: {view.describe(action)}: " + "; ".join(exc.reasons)))
            return
        except asyncio.CancelledError:
            self.post_message(ActionDone(action, False, f"Cancelled: {view.describe(action)}"))
            raise
        except CockpitError as exc:
            self.post_message(ActionDone(action, False, f"{view.describe(action)}: {exc}"))
            return
        finally:
            if key is not None:
                self._ticks.pop(key, None)
        self.post_message(ActionDone(action, *_result_text(action, result)))

    async def _ask(self, screen: Any) -> Any:
        answer = await self.app.push_screen_wait(screen)
        if answer is None:
            raise Cancelled
        return answer

    async def _complete(self, action: Action, via_next: bool) -> tuple[Action, str | None]:
        """Ask for whatever the action still needs: a typed confirmation, a note, a reason."""
        s = self.session
        k = action.kind
        demo = self.reviewer is not None
        if k is ActionKind.RUN_STEP and is_destructive(s.runbook, action):
            expected = action.node if action.node is not None else action.stage or ""
            target, command = self._preview(action)
            typed = await self._ask(
                ConfirmDestructive(
                    title=view.describe(action),
                    target=target,
                    command=command,
                    expected=expected,
                    warning="This changes the node. The change log records who confirmed it.",
                )
            )
            return action, typed
        if k is ActionKind.TICK_ITEM:
            item = self._item_state(action)
            required = bool(item and item.note_required)
            note = await self._ask(
                TextPrompt(
                    title=f"Tick {action.stage}/{action.item}",
                    label="Note (what you checked)" + (" (required)" if required else ""),
                    explanation=item.text if item else "",
                    required=required,
                    value="checked in the demo (simulated fleet)" if demo else "",
                )
            )
            return action.model_copy(update={"note": note or None}), None
        if k is ActionKind.OVERRIDE:
            stage = self._stage_of(action)
            blockers = gate_blockers(stage) if stage is not None else []
            reason = await self._ask(
                TextPrompt(
                    title=f"OVERRIDE the {action.stage} gate",
                    label="Reason (required; recorded and shown in red)",
                    danger=True,
                    explanation="Bypasses: " + "; ".join(blockers),
                )
            )
            return action.model_copy(update={"reason": reason}), None
        if k is ActionKind.START_ROLLBACK:
            reason = await self._ask(
                TextPrompt(
                    title=f"Roll back {action.node}",
                    label="Reason (required)",
                    value=action.reason or "",
                    explanation="Restores the recorded driver package, reboots and smoke-tests the node.",
                )
            )
            return action.model_copy(update={"reason": reason}), None
        if k is ActionKind.RAISE_TRIGGER:
            trigger = action.trigger
            if trigger is None:
                manual = [(t.id, f"{t.id}: {t.title}") for t in s.runbook.triggers if t.mode is TriggerMode.MANUAL]
                trigger = await self._ask(PickPrompt(title="Raise which trigger?", choices=manual))
            note = await self._ask(
                TextPrompt(
                    title=f"Raise {trigger}" + (f" on {action.node}" if action.node else ""),
                    label="What was seen (required)",
                )
            )
            return action.model_copy(update={"trigger": trigger, "note": note}), None
        if k is ActionKind.CLEAR_TRIGGER:
            trigger = action.trigger
            if trigger is None:
                fired = [(t.id, f"{t.id}: {t.evidence}") for t in s.state.fired()]
                trigger = (
                    fired[0][0]
                    if len(fired) == 1
                    else await self._ask(PickPrompt(title="Clear which trigger?", choices=fired))
                )
            reason = await self._ask(
                TextPrompt(title=f"Clear trigger {trigger}", label="Reason (required)", danger=True)
            )
            return action.model_copy(update={"trigger": trigger, "reason": reason}), None
        if k is ActionKind.NOTE:
            note = await self._ask(
                TextPrompt(
                    title="Add a note to the change log" + (f" ({action.node})" if action.node else ""), label="Note"
                )
            )
            return action.model_copy(update={"note": note}), None
        if k is ActionKind.CHOOSE_PATH:
            values = await self._ask(
                FormPrompt(
                    title="Choose the recovery path",
                    fields=[
                        ("path", "Path", action.path or ""),
                        ("rationale", "Rationale", action.rationale or ""),
                        ("owner", "Owner", action.owner or (s.operator if demo else "")),
                    ],
                )
            )
            return (
                action.model_copy(
                    update={"path": values["path"], "rationale": values["rationale"], "owner": values["owner"]}
                ),
                None,
            )
        if k is ActionKind.RECORD_DECISION:
            outcome_default = action.outcome or ""
            values = await self._ask(
                FormPrompt(
                    title="Record the decision",
                    explanation="Outcomes: keep-upgraded-path, keep-isolated-path, keep-cu129-transition, roll-back "
                    "(roll-back halts the rollout).",
                    fields=[
                        ("outcome", "Outcome", outcome_default),
                        ("why", "Why", "a rollback trigger fired" if outcome_default == "roll-back" and demo else ""),
                    ],
                )
            )
            outcome = values["outcome"]
            return (
                action.model_copy(
                    update={
                        "outcome": outcome,
                        "answers": (("why", values["why"]),),
                        "halt_rollout": outcome == "roll-back",
                    }
                ),
                None,
            )
        return action, None

    def _preview(self, action: Action) -> tuple[str, str]:
        """The exact command and where it runs, as the session will run it."""
        return self.session.preview_step(action.stage or "", action.step or "", action.node)

    def _stage_of(self, action: Action) -> StageState | None:
        state = self.session.state
        if action.stage in state.window:
            return state.window[action.stage or ""]
        progress = state.nodes.get(action.node or "")
        if progress is None:
            return None
        if action.stage == "rollback":
            return progress.rollback
        return progress.stages.get(action.stage or "")

    def _item_state(self, action: Action) -> Any:
        stage = self._stage_of(action)
        return None if stage is None else stage.items.get(action.item or "")

    # ------------------------------------------------------------------ key actions

    _DYNAMIC = (
        "pass_gate",
        "override",
        "clear_trigger",
        "cancel_steps",
        "rollback",
        "start_wave",
        "choose_path",
        "decision",
    )

    def _sync_bindings(self) -> None:
        """Rebuild the footer only when the keys that apply changed (a rebuild costs tens of ms)."""
        sig = tuple(self.check_action(a, ()) for a in self._DYNAMIC)
        if sig != getattr(self, "_binding_sig", None):
            self._binding_sig = sig
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide keys that cannot apply now; the rest stay so a press can say why not."""
        if not self.is_mounted:
            return True
        state = self.session.state
        stage, _node = self._focus
        if action in ("pass_gate", "override"):
            return stage is not None and not stage.closed
        if action == "clear_trigger":
            return bool(state.fired())
        if action == "cancel_steps":
            return any(a.kind is ActionKind.RUN_STEP for a, _ in self._actions.values())
        if action == "rollback":
            sel = state.nodes.get(self.selected_node() or "")
            return sel is not None and sel.current not in (PENDING, ROLLING_BACK, ROLLED_BACK)
        if action == "start_wave":
            return (
                state.opening_done
                and (state.current_wave or 0) + 1 <= len(state.waves)
                and (state.current_wave is None or state.current_wave + 1 < len(state.waves))
            )
        if action == "choose_path":
            return state.current_wave is None and state.path is None
        if action == "decision":
            return state.decision is None and (bool(state.fired()) or state.window_current in state.closing)
        return True

    def action_next(self) -> None:
        action = self.session.next_action()
        if action is None:
            self.notify(view.next_line(None, self.session.state).plain, severity="warning")
            return
        self.start(action, via_next=True)

    def action_act(self) -> None:
        """Act on the stage pane's selected row: run a step, tick / verify / sign an item."""
        stage, node = self._focus
        key = self.query_one(StageTable).selected_key
        if stage is None or key is None:
            return
        kind, _, ident = key.partition(":")
        sid = "rollback" if stage.scope == "rollback" else stage.id
        if kind == "step":
            self.start(Action(kind=ActionKind.RUN_STEP, stage=sid, node=node, step=ident))
            return
        item = stage.items[ident]
        if item.verify == "manual":
            self.start(Action(kind=ActionKind.TICK_ITEM, stage=sid, node=node, item=ident))
        elif item.verify == "signoff":
            self.start(Action(kind=ActionKind.SIGN_OFF, stage=sid, node=node, item=ident))
        elif item.verify == "step" and item.step:
            self.start(Action(kind=ActionKind.RUN_STEP, stage=sid, node=node, step=item.step))
        else:
            self.start(Action(kind=ActionKind.VERIFY_ITEM, stage=sid, node=node, item=ident))

    def _stage_action(self, kind: ActionKind) -> None:
        stage, node = self._focus
        if stage is None:
            self.notify("no stage in progress", severity="warning")
            return
        sid = "rollback" if stage.scope == "rollback" else stage.id
        self.start(Action(kind=kind, stage=sid, node=node))

    def action_pass_gate(self) -> None:
        self._stage_action(ActionKind.PASS_GATE)

    def action_override(self) -> None:
        self._stage_action(ActionKind.OVERRIDE)

    def action_sign_off(self) -> None:
        stage, node = self._focus
        key = self.query_one(StageTable).selected_key or ""
        if stage is None:
            self.notify("no stage in progress", severity="warning")
            return
        item = key.partition(":")[2] if key.startswith("item:") else None
        self.start(Action(kind=ActionKind.SIGN_OFF, stage=stage.id, node=node, item=item))

    def action_raise_trigger(self) -> None:
        self.start(Action(kind=ActionKind.RAISE_TRIGGER, trigger=None, node=self.selected_node()))

    def action_clear_trigger(self) -> None:
        self.start(Action(kind=ActionKind.CLEAR_TRIGGER))

    def action_rollback(self) -> None:
        node = self.selected_node()
        fired = [t for t in self.session.state.fired() if node in t.fired_nodes]
        reason = f"trigger {fired[0].id}: {fired[0].fired_nodes[node or '']}" if fired else None
        self.start(Action(kind=ActionKind.START_ROLLBACK, node=node, reason=reason))

    def action_start_wave(self) -> None:
        state = self.session.state
        nxt = 0 if state.current_wave is None else state.current_wave + 1
        self.start(Action(kind=ActionKind.START_WAVE, wave=nxt))

    def action_choose_path(self) -> None:
        self.start(Action(kind=ActionKind.CHOOSE_PATH))

    def action_decision(self) -> None:
        fired = bool(self.session.state.fired())
        self.start(Action(kind=ActionKind.RECORD_DECISION, outcome="roll-back" if fired else None))

    def action_note(self) -> None:
        self.start(Action(kind=ActionKind.NOTE, node=self.selected_node()))

    def action_cancel_steps(self) -> None:
        steps = [(a, w) for a, w in self._actions.values() if a.kind is ActionKind.RUN_STEP]
        for _, worker in steps:
            worker.cancel()
        if steps:
            self.notify(f"cancelling {', '.join(view.describe(a) for a, _ in steps)}", severity="warning")

    def action_toggle_detail(self) -> None:
        self.toggle_class("show-detail")

    def action_toggle_theme(self) -> None:
        self.app.theme = "textual-light" if self.app.theme != "textual-light" else "textual-dark"

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    async def action_quit_cockpit(self) -> None:
        await self.app.action_quit()


def _result_text(action: Action, result: object) -> tuple[bool, str]:
    """An action's result in words: a failed step or check is not a success."""
    ok = getattr(result, "ok", True) if not isinstance(result, bool) else result
    what = view.describe(action)
    if ok:
        return True, f"Done: {what}"
    err = getattr(result, "error", None) or (
        f"exit {getattr(result, 'exit_status', None)}" if getattr(result, "exit_status", None) is not None else "failed"
    )
    return False, f"Failed: {what}: {err}"
