"""The interactive replay on the recorded gpu-missing window: play, step, speeds, jumps,
search, the timeline, a torn file's banner; and it never writes to the session file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rendered import rendered_text
from repo_paths import with_example_runbook
from textual.widgets import Input, Static

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session, session_paths
from cockpit.session.review import session_runbook
from cockpit.view.model import stage_cell
from cockpit.view.replay import Replay
from screens.replay import ReplayApp
from screens.widgets import CockpitHeader, FleetTable, TriggerPanel

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "sessions" / "examples" / "demo-gpu-missing.toml"


def make_app(path: Path, speed: int = 1) -> ReplayApp:
    log = read_session(path)
    return ReplayApp(log, session_runbook(log.header, path), speed=speed)


def shows_state_of(app: ReplayApp, replay: Replay) -> None:
    """The panes show the state folded at the player's event, not something else."""
    screen = app.view
    state = replay.state_at(screen.player.seq)
    fleet = screen.query_one(FleetTable)
    for name, progress in state.nodes.items():
        assert fleet.get_cell(name, "stage").plain == stage_cell(progress)
    assert f"event {screen.player.seq}/{replay.final.last_seq}" in rendered_text(screen.query_one("#timeline", Static))
    assert bool(state.fired()) == screen.query_one(CockpitHeader).has_class("alarm")


@pytest.mark.slow
async def test_replay_keys_drive_the_panes(tmp_path: Path) -> None:
    before = EXAMPLE.read_bytes()
    log = read_session(EXAMPLE)
    replay = Replay.for_session(log, session_runbook(log.header, EXAMPLE).runbook)
    app = make_app(EXAMPLE)
    async with app.run_test(size=(150, 46)) as pilot:
        screen = app.view
        player = screen.player
        assert player.seq == 0 and not player.playing
        assert "demo-gpu-missing" in rendered_text(screen.query_one(CockpitHeader))
        # the change log's verification and head, right under the header
        integrity = rendered_text(screen.query_one("#integrity", Static))
        assert "chain: ok" in integrity and f"head {len(log.events)}:{log.chain.head}" in integrity

        for _ in range(5):
            await pilot.press("right")
        assert player.seq == 5
        await pilot.press("left")
        assert player.seq == 4
        shows_state_of(app, replay)

        await pilot.press("plus", "plus", "plus")
        assert player.speed == 8
        await pilot.press("minus")
        assert player.speed == 4
        assert "4x" in rendered_text(screen.query_one("#replay-bar", Static))

        # n walks the events of interest in order: the override, the trigger, sign-offs, failures
        jumps: list[tuple[int, str]] = []
        for _ in range(30):
            seq = player.seq
            await pilot.press("n")
            if player.seq == seq:
                break
            assert player.event is not None
            jumps.append((player.seq, player.event.kind))
        kinds = {k for _, k in jumps}
        assert {EventKind.OVERRIDE, EventKind.TRIGGER_FIRED, EventKind.SIGNOFF} <= kinds
        fired_seq = next(s for s, k in jumps if k is EventKind.TRIGGER_FIRED)
        player.seek(fired_seq)
        screen.render_all()
        await pilot.pause()
        shows_state_of(app, replay)
        assert "gpu-missing FIRED on gpu02" in screen.query_one(TriggerPanel).plain
        assert "trigger-fired" in rendered_text(screen.query_one("#log", Static)).splitlines()[-1]

        # search: / opens the field, Enter jumps to the first match after the cursor
        await pilot.press("home")
        assert player.seq == 0
        await pilot.press("slash")
        field = screen.query_one("#search", Input)
        assert field.has_focus
        await pilot.press(*"PLAT-311")
        await pilot.press("enter")
        assert player.event is not None and player.event.kind is EventKind.OVERRIDE
        assert not field.has_class("shown")
        shows_state_of(app, replay)

        # play at 32x: the replay runs to the end by itself, event after event, through compressed idle gaps
        for _ in range(6):
            await pilot.press("plus")
        assert player.speed == 64
        await pilot.press("minus")
        await pilot.press("home")
        rendered: list[int] = []
        render_all = screen.render_all

        def spy(*, force: bool = False) -> None:
            rendered.append(player.seq)
            render_all(force=force)

        screen.render_all = spy  # type: ignore[method-assign]  # a spy on the real render, to count frames
        await pilot.press("space")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while player.playing and loop.time() < deadline:
            await asyncio.sleep(0.05)
        assert len(set(rendered)) > 10, f"the replay jumped instead of playing through: {rendered}"
        assert rendered == sorted(rendered)
        await pilot.pause()
        assert player.seq == player.last == len(log.events) and not player.playing
        shows_state_of(app, replay)
        assert "ENDED" in rendered_text(screen.query_one(CockpitHeader))
        await pilot.press("q")
    assert EXAMPLE.read_bytes() == before
    lock, _folder, _ = session_paths(EXAMPLE)
    assert not lock.exists()


async def test_a_torn_file_opens_with_a_banner(tmp_path: Path) -> None:
    torn = tmp_path / "torn.toml"
    torn.write_bytes(EXAMPLE.read_bytes() + b"\n[events.000146]\nseq = 146\nts = 2026-08-05 23:")
    with_example_runbook(tmp_path)
    app = make_app(torn)
    async with app.run_test(size=(120, 40)) as pilot:
        banner = app.view.query_one("#banner", Static)
        assert banner.has_class("shown") and banner.display
        assert "torn block" in rendered_text(banner)
        integrity = app.view.query_one("#integrity", Static)
        assert integrity.has_class("broken") and "FAILED at seq 146" in rendered_text(integrity)
        await pilot.press("end")
        assert app.view.player.seq == 145
        await pilot.press("q")
