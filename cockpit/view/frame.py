"""The cockpit's panes as plain Rich renderables: for replay's timeline and ``--cast`` frames.

No Textual here (``cockpit/`` stays UI-free): these render a folded
:class:`~cockpit.engine.state.CockpitState` with Rich alone, so ``cockpit replay --cast``
writes frames without a terminal UI, and the interactive replay shares the timeline
line (:func:`timeline_text`). The live panes of the Textual cockpit are in ``screens/``.
"""

from __future__ import annotations

import bisect
import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from cockpit.changelog.events import Event, EventKind
from cockpit.engine.gates import gate_blockers
from cockpit.engine.state import (
    DONE,
    PENDING,
    ROLLED_BACK,
    ROLLING_BACK,
    STATUS_GLYPH,
    CockpitState,
    StageState,
)
from cockpit.gpu.nodestate import show
from cockpit.view.replay import FAILURE, Marker, is_failure

GLYPH = STATUS_GLYPH
STATUS_STYLE: dict[str, str] = {
    "done": "green",
    "passed": "green",
    "overridden": "bold red",
    "failed": "bold red",
    "running": "yellow",
    "active": "bold",
    "locked": "dim",
    "needs-signoff": "magenta",
    "skipped": "dim",
}


# --------------------------------------------------------------------------- timeline


@dataclass(frozen=True, slots=True)
class Tick:
    """One mark on the scrub bar: a stage boundary, a wave, or an event worth jumping to."""

    seq: int
    glyph: str
    style: str
    label: str


def timeline_ticks(markers: Sequence[Marker], events: Sequence[Event]) -> list[Tick]:
    """Marks for the scrub bar: waves (their number), stage gates (``|``), triggers (``!``),
    overrides (``O``), rollbacks (``R``), sign-offs (``s``), failures (``x``), decision (``D``)."""
    ticks: list[Tick] = []
    for m in markers:
        if m.kind == "wave" or (m.kind == "stage" and "overridden" in m.label):
            continue  # drawn from the event itself below
        if m.kind == "stage":
            ticks.append(Tick(m.seq, "|", "green", m.label + (f" on {m.node}" if m.node else "")))
        elif m.kind == "rollback":
            ticks.append(Tick(m.seq, "R", "bold yellow", m.label + (f" on {m.node}" if m.node else "")))
        elif m.kind == "decision":
            ticks.append(Tick(m.seq, "D", "bold", m.label))
        elif m.kind == "triggers":
            ticks.append(Tick(m.seq, "A", "bold", m.label))
    for e in events:
        if e.kind is EventKind.WAVE_STARTED:
            number = str((e.wave or 0) + 1)
            ticks.append(Tick(e.seq, number if len(number) == 1 else "W", "bold cyan", f"wave {number} started"))
        elif e.kind is EventKind.TRIGGER_FIRED:
            ticks.append(
                Tick(e.seq, "!", "bold red", f"trigger {e.trigger} fired" + (f" on {e.node}" if e.node else ""))
            )
        elif e.kind is EventKind.OVERRIDE:
            ticks.append(Tick(e.seq, "O", "bold red", f"{e.stage} overridden" + (f" on {e.node}" if e.node else "")))
        elif e.kind is EventKind.SIGNOFF:
            ticks.append(Tick(e.seq, "s", "magenta", f"sign-off by {e.actor}"))
        elif is_failure(e):
            ticks.append(Tick(e.seq, "x", "red", f"{FAILURE}: {e.stage}/{e.step or e.item}"))
    # the most telling mark wins a shared column: triggers and overrides over the rest
    rank = {"!": 0, "O": 1, "R": 2, "x": 3, "D": 4, "A": 5, "s": 7, "|": 8}
    return sorted(ticks, key=lambda t: (t.seq, rank.get(t.glyph, 6)))


def timeline_text(ticks: Sequence[Tick], markers: Sequence[Marker], total: int, seq: int, width: int) -> Text:
    """Two lines: the scrub bar with its marks and the cursor, then where the cursor is, in words."""
    width = max(width, 20)
    bar_w = width - 2
    cells: list[tuple[str, str]] = [("─", "dim")] * bar_w
    taken: set[int] = set()

    def col(s: int) -> int:
        return 0 if total <= 1 else min(bar_w - 1, (s - 1) * bar_w // total)

    for tick in ticks:  # sorted with the strongest first within a seq
        c = col(tick.seq)
        if c in taken and cells[c][0] in "!O":
            continue
        cells[c] = (tick.glyph, tick.style)
        taken.add(c)
    cursor = col(max(seq, 1))
    text = Text("[", style="dim", no_wrap=True, overflow="crop")
    for i, (glyph, style) in enumerate(cells):
        text.append(glyph, style=("reverse " + style).strip() if i == cursor else style)
    text.append("]", style="dim")
    text.append("\n")
    # where we are: the latest stage/wave boundary at or before the cursor
    seqs = [m.seq for m in markers]
    idx = bisect.bisect_right(seqs, seq) - 1
    where = "before the first event"
    if idx >= 0:
        mark = markers[idx]
        label = mark.label
        if mark.kind == "wave":  # markers count waves from 0; the cockpit shows them from 1
            head, _, rest = label.partition(":")
            number = head.removeprefix("wave ").strip()
            label = f"wave {int(number) + 1}" + (f":{rest}" if rest else "") if number.isdigit() else label
        where = label + (f" on {mark.node}" if mark.node else "")
    text.append(f"event {seq}/{total}", style="bold")
    text.append(f" · {where}", style="")
    return text


# --------------------------------------------------------------------------- panes


def header_line(state: CockpitState, *, change_id: str, operator: str, at: datetime | None) -> Text:
    fired = state.fired()
    parts = [change_id, state.runbook_id, f"op {operator}", f"rev {', '.join(state.reviewers) or 'none'}"]
    if at is not None:
        parts.append(at.strftime("%Y-%m-%d %H:%M:%S UTC"))
    parts.append(
        f"wave -/{len(state.waves)}"
        if state.current_wave is None
        else f"wave {state.current_wave + 1}/{len(state.waves)}"
    )
    if state.ended_at is not None:
        parts.append("ENDED")
    elif state.paused:
        parts.append("paused")
    if fired:  # first, so a narrow terminal never cuts the alarm off
        parts.insert(0, f"⚠ {len(fired)} TRIGGER{'S' if len(fired) > 1 else ''} FIRED")
    return Text(" · ".join(parts), style="bold white on red" if fired else "bold", no_wrap=True, overflow="ellipsis")


def stage_strip(state: CockpitState) -> Text:
    """Window stages with their glyphs, node stages with counts through, closing stages."""
    text = Text(no_wrap=True, overflow="ellipsis")
    wcur = state.window_current

    def window(ids: Sequence[str]) -> None:
        for sid in ids:
            st = state.window[sid]
            style = "bold reverse" if sid == wcur else STATUS_STYLE.get(st.status, "")
            text.append(f"{sid} {GLYPH[st.status]}", style=style)
            text.append(" ")

    window(state.opening)
    text.append("│ ", style="dim")
    total = len(state.nodes)
    for sid in state.node_stage_order:
        through = sum(1 for p in state.nodes.values() if p.stages[sid].closed)
        inside = sum(1 for p in state.nodes.values() if p.current == sid)
        style = "green" if total and through == total else ("bold" if inside else "dim")
        text.append(f"{sid} {through}/{total}", style=style)
        text.append(" ")
    text.append("│ ", style="dim")
    window(state.closing)
    return text


def _stage_cell(state: CockpitState, node: str) -> Text:
    progress = state.nodes[node]
    cur = progress.current
    if cur == ROLLING_BACK:
        return Text("rolling back", style="bold yellow")
    if cur == ROLLED_BACK:
        ok = progress.rollback_ok
        return Text("rolled back" + ("" if ok else " (failed)"), style="yellow" if ok else "bold red")
    if cur in (PENDING, DONE):
        return Text(cur, style="green" if cur == DONE else "dim")
    stage = progress.stages.get(cur)
    if stage is None:  # held, rollback-failed: a state, not a stage
        return Text(cur, style="bold red" if cur == "rollback-failed" else "dim")
    if any(s.status == "running" for s in stage.steps.values()):
        return Text(f"{cur} …", style="yellow")
    if any(s.status == "failed" for s in stage.steps.values()):
        return Text(f"{cur} ✗", style="bold red")
    return Text(cur)


def fleet_table(state: CockpitState, max_rows: int) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", expand=False)
    for col in ("node", "W", "stage", "driver", "CUDA", "GPUs", "health"):
        table.add_column(col, no_wrap=True)
    names = list(state.nodes)
    shown = names if len(names) <= max_rows else names[: max_rows - 1]
    for name in shown:
        progress = state.nodes[name]
        probe = progress.probe
        base = progress.baseline.get("gpu_count")
        gpus = probe.get("gpu_count")
        gpu_cell = "N/A" if gpus is None else (f"{gpus}/{base}" if base is not None else str(gpus))
        health = str(probe.get("health", "unknown"))
        health_style = "green" if health == "ok" else ("yellow" if health in ("unknown", "rebooting") else "bold red")
        kmod, user = probe.get("kernel_module_version"), probe.get("driver_version")
        driver = show(kmod) if kmod == user else f"{show(kmod)}/{show(user)}"
        table.add_row(
            name,
            str(progress.wave + 1),
            _stage_cell(state, name),
            driver,
            show(probe.get("cuda_version")),
            gpu_cell,
            Text(health, style=health_style),
        )
    if len(shown) < len(names):
        table.add_row(f"… {len(names) - len(shown)} more", "", "", "", "", "", "")
    return table


def focus_stage(state: CockpitState) -> StageState | None:
    """The stage worth showing: the active window stage, else the first busy node's stage."""
    wcur = state.window_current
    if wcur is not None:
        return state.window[wcur]
    order = [n for n, p in state.nodes.items() if p.current == ROLLING_BACK]
    if state.current_wave is not None:
        order += list(state.waves[state.current_wave])
    for node in order:
        stage = state.nodes[node].stage
        if stage is not None and not stage.closed:
            return stage
    return None


def stage_pane(state: CockpitState, max_rows: int) -> Group:
    stage = focus_stage(state)
    if stage is None:
        idle = "The session has ended." if state.ended_at is not None else "No stage in progress."
        return Group(Text(idle, style="bold"))
    where = f" on {stage.node}" if stage.node else ""
    title = Text(f"{stage.id}{where}: {stage.title}", style="bold", no_wrap=True, overflow="ellipsis")
    rows: list[Text] = []
    for step in stage.steps.values():
        line = Text(f"{GLYPH[step.status]} ", style=STATUS_STYLE.get(step.status, ""))
        line.append(f"run  {step.id}" + (" ⚠" if step.destructive else ""))
        if step.status == "failed":
            line.append(f"  {step.failure()}", style="red")
        rows.append(line)
    for item in stage.items.values():
        line = Text(f"{GLYPH[item.status]} ", style=STATUS_STYLE.get(item.status, ""))
        line.append(f"{item.verify:<8} {item.id}")
        detail = f"signed by {', '.join(item.signers)}" if item.signers else (item.note or item.evidence or "")
        if detail:
            line.append(f"  {detail}", style="dim")
        rows.append(line)
    for r in rows:
        r.no_wrap = True
        r.overflow = "ellipsis"
    if len(rows) > max_rows:
        rows = [*rows[: max_rows - 1], Text(f"… {len(rows) - max_rows + 1} more", style="dim")]
    blockers = gate_blockers(stage)
    gate = (
        Text("Gate open", style="green")
        if not blockers
        else Text("Gate blocked: " + "; ".join(blockers), style="yellow", no_wrap=True, overflow="ellipsis")
    )
    return Group(title, *rows, gate)


def trigger_pane(state: CockpitState) -> Text:
    fired = state.fired()
    armed = sum(1 for t in state.triggers.values() if t.status == "armed")
    text = Text(
        f"Rollback triggers: {armed} armed, {len(fired)} fired"
        if state.armed
        else f"Rollback triggers: NOT ARMED ({len(state.triggers)} written)",
        style="bold",
    )
    for trig in state.triggers.values():
        if trig.status == "fired":
            where = ", ".join(n for n in trig.fired_nodes if n) or "window"
            text.append(f"\n● {trig.id} FIRED on {where}: {trig.evidence or ''}", style="bold red")
        elif trig.status == "cleared":
            text.append(f"\n○ {trig.id} cleared by {trig.cleared_by}: {trig.clear_reason}", style="dim")
    return text


def event_line(event: Event) -> Text:
    """One event for a log pane: time, seq, actor, kind, where, and the telling fact."""
    where = "/".join(x for x in (event.stage, event.step or event.item) if x)
    text = Text(f"{event.ts:%H:%M:%S} {event.seq:>5} ", style="dim")
    text.append(f"{event.actor:<14.14} ", style="cyan")
    style = (
        "bold red"
        if event.kind in (EventKind.TRIGGER_FIRED, EventKind.OVERRIDE) or is_failure(event)
        else "magenta"
        if event.kind is EventKind.SIGNOFF
        else ""
    )
    text.append(str(event.kind), style=style)
    for part in (where, event.node):
        if part:
            text.append(f" {part}")
    detail = event.reason or event.note
    if event.kind is EventKind.STEP_FINISHED:
        detail = "ok" if event.facts.ok else (event.facts.error or f"exit {event.facts.exit_status}")
    elif event.kind is EventKind.TRIGGER_FIRED:
        detail = event.facts.evidence or detail or ""
    if detail:
        text.append(f"  {detail}", style="dim")
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


def frame(
    state: CockpitState,
    *,
    change_id: str,
    operator: str,
    events: Sequence[Event],
    seq: int,
    ticks: Sequence[Tick],
    markers: Sequence[Marker],
    height: int,
    width: int,
) -> Group:
    """One whole screen of the cockpit at event ``seq`` (``events`` is the full log)."""
    at = events[seq - 1].ts if 0 < seq <= len(events) else None
    top = [
        header_line(state, change_id=change_id, operator=operator, at=at),
        timeline_text(ticks, markers, len(events), seq, width),
        stage_strip(state),
        Text(""),
    ]
    fixed = len(top) + 4  # two rules, the trigger summary line, the log title
    room = max(height - fixed, 6)
    fleet_rows = min(len(state.nodes), max(2, room // 3))
    triggers = trigger_pane(state)
    trigger_lines = len(triggers.plain.splitlines())
    stage_rows = max(2, room - fleet_rows - 1 - trigger_lines - 4)
    log_rows = max(1, room - fleet_rows - 1 - trigger_lines - min(stage_rows, _stage_len(state)) - 2)
    recent = [event_line(e) for e in events[max(0, seq - log_rows) : seq]]
    return Group(
        *top,
        fleet_table(state, fleet_rows + 1),
        Text(""),
        stage_pane(state, stage_rows),
        triggers,
        Text("─" * width, style="dim"),
        *recent,
    )


def _stage_len(state: CockpitState) -> int:
    stage = focus_stage(state)
    return 1 if stage is None else 2 + len(stage.steps) + len(stage.items)


def render_ansi(renderable: object, *, width: int, height: int) -> list[str]:
    """``renderable`` as at most ``height`` lines of ANSI-styled text, each at most ``width`` cells."""
    console = Console(
        width=width,
        height=height,
        record=True,
        force_terminal=True,
        color_system="256",
        file=_NullFile(),
        legacy_windows=False,
        soft_wrap=False,
    )
    console.print(renderable, crop=True, overflow="ellipsis")
    lines = console.export_text(styles=True, clear=True).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[:height]


class _NullFile(io.StringIO):
    """Rich writes here; only its record is kept."""

    def write(self, text: str) -> int:
        return len(text)
