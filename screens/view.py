"""What the panes show, as plain values: pure functions of the folded state.

Widgets call these and only assign the results; nothing here touches Textual, the
network or a file, so every line the operator reads is testable with a folded state
and no terminal. ``None`` facts render as ``N/A`` (:func:`cockpit.gpu.nodestate.show`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from rich.text import Text

from cockpit.engine.actions import (
    Action,
    describe,  # an action in words: the engine's, so the Next line, the palette and notices agree
)
from cockpit.engine.gates import (
    gate_blockers,
    wave_blockers,
)
from cockpit.engine.state import (
    DONE,
    PENDING,
    ROLLED_BACK,
    ROLLING_BACK,
    STATUS_GLYPH,
    CockpitState,
    NodeProgress,
    StageState,
    TriggerState,
)
from cockpit.gpu.nodestate import NodeState, show

#: One glyph per item/step status, as the issue spells them.
SYMBOL = STATUS_GLYPH

#: Theme variables (Textual ``$variables`` resolved by the widgets) per status.
STYLE: dict[str, str] = {
    "done": "green",
    "passed": "green",
    "overridden": "bold red",
    "failed": "bold red",
    "running": "yellow",
    "open": "",
    "active": "bold reverse",
    "locked": "dim",
    "needs-signoff": "magenta",
    "skipped": "dim",
}

FLEET_COLUMNS: tuple[tuple[str, str], ...] = (
    ("node", "Node"),
    ("wave", "W"),
    ("stage", "Stage"),
    ("driver", "Driver kmod/user"),
    ("cuda", "CUDA"),
    ("gpus", "GPUs"),
    ("health", "Health"),
    ("since", "In stage"),
)


def duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``1h02m``: short enough for a table cell."""
    if seconds is None or seconds < 0:
        return "N/A"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def since(at: datetime | None, now: datetime) -> str:
    return "N/A" if at is None else duration((now - at).total_seconds())


# --------------------------------------------------------------------------- header


@dataclass(frozen=True, slots=True)
class HeaderView:
    parts: tuple[str, ...]  # in order of importance after the first two (change id, alarm)
    alarm: bool  # a trigger has fired: the header turns red

    @property
    def text(self) -> str:
        return " · ".join(self.parts)

    def fit(self, width: int) -> str:
        """Drop the runbook id, then the reviewers, when the line is too long."""
        parts = list(self.parts)
        for drop in (1, 3):
            if len(" · ".join(parts)) <= width:
                break
            parts[drop] = ""
        return " · ".join(p for p in parts if p)


def wave_text(state: CockpitState) -> str:
    total = len(state.waves)
    if state.current_wave is None:
        return f"wave -/{total}"
    return f"wave {state.current_wave + 1}/{total}"


def header_view(state: CockpitState, *, change_id: str, runbook_id: str, operator: str, now: datetime) -> HeaderView:
    reviewers = ", ".join(state.reviewers) or "none yet"
    start = state.started_at
    elapsed = "N/A" if start is None else duration(((state.ended_at or now) - start).total_seconds())
    fired = state.fired()
    parts = [
        change_id,
        runbook_id,
        f"op {operator}",
        f"rev {reviewers}",
        f"⏱ {elapsed}",
        wave_text(state),
    ]
    if state.ended_at is not None:
        parts.append("ENDED")
    elif state.paused:
        parts.append("paused")
    if fired:
        parts.insert(1, f"⚠ {len(fired)} TRIGGER{'S' if len(fired) > 1 else ''} FIRED")
    return HeaderView(tuple(parts), alarm=bool(fired))


# --------------------------------------------------------------------------- progress strip


@dataclass(frozen=True, slots=True)
class Segment:
    id: str
    label: str  # "smoke 1/8" or "freeze ✓"
    status: str  # a key of STYLE
    current: bool
    group: str  # "opening", "node", "closing"


def current_node_stage(state: CockpitState) -> str | None:
    """The earliest node stage that a node of the current wave is in."""
    if state.current_wave is None or state.window_current is not None:
        return None
    order = state.node_stage_order
    best: int | None = None
    for node in state.waves[state.current_wave]:
        cur = state.nodes[node].current
        if cur in order and (best is None or order.index(cur) < best):
            best = order.index(cur)
    return None if best is None else order[best]


def progress_segments(state: CockpitState) -> list[Segment]:
    segs: list[Segment] = []
    wcur = state.window_current
    for group, ids in (("opening", state.opening), ("closing", state.closing)):
        if group == "closing":
            segs.extend(_node_segments(state))
        for sid in ids:
            st = state.window[sid]
            segs.append(Segment(sid, f"{sid} {SYMBOL[st.status]}", st.status, sid == wcur, group))
    return segs


def _node_segments(state: CockpitState) -> list[Segment]:
    total = len(state.nodes)
    cur = current_node_stage(state)
    out = []
    for sid in state.node_stage_order:
        through = sum(1 for p in state.nodes.values() if p.stages[sid].closed)
        inside = sum(1 for p in state.nodes.values() if p.current == sid)
        status = "passed" if total and through == total else ("active" if inside else "open")
        out.append(Segment(sid, f"{sid} {through}/{total}", status, sid == cur, "node"))
    return out


def progress_text(segments: Sequence[Segment], width: int) -> Text:
    """The strip, fitted to ``width``: window stages fold to glyphs, then gaps shrink,
    then node stage names shorten, until it fits."""
    text = Text()
    for level in range(5):
        text = _strip(segments, level)
        if text.cell_len <= width:
            return text
    text.truncate(width, overflow="ellipsis")
    return text


def _strip(segments: Sequence[Segment], level: int) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    prev_group = None
    for seg in segments:
        window = seg.group != "node"
        if prev_group is not None:
            if seg.group != prev_group:
                text.append("│" if level >= 3 else " │ ")
            elif window:
                text.append("" if level >= 3 else " " if level >= 1 else "  ")
            else:
                text.append(" " if level >= 2 else "  ")
        style = "bold reverse" if seg.current else STYLE.get(seg.status, "")
        if window and (level >= 3 or (level >= 1 and not seg.current)):
            text.append(SYMBOL[seg.status][0], style=style)
        elif not window and level >= 4:
            name, _, count = seg.label.partition(" ")
            text.append(f"{name[:3]} {count}", style=style)
        else:
            text.append(seg.label, style=style)
        prev_group = seg.group
    return text


# --------------------------------------------------------------------------- fleet table


def driver_cell(live: NodeState | None, probe: Mapping[str, object]) -> str:
    kmod = live.kernel_module_version if live else probe.get("kernel_module_version")
    user = live.driver_version if live else probe.get("driver_version")
    if kmod is None and user is None:
        return "N/A"
    if kmod == user:
        return show(kmod)
    return f"{show(kmod)}/{show(user)}"


def stage_cell(progress: NodeProgress) -> str:
    cur = progress.current
    if cur in (PENDING, DONE, ROLLING_BACK, ROLLED_BACK):
        if cur == ROLLING_BACK and progress.rollback is not None:
            running = [s.id for s in progress.rollback.steps.values() if s.status == "running"]
            return f"rollback {running[0]}…" if running else "rollback"
        return cur
    stage = progress.stages.get(cur)
    if stage is None:  # held, rollback-failed: a state, not a stage
        return cur
    if any(s.status == "running" for s in stage.steps.values()):
        return f"{cur} …"
    if any(s.status == "failed" for s in stage.steps.values()):
        return f"{cur} ✗"
    return cur


def fleet_row(progress: NodeProgress, live: NodeState | None, now: datetime) -> tuple[str, ...]:
    """One node's cells, in :data:`FLEET_COLUMNS` order."""
    probe = progress.probe
    base = progress.baseline.get("gpu_count")
    present: object = live.gpu_count if live is not None and live.reachable else probe.get("gpu_count")
    if present is None:
        gpus = "N/A"
    else:
        gpus = f"{present}/{show(base)}" if base is not None else f"{present}"
    cuda = live.cuda_version if live is not None else probe.get("cuda_version")
    health = str(live.health) if live is not None else str(probe.get("health", "unknown"))
    return (
        progress.node,
        str(progress.wave + 1),
        stage_cell(progress),
        driver_cell(live, probe),
        show(cuda),
        gpus,
        health,
        since(progress.entered_at, now),
    )


def health_style(cell: str) -> str:
    if cell == "ok":
        return "green"
    if cell in ("unknown", "rebooting"):
        return "yellow"
    return "bold red"


# --------------------------------------------------------------------------- stage pane


def focus_stage(state: CockpitState, selected: str | None) -> tuple[StageState | None, str | None]:
    """The stage the stage pane shows: the active window stage, else the selected node's
    current stage (its rollback while rolling back), else the first busy node's."""
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
    status: str
    label: str
    detail: str


def stage_rows(stage: StageState) -> list[StageRow]:
    rows = []
    for step in stage.steps.values():
        detail = ""
        if step.status == "failed":
            detail = step.failure()
        elif step.duration_s is not None and step.status == "done":
            detail = duration(step.duration_s)
        flag = " ⚠ destructive" if step.destructive else ""
        rows.append(
            StageRow(
                f"step:{step.id}", SYMBOL[step.status], step.status, f"{'run':<6}{step.id}: {step.title}{flag}", detail
            )
        )
    for item in stage.items.values():
        kind = {"manual": "tick", "signoff": "sign", "step": "step", "check": "check", "command": "cmd"}.get(
            item.verify, item.verify
        )
        detail = item.note or item.evidence or ""
        if item.verify == "signoff" and item.signers:
            detail = f"signed by {', '.join(item.signers)}"
        rows.append(
            StageRow(f"item:{item.id}", SYMBOL[item.status], item.status, f"{kind:<6}{item.id}: {item.text}", detail)
        )
    return rows


def stage_title(stage: StageState) -> str:
    where = f" on {stage.node}" if stage.node else ""
    status = {"overridden": " (OVERRIDDEN)", "passed": " (passed)"}.get(stage.status, "")
    return f"{stage.id}{where}: {stage.title}{status}"


def gate_line(stage: StageState) -> Text:
    """The gate in words: open, or every blocker."""
    if stage.status == "overridden":
        return Text(f"Gate OVERRIDDEN: {stage.override_reason}", style="bold red")
    if stage.closed:
        return Text(f"Gate passed by {stage.passed_by}", style="green")
    blockers = gate_blockers(stage)
    if not blockers:
        return Text("Gate open: press g to pass it", style="bold green")
    return Text(f"Gate blocked ({len(blockers)}): " + "; ".join(blockers), style="yellow")


def idle_stage_text(state: CockpitState) -> str:
    """What the stage pane says when no stage is in progress."""
    if state.ended_at is not None:
        return "The session has ended."
    if state.current_wave is None:
        return "No wave running."
    blockers = wave_blockers(state, state.current_wave)
    wave = state.current_wave + 1
    if not blockers:
        more = state.current_wave + 1 < len(state.waves)
        return f"Wave {wave} is through." + (" Press w to start the next wave." if more else "")
    return f"Wave {wave}: " + "; ".join(blockers)


# --------------------------------------------------------------------------- triggers


@dataclass(frozen=True, slots=True)
class TriggerLine:
    id: str
    status: str
    text: str


def trigger_lines(state: CockpitState) -> list[TriggerLine]:
    """Fired triggers first (with evidence), then cleared ones, then the rest by status."""
    order = {"fired": 0, "cleared": 1, "armed": 2, "disarmed": 3}
    out = []
    for trig in sorted(state.triggers.values(), key=lambda t: order.get(t.status, 9)):
        out.append(TriggerLine(trig.id, trig.status, _trigger_text(trig)))
    return out


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


# --------------------------------------------------------------------------- actions


def next_line(action: Action | None, state: CockpitState) -> Text:
    if state.ended_at is not None:
        return Text("Session ended.", style="dim")
    if action is None:
        fired = state.fired()
        if fired:
            return Text(
                f"Next: trigger {fired[0].id} fired: roll back {fired[0].node or 'the node'} (b) "
                "or clear it with a reason (c)",
                style="bold red",
            )
        return Text("Next: nothing the cockpit can do alone: see the stage pane", style="dim")
    return Text.assemble(("Next: ", "bold"), describe(action), ("   [n] to do it", "dim"))
