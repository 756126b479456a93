"""The main screen: header, progress strip, fleet, node detail, stage pane, triggers, footer.

It renders ``session.state`` (the fold of the change log) and forwards intent: every key
becomes an :class:`~cockpit.engine.actions.Action` handed to the session, which checks the gate,
writes the change log and acts. Refusals come back as the gate's reasons. Long work
(steps, probe rounds) runs in async workers on the app's loop (asyncssh lives there).
"""

from __future__ import annotations

import asyncio
import gc
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.css.query import NoMatches
from textual.css.scalar import Scalar
from textual.widgets import DataTable
from textual.widgets._toast import Toast, ToastRack
from textual.worker import Worker, WorkerState, get_current_worker

from cockpit.engine import actions
from cockpit.engine.actions import Action, ActionKind, ActionRefused
from cockpit.engine.offers import offered_kinds
from cockpit.engine.planner import WINDOW_THROUGH
from cockpit.engine.rules import reasons_against
from cockpit.engine.state import NodeProgress, StageState
from cockpit.errors import CockpitError
from cockpit.export.summary import left_mid_change
from cockpit.fleet.executor import RebootProgress
from cockpit.session.operator import step_key
from cockpit.view.fleet import FOLD_ABOVE
from cockpit.view.inert import inert
from cockpit.view.model import NARROW_BELOW
from screens import view
from screens.completion import ActionDialogs, Cancelled, result_text
from screens.key_actions import KeyActions
from screens.keys import FOLD_ACTION, KEY_KINDS, MAIN_KEYS
from screens.messages import (
    ActionDone,
    FlightChanged,
    RebootTick,
    RefreshDone,
    SessionChanged,
    StepOutput,
)
from screens.modals import PickPrompt
from screens.waves import WAVE_KEYS, WaveKeys, WavePane
from screens.widgets import (
    CockpitHeader,
    FleetTable,
    KeysFooter,
    NextBar,
    NodeDetail,
    ProgressStrip,
    StagePane,
    TriggerPanel,
    cockpit_body,
)

if TYPE_CHECKING:
    from textual.timer import Timer

    from cockpit.session.operator import Session

#: The least time between two redraws for recorded events. A wave of 200 nodes records
#: ~80 events a second; a redraw per event (the fleet's rows, Next, the keys: ~5 ms) took a
#: fifth of the process and put a key behind each one. The first event after a quiet spell
#: is drawn at once; a burst is drawn at most this often, its last event always included.
REDRAW_EVERY_S = 0.25


class MainScreen(WaveKeys, KeyActions):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]  # noqa: RUF012 - Textual declares it an instance variable
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]  # noqa: RUF012 - Textual declares it an instance variable

    #: Every key of the screen, declared once (:mod:`screens.keys`): the footer, the help
    #: screen and the command palette are generated from it.
    BINDINGS: ClassVar[list[BindingType]] = MAIN_KEYS

    def __init__(
        self, session: Session, *, refresh_s: float = 2.0, reviewer: str | None = None, autopilot: bool = False
    ) -> None:
        super().__init__()
        self.autopilot = autopilot
        self.session = session
        self.refresh_s = refresh_s
        self.reviewer = reviewer  # the demo's simulated second person; None in a real window
        self._actions: dict[int, tuple[Action, Worker[None]]] = {}
        self.dialogs = ActionDialogs(self, session)
        self._offered_sig: tuple[object, ...] | None = None
        self._offered_kinds: frozenset[ActionKind] = frozenset()
        self._ticks: dict[str, RebootProgress] = {}
        self._focus: tuple[StageState | None, str | None] = (None, None)
        self._last_refresh_error: str | None = None
        self.refresh_rounds = 0
        self._poller_started = False  # the probe rounds start once, after the first frame
        self.actions_started = 0  # for tests and the benchmark: each key that became an action
        self._completing: set[int] = set()  # workers whose action is still checked or asked for its words
        #: workers whose action was handed to the session (asked, confirmed): only these run.
        #: Not "not completing": a dialog's Escape ends completing a moment before the worker,
        #: and the screen's bindings, refreshed as the dialog closes, would offer k then.
        self._handed: set[int] = set()
        self.expanded: frozenset[str] = frozenset()  # the node sets the operator expanded (their fold keys)
        self._drawn_at = 0.0  # time.monotonic() of the last render_all
        self._stale = False  # something was recorded since the last render_all
        self._redraw: Timer | None = None  # the redraw due for a burst of events
        self._highlighted: tuple[str | None, int] | None = None  # (node, seq) the cursor's row showed

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield CockpitHeader(id="header")
        yield ProgressStrip(id="strip")
        yield cockpit_body(NodeDetail(id="detail"), WavePane(id="wave"))
        yield TriggerPanel(id="triggers")
        yield NextBar(id="next")
        # one line of keys, ctrl+p named on the help screen instead: at 80 columns every
        # key the gate offers (b w k d D among them) stays on the footer
        yield KeysFooter()

    def on_mount(self) -> None:
        self.session.subscribe(self._on_event)
        # an action that starts or ends with no event yet (a check's command, a step's closing
        # probe) changes Next: the line follows at once, so `n` acts on what it shows
        self.session.flight_listeners.append(self._on_flight)
        if len(self.session.state.nodes) > FOLD_ABOVE:
            # a big fleet's state is hundreds of thousands of objects that live as long as the
            # window: frozen, the cyclic collector stops walking them every few frames (as replay)
            gc.freeze()
        self.render_all()
        fleet = self.query_one(FleetTable)
        fleet.on_cursor_row = self._node_highlighted
        fleet.focus()
        # after each layout: the toasts' room ends where the gate line, triggers or Next begin
        self.screen_layout_refresh_signal.subscribe(self, self._place_toasts)
        self.set_interval(1.0, self._tick, name="clock")
        if self.autopilot:
            self.run_worker(self._autopilot(), group="autopilot", exclusive=True, exit_on_error=False)

    def start_poller(self) -> None:
        """Start the probe rounds (once; none when ``refresh_s`` is 0). The app calls it when
        its first frame has been written (Textual's Ready): the first round's SSH (asyncssh's
        import, 2,000 handshakes) asked for any earlier held that frame back by half a second."""
        if self.refresh_s > 0 and not self._poller_started:
            self._poller_started = True
            self.run_worker(self._poll(), group="poll", exclusive=True, exit_on_error=False, name="poller")

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

    def _on_flight(self) -> None:
        self.post_message(FlightChanged())

    def on_unmount(self) -> None:
        if self._on_flight in self.session.flight_listeners:
            self.session.flight_listeners.remove(self._on_flight)

    @property
    def now(self) -> datetime:
        return self.session.clock()

    def selected_node(self) -> str | None:
        node = self.query_one(FleetTable).selected_node
        if node is None and self.session.state.nodes:
            return next(iter(self.session.state.nodes))
        return node

    def target_node(self) -> str | None:
        """The node an action about a fault acts on: the one a fired trigger or a failed
        step names, the cursor choosing only among several (:func:`view.target_node`)."""
        return view.target_node(self.session.state, self.selected_node())

    def render_all(self) -> None:
        self._drawn_at, self._stale = time.monotonic(), False
        s = self.session
        state = s.state
        now = self.now
        header = view.header_view(state, change_id=s.change_id, runbook_id=s.runbook.id, operator=s.operator, now=now)
        self.query_one(CockpitHeader).show_view(self.header_with_forecast(header, now))
        self.query_one(ProgressStrip).show_segments(view.progress_segments(state))
        self._sync_fleet()
        self._focus = view.focus_stage(state, self.selected_node())
        stage, node = self._focus
        self.query_one(StagePane).show_stage(state, stage, node)
        short = self.has_class("-short")
        # a short terminal: every fired trigger, then "+N more: T shows every trigger"
        self.query_one(TriggerPanel).show_triggers(
            state, compact=short, room=(5 if state.fired() else 3) if short else None
        )
        self.set_class(bool(state.fired()), "alarm")
        self.render_next()
        self._render_detail()
        self.render_wave(now)
        self._sync_bindings()

    def _sync_fleet(self) -> None:
        s = self.session
        self.query_one(FleetTable).sync(
            s.state, s.live, self.now, narrow=self.has_class("-narrow"), expanded=self.expanded
        )

    def render_next(self) -> None:
        state = self.session.state
        bar = self.query_one(NextBar)
        # the bar's own columns (0 before the first layout: then the line as it is)
        planned = self.wave_plan() or self.session.next_plan(self.reviewer)
        bar.shown = planned.action if state.ended_at is None else None
        text = view.next_line(planned, state, bar.content_size.width or None, keys=self.next_keys(planned))
        running = [a for a in self.steps_under_way() if a.kind is ActionKind.RUN_STEP]
        if running:
            text.append(f"   running: {', '.join(view.describe(a) for a in running)} (k cancels)", style="yellow")
        if self._last_refresh_error:
            text.append(f"   probe: {inert(self._last_refresh_error)}", style="red")
        bar.show_text(text)

    def _running_for(self, node: str | None) -> tuple[str, Any] | None:
        for key, run in self.session.running.items():
            if run.node == node or (node is not None and key.endswith(f"/{node}")):
                return key, run
        return None

    def _detail_hidden(self) -> bool:
        """At the narrow breakpoint the node detail shows only on d (cockpit.tcss): words
        written into it while hidden would only lay the screen out again for nothing."""
        return self.has_class("-narrow") and not self.has_class("show-detail")

    def _render_detail(self) -> None:
        if self._detail_hidden():
            return  # rendered when d shows it (action_toggle_detail) or the screen widens (on_resize)
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
        header = view.header_view(state, change_id=s.change_id, runbook_id=s.runbook.id, operator=s.operator, now=now)
        self.query_one(CockpitHeader).show_view(self.header_with_forecast(header, now))
        self._sync_fleet()
        if s.running:
            self._render_detail()

    def _place_toasts(self, _screen: object = None) -> None:
        """Keep the toasts (docked under the header and the strip, cockpit.tcss) above the
        gate line, the trigger panel and the Next line: what an operator reads to decide
        stays in sight while a toast says how the last action went. More toasts than the
        room holds scroll; the newest shows (Textual's rack scrolls to its end)."""
        try:
            rack = self.get_child_by_type(ToastRack)
        except NoMatches:
            return  # notifications off (the test pilot's default)
        kept = [self.query_one(w).region for w in ("#gate-line", "#triggers", "#next")]
        top = min((r.y for r in kept if r.height), default=self.size.height)
        room = max(top - rack.styles.margin.top, 0)
        if rack.styles.max_height != Scalar.from_number(room):
            rack.styles.max_height = room
        # The newest toasts that fit stay; older ones go early. (Textual would scroll its rack
        # to the newest, but a rack it keeps invisible is never given a size to scroll in.)
        used = 0
        for toast in reversed(list(rack.query(Toast))):
            margin = toast.styles.margin
            used += toast.outer_size.height + margin.top + margin.bottom
            if used > room and toast.outer_size.height:
                toast._expire()  # Textual's own way out for a toast: its timeout, or a click

    def on_resize(self) -> None:
        # the breakpoint classes (-narrow/-short) decide how much the trigger panel may say
        self.call_after_refresh(self.render_all)

    @on(SessionChanged)
    def _session_changed(self) -> None:
        self._stale = True
        if self._redraw is not None:
            return  # a burst: its redraw is due, and will show this event too
        wait = self._drawn_at + REDRAW_EVERY_S - time.monotonic()
        if wait <= 0:
            self.render_all()
        else:
            self._redraw = self.set_timer(wait, self._redraw_due, name="redraw")

    @property
    def redraw_pending(self) -> bool:
        """Something was recorded that the screen has not drawn yet (a paced redraw is due)."""
        return self._stale or self._redraw is not None

    def _redraw_due(self) -> None:
        self._redraw = None
        if self._stale:  # else a key's or an action's render_all came first
            self.render_all()

    @on(FlightChanged)
    def _flight_changed(self) -> None:
        if self._redraw is not None:
            self._stale = True  # the redraw due draws Next and the keys as they are then
            return
        self.render_next()
        self._sync_bindings()

    @on(RefreshDone)
    def _refresh_done(self, message: RefreshDone) -> None:
        self.refresh_rounds += 1
        self._last_refresh_error = message.error
        self._sync_fleet()
        self._render_detail()
        self.render_next()  # a check that waited for its node's probe is Next again

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
        else:  # top right, over the fleet's last columns: never over the triggers or the gate
            self.notify(message.text, severity="error", timeout=6)
        self.render_all()

    @on(DataTable.RowHighlighted, "#fleet")
    def _node_highlighted(self) -> None:
        state = self.session.state
        shown = (self.selected_node(), state.last_seq)
        if shown == self._highlighted:
            return  # shown already, when the cursor moved (FleetTable.on_cursor_row)
        self._highlighted = shown
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

    def start(self, action: Action, *, via_next: bool = False) -> Worker[None] | None:
        """Complete the action with the operator's words, then hand it to the session.

        A key pressed while an earlier one is still opening its dialog (a double press,
        key repeat) starts nothing: it would open a second dialog or act twice."""
        if self._completing:
            return None
        worker = self.run_worker(
            self._act(action, via_next), group="actions", exit_on_error=False, description=view.describe(action)
        )
        self._actions[id(worker)] = (action, worker)
        self._completing.add(id(worker))
        self.actions_started += 1
        return worker

    def quit_stops(self) -> list[str]:
        """The work a quit stops besides the steps running (each named by ``running_steps``),
        each with what becomes of it: the wave running itself and the checks under way."""
        checks = [a for a in self.session.in_flight().actions if isinstance(a, actions.VerifyItem)]
        return self.wave_quit_words() + [
            f"{view.describe(a)}: its command is cut and nothing is recorded; Next runs it again" for a in checks
        ]

    def steps_under_way(self) -> list[Action]:
        """The actions handed to the session: not one still asking for its words or its typed
        confirmation (no step-started yet; k would cancel nothing, a running line would lie)."""
        return [a for key, (a, _) in self._actions.items() if key in self._handed]

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            self._completing.discard(id(event.worker))  # also when cancelled before it ran
            self._handed.discard(id(event.worker))
            entry = self._actions.pop(id(event.worker), None)
            if entry is not None:
                if event.state is WorkerState.ERROR:
                    self.notify(f"{view.describe(entry[0])}: {event.worker.error}", severity="error", timeout=10)
                self.render_next()
                self._sync_bindings()

    async def stop_workers(self, timeout: float = 10.0, *, wave: bool = False) -> None:
        """Cancel the poller and any running action (a running step records that it was
        interrupted, outcome unknown), and wait for them to finish. ``wave`` (a quit): the wave
        running itself too, before the pause is written: it takes no new action, and its work
        in flight stops as the screen's own does (a check's command cut records nothing), so
        nothing of it is written after session-paused."""
        groups = ("poll", "actions", "autopilot", "wave") if wave else ("poll", "actions", "autopilot")
        if wave and self.wave_runner is not None:
            self.wave_runner.pause()
        workers = [w for w in self.workers if w.group in groups]
        for worker in workers:
            worker.cancel()
        tasks = [w._task for w in workers if w._task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def _end_window(self) -> None:
        """Ask how the window ended (the runbook's outcomes, the recorded decision's first),
        then end it as `cockpit end` does (Session.end_by_person: session-ended written, the
        engine's changes put back, the lock released) and exit; the command that ran the
        cockpit then says where the log is and how to export it."""
        s = self.session
        recorded = s.state.decision.facts.outcome if s.state.decision is not None else None
        order = sorted(s.runbook.ending_outcomes, key=lambda o: o != recorded)
        try:
            outcome: str = await self.dialogs.ask(
                PickPrompt(
                    title="End the window: how did it end?",
                    choices=[(o, o + (" (the recorded decision)" if o == recorded else "")) for o in order],
                    explanation="\n".join(
                        [
                            "Written to the change log and the ticket; an ended window cannot be resumed.",
                            *left_mid_change(s.state),  # as `cockpit end` says them: for a person to take
                        ]
                    ),
                )
            )
        except Cancelled:
            return
        await self.stop_workers()  # the probe rounds: the window's transport closes with it
        try:
            await s.end_by_person(outcome)
        except CockpitError as exc:
            self.notify(f"the window was not ended: {exc}", severity="error", timeout=10)
            self._poller_started = False
            self.start_poller()
            return
        # the real app's exit also ends a process whose terminal went away (CockpitApp.exit_for_sure)
        getattr(self.app, "exit_for_sure", self.app.exit)(0)

    def _actor(self, action: Action, via_next: bool) -> str:
        if isinstance(action, actions.SignOff) and via_next and self.reviewer:
            return self.reviewer
        return self.session.operator

    def _refused(self, action: Action, actor: str) -> list[str]:
        """The gate's reasons before any dialog opens; words not written yet are not one."""
        if isinstance(action, actions.RaiseTrigger | actions.ClearTrigger) and not action.trigger:
            return []  # asked once the operator picked the trigger
        s = self.session
        s.absorb_foreign()
        return reasons_against(s.state, s.runbook, action, actor, s.operator, need_text=False)

    async def _act(self, action: Action, via_next: bool) -> None:
        try:
            actor = self._actor(action, via_next)
            reasons = self._refused(action, actor)
            if reasons:
                self.post_message(ActionDone(action, False, f"Refused: {view.describe(action)}: " + "; ".join(reasons)))
                return
            try:
                action, confirmation = await self.dialogs.complete(action)
            except Cancelled:
                return
        finally:
            self._completing.discard(id(get_current_worker()))
        self._handed.add(id(get_current_worker()))
        key = step_key(action.stage, action.step, action.node) if isinstance(action, actions.RunStep) else None

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
        ok, text = result_text(action, result)
        if not ok and isinstance(action, actions.VerifyItem):  # the check's own evidence line
            item = self.dialogs.item_state(action.stage, action.node, action.item)
            if item is not None and item.evidence:
                text = f"{text}: {item.evidence}"
        self.post_message(ActionDone(action, ok, text))

    # ------------------------------------------------------------------ key actions

    def _offered(self) -> frozenset[ActionKind]:
        """The kinds of action the engine would accept now on the focus (cached per event)."""
        s = self.session
        stage, stage_node = self._focus
        node = self.target_node()
        sig = (s.state.last_seq, id(stage), stage_node, node)
        if sig != self._offered_sig:
            self._offered_sig = sig
            self._offered_kinds = offered_kinds(
                s.state, s.runbook, s.operator, operator=s.operator, stage=stage, stage_node=stage_node, node=node
            )
        return self._offered_kinds

    def _sync_bindings(self) -> None:
        """Rebuild the footer only when the keys that apply changed (a rebuild costs tens of ms)."""
        sig = (
            *(self.check_action(name, ()) for name in (*KEY_KINDS, *WAVE_KEYS, "cancel_steps", FOLD_ACTION)),
            self.footer_also,
        )
        if sig != getattr(self, "_binding_sig", None):
            self._binding_sig = sig
            self.refresh_bindings()

    @property
    def footer_also(self) -> frozenset[str]:
        """Keys kept out of the footer that it shows now: E once every stage is through (the
        Next line says "E ends the window"; before, the footer would crowd with a key for the
        window's end)."""
        through = self.session.state.ended_at is None and self.session.next_plan().person_must == WINDOW_THROUGH
        return frozenset({"end_window"}) if through else frozenset()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A key that asks the session to act is offered only when the engine would accept
        some action of its kind now (:func:`cockpit.engine.offers.offered_kinds`)."""
        if not self.is_mounted:
            return True
        if action == "cancel_steps":
            return any(isinstance(a, actions.RunStep) for a in self.steps_under_way())
        if action == FOLD_ACTION:  # only where the fleet has node sets to open or close
            return self.query_one(FleetTable).folds
        if action in ("pause_wave", "kill_wave", "needs_you"):
            return self.wave_running()
        if action == "run_wave":  # offered where the next wave may run itself (after the second node)
            return self.wave_startable(ActionKind.START_WAVE in self._offered())
        kind = KEY_KINDS.get(action)
        return True if kind is None else kind in self._offered()
