"""Playing a recorded change window: the asciicast v2 writer and the interactive player's clock.

``cockpit replay --cast`` writes a window as an asciicast v2 file, without a UI.

asciicast v2 is newline-delimited JSON: a header object (``version`` 2, ``width``,
``height``, ``timestamp``, ``title``), then one ``[time, code, data]`` array per
event, times in seconds from the start and never decreasing. Code ``"o"`` is output
written to the terminal; code ``"m"`` is a marker (players list them as chapters):
one at every stage or wave boundary, trigger firing, override, rollback and decision,
named in the event's short words (:func:`cockpit.view.words.event_text`). Each frame
shows the view model of the state at its event (:mod:`cockpit.view.model`), as the live
screen showed it, Next line included.

Each frame repaints the screen from the top (cursor home, each line cleared to its
end, the rest cleared below), so a player never shows two frames mixed. Idle gaps
in the window are compressed: a gap longer than ``max_gap`` seconds plays as
``max_gap``, so a three-hour window becomes a few minutes of cast.

:class:`Player` is the interactive replay's position, speed and jumps, on the same
compressed clock; ``screens/replay.py`` renders it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cockpit.changelog.events import Event
from cockpit.changelog.journal import SessionLog
from cockpit.engine.fold import Folder
from cockpit.engine.planner import demo_reviewer, plan
from cockpit.engine.state import CockpitState
from cockpit.errors import BadInput
from cockpit.runbook.model import Runbook
from cockpit.view.frame import frame, render_ansi, timeline_ticks
from cockpit.view.inert import inert
from cockpit.view.model import NARROW_BELOW, cockpit_view
from cockpit.view.replay import Replay, timeline
from cockpit.view.words import CHAPTER_KINDS, Form, event_text

#: A frame is drawn at most this often (seconds of cast time): events closer than this share one.
MIN_FRAME_INTERVAL = 0.05
HOME = "\x1b[H"
CLEAR_LINE = "\x1b[K"
CLEAR_BELOW = "\x1b[J"
HIDE_CURSOR = "\x1b[?25l"
SHOW_CURSOR = "\x1b[?25h"


def compressed_times(stamps: Sequence[datetime], *, max_gap: float = 2.0, speed: float = 1.0) -> list[float]:
    """Seconds from the first stamp, each gap divided by ``speed`` and capped at ``max_gap``.

    A clock that stepped back (two hosts appending) counts as no gap, so times never decrease.
    """
    if speed <= 0:
        raise ValueError("speed must be positive")
    out: list[float] = []
    t = 0.0
    prev: datetime | None = None
    for ts in stamps:
        if prev is not None:
            gap = max(0.0, (ts - prev).total_seconds()) / speed
            t += min(gap, max_gap)
        out.append(round(t, 6))
        prev = ts if prev is None or ts > prev else prev
    return out


@dataclass(frozen=True)
class CastSummary:
    path: Path
    frames: int
    markers: int
    duration_s: float
    events: int


def write_cast(
    log: SessionLog,
    runbook: Runbook,
    out: str | os.PathLike[str],
    *,
    width: int = 120,
    height: int = 40,
    max_gap: float = 2.0,
    speed: float = 1.0,
    title: str | None = None,
) -> CastSummary:
    """Render every moment of ``log`` to an asciicast v2 file at ``out``; return what was written.

    The state at each event is folded incrementally with the gating engine's
    :class:`~cockpit.engine.fold.Folder`, exactly as the live session folded it.
    """
    if not 40 <= width <= 1000 or not 10 <= height <= 500:
        raise BadInput("cast size must be 40-1000 columns by 10-500 rows")
    if max_gap <= 0:
        raise BadInput("--max-gap must be positive")
    if speed <= 0:
        raise BadInput("--speed must be positive")
    header = log.header
    events = log.events
    times = compressed_times([e.ts for e in events], max_gap=max_gap, speed=speed)
    markers = timeline(events)
    ticks = timeline_ticks(events)
    folder = Folder(
        runbook, header.window_parameters(), header.hosts, operator=header.operator, signatures=log.signatures
    )
    # the header's names are the log's, hand-editable: a player sets the pane title (and more,
    # with OSC 52, the clipboard) from this string, so every control in it is shown, not obeyed
    doc_title = inert(title or f"cockpit replay {header.change_id} ({header.runbook_id}, operator {header.operator})")
    cast_header = {
        "version": 2,
        "width": width,
        "height": height,
        "timestamp": int(header.created_at.timestamp()),
        "title": doc_title,
        "env": {"TERM": "xterm-256color"},
    }
    out_path = Path(out)
    frames = marks = 0
    last_frame_t = -1.0
    lines_out: list[str] = [json.dumps(cast_header)]

    def draw(seq: int, t: float) -> None:
        nonlocal frames, last_frame_t
        state = folder.state
        at = events[seq - 1].ts if seq else header.created_at
        view = cockpit_view(
            state,
            change_id=header.change_id,
            runbook_id=header.runbook_id,
            operator=header.operator,
            now=at,
            next_plan=plan(state, runbook, header.operator, reviewer=demo_reviewer(header.operator)),
            narrow=width < NARROW_BELOW,  # as the live screen at that width
            width=width,  # the Next line shortens its report, never its instruction, as live
        )
        rendered = render_ansi(
            frame(
                view,
                events=events,
                seq=seq,
                ticks=ticks,
                markers=markers,
                height=height,
                width=width,
            ),
            width=width,
            height=height,
        )
        data = HOME + "".join(line + CLEAR_LINE + "\r\n" for line in rendered[:-1])
        data += (rendered[-1] + CLEAR_LINE if rendered else "") + CLEAR_BELOW
        lines_out.append(json.dumps([t, "o", data]))
        frames += 1
        last_frame_t = t

    lines_out.append(json.dumps([0.0, "o", HIDE_CURSOR + "\x1b[2J"]))
    for index, event in enumerate(events):
        folder.apply(event)
        t = times[index]
        label = event_text(event, Form.SHORT) if event.kind in CHAPTER_KINDS else None
        if label is not None:
            lines_out.append(json.dumps([t, "m", label]))
            marks += 1
        nxt = times[index + 1] if index + 1 < len(events) else None
        # draw when the next event is far enough away (or this one opens a chapter): a burst shares a frame
        if nxt is None or nxt - t >= MIN_FRAME_INTERVAL or label is not None:
            draw(index + 1, t)  # a position in the log: a seq a repair or a bad block left out is no index
    end = (times[-1] if times else 0.0) + min(max_gap, 2.0)
    if not events:
        draw(0, 0.0)
    lines_out.append(json.dumps([end, "o", SHOW_CURSOR + "\r\n"]))
    try:
        out_path.write_text("\n".join(lines_out) + "\n", encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot write {out_path}: {exc.strerror or exc}") from None
    return CastSummary(path=out_path, frames=frames, markers=marks, duration_s=end, events=len(events))


# --------------------------------------------------------------------------- the interactive player's clock

#: Playback speeds, slowest first.
SPEEDS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


class Player:
    """Where an interactive replay is: the event shown, playing or paused, the speed.

    Pure: the UI calls :meth:`advance` with the wall-clock seconds since its last tick
    and renders :attr:`state`. Time runs on the compressed clock (idle gaps capped at
    ``max_gap``), so a quiet hour in the window does not freeze the replay.
    """

    def __init__(self, replay: Replay, *, speed: int = 1, max_gap: float = 2.0) -> None:
        self.replay = replay
        self.events = replay.events
        self.times = compressed_times([e.ts for e in self.events], max_gap=max_gap)
        self.seq = 0  # 0: before the first event
        self.clock = 0.0  # compressed seconds since the first event
        self.playing = False
        self.speed = speed if speed in SPEEDS else 1
        self._cached: tuple[int, CockpitState] | None = None

    @property
    def last(self) -> int:
        return len(self.events)

    @property
    def state(self) -> CockpitState:
        """The folded state just after event :attr:`seq`: read-only, valid until the position changes.

        Moves the replay's cursor (:meth:`Replay.view_at`), so playing or stepping forward
        folds only the events in between; a jump costs one checkpoint copy.
        """
        if self._cached is None or self._cached[0] != self.seq:
            self._cached = (self.seq, self.replay.view_at(self.seq))
        return self._cached[1]

    @property
    def event(self) -> Event | None:
        return self.events[self.seq - 1] if self.seq else None

    def seek(self, seq: int) -> None:
        self.seq = max(0, min(seq, self.last))
        self.clock = self.times[self.seq - 1] if self.seq else 0.0

    def step(self, delta: int) -> None:
        """One event back (-1) or forward (+1); pauses, as a scrub does."""
        self.playing = False
        self.seek(self.seq + delta)

    def toggle(self) -> None:
        if not self.playing and self.seq >= self.last:
            self.seek(0)  # play again from the start
        self.playing = not self.playing

    def faster(self) -> None:
        self.speed = SPEEDS[min(SPEEDS.index(self.speed) + 1, len(SPEEDS) - 1)]

    def slower(self) -> None:
        self.speed = SPEEDS[max(SPEEDS.index(self.speed) - 1, 0)]

    def advance(self, dt: float) -> bool:
        """Let ``dt`` wall-clock seconds pass while playing; True when the event shown changed."""
        if not self.playing:
            return False
        before = self.seq
        self.clock += dt * self.speed
        while self.seq < self.last and self.times[self.seq] <= self.clock:
            self.seq += 1
        if self.seq >= self.last:
            self.playing = False
        return self.seq != before

    def next_of_interest(self) -> Event | None:
        """Jump to the next trigger, override, sign-off or failure (None: there is none after here)."""
        found = self.replay.next_of_interest(self.seq)
        if found is not None:
            self.playing = False
            self.seek(found.seq)
        return found

    def search(self, text: str, *, forward: bool = True) -> Event | None:
        """Jump to the next (or previous) event whose words contain ``text``, wrapping around."""
        needle = text.strip().lower()
        if not needle or not self.events:
            return None
        n = self.last
        order = [(self.seq + i) % n for i in range(n)] if forward else [(self.seq - 2 - i) % n for i in range(n)]
        for index in order:
            event = self.events[index]
            if needle in event_words(event):
                self.playing = False
                self.seek(event.seq)
                return event
        return None


def event_words(event: Event) -> str:
    """What search matches against: kind, actor, where, and the words and facts of an event."""
    parts = [
        str(event.kind),
        event.actor,
        event.node,
        event.stage,
        event.step,
        event.item,
        event.trigger,
        event.reason,
        event.note,
        json.dumps(event.facts, default=str, ensure_ascii=False),
    ]
    return " ".join(p for p in parts if p).lower()
