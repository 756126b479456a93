"""The executor hands a backend step to the window's engine: a real backend (tests/backend_double.py)
draining and resuming simulated nodes through ``scontrol`` on the simulated control host, over
the real SSH transport; the SSH backend rebooting a node through the reboot round trip; a step
the engine cannot do refused before anything runs; a cancel passed on to the engine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from backend_double import ScontrolDouble

from cockpit.fleet.backends.base import BackendAction, Observation, ObservedStage
from cockpit.fleet.backends.runners import ssh_runner
from cockpit.fleet.backends.ssh import SshBackend
from cockpit.fleet.executor import Executor
from cockpit.fleet.results import ErrorKind
from cockpit.fleet.transport import Transport
from cockpit.runbook.model import Step, StepKind, Where
from cockpit.sim import SimFleet

pytestmark = pytest.mark.timeout(120)

SPEED = 20.0  # the simulated jobs end in 1 s of its time, a reboot in ~4 s: a fraction of a second here


async def open_fleet(
    tmp_path: Path, nodes: int = 2, scenario: str = "happy", speed: float = SPEED
) -> tuple[SimFleet, Transport]:
    fleet = SimFleet(nodes=nodes, scenario=scenario, speed=speed)
    await fleet.start()
    files = fleet.write_client_files(tmp_path)
    options = fleet.transport_options(files, connect_timeout_s=2, keepalive_interval_s=0.5, keepalive_count_max=2)
    return fleet, Transport(fleet.targets(), options)


def engine_step(sid: str, action: BackendAction, **kw: object) -> Step:
    fields: dict[str, object] = {"timeout_s": 30, **kw}
    return Step(id=sid, title=sid, kind=StepKind.BACKEND, action=action, **fields)


async def test_a_drain_step_goes_to_the_engine_over_real_ssh_and_its_words_come_back(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path)
    heard: list[Observation] = []
    try:
        backend = ScontrolDouble(ssh_runner(transport, "control"))
        executor = Executor(transport, {}, facts={"change_id": "CHG-7"}, backend=backend)
        outcome = await executor.execute_step(
            engine_step("drain", BackendAction.DRAIN), "gpu01", on_observation=heard.append
        )
        controller = fleet.control.slurm.slurm_nodes["gpu01"]
        assert (controller.state, controller.reason) == ("DRAINED", "cockpit CHG-7: drain")
        resumed = await executor.execute_step(engine_step("resume", BackendAction.RESUME), "gpu01")
        assert controller.state == "IDLE"
    finally:
        await transport.close()
        await fleet.stop()
    assert outcome.ok, outcome.error
    assert (outcome.backend, outcome.action, outcome.target) == ("slurm", "drain", "gpu01")
    assert (outcome.native_state, outcome.observed_stage) == ("IDLE+DRAIN", "drained")
    assert outcome.evidence == {"scontrol_state": "IDLE+DRAIN"}
    assert outcome.command == "slurm: drain gpu01"
    # the node ran a job: the engine said draining before drained, each word once
    assert [(o.native_state, o.stage) for o in heard] == [
        ("MIXED", ObservedStage.IN_SERVICE),
        ("MIXED+DRAIN", ObservedStage.DRAINING),
        ("IDLE+DRAIN", ObservedStage.DRAINED),
    ]
    assert resumed.ok and resumed.observed_stage == "in-service"
    facts = outcome.facts()
    assert facts["backend"] == "slurm" and facts["native_state"] == "IDLE+DRAIN"
    assert facts["evidence"] == {"scontrol_state": "IDLE+DRAIN"}


async def test_a_node_the_engine_reports_down_fails_with_the_engines_words(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path)
    try:
        down = await transport.run("control", "scontrol update nodename=gpu02 state=down reason=ECC-storm", timeout=10)
        assert down.ok, down.stderr
        backend = ScontrolDouble(ssh_runner(transport, "control"))
        outcome = await Executor(transport, {}, backend=backend).execute_step(
            engine_step("drain", BackendAction.DRAIN), "gpu02"
        )
        assert backend.asked == []  # a failed node is not asked to drain
    finally:
        await transport.close()
        await fleet.stop()
    assert not outcome.ok and outcome.error_kind is None  # the engine's verdict, not a lost link
    assert outcome.observed_stage == "failed" and outcome.native_state == "DOWN"
    assert outcome.error == "gpu02: drain through slurm: the controller reports DOWN"


async def test_what_the_engine_cannot_do_is_refused_before_anything_runs(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path, nodes=1)
    try:
        backend = ScontrolDouble(ssh_runner(transport, "control"))
        executor = Executor(transport, {}, backend=backend)
        upgrade = await executor.execute_step(engine_step("upgrade", BackendAction.UPGRADE), "gpu01")
        nobody = await Executor(transport, {}).execute_step(engine_step("drain", BackendAction.DRAIN), "gpu01")
        assert backend.asked == []
    finally:
        await transport.close()
        await fleet.stop()
    assert upgrade.error_kind is ErrorKind.BAD_INPUT
    assert upgrade.error == "step upgrade: backend slurm does not upgrade (it performs: drain, resume)"
    assert nobody.error_kind is ErrorKind.BAD_INPUT and "the window has no backend" in (nobody.error or "")


async def test_a_reboot_step_goes_over_ssh_when_the_engine_does_not_reboot(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path, nodes=1)
    try:
        before = fleet.nodes["gpu01"].boot_id
        executor = Executor(transport, {}, backend=ScontrolDouble(ssh_runner(transport, "control")), reboot_poll_s=0.05)
        assert executor.backend_action(Step(id="reboot", title="r", kind=StepKind.REBOOT)) is None
        outcome = await executor.execute_step(Step(id="reboot", title="r", kind=StepKind.REBOOT, timeout_s=10), "gpu01")
        after = fleet.nodes["gpu01"].boot_id
    finally:
        await transport.close()
        await fleet.stop()
    assert outcome.ok, outcome.error
    assert outcome.backend is None and outcome.command == "systemctl reboot"
    assert outcome.boot_id_before == before and outcome.boot_id_after == after != before


async def test_the_ssh_backend_reboots_a_node_for_a_backend_step(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path, nodes=1)
    heard: list[Observation] = []
    try:
        before = fleet.nodes["gpu01"].boot_id
        backend = SshBackend(transport, reboot_poll_s=0.05)
        executor = Executor(transport, {}, backend=backend)
        # a reboot step keeps its own command over SSH; a backend step asks the backend
        assert executor.backend_action(Step(id="r", title="r", kind=StepKind.REBOOT)) is None
        outcome = await executor.execute_step(
            engine_step("reboot", BackendAction.REBOOT, timeout_s=10), "gpu01", on_observation=heard.append
        )
        drain = await executor.execute_step(engine_step("drain", BackendAction.DRAIN), "gpu01")
        seen = await backend.observe(["gpu01", "gpu09"])
    finally:
        await transport.close()
        await fleet.stop()
    assert outcome.ok, outcome.error
    assert outcome.boot_id_before == before and outcome.boot_id_after not in (None, before)
    assert [(o.native_state, o.stage) for o in heard] == [
        ("reboot-issued", ObservedStage.REBOOTING),
        ("back", ObservedStage.DONE),
    ]
    assert drain.error == "step drain: backend ssh does not drain (it performs: reboot)"
    assert [(o.native_state, o.stage) for o in seen] == [
        ("up", ObservedStage.UNKNOWN),
        ("not-in-window", ObservedStage.UNKNOWN),
    ]
    assert seen[0].evidence == {"boot_id": outcome.boot_id_after}


async def test_cancelling_a_released_step_cancels_it_in_the_engine(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path, nodes=1, speed=0.25)  # its job ends 4 s after the drain
    try:
        backend = ScontrolDouble(ssh_runner(transport, "control"))
        executor = Executor(transport, {}, backend=backend)
        task = asyncio.ensure_future(executor.execute_step(engine_step("drain", BackendAction.DRAIN), "gpu01"))
        controller = fleet.control.slurm.slurm_nodes["gpu01"]
        while controller.state != "DRAINING":  # asked, and waiting for the node's job
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await transport.close()
        await fleet.stop()
    assert backend.cancelled == ["gpu01"]


def test_a_backend_step_needs_a_node_where() -> None:
    step = engine_step("drain", BackendAction.DRAIN)
    assert step.where is Where.NODE and step.reboots is False
    assert engine_step("reboot", BackendAction.REBOOT).reboots is True
