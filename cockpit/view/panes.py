"""The view model of the stage pane (the focused stage, its step and item rows, its gate
in words) and of the trigger panel (every rollback trigger, the fired ones first)."""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.changelog.events import wave_number
from cockpit.engine.gates import gate_blockers, wave_blockers
from cockpit.engine.state import (
    ROLLBACK_FAILED,
    ROLLED_BACK,
    ROLLING_BACK,
    CockpitState,
    StageState,
    TriggerState,
)
from cockpit.runbook.model import Verify
from cockpit.view.lines import SYMBOL, Line, duration, fit_rows, more_text
from cockpit.view.words import why_rollback_failed

# --------------------------------------------------------------------------- stage pane


def focus_stage(state: CockpitState, selected: str | None) -> tuple[StageState | None, str | None]:
    """The stage the stage pane shows: the active window stage, else the selected node's
    current stage, else the first busy node's of the current wave, else a rollback's."""
    wcur = state.window_current
    if wcur is not None:
        return state.window[wcur], None
    candidates = [selected] if selected in state.nodes else []
    if state.current_wave is not None:
        candidates += list(state.waves[state.current_wave])
    candidates += [n for n, p in state.nodes.items() if p.current == ROLLING_BACK]
    for node in candidates:
        if node is None:
            continue
        stage = state.nodes[node].stage
        if stage is not None and not stage.closed:
            return stage, node
    return None, None


@dataclass(frozen=True, slots=True)
class StageRow:
    key: str  # "step:<id>" or "item:<id>"
    symbol: str
    status: str  # the symbol's tone
    label: str
    detail: str

    @property
    def text(self) -> str:
        return f"{self.symbol} {self.label}" + (f"  {self.detail}" if self.detail else "")


def stage_rows(stage: StageState) -> list[StageRow]:
    rows = []
    for step in stage.steps.values():
        detail = ""
        if step.status == "failed":
            detail = step.failure()
        elif step.duration_s is not None and step.status == "done":
            detail = duration(step.duration_s)
        flag = " ⚠ destructive" if step.destructive else ""
        label = f"{'run':<6}{step.id}: {step.title}{flag}"
        rows.append(StageRow(f"step:{step.id}", SYMBOL[step.status], step.status, label, detail))
    kinds = {"manual": "tick", "signoff": "sign", "step": "step", "check": "check", "command": "cmd"}
    for item in stage.items.values():
        kind = kinds.get(item.verify, item.verify)
        detail = item.note or item.evidence or ""
        if len(detail) > 400:  # a table cell: a pasted page of text is cut (the detail view has more)
            detail = detail[:400] + "…"
        if item.verify == Verify.SIGNOFF and item.signers:
            detail = f"signed by {', '.join(item.signers)}"
        label = f"{kind:<6}{item.id}: {item.text}"
        rows.append(StageRow(f"item:{item.id}", SYMBOL[item.status], item.status, label, detail))
    return rows


def stage_title(stage: StageState) -> str:
    where = f" on {stage.node}" if stage.node else ""
    status = {"overridden": " (OVERRIDDEN)", "passed": " (passed)"}.get(stage.status, "")
    return f"{stage.id}{where}: {stage.title}{status}"


def gate_line(stage: StageState) -> Line:
    """The gate in words: open, or every blocker."""
    if stage.status == "overridden":
        return Line.of(f"Gate OVERRIDDEN: {stage.override_reason}", "alarm")
    if stage.closed:
        return Line.of(f"Gate passed by {stage.passed_by}", "ok")
    blockers = gate_blockers(stage)
    if not blockers:
        return Line.of("Gate open: press g to pass it", "go")
    return Line.of(f"Gate blocked ({len(blockers)}): " + "; ".join(blockers), "warning")


def rollback_failures(state: CockpitState) -> list[str]:
    """Each node whose rollback failed, and why in plain words (:func:`why_rollback_failed`)."""
    lines = []
    for name, progress in state.nodes.items():
        if progress.current != ROLLBACK_FAILED:
            continue
        rollback = progress.rollback
        checks = [] if rollback is None else [i.check for i in rollback.items.values() if i.status == "failed"]
        steps = (
            [] if rollback is None else [(s.id, s.failure()) for s in rollback.steps.values() if s.status == "failed"]
        )
        lines.append(f"{name}: rollback FAILED: {why_rollback_failed(checks, steps)}.")
    return lines


def idle_stage_text(state: CockpitState) -> str:
    """What the stage pane says when no stage is in progress (a failed rollback first)."""
    failures = " ".join(rollback_failures(state))
    said = _idle_text(state)
    return f"{failures} {said}" if failures else said


def _idle_text(state: CockpitState) -> str:
    if state.ended_at is not None:
        return "The session has ended."
    if state.current_wave is None:
        return "No wave running."
    blockers = wave_blockers(state, state.current_wave)
    wave = wave_number(state.current_wave)
    if not blockers:
        more = state.current_wave + 1 < len(state.waves)
        return f"Wave {wave} is through." + (" Press w to start the next wave." if more else "")
    return f"Wave {wave}: " + "; ".join(blockers)


@dataclass(frozen=True, slots=True)
class StagePaneView:
    """The focused stage: its title, its step and item rows, and its gate in words."""

    key: tuple[str, str | None] | None  # (stage id, node); None: no stage in progress
    title: str
    rows: tuple[StageRow, ...]
    gate: Line


def stage_pane(state: CockpitState, stage: StageState | None, node: str | None) -> StagePaneView:
    """The pane for the stage :func:`focus_stage` chose (``None``: what the window waits for)."""
    if stage is None:
        tone = "alarm" if rollback_failures(state) else ""
        return StagePaneView(None, "No stage in progress", (), Line.of(idle_stage_text(state), tone))
    return StagePaneView((stage.id, node), stage_title(stage), tuple(stage_rows(stage)), gate_line(stage))


# --------------------------------------------------------------------------- triggers


@dataclass(frozen=True, slots=True)
class TriggerLine:
    id: str
    status: str
    text: str


def trigger_lines(state: CockpitState) -> list[TriggerLine]:
    """Fired triggers first (with evidence), then cleared ones, then the rest by status."""
    order = {"fired": 0, "cleared": 1, "armed": 2, "disarmed": 3}
    triggers = sorted(state.triggers.values(), key=lambda t: order.get(t.status, 9))
    return [TriggerLine(trig.id, trig.status, _trigger_text(trig)) for trig in triggers]


def _trigger_text(trig: TriggerState) -> str:
    if trig.status == "fired":
        where = ", ".join(n for n in trig.fired_nodes if n) or (trig.node or "window")
        return f"● {trig.id} FIRED on {where}: {trig.evidence or 'no evidence recorded'}"
    if trig.status == "cleared":
        return f"○ {trig.id} cleared by {trig.cleared_by}: {trig.clear_reason}"
    mark = "◉" if trig.status == "armed" else "·"
    return f"{mark} {trig.id}"


def trigger_summary(state: CockpitState) -> str:
    fired = len(state.fired())
    armed = sum(1 for t in state.triggers.values() if t.status == "armed")
    if not state.armed:
        return f"Rollback triggers: NOT ARMED ({len(state.triggers)} written)"
    return f"Rollback triggers: {armed} armed, {fired} fired"


ROLLBACK_HINT = "Rollback: b rolls back the node that fired (the cursor picks among several); n runs its steps"


#: The last answer of :func:`nodes_needing_action`: (the state, its last seq, the nodes). A
#: key press asks several times (each key the footer may offer), and on a 2,000-node fleet
#: each answer walks every node's steps; the state moves only by an event (a new seq).
_needing: tuple[CockpitState, int, tuple[str, ...]] | None = None


def nodes_needing_action(state: CockpitState) -> list[str]:
    """The nodes an action about a fault is about, in fleet order: those a fired trigger
    names first, then those whose current stage (or rollback) has a failed step. Keys
    like rollback and detail default to these, not to the row under the cursor."""
    global _needing
    if _needing is not None and _needing[0] is state and _needing[1] == state.last_seq:
        return list(_needing[2])
    found = _nodes_needing_action(state)
    _needing = (state, state.last_seq, tuple(found))
    return found


def _nodes_needing_action(state: CockpitState) -> list[str]:
    fired = {n for t in state.fired() for n in t.fired_nodes if n} | {t.node for t in state.fired() if t.node}
    settled = (ROLLING_BACK, ROLLED_BACK)
    failed = set()
    for name, progress in state.nodes.items():
        stage = progress.stage
        if progress.current == ROLLBACK_FAILED or (
            stage is not None and any(s.status == "failed" for s in stage.steps.values())
        ):
            failed.add(name)
    first = [n for n in state.nodes if n in fired and state.nodes[n].current not in settled]
    return first + [n for n in state.nodes if n in failed and n not in first]


def target_node(state: CockpitState, cursor: str | None) -> str | None:
    """The node an action about a fault targets: the cursor's when it is one of
    :func:`nodes_needing_action` (the cursor chooses among several) or when none needs
    it, else the first that does."""
    needing = nodes_needing_action(state)
    if not needing or cursor in needing:
        return cursor
    return needing[0]


@dataclass(frozen=True, slots=True)
class TriggerPanelView:
    """The summary line, then fired and cleared triggers a line each, the rollback hint
    when one fired, and the quiet triggers on one line."""

    summary: str
    lines: tuple[Line, ...]
    alarm: bool

    @property
    def text(self) -> str:
        return "\n".join([self.summary, *(line.text for line in self.lines)])

    def fit(self, room: int, *, key: str = "") -> TriggerPanelView:
        """At most ``room`` lines, the summary included; what does not fit becomes "+N more"
        (naming ``key`` when a key shows them all). Fired triggers are the last to go: the
        rollback hint and the quiet line give way first."""
        fired = [ln for ln in self.lines if ln.tone == "alarm"]
        rest = [ln for ln in self.lines if ln.tone != "alarm"]
        kept, hidden = fit_rows([*fired, *rest], max(room - 1, 1))
        order = {id(ln): i for i, ln in enumerate(self.lines)}
        kept.sort(key=lambda ln: order[id(ln)])
        words = more_text(hidden) + (f": {key} shows every trigger" if key else "")
        more = (Line.of(words, "dim"),) if hidden else ()
        return TriggerPanelView(self.summary, (*kept, *more), self.alarm)


def trigger_panel(state: CockpitState) -> TriggerPanelView:
    lines = trigger_lines(state)
    loud = [ln for ln in lines if ln.status in ("fired", "cleared")]
    quiet = [ln for ln in lines if ln.status not in ("fired", "cleared")]
    out = [Line.of(ln.text, "alarm" if ln.status == "fired" else "dim") for ln in loud]
    alarm = any(ln.status == "fired" for ln in loud)
    if alarm:
        out.append(Line.of(ROLLBACK_HINT, "bold"))
    if quiet:
        out.append(Line.of("  ".join(ln.text for ln in quiet), "" if state.armed else "dim"))
    return TriggerPanelView(trigger_summary(state), tuple(out), alarm)
