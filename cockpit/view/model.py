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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from cockpit.changelog.events import Event, wave_number
from cockpit.engine.planner import KEY_DETAIL, KEY_PHRASES, Plan
from cockpit.engine.state import PASSED_STATUSES, CockpitState
from cockpit.gpu.nodestate import NodeState
from cockpit.view.fleet import (
    FLEET_COLUMNS,
    HEALTH_SHORT,
    NARROW_BELOW,
    FleetRow,
    driver_cell,
    fleet_row,
    fleet_rows,
    health_of,
    health_tone,
    health_word,
    row_for,
    stage_cell,
)
from cockpit.view.lines import SYMBOL, Line, Run, duration
from cockpit.view.panes import StagePaneView, TriggerPanelView, focus_stage, stage_pane, trigger_panel
from cockpit.view.words import describe, event_text, event_tone

__all__ = [  # the fleet table's names, from cockpit.view.fleet, are the view model's too
    "FLEET_COLUMNS",
    "HEALTH_SHORT",
    "NARROW_BELOW",
    "FleetRow",
    "driver_cell",
    "fleet_row",
    "fleet_rows",
    "health_of",
    "health_tone",
    "health_word",
    "row_for",
    "stage_cell",
]

# --------------------------------------------------------------------------- header


#: Header parts a narrow terminal drops, first to last; the change id, the alarm, the
#: operator and the wave always stay.
HEADER_DROP_ORDER: tuple[str, ...] = ("runbook", "reviewers", "forecast", "elapsed")


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
    return f"wave {wave_number(state.current_wave)}/{total}"


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
    if state.refused:  # events in the log the rules refuse (written by hand): on every screen, in red
        first = state.refused[0]
        many = len(state.refused)
        parts.insert(
            1, ("alarm", f"⚠ {many} REFUSED EVENT{'S' if many > 1 else ''} (first seq {first.seq} {first.kind})")
        )
    alarm = bool(fired or state.refused)
    return HeaderView(tuple(text for _, text in parts), alarm=alarm, roles=tuple(role for role, _ in parts))


def with_forecast(header: HeaderView, words: str, *, late: bool = False) -> HeaderView:
    """The header with the forecast of the window's end after the wave (``late``: it will not
    fit before the declared end, and is kept as long as the wave is)."""
    role = "wave" if late else "forecast"  # a late window is never dropped on a narrow screen
    return HeaderView((*header.parts, words), alarm=header.alarm, roles=(*header.roles, role))


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


#: The last node segments: (the state, its last seq, the segments). Each frame of an event
#: asks; counting 2,000 nodes through every stage is worth doing once per event.
_node_segments_of: tuple[CockpitState, int, tuple[Segment, ...]] | None = None


def _node_segments(state: CockpitState) -> list[Segment]:
    global _node_segments_of
    known = _node_segments_of
    if known is not None and known[0] is state and known[1] == state.last_seq:
        return list(known[2])
    total = len(state.nodes)
    cur = current_node_stage(state)
    through = dict.fromkeys(state.node_stage_order, 0)
    inside = dict.fromkeys(state.node_stage_order, 0)
    for p in state.nodes.values():  # one pass over the fleet, not one per stage
        if p.current in inside:
            inside[p.current] += 1
        for sid, stage_status in p.stage_statuses():
            if sid in through and stage_status in PASSED_STATUSES:
                through[sid] += 1
    out = []
    for sid in state.node_stage_order:
        status = "passed" if total and through[sid] == total else ("active" if inside[sid] else "open")
        out.append(Segment(sid, f"{sid} {through[sid]}/{total}", status, sid == cur, "node"))
    _node_segments_of = (state, state.last_seq, tuple(out))
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


# --------------------------------------------------------------------------- Next and the log


#: What the Next line says to press for the action it shows.
NEXT_KEY = "[n] to do it"


def next_line(plan: Plan, state: CockpitState, width: int | None = None, *, keys: str = NEXT_KEY) -> Line:
    """What the cockpit proposes next, in words (``plan``: the planner's): the action,
    what it waits for, or who must act and with which key (``keys``: what to press for
    the action shown).

    ``width``: the columns the line has. A longer line gives up words from what it
    reports (a check's evidence, a step's error) and the lead of its key list, never
    the instruction itself: cut at its end, an 80-column terminal lost the very key that
    says what to do ("… Enter on its row verifies it")."""
    if state.ended_at is not None:
        return Line.of("Session ended.", "dim")
    if plan.action is not None:
        head, sep, instruction = describe(plan.action), "   ", keys
        line = Line((("Next: ", "bold"), (head, ""), (sep + instruction, "dim")))
        tones = ("bold", "", "dim")
    elif plan.waiting_for is not None:
        head, sep, instruction = _split_instruction(f"waiting for {plan.waiting_for}", waiting=True)
        line = Line((("Next: ", "bold"), (f"waiting for {plan.waiting_for}", "running")))
        tones = ("bold", "running", "running")
    else:
        head, sep, instruction = _split_instruction(plan.text, waiting=False)
        line = Line.of(f"Next: {plan.text}", "alarm" if state.fired() else "warning")
        tones = ("", "", "")
    if width is None or len(line.text) <= width:
        return line
    return _fit_next(head, sep, instruction, width, tones, line.tone)


#: Where a planner's words end what they report and start what a person does: the last
#: "; " outside parentheses ("check 'x' failed: evidence; the operator decides: keys").
_INSTRUCTION_SEP = "; "
#: A waiting line ends with its key in parentheses ("… to finish (k cancels it)").
_WAITING_SEP = " ("
#: The lead of the planner's key lists, which a narrow line drops first.
_KEYS_LEAD = "the operator decides: "
#: A key that only shows (the footer names it too): the first a narrow line leaves out.
_SHOW_ONLY_KEYS = (KEY_DETAIL,)
#: Fewer columns than this left for what a line reports: it is left out, not cut to a stub.
_MIN_HEAD = 8


def _split_instruction(text: str, *, waiting: bool) -> tuple[str, str, str]:
    """``text`` as (what it reports, separator, instruction); all instruction when the
    planner's words have no separator (keys first, say: cut at the end, they stay)."""
    depth, at = 0, -1
    for i, ch in enumerate(text):
        if ch == "(":
            if waiting and depth == 0 and text.endswith(")") and text.startswith(_WAITING_SEP, i - 1):
                at = i - 1
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif not waiting and depth == 0 and text.startswith(_INSTRUCTION_SEP, i):
            at = i
    if at < 0:
        return "", "", text
    sep = _WAITING_SEP if waiting else _INSTRUCTION_SEP
    return text[:at], sep, text[at + len(sep) :]


def _instruction_forms(instruction: str) -> list[str]:
    """The instruction, then shorter forms that still say what to do: a key list without
    its lead, then only its first key that acts (``d`` only shows, and the footer has it)."""
    forms = [instruction]
    if not instruction.startswith(_KEYS_LEAD):
        return forms
    keys_text = instruction.removeprefix(_KEYS_LEAD)
    forms.append(keys_text)
    keys: list[str] = []
    rest = keys_text
    while rest:
        # a key's own words may hold ", " (ctrl+p, finish-rollback, …): known keys first
        whole = next((k for k in KEY_PHRASES if rest.startswith(k)), None)
        key = whole if whole is not None else rest.split(", ", 1)[0]
        keys.append(key)
        rest = rest[len(key) :].removeprefix(", ")
    acting = [k for k in keys if k not in _SHOW_ONLY_KEYS] or keys
    if acting[0] != keys_text:
        forms.append(acting[0])
    return forms


def _fit_next(head: str, sep: str, instruction: str, width: int, tones: tuple[str, str, str], tone: str) -> Line:
    """The Next line in ``width`` columns: the report cut (marked "…") before the instruction
    is shortened; the instruction cut only when even its shortest form does not fit.

    A cut report ends in "…" where the "; " was (the mark says the words go on; a column
    saved is a column of the report kept)."""
    lead = "Next: "
    cut_sep = sep if sep == _WAITING_SEP else " "
    subject = len(re.split(r": | \(", head, maxsplit=1)[0]) if head else 0

    def cut_room(form: str) -> int:
        return width - len(lead) - 1 - len(cut_sep) - len(form)  # 1: the "…"

    def whole(form: str) -> bool:
        return len(lead) + len(head) + len(sep) + len(form) <= width

    forms = _instruction_forms(instruction)
    # the longest form that leaves the report its subject ("check 'x' on gpu05 failed")
    chosen = next((f for f in forms if not head or whole(f) or cut_room(f) >= subject), forms[-1])
    if head and not whole(chosen):
        room = cut_room(chosen)
        head, sep = (head[:room].rstrip(" :;,(") + "…", cut_sep) if room >= _MIN_HEAD else ("", "")
    runs: tuple[Run, ...] = ((lead, tones[0]), (head, tones[1]), (sep + chosen, tones[2]))
    if len(lead) + len(head) + len(sep) + len(chosen) > width:  # the instruction alone is wider
        cut = width - len(lead) - 1
        runs = ((lead, tones[0]), (chosen[: max(cut, 0)] + "…", tones[2]))
    return Line(tuple(r for r in runs if r[0]), tone)


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
    expanded: frozenset[str] = frozenset(),
    width: int | None = None,
) -> CockpitView:
    """The whole screen; ``next_plan`` is the planner's (:func:`cockpit.engine.planner.plan`);
    ``narrow``: under :data:`NARROW_BELOW` columns; ``expanded``: the node sets shown with their nodes;
    ``width``: the screen's columns, which the Next line fits (:func:`next_line`)."""
    stage, node = focus_stage(state, selected)
    return CockpitView(
        header=header_view(state, change_id=change_id, runbook_id=runbook_id, operator=operator, now=now),
        strip=tuple(progress_segments(state)),
        fleet=tuple(fleet_rows(state, live or {}, now, narrow=narrow, expanded=expanded)),
        stage=stage_pane(state, stage, node),
        triggers=trigger_panel(state),
        next=next_line(next_plan, state, width),
    )
