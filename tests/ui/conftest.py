"""Helpers for the UI tests: a real session on the in-process simulator, and a pilot
that answers the cockpit's dialogs the way an operator would."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from offline_session import FROZEN, frozen_clock, start_offline, through_opening
from textual.pilot import Pilot
from textual.widgets import Input, OptionList

from cockpit.changelog.events import Event
from cockpit.changelog.journal import read_session
from cockpit.engine.planner import DEMO_REVIEWER
from cockpit.engine.state import CockpitState
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session
from cockpit.sim.fleet import node_names
from screens.app import CockpitApp
from screens.main import MainScreen
from screens.modals import ConfirmDestructive, FormPrompt, PickPrompt, TextPrompt


def events(session: Session) -> list[Event]:
    """What the change log on disk says (not the screen, not memory)."""
    return read_session(session.path).events


def kinds(session: Session) -> list[str]:
    return [str(e.kind) for e in events(session)]


@pytest.fixture(autouse=True)
def _show_app_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Print the first exception an app hit: run_test re-raises only the last one, and a
    key pressed after a crash would hide the crash behind "No screens on stack"."""
    original = CockpitApp._handle_exception

    def handle(self: CockpitApp, error: Exception) -> None:
        import traceback

        traceback.print_exception(error)
        original(self, error)

    monkeypatch.setattr(CockpitApp, "_handle_exception", handle)


@pytest.fixture
async def sim_session(tmp_path: Path) -> AsyncIterator[Session]:
    """The demo's gpu-missing story on 4 simulated nodes, fast: the second node comes
    back from its reboot with a GPU missing."""
    async with demo_session(
        nodes=4, scenario="gpu-missing", sessions_dir=tmp_path / "sessions", change_id="CHG-PILOT", speed=25.0
    ) as (session, _fleet):
        session.executor.reboot_poll_s = 0.1
        yield session


async def type_text(app: CockpitApp, text: str) -> None:
    """Type like a person: one key event per character, through the app's key handling."""
    for ch in text:
        app.simulate_key(ch)
    await asyncio.sleep(0.01)


#: what the simulated operator writes in a note or reason field
DEFAULT_ANSWER = "checked on the simulated node"


async def settle(
    pilot: Pilot[int], *, started: int | None = None, answer: str = DEFAULT_ANSWER, timeout: float = 60
) -> None:
    """Wait until the cockpit is idle again, answering each dialog like an operator: type
    the node name for a destructive step, write a note or reason, keep suggested values.

    ``started``: the action count before the key press; settle first waits for a new action.
    (It polls instead of ``pilot.pause()``: the simulator shares the process, so waiting for
    the process to go idle would cost up to a second per key.)"""
    app = pilot.app
    assert isinstance(app, CockpitApp)
    main = app.main
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    answered: set[int] = set()  # each dialog is answered once; a stray Enter would act on the screen below
    while loop.time() < deadline:
        await asyncio.sleep(0.01)
        screen = app.screen
        if id(screen) in answered:
            continue
        if isinstance(screen, ConfirmDestructive):
            if not screen.query(Input):
                continue
            field = screen.query_one(Input)
            field.focus()
            focused_by = loop.time() + 10
            while screen.focused is not field and loop.time() < focused_by:
                await asyncio.sleep(0.01)
            await type_text(app, screen.expected)
            # Key events are queued: on a loaded machine the field may not hold them all yet.
            typed_by = loop.time() + 10
            while field.value != screen.expected and loop.time() < typed_by:
                await asyncio.sleep(0.02)
            if field.value != screen.expected:
                raise AssertionError(f"typed {screen.expected!r} but the field holds {field.value!r}")
            answered.add(id(screen))
            app.simulate_key("enter")
        elif isinstance(screen, TextPrompt | FormPrompt):
            fields = list(screen.query(Input))
            if not fields:
                continue  # pushed, not composed yet
            for field in fields:
                if not field.value:
                    field.value = answer
            fields[-1].focus()
            await asyncio.sleep(0.01)
            answered.add(id(screen))
            app.simulate_key("enter")
        elif isinstance(screen, PickPrompt):
            if not screen.query(OptionList):
                continue
            screen.query_one(OptionList).focus()
            await asyncio.sleep(0.01)
            answered.add(id(screen))
            app.simulate_key("enter")
        elif (
            isinstance(screen, MainScreen) and not main._actions and (started is None or main.actions_started > started)
        ):
            await asyncio.sleep(0.02)
            if not main._actions:
                return
    values = [f.value for f in app.screen.query(Input)]
    raise AssertionError(f"the cockpit did not settle within {timeout}s (screen {app.screen!r}, inputs {values})")


async def press(pilot: Pilot[int], key: str, *, answer: str = DEFAULT_ANSWER, timeout: float = 60) -> None:
    """Press a key that starts an action, and wait until the action is over."""
    app = pilot.app
    assert isinstance(app, CockpitApp)
    before = app.main.actions_started
    app.simulate_key(key)
    await settle(pilot, started=before, answer=answer, timeout=timeout)


async def press_next_until(pilot: Pilot[int], done: Callable[[CockpitState], bool], *, limit: int = 400) -> int:
    """Press ``n`` (the Next action) until ``done(state)`` holds; returns the presses."""
    app = pilot.app
    assert isinstance(app, CockpitApp)
    session = app.session
    for presses in range(limit):
        if done(session.state):
            return presses
        if session.next_action() is None:
            raise AssertionError(
                f"Next has nothing to offer after {presses} presses; state: "
                f"{ {n: p.current for n, p in session.state.nodes.items()} }"
            )
        await press(pilot, "n")
    pending = session.next_action()
    raise AssertionError(
        f"not done after {limit} presses; Next is still {pending!r}; "
        f"gate says {session.verdict(pending).reasons if pending else 'nothing'}"
    )


def offline_session(directory: Path, *, nodes: int = 8) -> Session:
    """A session on gpu01.. with no transport and a frozen clock (offline_session.start_offline)."""
    return start_offline(directory, node_names(nodes), change_id="CHG-0042")


@pytest.fixture
def offline(tmp_path: Path) -> Iterator[Session]:
    session = offline_session(tmp_path / "sessions")
    yield session
    asyncio.run(session.close())


@pytest.fixture
def ui() -> SimpleNamespace:
    """The helpers above, for test modules (conftest is not importable in importlib mode)."""
    return SimpleNamespace(
        settle=settle,
        press=press,
        press_next_until=press_next_until,
        events=events,
        kinds=kinds,
        frozen_clock=frozen_clock,
        FROZEN=FROZEN,
        through_opening=through_opening,
        offline_session=offline_session,
        DEMO_REVIEWER=DEMO_REVIEWER,
    )
