"""`n` pressed twice within a second does what the Next line showed at each press, or
refuses saying the plan changed; it never takes the same work twice. On every kind of
work in flight: a step running, a check's command verifying, a probe reading the node
for its check, and several steps running on several nodes at once.

Real parts only: the simulated fleet behind real SSH (the `slow` scenario: every reply
late, so work stays in flight long enough to press `n` over it), the real screen through
the pilot, the change log read back from disk. The window is brought to each point by
the planner headless and fast, then slowed down for the presses."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from gating_scenarios import take_planned
from textual.pilot import Pilot

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import Action, RunStep, TickItem, VerifyItem, is_destructive
from cockpit.runbook.service import changes_service
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session
from cockpit.sim.fleet import SimFleet
from screens.app import CockpitApp, build_app
from screens.main import MainScreen
from screens.widgets import NextBar

FAST = 100.0  # the headless part: the simulator 100 times faster than real
SLOW = 1.0  # the presses: the slow link's 0.3 s before every reply


@dataclass
class Press:
    shown: Action | None  # what the Next line showed when n was pressed
    line: str  # the line's words
    started: Action | None = None  # what the screen started on it
    said: str | None = None  # or the one line it said instead


def _dialog_free(session: Session, action: Action | None) -> bool:
    """An action `n` takes with no dialog (a dialog would take the second press as typing)."""
    if isinstance(action, RunStep):
        return not is_destructive(session.runbook, action) and not changes_service(
            session.runbook, action.stage, action.step, action.node
        )
    return isinstance(action, VerifyItem)


async def _headless_until(session: Session, wanted: Callable[[Action], bool], limit: int = 900) -> Action:
    for _ in range(limit):
        action = session.next_action()
        if action is not None and wanted(action):
            return action
        await take_planned(session)
    raise AssertionError("Next never reached the wanted action")


def _item_kind(session: Session, action: Action) -> str | None:
    if not isinstance(action, VerifyItem) or action.node is None:
        return None
    return session.state.nodes[action.node].stages[action.stage].items[action.item].verify


def _spy(main: MainScreen) -> tuple[list[Action], list[str]]:
    """What the screen starts and what it says: wrappers that pass everything on."""
    started: list[Action] = []
    said: list[str] = []
    start, notify = main.start, main.notify

    def spy_start(action: Action, *, via_next: bool = False) -> Any:
        started.append(action)
        return start(action, via_next=via_next)

    def spy_notify(message: str, *args: Any, **kwargs: Any) -> None:
        said.append(str(message))
        notify(message, *args, **kwargs)

    main.start = spy_start  # type: ignore[method-assign]
    main.notify = spy_notify  # type: ignore[method-assign]
    return started, said


async def _press_n(app: CockpitApp, started: list[Action], said: list[str]) -> Press:
    bar = app.main.query_one(NextBar)
    press = Press(shown=bar.shown, line=str(bar.render()))
    n_started, n_said = len(started), len(said)
    app.simulate_key("n")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while len(started) == n_started and len(said) == n_said:
        assert loop.time() < deadline, "n did nothing at all"
        await asyncio.sleep(0.005)
    if len(started) > n_started:
        press.started = started[n_started]
    else:
        press.said = said[n_said]
    return press


async def _twice(app: CockpitApp, gap: float = 0.3) -> list[Press]:
    """n, then n again ``gap`` seconds later (within a second)."""
    started, said = _spy(app.main)
    first = await _press_n(app, started, said)
    await asyncio.sleep(gap)
    second = await _press_n(app, started, said)
    return [first, second]


def _judge(presses: list[Press]) -> None:
    for press in presses:
        if press.started is not None:  # exactly what the line showed
            assert press.started == press.shown, press
        elif press.shown is not None:  # the line showed an action and n did not take it: it said why
            assert press.said is not None and "the plan changed" in press.said, press
        else:  # the line showed no action (waiting, a person's part): n says so
            assert press.said is not None and "the plan changed" not in press.said, press


def _work(session: Session, after: int) -> Counter[tuple[str, str, str | None, str | None]]:
    """Each step started and each check verified after seq ``after``, counted."""
    counted: Counter[tuple[str, str, str | None, str | None]] = Counter()
    for e in read_session(session.path).events:
        if e.seq <= after:
            continue
        if e.kind == EventKind.STEP_STARTED:
            counted[("step", e.stage or "", e.step, e.node)] += 1
        elif e.kind == EventKind.ITEM_VERIFIED:
            counted[("check", e.stage or "", e.item, e.node)] += 1
    return counted


def _key(action: Action) -> tuple[str, str, str | None, str | None]:
    if isinstance(action, RunStep):
        return ("step", action.stage, action.step, action.node)
    assert isinstance(action, VerifyItem)
    return ("check", action.stage, action.item, action.node)


async def _settled(ui: SimpleNamespace, pilot: Pilot[int], session: Session) -> None:
    await ui.settle(pilot)  # dialogs answered, every action over
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while session.in_flight().actions or session.running:
        assert loop.time() < deadline, "work still in flight"
        await asyncio.sleep(0.02)


def _no_work_twice(session: Session, after: int, presses: list[Press]) -> None:
    work = _work(session, after)
    assert all(n == 1 for n in work.values()), f"the same work twice: {work}"
    taken = [p.started for p in presses if isinstance(p.started, RunStep | VerifyItem)]
    assert Counter(_key(a) for a in taken) == +Counter({k: 1 for k in work}), (taken, work)


async def _at(
    tmp_path: Path, wanted: Callable[[Session, Action], bool], *, nodes: int = 2
) -> tuple[Any, Session, SimFleet, Action]:
    cm = demo_session(nodes=nodes, scenario="slow", sessions_dir=tmp_path, speed=FAST)
    session, fleet = await cm.__aenter__()
    session.executor.reboot_poll_s = 0.05
    action = await _headless_until(session, lambda a: wanted(session, a))
    fleet.speed = SLOW
    return cm, session, fleet, action


@pytest.mark.timeout(180)
async def test_n_twice_while_a_step_runs(ui: SimpleNamespace, tmp_path: Path) -> None:
    cm, session, _fleet, step = await _at(
        tmp_path, lambda s, a: isinstance(a, RunStep) and a.node is not None and _dialog_free(s, a)
    )
    try:
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            mark = session.state.last_seq
            presses = await _twice(app)
            assert presses[0].started == step
            assert step in session.in_flight().actions or presses[1].started is not None
            await _settled(ui, pilot, session)
            _judge(presses)
            _no_work_twice(session, mark, presses)
    finally:
        await cm.__aexit__(None, None, None)


@pytest.mark.timeout(180)
async def test_n_twice_while_a_check_verifies(ui: SimpleNamespace, tmp_path: Path) -> None:
    cm, session, _fleet, check = await _at(tmp_path, lambda s, a: _item_kind(s, a) == "command")
    try:
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            mark = session.state.last_seq
            presses = await _twice(app, gap=0.2)
            assert presses[0].started == check
            # the check's command was still running at the second press: the line had moved on
            assert presses[1].shown != check, presses
            await _settled(ui, pilot, session)
            _judge(presses)
            _no_work_twice(session, mark, presses)
            assert _work(session, mark)[_key(check)] == 1  # one verdict, not two
    finally:
        await cm.__aexit__(None, None, None)


@pytest.mark.timeout(180)
async def test_n_twice_while_a_probe_reads_the_node_a_check_reads(ui: SimpleNamespace, tmp_path: Path) -> None:
    cm, session, _fleet, check = await _at(tmp_path, lambda s, a: _item_kind(s, a) == "check")
    assert isinstance(check, VerifyItem) and check.node is not None
    try:
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            mark = session.state.last_seq
            probe = asyncio.create_task(session.refresh([check.node]))  # as a check read again asks
            await asyncio.sleep(0.05)
            assert check.node in session.in_flight().probing
            started, said = _spy(app.main)
            presses: list[tuple[bool, Press]] = []
            for _ in range(2):  # n twice within a second while the probe reads the node
                during = not probe.done()
                presses.append((during, await _press_n(app, started, said)))
                await asyncio.sleep(0.3)
            await probe
            await _settled(ui, pilot, session)
            _judge([p for _, p in presses])
            first_during, first = presses[0]
            assert first_during and first.shown is None and "probe of" in first.line, first
            for during, press in presses:
                if during:  # never verified on the probe being replaced
                    assert press.started != check, press
            _no_work_twice(session, mark, [p for _, p in presses])
    finally:
        await cm.__aexit__(None, None, None)


@pytest.mark.timeout(300)
async def test_n_twice_while_several_steps_run(ui: SimpleNamespace, tmp_path: Path) -> None:
    # 4 nodes: the canary, the second node, then a wave of two run side by side
    def third_wave(s: Session, a: Action) -> bool:
        return (
            isinstance(a, RunStep)
            and a.node is not None
            and s.state.current_wave == 2
            and len(s.state.waves[2]) > 1
            and _dialog_free(s, a)
        )

    cm, session, _fleet, step = await _at(tmp_path, third_wave, nodes=4)
    try:
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            mark = session.state.last_seq
            presses: list[Press] = []
            for _ in range(10):  # steps start on both nodes of the wave, then n twice while both run
                presses += await _twice(app, gap=0.15)
                if len({run.node for run in session.running.values()}) > 1:
                    presses += await _twice(app, gap=0.15)  # pressed while steps run on two nodes
                    break
                await ui.settle(pilot)  # a dialog the second press opened is answered
            else:
                raise AssertionError(f"steps never ran on two nodes at once: {presses}")
            assert presses[0].started == step
            await _settled(ui, pilot, session)
            _judge(presses)
            _no_work_twice(session, mark, presses)
            nodes = {getattr(p.started, "node", None) for p in presses if p.started is not None}
            assert len(nodes - {None}) > 1, presses
    finally:
        await cm.__aexit__(None, None, None)


@pytest.mark.timeout(120)
async def test_n_refuses_when_the_plan_changed_since_the_line_was_drawn(ui: SimpleNamespace, tmp_path: Path) -> None:
    cm, session, _fleet, tick = await _at(tmp_path, lambda s, a: isinstance(a, TickItem) and a.node is not None)
    assert isinstance(tick, TickItem) and tick.node is not None
    try:
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            main = app.main
            assert main.query_one(NextBar).shown == tick
            started, said = _spy(main)
            # the change log moves on (a reviewer's terminal, another key) and n comes before the
            # line is drawn again: the key press and the redraw race in a loaded terminal
            session.tick(tick.stage, tick.item, tick.node, note="ticked elsewhere first (test)")
            main.action_next()
            assert not started and said and "the plan changed" in said[-1], said
            await pilot.pause()
            now = session.next_action()
            assert main.query_one(NextBar).shown == now != tick  # drawn again: n now does the new Next
            ticks = [e for e in read_session(session.path).events if e.kind == EventKind.ITEM_TICKED]
            assert [(e.item, e.node) for e in ticks].count((tick.item, tick.node)) == 1
    finally:
        await cm.__aexit__(None, None, None)
