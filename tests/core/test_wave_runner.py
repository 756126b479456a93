"""A wave that runs itself: started by one person action on the simulated fleet (called in
process), walked by the planner's Next for every node at once under the gate, what needs a
person queued with its node, and the wave's end recorded."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from gating_scenarios import take_planned
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import ActionRefused, StartWave, TickItem
from cockpit.engine.state import DONE
from cockpit.engine.waverun import confirmation_text, first_auto_wave, out_of_service
from cockpit.errors import BadInput
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session
from cockpit.session.waves import WaveRunner
from cockpit.sim.scenarios import SCENARIOS

PARAMS: dict[str, ParamValue] = {"reboot_timeout_s": 5, "drain_timeout_s": 3, "wave_size": 4, "max_parallel": 2}
WAVE = ("gpu03", "gpu04", "gpu05", "gpu06")


async def walk_by_hand_until_auto(session: Session) -> int:
    """Take Next as a person would (the demo reviewer signing) until it would start the first
    wave that may run itself; return that wave's index."""
    first = first_auto_wave(session.runbook)
    for _ in range(2000):
        action = session.next_action()
        if isinstance(action, StartWave) and action.wave == first:
            return first
        await take_planned(session)
    raise AssertionError("Next never reached the first wave that runs itself")


def _open(session: Session, tick: TickItem) -> bool:
    stage = session.state.nodes[tick.node or ""].stages.get(tick.stage)
    return stage is not None and stage.items[tick.item].status == "open"


async def answer_needs_you(runner: WaveRunner, task: asyncio.Task[object]) -> list[str]:
    """Act as the person at the "needs you" list: tick each manual item it asks for, once."""
    ticked: list[str] = []
    while not task.done():
        for need in runner.status().needs_you:
            done = f"{need.action.item}@{need.node}" if isinstance(need.action, TickItem) else None
            if isinstance(need.action, TickItem) and done not in ticked and _open(runner.session, need.action):
                note = f"sampled {need.node}: requests and workloads pass"
                await runner.session.perform(need.action.model_copy(update={"note": note}))
                ticked.append(f"{need.action.item}@{need.node}")
        await asyncio.sleep(0.05)
    return ticked


@pytest.mark.timeout(240)
async def test_one_action_starts_a_wave_that_walks_its_nodes_concurrently(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=6, scenario="happy", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=PARAMS
    ) as (
        session,
        _fleet,
    ):
        wave = await walk_by_hand_until_auto(session)
        assert confirmation_text(session.state, wave) == "gpu[03-06]"
        before = session.state.last_seq
        with pytest.raises(BadInput, match="gpu\\[03-06\\]"):
            WaveRunner.start(session, "gpu03")
        assert session.state.last_seq == before  # a wrong node set writes nothing

        runner = WaveRunner.start(session, "gpu[03-06]", refresh_s=0.5)
        running: set[str] = set()
        widest = 0

        def watch(event: object) -> None:
            nonlocal widest
            kind = getattr(event, "kind", None)
            node = getattr(event, "node", None)
            if kind is EventKind.STEP_STARTED and node:
                running.add(node)
            elif kind is EventKind.STEP_FINISHED and node:
                running.discard(node)
            widest = max(widest, len(running))

        session.subscribe(watch)
        task = asyncio.create_task(runner.run())
        ticked = await answer_needs_you(runner, task)
        status = task.result()
        assert status.halted is None, status
        assert all(session.state.nodes[n].current == DONE for n in ("gpu03", "gpu04", "gpu05", "gpu06"))
        assert widest == 2  # two nodes at work at once, never more than max_parallel
        assert status.actions > 4 * 20  # every step, check and gate of four nodes, none by hand

        events = read_session(session.path).events
        started = [e for e in events if e.kind is EventKind.WAVE_STARTED and e.wave == wave]
        assert len(started) == 1 and started[0].facts.confirmed == "gpu[03-06]"
        assert started[0].facts.parallel == 2
        done = [e for e in events if e.kind is EventKind.WAVE_DONE]
        assert len(done) == 1 and done[0].wave == wave
        assert done[0].facts.done == ["gpu03", "gpu04", "gpu05", "gpu06"]
        since = [e for e in events if e.seq > started[0].seq]
        # the wave acts in the name of the person who started it
        assert {e.actor for e in since if e.kind is EventKind.STEP_STARTED} == {session.operator}
        # a person ticked the per-wave attestations once for the wave, on the node that asked first
        # (the serve and request checks are commands the wave ran on every node)
        assert sorted(t.split("@")[0] for t in ticked) == ["baseline-workloads"], ticked
        for node in ("gpu03", "gpu04", "gpu05", "gpu06"):
            expand = session.state.nodes[node].stages["expand"]
            assert expand.items["baseline-workloads"].status == "done"
            # the per-window ones were ticked on the canary, once for every node
            assert "ticked on gpu01" in (
                session.state.nodes[node].stages["upgrade"].items["official-procedure"].note or ""
            )
        assert session.state.wave_ended == {wave: "done"}


async def test_the_canary_and_the_second_node_are_walked_by_a_person(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=4, scenario="happy", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=PARAMS
    ) as (
        session,
        _fleet,
    ):
        with pytest.raises(BadInput, match="walked by a person"):
            WaveRunner.start(session, "gpu01", wave=0)
        with pytest.raises(BadInput, match="walked by a person"):
            WaveRunner.start(session, "gpu02", wave=1)


@pytest.mark.timeout(120)
async def test_a_per_wave_tick_names_the_nodes_sampled(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=6, scenario="happy", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=PARAMS
    ) as (
        session,
        _fleet,
    ):
        await walk_by_hand_until_auto(session)
        # the second node's per-window items came from the canary's tick; its per-wave ones are its own
        second = session.state.nodes["gpu02"]
        assert second.stages["upgrade"].items["official-procedure"].by == session.operator
        assert "ticked on gpu01" in (second.stages["upgrade"].items["official-procedure"].note or "")
        ticks = [e for e in read_session(session.path).events if e.kind is EventKind.ITEM_TICKED]
        assert sorted({e.node or "" for e in ticks if e.item == "baseline-workloads"}) == ["gpu01", "gpu02"]
        assert [e.node for e in ticks if e.item == "official-procedure"] == ["gpu01"]
        # the serve and request checks were verified on each node by their commands, never ticked
        assert not [e for e in ticks if e.item in ("smallest-serve", "app-requests")]
        for node in ("gpu01", "gpu02"):
            smoke = session.state.nodes[node].stages["smoke"]
            assert smoke.items["smallest-serve"].status == "done" and smoke.items["app-requests"].status == "done"

        runner = WaveRunner.start(session, "gpu[03-06]", refresh_s=0.5)
        task = asyncio.create_task(runner.run())
        need = None
        for _ in range(2000):
            need = next((n for n in runner.status().needs_you if isinstance(n.action, TickItem)), None)
            if need is not None:
                break
            await asyncio.sleep(0.05)
        assert need is not None and isinstance(need.action, TickItem) and need.action.item == "baseline-workloads"
        vague = need.action.model_copy(update={"note": "requests answered fine for the whole wave"})
        with pytest.raises(ActionRefused, match="name the nodes you sampled"):
            await session.perform(vague)
        runner.kill()
        status = await task
        assert status.halted == "killed by the operator"
        assert session.state.wave_ended[2].startswith("halted: killed")


@pytest.mark.timeout(240)
async def test_a_failed_node_holds_and_the_spent_budget_halts_the_wave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the mismatch fault (the new module never built) on the wave's second node, gpu04
    monkeypatch.setitem(SCENARIOS, "mismatch-gpu04", replace(SCENARIOS["mismatch"], name="mismatch-gpu04", target=3))
    async with demo_session(
        in_process=True,
        nodes=6,
        scenario="mismatch-gpu04",
        sessions_dir=tmp_path,
        speed=IN_PROCESS_WALK_SPEED,
        params=PARAMS,
    ) as (
        session,
        _fleet,
    ):
        wave = await walk_by_hand_until_auto(session)
        runner = WaveRunner.start(session, "gpu[03-06]", refresh_s=0.5)
        task = asyncio.create_task(runner.run())
        await answer_needs_you(runner, task)
        status = task.result()
        assert status.halted is not None, status
        held = {n.node: n for n in status.needs_you}
        assert "gpu04" in held and held["gpu04"].failed, held
        state = session.state
        assert state.nodes["gpu03"].current == DONE  # the node at work beside it went on to the end
        for node in ("gpu05", "gpu06"):  # no new node started once the budget (0) was spent
            drain = state.nodes[node].stages["drain"]
            assert all(s.status in ("open", "skipped") for s in drain.steps.values()), node
        halted = [e for e in read_session(session.path).events if e.kind is EventKind.WAVE_HALTED]
        assert len(halted) == 1 and halted[0].wave == wave
        assert halted[0].facts.held == ["gpu04"] and halted[0].facts.not_started == ["gpu05", "gpu06"]
        assert state.wave_ended[wave].startswith("halted: ")


@pytest.mark.timeout(240)
async def test_the_fleets_bound_on_nodes_out_of_service_holds_the_wave_to_it(tmp_path: Path) -> None:
    params = {**PARAMS, "max_parallel": 4, "max_unavailable": "1"}
    async with demo_session(
        in_process=True, nodes=6, scenario="happy", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED, params=params
    ) as (
        session,
        _fleet,
    ):
        await walk_by_hand_until_auto(session)
        runner = WaveRunner.start(session, "gpu[03-06]", refresh_s=0.5)
        assert runner.limit == 1
        widest = 0

        def watch(_event: object) -> None:
            nonlocal widest
            widest = max(widest, len([n for n in out_of_service(session.state) if n in WAVE]))

        session.subscribe(watch)
        task = asyncio.create_task(runner.run())
        await answer_needs_you(runner, task)
        assert task.result().halted is None
        assert all(session.state.nodes[n].current == DONE for n in WAVE)
        assert widest == 1  # one node out of service at a time, though max_parallel is 4
