"""The session engine against the simulator (called in process: its SSH path has its own
tests, and test_inprocess_transport holds the two alike): intents through the gate,
onto disk first, folded into the same state replay gets from the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from gating_scenarios import perform_as_demo, take_planned
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import BaselineRecordedEvent, EventKind, StepFinishedEvent, TriggerFiredEvent
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import (
    Action,
    ActionKind,
    ActionRefused,
)
from cockpit.engine.fold import fold
from cockpit.engine.planner import (
    DEMO_REVIEWER,
    OUTCOME_KEEP_UPGRADE,
    OUTCOME_ROLLBACK,
)
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session

pytestmark = pytest.mark.timeout(180)

FAST = IN_PROCESS_WALK_SPEED  # simulator speed, in process: installs and reboots in a few milliseconds


def folded_from_disk(session: Session):
    log = read_session(session.path)
    return log, fold(session.runbook, log.header.parameters, log.header.hosts, log.events, operator=log.header.operator)


async def test_happy_window_runs_end_to_end_and_the_file_folds_to_the_same_state(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=3, scenario="happy", sessions_dir=tmp_path, change_id="CHG-HAPPY", speed=FAST
    ) as (
        session,
        _fleet,
    ):
        result = await drive(session)
        assert result.outcome == OUTCOME_KEEP_UPGRADE, result.stuck_on
        state = session.state
        assert state.ended_at is not None
        assert {p.current for p in state.nodes.values()} == {"done"}
        assert not state.fired()
        log, replayed = folded_from_disk(session)
        assert log.torn is None
        assert [e.seq for e in log.events] == list(range(1, len(log.events) + 1))
        assert replayed.last_seq == state.last_seq
        assert {n: p.current for n, p in replayed.nodes.items()} == {n: p.current for n, p in state.nodes.items()}
        kinds = [e.kind for e in log.events]
        assert kinds[0] is EventKind.SESSION_STARTED and kinds[-1] is EventKind.SESSION_ENDED
        # every node went through the reboot with a new boot id and the new driver
        reboots = [e for e in log.events if isinstance(e, StepFinishedEvent) and e.stage == "reboot"]
        assert len(reboots) == 3
        assert all(e.facts.ok and e.facts.boot_id_after != e.facts.boot_id_before for e in reboots)
        baselines = {e.node: e.facts for e in log.events if isinstance(e, BaselineRecordedEvent)}
        assert set(baselines) == {"gpu01", "gpu02", "gpu03"}
        assert all(str(b.driver_version).startswith("575.") for b in baselines.values())
        # the platform facts are in the change log's baselines, as the simulator's probe answered them
        assert {(b.os_id, b.package_manager, b.driver_flavour, b.nvswitch) for b in baselines.values()} == {
            ("ubuntu", "apt", "open", True)
        }
        assert all(b.gpus and len(b.gpus) == 8 and b.gpu_holders is not None for b in baselines.values())
        assert all(str(session.live[n].driver_version).startswith("580.") for n in baselines if n)
        # the demo reviewer signed the two-person items, the operator never did
        signoffs = [e for e in log.events if e.kind is EventKind.SIGNOFF]
        assert signoffs and {e.actor for e in signoffs} == {DEMO_REVIEWER}


async def test_gpu_missing_fires_the_trigger_blocks_destructive_steps_and_leads_to_rollback(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=4, scenario="gpu-missing", sessions_dir=tmp_path, change_id="CHG-GPU", speed=FAST
    ) as (session, _fleet):
        # drive until the trigger fires
        while not session.state.fired():
            await take_planned(session)
            await session.refresh()
        fired = {t.id: t for t in session.state.fired()}
        assert "gpu-missing" in fired  # the sim's lost GPU also logs XID 79, so fatal-xid may fire too
        assert fired["gpu-missing"].node == "gpu02" and "7 GPUs, baseline 8" in (fired["gpu-missing"].evidence or "")
        assert all(t.node == "gpu02" for t in fired.values())
        # the next safe action is the rollback of gpu02, not more rollout
        nxt = session.next_action()
        assert nxt is not None and nxt.kind is ActionKind.START_ROLLBACK and nxt.node == "gpu02"
        # a destructive step on another node is refused while the trigger is fired
        with pytest.raises(ActionRefused) as refused:
            await session.steps.run_step("reboot", "reboot", "gpu02", confirmation="gpu02")
        assert any("gpu-missing" in r for r in refused.value.reasons), refused.value.reasons
        with pytest.raises(ActionRefused) as refused:
            session.start_wave()
        assert any("gpu-missing" in r for r in refused.value.reasons), refused.value.reasons
        result = await drive(session)
        assert result.outcome == OUTCOME_ROLLBACK, result.stuck_on
        state = session.state
        assert state.nodes["gpu01"].current == "done"
        # the driver went back, but a GPU that fell off the bus stays missing: the rollback's
        # checks do not hold and the node is handed to a person, not called restored
        assert state.nodes["gpu02"].current == "rollback-failed"
        assert state.nodes["gpu02"].baseline.driver_version == session.live["gpu02"].driver_version
        assert state.nodes["gpu03"].current == "held"
        log, _ = folded_from_disk(session)
        rollback = [e for e in log.events if e.kind is EventKind.ROLLBACK_STARTED]
        assert [e.node for e in rollback] == ["gpu02"]
        assert "gpu-missing" in (rollback[0].reason or "")
        fired_events = [e for e in log.events if isinstance(e, TriggerFiredEvent)]
        assert fired_events[0].actor == "cockpit" and fired_events[0].facts.evidence


async def test_gate_refusals_write_nothing(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-REFUSE", speed=FAST
    ) as (
        session,
        _fleet,
    ):
        before = session.journal.last_seq
        with pytest.raises(ActionRefused):  # the operator cannot sign off a two-person item
            session.sign_off("arm", actor=session.operator)
        with pytest.raises(ActionRefused):  # a reviewer cannot run steps
            await session.steps.run_step("freeze", session.runbook.stage("freeze").steps[0].id, actor=DEMO_REVIEWER)
        with pytest.raises(ActionRefused):  # no rollout before the window stages and the armed triggers
            session.start_wave(0)
        with pytest.raises(ActionRefused):  # an override needs a reason
            session.override("freeze", reason="  ")
        assert session.journal.last_seq == before
        event = session.override("freeze", reason="evidence captured in ticket CHG-REFUSE by hand")
        assert event.kind is EventKind.OVERRIDE and event.facts.blocked_by
        assert session.state.window["freeze"].status == "overridden"


async def test_destructive_step_needs_the_typed_node_name(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-CONFIRM", speed=FAST
    ) as (
        session,
        _fleet,
    ):
        while session.state.nodes["gpu01"].current != "upgrade":
            await take_planned(session)
        step = next(s for s in session.runbook.stage("upgrade").steps if s.destructive)
        assert (await session.steps.run_step("upgrade", "target-set", "gpu01")).ok  # what the install reads
        for wrong in (None, "gpu02", "GPU01"):
            with pytest.raises(ActionRefused, match="type 'gpu01'"):
                await session.steps.run_step("upgrade", step.id, "gpu01", confirmation=wrong)
        outcome = await session.steps.run_step("upgrade", step.id, "gpu01", confirmation="gpu01")
        assert outcome.ok, outcome.error


async def test_resume_continues_where_it_stopped(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-RESUME", speed=FAST
    ) as (
        session,
        fleet,
    ):
        for _ in range(12):
            await take_planned(session)
        seq_before = session.state.last_seq
        window_before = session.state.window_current
        path = session.path
        session.pause()
        await session.close()
        from cockpit.sim.inprocess import InProcessTransport

        def transport(_hosts: list[str]) -> InProcessTransport:
            return InProcessTransport(fleet, fleet.transport_options(None))

        resumed = Session.resume(path, transport_factory=transport)
        try:
            assert resumed.state.last_seq == seq_before + 2  # paused, resumed
            assert resumed.state.window_current == window_before
            assert read_session(path).events[-1].kind is EventKind.SESSION_RESUMED
            # the demo's pace, which demo_session set on the session before the pause
            resumed.executor.reboot_poll_s = session.executor.reboot_poll_s
            result = await drive(resumed)
            assert result.outcome == OUTCOME_KEEP_UPGRADE, result.stuck_on
        finally:
            await resumed.close()
        session.close = _noop  # type: ignore[method-assign]  # already closed; the context manager would close it again


async def _noop() -> None:
    return None


async def test_a_trigger_raised_between_the_check_and_the_append_stops_the_action(tmp_path: Path) -> None:
    from cockpit.session.review import ReviewerSession

    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-RACE", speed=FAST
    ) as (
        session,
        _fleet,
    ):
        while (action := session.next_action()) is not None and action.kind is not ActionKind.START_WAVE:
            await perform_as_demo(session, action)
        assert action is not None and session.verdict(action).allowed
        reviewer = ReviewerSession(session.path, "bob")
        checks = 0
        original = session._check

        def check_then_reviewer_raises(gate: Action, actor: str) -> None:
            nonlocal checks
            original(gate, actor)
            checks += 1
            if checks == 1:  # the reviewer's append lands after the first check, before the append
                reviewer.raise_trigger("protected-workload-failed", note="training job on gpu02 died")

        session._check = check_then_reviewer_raises  # type: ignore[method-assign,assignment]  # a seam for the race
        with pytest.raises(ActionRefused, match="protected-workload-failed"):
            session.start_wave(0)
        log = read_session(session.path)
        assert log.events[-1].kind is EventKind.TRIGGER_FIRED and log.events[-1].actor == "bob"
        assert not any(e.kind is EventKind.WAVE_STARTED for e in log.events)
        reviewer.close()
