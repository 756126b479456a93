"""The view model: what every pane says, as plain words built from the folded state.

The pieces are in three modules: this one (header, progress strip, fleet rows, the Next
line, a log line, and the whole screen at once), :mod:`cockpit.view.panes` (the stage
pane and the trigger panel) and :mod:`cockpit.view.detail` (the node detail pane), on
the building blocks of :mod:`cockpit.view.lines`.

The live screen, the reviewer's view, the interactive replay and the cast writer all
render these values, so all four say the same thing. No Rich and no Textual here: a
piece of text carries a semantic *tone* (``"alarm"``, ``"ok"``, ``"warning"``, ``"dim"``,
a step or item status, …) that :mod:`cockpit.view.richtext` turns into a style. Pure
functions of the state (and, for the fleet, the live probes): no clock reads, no I/O.
``None`` facts read ``N/A`` (:func:`cockpit.gpu.nodestate.show`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from cockpit.changelog.events import Event
from cockpit.engine.planner import Plan
from cockpit.engine.state import DONE, PENDING, ROLLBACK_FAILED, ROLLED_BACK, ROLLING_BACK, CockpitState, NodeProgress
from cockpit.gpu.nodestate import Health, NodeState, show
from cockpit.view.lines import SYMBOL, Line, Run, duration, since
from cockpit.view.panes import StagePaneView, TriggerPanelView, focus_stage, stage_pane, trigger_panel
from cockpit.view.words import describe, event_text, event_tone

# --------------------------------------------------------------------------- header


#: Header parts a narrow terminal drops, first to last; the change id, the alarm, the
#: operator and the wave always stay.
HEADER_DROP_ORDER: tuple[str, ...] = ("runbook", "reviewers", "elapsed")


@dataclass(frozen=True, slots=True)
class HeaderView:
    parts: tuple[str, ...]  # change id, alarm (when fired), runbook, op, rev, elapsed, wave, state
    alarm: bool  # a trigger has fired: the header turns red
    roles: tuple[str, ...] = ()  # what each part is, for :meth:`fit`

    @property
    def text(self) -> str:
        return " · ".join(self.parts)

    def fit(self, width: int) -> str:
        """Drop the runbook id, then the reviewers, then the elapsed time, when the line
        is too long; the operator and the wave stay."""
        kept = dict(zip(range(len(self.parts)), self.parts, strict=True))
        for role in HEADER_DROP_ORDER:
            if len(" · ".join(kept.values())) <= width:
                break
            for i, r in enumerate(self.roles):
                if r == role:
                    kept.pop(i, None)
        return " · ".join(kept.values())


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
        ("change", change_id),
        ("runbook", runbook_id),
        ("operator", f"op {operator}"),
        ("reviewers", f"rev {reviewers}"),
        ("elapsed", f"⏱ {elapsed}"),
        ("wave", wave_text(state)),
    ]
    if state.ended_at is not None:
        parts.append(("state", "ENDED"))
    elif state.paused:
        parts.append(("state", "paused"))
    if fired:  # second, so a narrow terminal never cuts the alarm off
        parts.insert(1, ("alarm", f"⚠ {len(fired)} TRIGGER{'S' if len(fired) > 1 else ''} FIRED"))
    return HeaderView(tuple(text for _, text in parts), alarm=bool(fired), roles=tuple(role for role, _ in parts))


# --------------------------------------------------------------------------- progress strip


@dataclass(frozen=True, slots=True)
class Segment:
    id: str
    label: str  # "smoke 1/8" or "freeze ✓"
    status: str  # a step/item/stage status, the segment's tone
    current: bool
    group: str  # "opening", "node", "closing"


#: How many ways :func:`strip_runs` can fold the strip, from roomiest (0) to tightest.
STRIP_LEVELS = 5


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


def strip_runs(segments: Sequence[Segment], level: int) -> list[Run]:
    """The strip folded ``level`` times (0 to ``STRIP_LEVELS - 1``): window stages fold to
    glyphs, then gaps shrink, then node stage names shorten. The current segment's tone
    is ``"current"``."""
    runs: list[Run] = []
    prev_group = None
    for seg in segments:
        window = seg.group != "node"
        if prev_group is not None:
            if seg.group != prev_group:
                runs.append(("│" if level >= 3 else " │ ", ""))
            elif window:
                runs.append(("" if level >= 3 else " " if level >= 1 else "  ", ""))
            else:
                runs.append((" " if level >= 2 else "  ", ""))
        tone = "current" if seg.current else seg.status
        if window and (level >= 3 or (level >= 1 and not seg.current)):
            runs.append((SYMBOL[seg.status][0], tone))
        elif not window and level >= 4:
            name, _, count = seg.label.partition(" ")
            runs.append((f"{name[:3]} {count}", tone))
        else:
            runs.append((seg.label, tone))
        prev_group = seg.group
    return runs


# --------------------------------------------------------------------------- fleet table

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


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One node's cells, in :data:`FLEET_COLUMNS` order."""

    node: str
    cells: tuple[str, ...]

    @property
    def tones(self) -> tuple[str, ...]:
        return tuple(cell_tone(key, cell) for (key, _), cell in zip(FLEET_COLUMNS, self.cells, strict=True))


#: Below this many columns the screen (and a cast frame) is narrow: one pane above another,
#: and health as its short word.
NARROW_BELOW = 120

#: Each health verdict in one word that fits the fleet table at 80 columns (the long
#: form, up to 23 characters, would be cut to ``driver-library-mismat``); the node detail
#: and the change log keep the long form.
HEALTH_SHORT: dict[Health, str] = {
    Health.OK: "ok",
    Health.DRIVER_LIBRARY_MISMATCH: "mismatch",
    Health.DRIVER_NOT_LOADED: "no driver",
    Health.GPU_MISSING: "GPU lost",
    Health.FABRIC_MANAGER_DOWN: "FM down",
    Health.REBOOTING: "rebooting",
    Health.UNREACHABLE: "offline",
    Health.UNKNOWN: "unknown",
}
_HEALTH_OF_WORD: dict[str, Health] = {**{str(h): h for h in Health}, **{w: h for h, w in HEALTH_SHORT.items()}}


def health_word(health: str, *, narrow: bool = False) -> str:
    """A node's health for a fleet cell: its short word when the table is narrow."""
    known = _HEALTH_OF_WORD.get(health)
    return HEALTH_SHORT[known] if narrow and known is not None else health


def health_tone(cell: str) -> str:
    """The tone of a health verdict, in its long form or its short word."""
    known = _HEALTH_OF_WORD.get(cell)
    if known is Health.OK:
        return "ok"
    if known in (Health.UNKNOWN, Health.REBOOTING):
        return "warning"
    return "alarm"


def cell_tone(column: str, cell: str) -> str:
    if column == "health":
        return health_tone(cell)
    if column == "stage" and ("✗" in cell or "FAILED" in cell):
        return "alarm"
    return ""


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
    if cur == ROLLBACK_FAILED:
        return "rollback FAILED"  # never counted or shown as rolled back
    stage = progress.stages.get(cur)
    if stage is None:  # held: a state, not a stage
        return cur
    if any(s.status == "running" for s in stage.steps.values()):
        return f"{cur} …"
    if any(s.status == "failed" for s in stage.steps.values()):
        return f"{cur} ✗"
    return cur


def fleet_row(progress: NodeProgress, live: NodeState | None, now: datetime, *, narrow: bool = False) -> FleetRow:
    """One node's row: from its live probe when there is one, else from the last recorded probe.

    ``narrow``: a table at 80 columns, where health reads as its short word."""
    probe = progress.probe
    base = progress.baseline.get("gpu_count")
    present: object = live.gpu_count if live is not None and live.reachable else probe.get("gpu_count")
    if present is None:
        gpus = "N/A"
    else:
        gpus = f"{present}/{show(base)}" if base is not None else f"{present}"
    cuda = live.cuda_version if live is not None else probe.get("cuda_version")
    health = str(live.health) if live is not None else str(probe.get("health", "unknown"))
    cells = (
        progress.node,
        str(progress.wave + 1),
        stage_cell(progress),
        driver_cell(live, probe),
        show(cuda),
        gpus,
        health_word(health, narrow=narrow),
        since(progress.entered_at, now),
    )
    return FleetRow(progress.node, cells)


def fleet_rows(
    state: CockpitState, live: Mapping[str, NodeState], now: datetime, *, narrow: bool = False
) -> list[FleetRow]:
    return [fleet_row(progress, live.get(name), now, narrow=narrow) for name, progress in state.nodes.items()]


# --------------------------------------------------------------------------- Next and the log


def next_line(plan: Plan, state: CockpitState) -> Line:
    """What the cockpit proposes next, in words (``plan``: the planner's): the action,
    what it waits for, or who must act and with which key."""
    if state.ended_at is not None:
        return Line.of("Session ended.", "dim")
    if plan.action is not None:
        return Line((("Next: ", "bold"), (describe(plan.action), ""), ("   [n] to do it", "dim")))
    if plan.waiting_for is not None:
        return Line((("Next: ", "bold"), (f"waiting for {plan.waiting_for}", "running")))
    return Line.of(f"Next: {plan.text}", "alarm" if state.fired() else "warning")


def log_line(event: Event) -> Line:
    """One event for a log pane: time, seq, actor, kind, and what it did."""
    return Line(
        (
            (f"{event.ts:%H:%M:%S} {event.seq:>5} ", "dim"),
            (f"{event.actor:<14.14} ", "actor"),
            (str(event.kind), event_tone(event)),
            (f"  {event_text(event)}", "dim"),
        )
    )


# --------------------------------------------------------------------------- the whole screen


@dataclass(frozen=True, slots=True)
class CockpitView:
    """Every pane of the cockpit at one moment."""

    header: HeaderView
    strip: tuple[Segment, ...]
    fleet: tuple[FleetRow, ...]
    stage: StagePaneView
    triggers: TriggerPanelView
    next: Line


def cockpit_view(
    state: CockpitState,
    *,
    change_id: str,
    runbook_id: str,
    operator: str,
    now: datetime,
    next_plan: Plan,
    live: Mapping[str, NodeState] | None = None,
    selected: str | None = None,
    narrow: bool = False,
) -> CockpitView:
    """The whole screen; ``next_plan`` is the planner's (:func:`cockpit.engine.planner.plan`);
    ``narrow``: under :data:`NARROW_BELOW` columns."""
    stage, node = focus_stage(state, selected)
    return CockpitView(
        header=header_view(state, change_id=change_id, runbook_id=runbook_id, operator=operator, now=now),
        strip=tuple(progress_segments(state)),
        fleet=tuple(fleet_rows(state, live or {}, now, narrow=narrow)),
        stage=stage_pane(state, stage, node),
        triggers=trigger_panel(state),
        next=next_line(next_plan, state),
    )
