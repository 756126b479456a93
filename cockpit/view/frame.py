"""The cockpit's screen as plain Rich renderables: replay's timeline and ``--cast`` frames.

No Textual here (``cockpit/`` stays UI-free): a frame renders the same view model
(:mod:`cockpit.view.model`) as the live Textual panes in ``screens/``, with Rich alone,
so ``cockpit replay --cast`` writes frames without a terminal UI and says what the live
screen said. The interactive replay shares the timeline line (:func:`timeline_text`).
"""

from __future__ import annotations

import bisect
import io
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from cockpit.changelog.events import Event, EventKind, wave_number
from cockpit.view.lines import fit_rows, more_text
from cockpit.view.model import FLEET_COLUMNS, CockpitView, FleetRow, log_line
from cockpit.view.replay import Marker
from cockpit.view.richtext import line_text, stage_row_text, strip_text
from cockpit.view.richtext import style as tone_style
from cockpit.view.words import Form, event_text, is_failure

# --------------------------------------------------------------------------- timeline


@dataclass(frozen=True, slots=True)
class Tick:
    """One mark on the scrub bar: a stage boundary, a wave, or an event worth jumping to."""

    seq: int
    glyph: str
    style: str
    label: str


#: The mark each kind of event leaves on the scrub bar (a failure is ``x``; a wave, its number).
TICK_GLYPHS: dict[str, tuple[str, str]] = {  # keyed by kind (an unknown kind has none)
    EventKind.GATE_PASSED: ("|", "green"),
    EventKind.ROLLBACK_STARTED: ("R", "bold yellow"),
    EventKind.ROLLBACK_FINISHED: ("R", "bold yellow"),
    EventKind.DECISION: ("D", "bold"),
    EventKind.TRIGGERS_ARMED: ("A", "bold"),
    EventKind.TRIGGER_FIRED: ("!", "bold red"),
    EventKind.OVERRIDE: ("O", "bold red"),
    EventKind.SIGNOFF: ("s", "magenta"),
}


def timeline_ticks(events: Sequence[Event]) -> list[Tick]:
    """Marks for the scrub bar: waves (their number), stage gates (``|``), triggers (``!``),
    overrides (``O``), rollbacks (``R``), sign-offs (``s``), failures (``x``), decision (``D``),
    arming (``A``); each labelled with the event's short words."""
    ticks: list[Tick] = []
    for e in events:
        if e.kind is EventKind.WAVE_STARTED:
            number = str(wave_number(e.wave or 0))
            glyph, style = (number if len(number) == 1 else "W"), "bold cyan"
        elif e.kind in TICK_GLYPHS:
            glyph, style = TICK_GLYPHS[e.kind]
        elif is_failure(e):
            glyph, style = "x", "red"
        else:
            continue
        ticks.append(Tick(e.seq, glyph, style, event_text(e, Form.SHORT)))
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
    where = markers[idx].label if idx >= 0 else "before the first event"
    text.append(f"event {seq}/{total}", style="bold")
    text.append(f" · {where}", style="")
    return text


# --------------------------------------------------------------------------- the whole screen

#: Lines of a frame that every layout has: header, timeline (2), strip, two blank lines,
#: the stage title, the gate line, the Next line, the rule above the log.
FIXED_LINES = 10


def _rows_text(rows: Sequence[Text], room: int) -> list[Text]:
    kept, hidden = fit_rows(rows, room)
    return [*kept, Text(more_text(hidden), style="dim")] if hidden else kept


def fleet_table(rows: Sequence[FleetRow], room: int) -> Table:
    """The fleet as the live table shows it, in at most ``room`` lines (its header included)."""
    table = Table(box=None, pad_edge=False, header_style="bold", expand=False)
    for _, label in FLEET_COLUMNS:
        table.add_column(label, no_wrap=True)
    kept, hidden = fit_rows(rows, max(room - 1, 1))
    for row in kept:
        table.add_row(*(Text(cell, style=tone_style(row.tone(i))) for i, cell in enumerate(row.cells)))
    if hidden:
        table.add_row(Text(more_text(hidden), style="dim"), *[""] * (len(FLEET_COLUMNS) - 1))
    return table


def frame(
    view: CockpitView,
    *,
    events: Sequence[Event],
    seq: int,
    ticks: Sequence[Tick],
    markers: Sequence[Marker],
    height: int,
    width: int,
) -> Group:
    """One whole screen of the cockpit at event ``seq`` (``events`` is the full log): the
    live screen's panes from the same view model, one under the other."""
    header = Text(
        view.header.fit(width),
        style="bold white on red" if view.header.alarm else "bold",
        no_wrap=True,
        overflow="ellipsis",
    )
    stage = view.stage
    room = max(height - FIXED_LINES, 6)
    trigger_room = min(1 + len(view.triggers.lines), max(2, room // 5))
    fleet_room = min(1 + len(view.fleet), max(3, room // 3))
    stage_room = min(len(stage.rows), max(2, room - trigger_room - fleet_room - 2))
    log_room = max(1, room - trigger_room - fleet_room - stage_room)
    triggers = view.triggers.fit(trigger_room)
    recent = [line_text(log_line(e), no_wrap=True) for e in events[max(0, seq - log_room) : seq]]
    return Group(
        header,
        timeline_text(ticks, markers, len(events), seq, width),
        strip_text(view.strip, width),
        Text(""),
        fleet_table(view.fleet, fleet_room),
        Text(""),
        Text(stage.title, style="bold", no_wrap=True, overflow="ellipsis"),
        *_rows_text([stage_row_text(row) for row in stage.rows], stage_room),
        line_text(stage.gate, no_wrap=True),
        Text(triggers.summary, style="bold", no_wrap=True, overflow="ellipsis"),
        *(line_text(line, no_wrap=True) for line in triggers.lines),
        line_text(view.next, no_wrap=True),
        Text("─" * width, style="dim"),
        *recent,
    )


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
