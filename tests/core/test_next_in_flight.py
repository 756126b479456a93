"""Next never proposes what is under way, nor what cannot help: a check whose command runs
is not offered (or taken) twice, a check that reads the reboot's probe waits for the reboot
and the probe that closes it, a node that does not answer is offered no step, and only a
node that changed is offered a rollback.

Real parts only: the simulated fleet called in process (InProcessTransport), the session engine, its change log."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gating_scenarios import take_planned
from walk_expectations import IN_PROCESS_WALK_SPEED, WALK_PARAMS

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import Action, ActionRefused, RunStep, StartRollback, VerifyItem
from cockpit.engine.planner import InFlight, plan
from cockpit.engine.state import recorded
from cockpit.gpu.nodestate import NodeState
from cockpit.runbook.loader import load
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.demo import demo_session, scaled_timeouts
from cockpit.session.operator import Session

#: The pace of the fleet while what a test watches is in flight: slow enough to be seen
#: running. The walk up to it goes at IN_PROCESS_WALK_SPEED with the runbook's timeouts
#: scaled to this pace (as patient as at 20 all the way, never less patient than real).
WATCHED_SPEED = 20.0
PARAMS: dict[str, ParamValue] = {**scaled_timeouts(load().runbook, WATCHED_SPEED), **WALK_PARAMS}


def _verified(session: Session, node: str, item: str) -> int:
    return sum(
        1
        for e in read_session(session.path).events
        if e.kind == EventKind.ITEM_VERIFIED and e.node == node and e.item == item
    )


async def _take_until(
    session: Session, wanted: type[Action], test: Callable[[Any], bool] | None = None, limit: int = 400
) -> Action:
    """Take Next until Next is a ``wanted`` action (``test(action)`` true); return it, not taken."""
    for _ in range(limit):
        action = session.next_action()
        if isinstance(action, wanted) and (test is None or test(action)):
            return action
        await take_planned(session)
    raise AssertionError(f"Next never reached a {wanted.__name__}")


def _command_check(session: Session) -> Callable[[Any], bool]:
    def test(action: Action) -> bool:
        if not isinstance(action, VerifyItem) or action.node is None:
            return False
        item = session.state.nodes[action.node].stages[action.stage].items[action.item]
        return item.verify == "command"

    return test


@pytest.mark.timeout(120)
async def test_a_check_whose_command_runs_is_neither_proposed_nor_taken_again(tmp_path: Path) -> None:
    # slow: every reply of the node is 0.3 s late, so the check's command is in flight a while
    async with demo_session(
        in_process=True, nodes=2, scenario="slow", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=PARAMS
    ) as (
        session,
        fleet,
    ):
        check = await _take_until(session, VerifyItem, _command_check(session))
        assert isinstance(check, VerifyItem) and check.node is not None
        fleet.speed = WATCHED_SPEED
        before = _verified(session, check.node, check.item)
        task = asyncio.create_task(session.perform(check))
        await asyncio.sleep(0)  # perform has registered it
        assert check in session.in_flight().actions
        seen = []
        while not task.done():
            planned = session.next_plan()
            seen.append(planned)
            assert planned.action != check, "Next proposed the check whose command runs"
            assert planned.action is None or getattr(planned.action, "node", None) != check.node, planned
            with pytest.raises(ActionRefused, match="already under way"):
                await session.perform(check)
            await asyncio.sleep(0.05)
        await task
        assert any(p.waiting_for and check.item in p.waiting_for for p in seen), seen
        assert _verified(session, check.node, check.item) == before + 1  # one verdict, not two
        assert session.in_flight() == InFlight()


@pytest.mark.timeout(180)
async def test_slow_the_boot_id_check_waits_for_the_reboot_and_its_probe(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="slow", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=PARAMS
    ) as (
        session,
        fleet,
    ):
        session.executor.reboot_poll_s = 0.1
        reboot = await _take_until(session, RunStep, lambda a: (a.stage, a.step) == ("reboot", "reboot"))
        assert isinstance(reboot, RunStep) and reboot.node is not None
        fleet.speed = WATCHED_SPEED
        task = asyncio.create_task(session.perform(reboot, confirmation=reboot.node))
        proposed = []
        while not task.done():
            action = session.next_action()
            if isinstance(action, VerifyItem) and action.node == reboot.node:
                proposed.append((action, session.state.nodes[reboot.node].stages["reboot"].steps["reboot"].status))
            await asyncio.sleep(0.01)
        await task
        assert not proposed, f"Next proposed a check of {reboot.node} while its reboot was under way: {proposed}"
        after = session.next_action()
        assert after == VerifyItem(stage="reboot", node=reboot.node, item="boot-id-changed")
        assert await session.perform(after) is True  # judged on the probe after the reboot


@pytest.mark.timeout(120)
async def test_a_node_that_does_not_answer_is_offered_no_step(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=PARAMS
    ) as (
        session,
        _fleet,
    ):
        drain = await _take_until(session, RunStep, lambda a: (a.stage, a.step) == ("drain", "cordon"))
        assert isinstance(drain, RunStep) and drain.node is not None
        # the node's latest probe could not connect (recorded as a probe round records it)
        gone = NodeState(host=drain.node, reachable=False, error=f"cannot connect to {drain.node}: refused")
        session.prober.record_probe(drain.node, gone)
        planned = session.next_plan()
        assert planned.action is None, planned
        assert planned.person_must is not None
        assert f"{drain.node} did not answer its latest probe" in planned.person_must
        assert planned.person_must.endswith("d shows the node")
        # a link that dropped mid-command is no such word: the node connected
        dropped = NodeState(host=drain.node, reachable=False, error=f"{drain.node}: connection lost mid-command")
        session.prober.record_probe(drain.node, dropped)
        assert session.next_action() == drain
        await session.refresh([drain.node])  # it answers again: Next goes on
        assert session.next_action() == drain


@pytest.mark.timeout(120)
async def test_a_rollback_is_offered_only_for_a_node_that_changed(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=PARAMS
    ) as (
        session,
        _fleet,
    ):
        before = await _take_until(session, RunStep, lambda a: (a.stage, a.step) == ("upgrade", "apt-update"))
        assert isinstance(before, RunStep)
        node = before.node
        assert node is not None and recorded(session.state.nodes[node].baseline)  # a baseline, but nothing changed yet
        assert session.state.armed
        session.raise_trigger("unexplained-in-window", node, note="the operator saw something (test)")
        planned = session.next_plan()
        assert not isinstance(planned.action, StartRollback), planned
        assert (
            planned.person_must is not None and f"{node} was not changed (nothing to roll back)" in planned.person_must
        )
        assert f"b rolls {node} back" not in planned.text
        # the same trigger on a node that did change: the rollback is Next
        state = copy.deepcopy(session.state)
        state.nodes[node].destructive_started = True
        changed = plan(state, session.runbook, session.operator)
        assert isinstance(changed.action, StartRollback) and changed.action.node == node, changed


def test_the_work_under_way_on_a_node_is_the_first_step_or_check_in_flight_there() -> None:
    # (InFlight answers from a table made once: a wave's plan asks for each of ~200 nodes)
    verify = VerifyItem(stage="upgrade", node="gpu01", item="install-supported")
    step = RunStep(stage="upgrade", node="gpu01", step="install")
    other = RunStep(stage="drain", node="gpu02", step="cordon")
    window = RunStep(stage="preflight", node=None, step="record")
    flight = InFlight((StartRollback(node="gpu03", reason="x"), verify, step, other, window))
    assert flight.on("gpu01") is verify and flight.on("gpu02") is other and flight.on(None) is window
    assert flight.on("gpu03") is None and flight.on("gpu04") is None  # a rollback is neither
    assert InFlight().on("gpu01") is None
    assert flight == InFlight((StartRollback(node="gpu03", reason="x"), verify, step, other, window))
