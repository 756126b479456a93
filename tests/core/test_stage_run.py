"""A stage run on the simulated fleet (called in process): one person action takes a node's
stage up to its gate as Next would, one step and check at a time, each judged by the gate
and recorded; it stops at the gate, at the first failure, and refuses a destructive stage
whose node name was not typed, writing nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from gating_scenarios import take_planned
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.engine import actions
from cockpit.engine.actions import ActionRefused
from cockpit.engine.checks import run_check
from cockpit.engine.stagerun import StageRunResult
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session
from cockpit.sim.scenarios import SCENARIOS

PARAMS: dict[str, ParamValue] = {"reboot_timeout_s": 5, "drain_timeout_s": 3}


async def walk_until_stage(session: Session, node: str, stage: str) -> None:
    """Take Next (the demo reviewer signing) until ``node`` stands at ``stage`` with nothing run."""
    for _ in range(2000):
        progress = session.state.nodes[node]
        steps = progress.stages[stage].steps.values()
        if progress.current == stage and all(s.status in ("open", "skipped") for s in steps):
            return
        await take_planned(session)
    raise AssertionError(f"Next never brought {node} to {stage}")


def kinds_after(session: Session, seq: int) -> list[tuple[str, str | None, str | None]]:
    """(kind, stage, step or item) of each event written after ``seq``, from the log on disk."""
    return [
        (str(e.kind), e.stage, getattr(e, "step", None) or getattr(e, "item", None))
        for e in read_session(session.path).events
        if e.seq > seq
    ]


@pytest.mark.timeout(240)
async def test_a_stage_run_takes_the_stage_to_its_gate_and_a_destructive_one_wants_the_name(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=PARAMS
    ) as (session, _fleet):
        await walk_until_stage(session, "gpu01", "record")
        before = session.state.last_seq
        result = await session.perform(actions.RunStage(stage="record", node="gpu01"))
        assert isinstance(result, StageRunResult) and result.ok, result
        stage = session.state.nodes["gpu01"].stages["record"]
        # every step ran and every check was verified, by the person who pressed the key
        assert all(s.status == "done" for s in stage.steps.values() if s.status != "skipped")
        assert all(i.status in ("done", "skipped") for i in stage.items.values())
        written = kinds_after(session, before)
        assert ("gate-passed", "record", None) not in written  # the gate stays the person's
        assert sum(1 for k, *_ in written if k == "item-verified") >= 5
        taken = (EventKind.STEP_STARTED, EventKind.STEP_FINISHED, EventKind.ITEM_VERIFIED)
        actors = {e.actor for e in read_session(session.path).events if e.seq > before and e.kind in taken}
        assert actors == {session.operator}
        assert result.taken == sum(1 for k, *_ in written if k in ("step-finished", "item-verified"))
        assert "gate" in result.stopped
        assert session.state.nodes["gpu01"].current == "record"
        assert isinstance(session.next_action(), actions.PassGate)
        # a second stage run of the same stage has nothing left to take: refused, nothing written
        seq = session.state.last_seq
        with pytest.raises(ActionRefused, match="nothing in stage 'record' runs by itself"):
            await session.perform(actions.RunStage(stage="record", node="gpu01"))
        assert session.state.last_seq == seq
        session.pass_gate("record", "gpu01")

        # the upgrade stage holds a destructive step: without the node's name typed, or with
        # another name, the stage run is refused before anything runs
        seq = session.state.last_seq
        for typed in (None, "gpu02", "upgrade"):
            with pytest.raises(ActionRefused, match="type 'gpu01' to confirm"):
                await session.perform(actions.RunStage(stage="upgrade", node="gpu01"), confirmation=typed)
        assert session.state.last_seq == seq
        assert read_session(session.path).events[-1].seq == seq
        result = await session.perform(actions.RunStage(stage="upgrade", node="gpu01"), confirmation="gpu01")
        assert isinstance(result, StageRunResult) and result.ok, result
        upgrade = session.state.nodes["gpu01"].stages["upgrade"]
        assert upgrade.steps["install"].status == "done"
        # official-procedure is a person's attestation: the run stops there, the item open
        assert upgrade.items["official-procedure"].status == "open"
        assert "official-procedure" in result.stopped


@pytest.mark.timeout(240)
async def test_a_stage_run_stops_at_the_first_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the pinned dry run fails on the canary: its mirror lacks the fabric manager of the driver
    monkeypatch.setitem(SCENARIOS, "lockstep-canary", replace(SCENARIOS["hgx-lockstep"], target=0))
    async with demo_session(
        in_process=True,
        nodes=2,
        scenario="lockstep-canary",
        sessions_dir=tmp_path,
        speed=IN_PROCESS_WALK_SPEED,
        params=PARAMS,
    ) as (session, _fleet):
        await walk_until_stage(session, "gpu01", "upgrade")
        before = session.state.last_seq
        result = await session.perform(actions.RunStage(stage="upgrade", node="gpu01"), confirmation="gpu01")
        assert isinstance(result, StageRunResult) and not result.ok
        assert "upgrade/target-downloadable" in result.stopped and "failed" in result.stopped
        steps = session.state.nodes["gpu01"].stages["upgrade"].steps
        assert steps["target-downloadable"].status == "failed"
        # nothing after the failure: the install never started, no check was verified past it
        assert steps["install"].status == "open"
        written = kinds_after(session, before)
        assert ("step-started", "upgrade", "install") not in written
        assert written[-1][:1] == ("step-finished",)
        assert written[-1][2] == "target-downloadable"
        # a stage standing at a failure is the operator's: a second run is refused, nothing written
        seq = session.state.last_seq
        with pytest.raises(ActionRefused, match="'target-downloadable' failed"):
            await session.perform(actions.RunStage(stage="upgrade", node="gpu01"), confirmation="gpu01")
        assert session.state.last_seq == seq


@pytest.mark.timeout(300)
async def test_closing_items_that_restate_the_window_are_checked_against_its_log(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=PARAMS
    ) as (session, _fleet):
        for _ in range(3000):
            if session.state.window_current == "prefix-cache":
                break
            await take_planned(session)
        state = session.state
        # the path's own items were verified from the path-chosen event: its owner named
        path = state.window["path"].items
        assert path["path-owner"].status == "done" and "owner" in (path["path-owner"].evidence or "")
        # what has not happened yet does not hold; what has, names who recorded it
        early = run_check("recorded", state, None, session.params, recaps=["capacity/load-1-model"])
        assert not early.ok and "capacity/load-1-model does not hold yet" in early.evidence
        smoke = run_check("recorded", state, None, session.params, recaps=["smoke", "freeze/first-failing-line"])
        assert smoke.ok and "smoke passed on gpu01, gpu02" in smoke.evidence
        assert "freeze/first-failing-line by demo-operator" in smoke.evidence
        assert not run_check("recorded", state, None, session.params).ok  # recaps nothing: never holds

        for _ in range(3000):
            if state.window_current == "closing":
                break
            await take_planned(session)
        result = await session.perform(actions.RunStage(stage="closing"))
        assert isinstance(result, StageRunResult) and result.ok, result
        closing = state.window["closing"].items
        recapped = [i for i in closing.values() if i.check == "recorded"]
        assert len(recapped) == 9 and all(i.status == "done" for i in recapped)
        assert "capacity/load-1-model by demo-operator" in (closing["load-and-short"].evidence or "")
        # the decision's expiry is a person's to write: the run stops there
        assert closing["decision-expiry"].status == "open" and "decision-expiry" in result.stopped
