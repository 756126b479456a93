"""Next, and only Next, walks every scenario of the simulator to its expected end; and
where a step is in flight or was cut short, Next waits or hands over to a person.

Real parts only: the simulated fleet called in process (InProcessTransport), the session engine, the
autopilot that takes the planner's Next (the demo reviewer signing where needed).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from gating_scenarios import take_planned_until
from walk_expectations import (
    IN_PROCESS_WALK_PARAMS,
    IN_PROCESS_WALK_SPEED,
    WALK_NODES,
    expected_end,
    walk_cases,
)

from cockpit.changelog.events import Event, ItemVerifiedEvent, StepFinishedEvent
from cockpit.changelog.journal import read_session
from cockpit.commands.demo import EXPECTED_OUTCOME, drive_and_report
from cockpit.engine.actions import RunStep
from cockpit.engine.planner import Plan
from cockpit.engine.state import NO_VERDICT_KINDS
from cockpit.export import export_text
from cockpit.runbook.loader import load
from cockpit.session.demo import demo_session, scaled_timeouts
from cockpit.session.operator import Session


@pytest.mark.timeout(90)
@pytest.mark.parametrize("scenario", walk_cases())
async def test_next_alone_ends_every_scenario_as_expected(
    scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = expected_end(scenario)
    async with demo_session(
        in_process=True,
        nodes=WALK_NODES,
        scenario=scenario,
        sessions_dir=tmp_path,
        speed=IN_PROCESS_WALK_SPEED,
        params=IN_PROCESS_WALK_PARAMS,
    ) as (session, _fleet):
        # the headless demo's own drive and report (`cockpit demo --autopilot --headless`)
        status = await drive_and_report(session, scenario)
        said = capsys.readouterr().out
        # it reports honestly: the outcome it reached is the one the scenario expects
        assert f"outcome: {expected.outcome} (expected {EXPECTED_OUTCOME[scenario]})" in said, said[-3000:]
        assert status == 0, said[-3000:]
        assert _same_failure_runs(read_session(session.path).events) <= 2  # never a third run that fails alike
        stopped = [line.removeprefix("stopped: ") for line in said.splitlines() if line.startswith("stopped: ")]
        if expected.stuck_on is not None:  # Next alone cannot end it: it names who must act
            assert stopped and expected.stuck_on in stopped[0], stopped
            for node, current in expected.nodes.items():  # what it did reach, it finished
                assert session.state.nodes[node].current == current
            return
        assert not stopped, stopped
        assert session.state.ended_at is not None
        assert {n: p.current for n, p in session.state.nodes.items()} == expected.nodes
        if expected.says is not None:  # the ticket says why, in plain words
            ticket = export_text(read_session(session.path), "markdown", load())
            assert expected.says in ticket


def _same_failure_runs(events: list[Event]) -> int:
    """The longest run of one step's (or one check's) consecutive runs that failed alike
    (the same exit status and error, the same evidence); a run cut short counts as no failure."""
    last: dict[tuple[str | None, ...], tuple[object, int]] = {}
    longest = 0
    for event in events:
        how: object = None
        if isinstance(event, StepFinishedEvent):
            key: tuple[str | None, ...] = ("step", event.stage, event.node, event.step)
            f = event.facts
            failed = f.ok is False or (f.ok is None and f.exit_status not in (0, None))
            if failed and f.error_kind not in NO_VERDICT_KINDS:
                how = (f.exit_status, f.error, f.error_kind)
        elif isinstance(event, ItemVerifiedEvent):
            key = ("item", event.stage, event.node, event.item)
            how = event.facts.evidence if event.facts.ok is False else None
        else:
            continue
        before, count = last.get(key, (None, 0))
        count = count + 1 if how is not None and how == before else 1
        last[key] = (how, count)
        if how is not None:
            longest = max(longest, count)
    return longest


def test_the_demo_timeouts_follow_the_speed() -> None:

    runbook = load().runbook
    assert scaled_timeouts(runbook, 1.0) == {
        "reboot_timeout_s": 600,
        "drain_timeout_s": 600,
        "dcgm_diag_timeout_s": 3600,
    }
    assert scaled_timeouts(runbook, 20.0) == {
        "reboot_timeout_s": 30,
        "drain_timeout_s": 30,
        "dcgm_diag_timeout_s": 180,
    }
    assert scaled_timeouts(runbook, 7.0)["reboot_timeout_s"] == 86  # rounded up: never less patient than real


async def _start_and_cancel(session: Session, action: RunStep) -> Plan:
    """Start ``action``, look at Next while it runs, cancel it as `k` would; Next while it ran."""
    task = asyncio.create_task(session.perform(action, confirmation=action.node))
    for _ in range(500):
        await asyncio.sleep(0.01)
        if any(r.step == action.step for r in session.running.values()):
            break
    while_running = session.next_plan()
    session.steps.request_cancel(action.stage, action.step, action.node)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return while_running


@pytest.mark.timeout(90)
async def test_next_waits_for_the_install_then_will_not_go_past_its_cancel(tmp_path: Path) -> None:
    # the install at speed 1: the simulated apt-get takes seconds, long enough to look at Next
    # while it runs (the walk up to it at the walks' speed; the fleet reads its speed at each wait)
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED
    ) as (session, fleet):
        session.executor.reboot_poll_s = 0.1
        install = await take_planned_until(session, "upgrade", "install")
        fleet.speed = 1.0
        running = await _start_and_cancel(session, install)
        assert running.action is None and running.waiting_for is not None
        assert "upgrade/install on gpu01" in running.waiting_for
        after = session.next_plan()
        assert after.action is None, after  # not the tick "installed following the official procedure"
        assert after.person_must is not None
        assert "upgrade/install on gpu01 was cancelled" in after.person_must
        for key in ("d shows the node", "Enter on its row runs it again", "b rolls gpu01 back"):
            assert key in after.person_must


@pytest.mark.timeout(120)
async def test_after_a_cancelled_reinstall_next_is_not_the_reboot(tmp_path: Path) -> None:
    # the walk to the rollback at the walks' speed; the reinstall itself at speed 4, slow
    # enough to be seen running and cancelled (the fleet reads its speed at each wait)
    async with demo_session(
        in_process=True, nodes=2, scenario="gpu-missing", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED
    ) as (session, fleet):
        session.executor.reboot_poll_s = 0.1
        action = await take_planned_until(session, "rollback", "reinstall")
        fleet.speed = 4.0
        await _start_and_cancel(session, action)
        after = session.next_plan()
        assert after.action is None, after  # not rollback/reboot
        assert after.person_must is not None and "rollback/reinstall on gpu02 was cancelled" in after.person_must
        assert "finish-rollback" in after.person_must


async def test_a_real_window_names_the_second_person_instead_of_signing(tmp_path: Path) -> None:
    from cockpit.fleet.targets import HostTarget

    session = Session.start(
        sessions_dir=tmp_path,
        change_id="CHG-SIGN",
        loaded=load(),
        params={"control_host": "control"},
        targets=[HostTarget(name="gpu01", address="127.0.0.1", port=22, user="ops")],
        operator="alice",
        transport=None,
    )
    try:
        session.override("freeze", reason="evidence frozen before the window (test)")
        for item in ("ceiling-only", "cu130-on-r575", "cu130-on-r580", "custom-cu129", "floating-image"):
            session.tick("compat", item, note="read and recorded (test)")
        planned = session.next_plan()
        assert planned.action is None  # never the operator's own sign-off
        assert planned.person_must is not None
        assert "a second person signs off" in planned.person_must and "s in `cockpit review`" in planned.person_must
        signed = session.next_plan(reviewer="bob").action  # with a second person at hand, it is theirs to sign
        assert signed is not None and signed.kind == "sign-off"
        assert session.verdict(signed, actor="bob").allowed
    finally:
        await session.close()
