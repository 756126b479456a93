"""The live screen and the cast frame of the same state say the same words.

The real MainScreen (Textual's pilot) shows an offline session on a frozen clock; the
cast writer replays the same session file and draws its last frame. Both render the
one view model (``cockpit/view/model.py``), so the header, every fleet row's cells, the
stage pane's title, rows and gate, the trigger lines and the Next line must appear in
both. A pane that grew its own wording again would fail here.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from textual.widgets import Static

from cockpit.changelog.journal import read_session
from cockpit.session.operator import Session
from cockpit.view.cast import write_cast
from cockpit.view.model import FLEET_COLUMNS
from screens.app import CockpitApp, build_app
from screens.widgets import CockpitHeader, FleetTable, NextBar, StageTable, TriggerPanel

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WIDTH, HEIGHT = 200, 50


def last_cast_frame(session: Session, out: Path) -> list[str]:
    """The lines of the last frame the cast writer draws for ``session``'s change log."""
    log = read_session(session.path)
    write_cast(log, session.runbook, out, width=WIDTH, height=HEIGHT)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    frames = [data for _, code, data in records if code == "o" and data.startswith("\x1b[H")]
    return [line.rstrip() for line in ANSI.sub("", frames[-1]).split("\r\n")]


def shown(live: str, cast: list[str]) -> bool:
    """``live`` is a line of the cast frame, whole or cut with an ellipsis at the frame's edge."""
    return any(line == live or (line.endswith("…") and live.startswith(line[:-1])) for line in cast)


def assert_same_words(app: CockpitApp, cast: list[str]) -> None:
    main = app.main
    frame_text = "\n".join(cast)

    header = main.query_one(CockpitHeader).render().plain
    assert header.strip() and header == cast[0], "the header differs"

    fleet = main.query_one(FleetTable)
    for node in main.session.state.nodes:
        cells = [fleet.get_cell(node, key).plain for key, _ in FLEET_COLUMNS]
        row = r"\s+".join(re.escape(cell) for cell in cells)
        assert any(re.fullmatch(row, line.strip()) for line in cast), f"fleet row {cells} not in the cast"
    assert any(re.fullmatch(r"\s+".join(label for _, label in FLEET_COLUMNS), line.strip()) for line in cast)

    title = str(main.query_one("#stage-title", Static).render())
    assert title.strip() and title in cast, "the stage title differs"
    table = main.query_one(StageTable)
    assert table.row_count > 0
    missing = []
    for index in range(table.row_count):
        symbol, label, detail = (cell.plain for cell in table.get_row_at(index))
        # the live table cuts long labels to its column with an ellipsis; the cast shows more
        if f"{symbol} {label.rstrip('…')}" not in frame_text:
            missing.append(label)
        elif detail:
            assert detail.rstrip("…") in frame_text
    # a stage longer than the frame's room (the record stage with its pre-change gate) is cut
    # there, the live table scrolls instead: the cast says how many rows it left out
    assert not missing or f"+{len(missing)} more" in frame_text, f"stage rows {missing} not in the cast"
    gate = str(main.query_one("#gate-line", Static).render())
    assert gate.startswith("Gate") and shown(gate, cast), "the gate line differs"

    panel = main.query_one(TriggerPanel).plain.splitlines()
    assert len(panel) >= 2
    for line in panel:
        assert shown(line, cast), f"trigger line {line!r} not in the cast"

    next_text = str(main.query_one(NextBar).render())
    assert next_text.startswith("Next") and next_text in cast, "the Next line differs"


async def live_and_cast_agree(session: Session, cast_path: Path) -> list[str]:
    """Show ``session`` live and as the last frame of a cast written to ``cast_path``, hold
    them to the same words, and give back the cast frame's lines."""
    app = build_app(session, refresh_s=0)
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        for _ in range(3):
            await asyncio.sleep(0.02)
            await pilot.pause()
        cast = last_cast_frame(session, cast_path)
        assert_same_words(app, cast)
    return cast


async def test_live_and_cast_frames_of_the_same_state_carry_the_same_words(offline, ui, tmp_path: Path) -> None:
    ui.through_opening(offline)
    offline.override("drain", "gpu01", reason="drained by hand before the window")
    offline.raise_trigger("protected-workload-failed", "gpu01", note="inference pods crash-looping")
    cast = await live_and_cast_agree(offline, tmp_path / "fired.cast")
    assert "FIRED" in cast[0] and "protected-workload-failed FIRED on gpu01" in "\n".join(cast)


async def test_live_and_cast_words_agree_on_a_window_stage(offline, ui, tmp_path: Path) -> None:
    offline.tick("freeze", "vllm-source", note="vLLM 0.11.0 from the image label")
    cast = await live_and_cast_agree(offline, tmp_path / "freeze.cast")
    assert "vLLM 0.11.0 from the image label" in "\n".join(cast)
