"""What an operator sees at 80×24 (a laptop's default terminal, a tmux pane), through
the pilot on an offline session: Ctrl-C's hint, the Next line, and where toasts sit."""

from __future__ import annotations

from pilot_idle import idle as _idle
from textual.widgets._toast import Toast, ToastRack

from screens.app import build_app
from screens.widgets import NextBar, TriggerPanel


def _toasts(app) -> list[Toast]:
    """The toasts on the current screen (Textual keeps them in a rack of its own)."""
    return list(app.screen.get_child_by_type(ToastRack).query(Toast))


async def test_ctrl_c_says_how_to_quit_in_plain_words(offline) -> None:
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await _idle(pilot)
        await pilot.press("ctrl+c")
        await _idle(pilot)
        shown = [toast.render().plain for toast in _toasts(app)]
        assert shown == ["Do you want to quit?\nPress ctrl+q to quit the app"]
        assert app.is_running  # Ctrl-C only says how; it quits nothing


async def test_the_next_line_keeps_its_instruction_at_80_by_24(offline) -> None:
    for stage in ("freeze", "compat", "path", "preflight"):
        offline.override(stage, reason=f"{stage} done on paper before the window (test fixture)")
    # the arm stage waits for a second person: a line of some 160 characters
    assert len(offline.next_plan().text) > 120
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await _idle(pilot)
        bar = app.main.query_one(NextBar)
        shown = str(bar.render())
        assert len(shown) <= bar.content_size.width == 78
        assert shown.startswith("Next: a second person signs off '") and "…" in shown
        assert shown.endswith("… s in `cockpit review`")  # the key, whole, after the cut
        # wider, the line is the planner's words again, whole
        await pilot.resize_terminal(200, 50)
        await _idle(pilot)
        assert str(bar.render()) == f"Next: {offline.next_plan().text}"


def _covered_by_toasts(app, selectors: tuple[str, ...]) -> dict[str, list[tuple[int, int]]]:
    """Each pane's cells where the screen shows a toast instead (what the person sees, from
    the compositor: a toast cut off by its rack does not count)."""
    covered: dict[str, list[tuple[int, int]]] = {}
    for selector in selectors:
        region = app.main.query_one(selector).region
        for y in range(region.y, region.bottom):
            for x in range(region.x, region.right):
                widget, _ = app.screen.get_widget_at(x, y)
                if isinstance(widget, Toast):
                    covered.setdefault(selector, []).append((x, y))
    return covered


async def test_toasts_never_cover_the_gate_the_triggers_or_next_at_80_by_24(offline, ui) -> None:
    kept = ("#gate-line", "#triggers", "#next")
    app = build_app(offline, refresh_s=0)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await _idle(pilot)
        # a burst of toasts, as a few quick actions make: more than the room above the gate
        await pilot.press("ctrl+c")
        for i in range(5):
            app.notify(f"step {i} done on gpu0{i + 1}: " + "output words " * 6, title="Done")
            await _idle(pilot, 2)
        await _idle(pilot)
        assert not _covered_by_toasts(app, kept)
        shown = _toasts(app)
        assert shown and "step 4 done" in shown[-1].render().plain  # the newest is in sight
        assert all(t.region.bottom <= app.main.query_one("#gate-line").region.y for t in shown)
        # a fired trigger makes the panel taller: the toasts' room shrinks with it
        ui.through_opening(offline)
        offline.raise_trigger("protected-workload-failed", "gpu01", note="inference pods crash-looping")
        await _idle(pilot)
        for i in range(3):
            app.notify(f"trigger note {i}: " + "words " * 10, severity="warning")
            await _idle(pilot, 2)
        await _idle(pilot)
        assert "FIRED" in app.main.query_one(TriggerPanel).plain
        assert not _covered_by_toasts(app, kept)
        assert any("trigger note 2" in t.render().plain for t in _toasts(app))
