"""The live screen's part of a wave that runs itself: its key, its pane, pause and kill.

``W`` starts the wave (the typed node-set confirmation dialog, once for its destructive
steps); the pane under the fleet shows the wave by stage with counts, the forecast of the
window's end and the "needs you" list (node and the planner's words); ``Y`` completes the
first item of that list through its dialog (a per-wave item's note); ``P`` pauses or
resumes the wave (steps in flight finish), ``K`` kills it (its steps in flight cancelled).
Lower-case ``p`` and ``k`` were already the path and a step's cancel: the wave's keys are
their capitals. The runner itself is :class:`cockpit.session.waves.WaveRunner`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.css.query import NoMatches
from textual.screen import Screen

from cockpit.changelog.events import wave_number
from cockpit.engine.actions import StartWave
from cockpit.engine.forecast import Forecast, declared_end, forecast_state
from cockpit.engine.planner import Plan
from cockpit.engine.state import FINISHED
from cockpit.engine.waverun import confirmation_text, first_auto_wave, max_unavailable
from cockpit.errors import BadInput, CockpitError
from cockpit.session.waves import WaveRunner, WaveStatus
from cockpit.view.model import NEXT_KEY, HeaderView, with_forecast
from cockpit.view.richtext import safe_text
from screens.completion import Cancelled
from screens.modals import ConfirmDestructive
from screens.widgets import Pane

if TYPE_CHECKING:
    from cockpit.engine.actions import Action
    from cockpit.session.operator import Session
    from screens.completion import ActionDialogs

#: The wave's keys (their offering follows the wave, not an action kind).
WAVE_KEYS = ("run_wave", "needs_you", "pause_wave", "kill_wave")
#: Seconds between two forecasts on the screen.
FORECAST_EVERY_S = 5.0
#: Lines of "needs you" the pane shows before "+N more".
NEEDS_YOU_ROWS = 4


def wave_next_words(status: WaveStatus) -> str:
    """The Next line while a wave runs itself: what the person has (its keys last, so a
    narrow line keeps them)."""
    wave = wave_number(status.wave)
    needs = [n for n in status.needs_you if n.action is not None]
    if status.paused:
        return f"wave {wave} is paused; P resumes it, K kills it"
    if needs:
        return f"wave {wave} needs you ({len(needs)}): {needs[0].node}: {needs[0].what}; Y does it, P pauses, K kills"
    at_work = len(status.running)
    return f"wave {wave} runs itself, {at_work} {'node' if at_work == 1 else 'nodes'} at work; P pauses, K kills"


def wave_lines(runner: WaveRunner | None, ahead: Forecast | None) -> list[Text]:
    """What the wave pane says: the wave by stage, its state, the forecast, what needs you."""
    lines: list[Text] = []
    if ahead is not None:
        tone = "bold red" if ahead.fits is False else "dim"
        lines.append(safe_text(f"forecast: {ahead.words()}", style=tone))
    if runner is None:
        return lines
    status = runner.status()
    state = "done" if status.finished and status.halted is None else "running"
    if status.halted is not None:
        state = f"HALTED: {status.halted}"
    elif status.paused:
        state = "PAUSED (P resumes)"
    tone = "bold red" if status.halted else ("yellow" if status.paused else "green")
    head = Text.assemble(
        safe_text(f"{status.progress} · ", style="bold"),
        safe_text(state, style=tone),
        safe_text(f" · {len(status.running)} at work · {status.actions} actions", style="dim"),
    )
    lines.append(head)
    needs = status.needs_you
    if needs:
        lines.append(safe_text(f"needs you ({len(needs)}; Y does the first):", style="bold yellow"))
        for need in needs[:NEEDS_YOU_ROWS]:
            tone = "red" if need.failed else "yellow"
            lines.append(safe_text(f"  {need.node}: {need.what}", style=tone))
        if len(needs) > NEEDS_YOU_ROWS:
            lines.append(safe_text(f"  +{len(needs) - NEEDS_YOU_ROWS} more", style="dim"))
    return lines


class WavePane(Pane):
    """The running wave and the window's forecast; hidden while there is neither. Drawn at
    each redraw: written (and the screen laid out) only when its words or height change."""

    def show_lines(self, lines: list[Text]) -> None:
        self.display = bool(lines)
        self.show(lines, lambda shown: Text("\n").join(shown))


def next_auto_wave(session: Session) -> int:
    """The wave ``W`` starts: the one a person's Next started and left unfinished, else the next."""
    state = session.state
    running = state.current_wave
    if running is not None and any(state.nodes[n].current not in FINISHED for n in state.waves[running]):
        return running
    return 0 if running is None else running + 1


class WaveKeys(Screen[None]):
    """The wave's keys on the main screen (mixed into :class:`screens.main.MainScreen`)."""

    session: Session
    dialogs: ActionDialogs
    wave_runner: WaveRunner | None = None

    def start(self, action: Action, *, via_next: bool = False) -> Any:
        raise NotImplementedError

    def render_all(self) -> None:
        raise NotImplementedError

    def render_next(self) -> None:
        raise NotImplementedError

    def header_with_forecast(self, header: HeaderView, now: datetime) -> HeaderView:
        """The header, with when the window will end once the canary is through."""
        ahead = self.wave_forecast(now)
        return header if ahead is None else with_forecast(header, ahead.short(), late=ahead.fits is False)

    def wave_forecast(self, now: datetime, *, again: bool = True) -> Forecast | None:
        """The forecast, computed again at most every few seconds (it reads every node's
        stages); ``again=False``: the last one as it is (the header shows it too, and is
        redrawn only with the whole screen: a pane alone would say another minute)."""
        cached: tuple[datetime, Forecast | None] | None = getattr(self, "_forecast_cache", None)
        if cached is not None and (not again or abs((now - cached[0]).total_seconds()) < FORECAST_EVERY_S):
            return cached[1]
        ahead = self._compute_forecast(now)
        self._forecast_cache = (now, ahead)
        return ahead

    def _compute_forecast(self, now: datetime) -> Forecast | None:
        runner = self.wave_runner
        parallel = runner.parallel if runner is not None else None
        session = self.session
        try:
            end = declared_end(session.params)
            limit = max_unavailable(session.runbook, session.params, len(session.state.nodes))
        except BadInput as exc:  # said once, where the forecast would be; the forecast without it
            self.notify(str(exc), severity="warning")
            end = limit = None
        return forecast_state(
            session.state,
            now,
            parallel=parallel,
            window_end=end,
            limit=limit,
            by_hand_waves=first_auto_wave(session.runbook),
            history=session.history,
        )

    def render_wave(self, now: datetime, *, forecast_again: bool = True) -> None:
        try:
            pane = self.query_one(WavePane)
        except NoMatches:  # a screen without the pane shows none
            return
        pane.show_lines(wave_lines(self.wave_runner, self.wave_forecast(now, again=forecast_again)))

    def wave_startable(self, start_offered: bool) -> bool:
        """Whether W applies: no wave runs, and the wave it would take may run itself (the next
        one, when the gate offers starting it; or one a person started and left unfinished)."""
        if self.wave_running():
            return False
        state = self.session.state
        wave = next_auto_wave(self.session)
        if not first_auto_wave(self.session.runbook) <= wave < len(state.waves):
            return False
        return start_offered or wave == state.current_wave

    def wave_plan(self) -> Plan | None:
        """While a wave runs itself it takes Next for its nodes: the Next line says what the
        person has instead (None: no wave runs; Next is the planner's)."""
        runner = self.wave_runner
        if runner is None or not self.wave_running():
            return None
        return Plan(person_must=wave_next_words(runner.status()))

    def next_keys(self, plan: Plan) -> str:
        """What to press for the Next line's action: starting a wave that may run itself, W
        runs it (the wave's whole point) and n walks it node by node, as the line says."""
        if isinstance(plan.action, StartWave) and self.wave_startable(True):
            return "W runs it itself, [n] walks it by hand"
        return NEXT_KEY

    def wave_running(self) -> bool:
        runner = self.wave_runner
        return runner is not None and not runner.status().finished

    def action_run_wave(self) -> None:
        if self.wave_running():
            self.notify("a wave is already running: P pauses it, K kills it", severity="warning")
            return
        self.run_worker(self._run_wave(), group="wave", exclusive=True, exit_on_error=False, name="wave")

    async def _run_wave(self) -> None:
        session = self.session
        state = session.state
        wave = next_auto_wave(session)
        first = first_auto_wave(session.runbook)
        if not 0 <= wave < len(state.waves) or wave < first:
            words = "every wave has started" if wave >= len(state.waves) else "n walks it step by step"
            self.notify(f"wave {wave_number(wave)} does not run itself: {words}", severity="warning")
            return
        expected = confirmation_text(state, wave)
        members = state.waves[wave]
        try:
            typed = await self.dialogs.ask(
                ConfirmDestructive(
                    title=f"wave {wave_number(wave)} runs itself",
                    target=f"{len(members)} nodes: {expected}",
                    command="every action Next proposes that needs no person, on each node, under the gate",
                    expected=expected,
                    warning=(
                        f"Up to {state.max_parallel} nodes at once leave service and are changed, in your name; "
                        "what needs a person waits under 'needs you' (Y), P pauses, K kills."
                    ),
                    kind="Wave",
                )
            )
        except Cancelled:
            return
        try:
            runner = WaveRunner.start(session, str(typed), wave=wave, on_change=self._wave_changed)
        except CockpitError as exc:
            self.notify(str(exc), severity="error")
            return
        self.wave_runner = runner
        self.render_all()
        status = await runner.run()
        self.render_all()
        if status.halted is not None:
            self.notify(f"wave {wave_number(wave)} halted: {status.halted}", severity="error")
        else:
            self.notify(f"wave {wave_number(wave)} done ({status.actions} actions)")

    def _wave_changed(self) -> None:
        self.render_wave(datetime.now(UTC), forecast_again=False)
        self.render_next()  # what the wave needs of the person is the Next line's

    def action_next(self) -> None:
        """While a wave runs itself it takes Next for its nodes: `n` would race it for the same
        node's action, so it says what the person has instead (then Next as always)."""
        if self.wave_running():
            self.notify("the wave is taking Next for its nodes: Y does what it needs you for, P pauses, K kills")
            return
        super_next = getattr(super(), "action_next", None)
        if super_next is not None:
            super_next()

    def wave_quit_words(self) -> list[str]:
        """What a quit does to the wave running itself, for the question before quitting."""
        runner = self.wave_runner
        if runner is None or not self.wave_running():
            return []
        nodes = confirmation_text(self.session.state, runner.wave)
        return [
            f"wave {wave_number(runner.wave)} running itself ({nodes}): it takes no more actions; "
            "after cockpit resume, W takes it on again"
        ]

    def action_pause_wave(self) -> None:
        runner = self.wave_runner
        if runner is None or not self.wave_running():
            self.notify("no wave is running", severity="warning")
            return
        if runner.paused:
            runner.resume()
        else:
            runner.pause()
        self.render_all()

    def action_kill_wave(self) -> None:
        runner = self.wave_runner
        if runner is None or not self.wave_running():
            self.notify("no wave is running", severity="warning")
            return
        runner.kill()
        self.render_all()

    def action_needs_you(self) -> None:
        """The first "needs you" item that has an action: its dialog (the note is the person's)."""
        runner = self.wave_runner
        needs = [] if runner is None else [n for n in runner.status().needs_you if n.action is not None]
        if not needs or needs[0].action is None:
            words = "nothing waits for you" if runner is not None else "no wave is running"
            self.notify(f"{words}; d shows a node", severity="information")
            return
        self.start(needs[0].action)
