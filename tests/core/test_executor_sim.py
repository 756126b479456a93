"""The executor against the fleet simulator on 127.0.0.1: the node stages of the
shipped runbook, the reboot round trip, a node that never returns, injection."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cockpit.fleet.executor import Executor, RebootProgress
from cockpit.fleet.results import ErrorKind
from cockpit.fleet.transport import Transport
from cockpit.runbook.loader import load
from cockpit.runbook.model import Step, StepKind, Where
from cockpit.runbook.placeholders import resolve_parameters
from cockpit.sim import SimFleet

pytestmark = pytest.mark.ssh  # the simulator's SSH server: tests/conftest.py SLOW_MARKS

SPEED = 20.0  # the simulator's reboot takes ~4 s of its time: ~0.2 s here


async def open_fleet(tmp_path: Path, nodes: int = 2, scenario: str = "happy") -> tuple[SimFleet, Transport]:
    fleet = SimFleet(nodes=nodes, scenario=scenario, speed=SPEED)
    await fleet.start()
    files = fleet.write_client_files(tmp_path)
    options = fleet.transport_options(files, connect_timeout_s=2, keepalive_interval_s=0.5, keepalive_count_max=2)
    return fleet, Transport(fleet.targets(), options)


async def test_node_stages_of_the_shipped_runbook_on_the_canary(tmp_path: Path) -> None:
    runbook = load().runbook
    params = resolve_parameters(runbook, {})
    fleet, transport = await open_fleet(tmp_path)
    try:
        executor = Executor(transport=transport, params=params, facts={"change_id": "CHG-42"}, reboot_poll_s=0.1)
        node = fleet.node_names[0]
        outcomes = {}
        for stage_id in ("drain", "record", "upgrade", "reboot"):
            for step in runbook.stage(stage_id).steps:
                if step.kind in (StepKind.PROBE, StepKind.RECORD):
                    continue  # the session runs probes
                # the simulated nodes: NVSwitch nodes on NVIDIA's repository with the open 575 driver,
                # fabric manager and nscq, as their record step would find
                outcomes[step.id] = await executor.execute_step(step, node, node_facts=SIM_NODE_FACTS)
    finally:
        await transport.close()
        await fleet.stop()
    failed = {k: (o.error or o.stderr) for k, o in outcomes.items() if not o.ok}
    assert not failed
    assert outcomes["cordon"].target == "control" and outcomes["cordon"].command == f"kubectl cordon {node}"
    assert outcomes["slurm-drain"].skipped  # scheduler = kubernetes
    assert not outcomes["install"].skipped and outcomes["dnf-install"].skipped  # an apt node
    assert outcomes["target-set"].stdout.split() == [
        "nvidia-driver-580-open=580.95.05*",
        "nvidia-dkms-580-open=580.95.05*",
        "nvidia-fabricmanager=580.95.05*",
        "libnvidia-nscq=580.95.05*",
    ]
    assert outcomes["boot-id"].stdout.strip() == outcomes["reboot"].boot_id_before
    reboot = outcomes["reboot"]
    assert reboot.boot_id_after and reboot.boot_id_after != reboot.boot_id_before
    assert reboot.kernel_module_before != reboot.kernel_module_after
    assert (reboot.kernel_module_after or "").startswith(str(params["target_branch"]))
    assert reboot.saw_node_down is True


#: what the record step finds on a simulated node (the default profile)
SIM_NODE_FACTS: dict[str, object] = {
    "recorded_nvswitch": True,
    "recorded_package_manager": "apt",
    "recorded_driver_install": "cuda-repository",
    "recorded_driver_flavour": "open",
    "recorded_driver_metapackage": "nvidia-driver-575-open",
    "recorded_module_packaging": "dkms",
    "recorded_fabric_manager_version": "575.57.08-1",
    "recorded_nscq_version": "575.57.08-1",
}


async def test_reboot_progress_and_new_boot_id(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path, nodes=1)
    ticks: list[RebootProgress] = []
    try:
        before = fleet.nodes["gpu01"].boot_id
        step = Step(id="reboot", title="reboot", kind=StepKind.REBOOT, timeout_s=10)
        outcome = await Executor(transport=transport, params={}, reboot_poll_s=0.05).execute_step(
            step, "gpu01", on_progress=ticks.append
        )
        assert outcome.ok, outcome.error
        assert outcome.command == "systemctl reboot"  # the default when the step gives none
        assert outcome.boot_id_before == before
        assert outcome.boot_id_after == fleet.nodes["gpu01"].boot_id != before
    finally:
        await transport.close()
        await fleet.stop()
    phases = [t.phase for t in ticks]
    assert phases[0] == "issued" and phases[-1] == "back" and "down" in phases
    assert [t.elapsed_s for t in ticks] == sorted(t.elapsed_s for t in ticks)
    assert all(t.last_error for t in ticks if t.phase == "down")


async def test_node_that_never_returns_times_out_with_the_last_error(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path, nodes=2, scenario="no-return")
    try:
        step = Step(id="reboot", title="reboot", kind=StepKind.REBOOT, timeout_s="reboot_timeout_s")
        executor = Executor(transport=transport, params={"reboot_timeout_s": 2}, reboot_poll_s=0.1)
        outcome = await executor.execute_step(step, "gpu02")
    finally:
        await transport.close()
        await fleet.stop()
    assert not outcome.ok and outcome.error_kind is ErrorKind.TIMEOUT
    assert outcome.saw_node_down is True and outcome.boot_id_after is None
    assert "gpu02: not back with a new boot id after 2 s (last error:" in (outcome.error or "")
    assert 2 <= (outcome.waited_s or 0) < 5


async def test_hostile_values_reach_the_simulated_node_as_one_word(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path, nodes=1)
    values = ["$(reboot)", "`reboot`", "x; reboot", "a' ; reboot ; '", "x && systemctl reboot", "gpu01\nreboot"]
    try:
        before = fleet.nodes["gpu01"].boot_id
        executor = Executor(transport=transport, params={})
        for value in values:
            outcome = await executor.execute_step(
                Step(id="echo", title="echo", run="echo {value}"), "gpu01", node_facts={"value": value}
            )
            assert outcome.ok, outcome.error
            assert outcome.stdout == f"{value}\n"
        await asyncio.sleep(0.1)
        assert fleet.nodes["gpu01"].boot_id == before and fleet.nodes["gpu01"].reboots == 0
    finally:
        await transport.close()
        await fleet.stop()


async def test_timeout_on_the_simulator_keeps_the_connection(tmp_path: Path) -> None:
    fleet, transport = await open_fleet(tmp_path, nodes=1)
    try:
        executor = Executor(transport=transport, params={})
        slow = await executor.execute_step(Step(id="slow", title="slow", run="sleep 30", timeout_s=1), "gpu01")
        assert slow.error_kind is ErrorKind.TIMEOUT and "timed out after 1 s" in (slow.error or "")
        fast = await executor.execute_step(Step(id="id", title="id", run="hostname"), "gpu01")
        assert fast.ok and fast.stdout.strip() == "gpu01"
    finally:
        await transport.close()
        await fleet.stop()


@pytest.mark.parametrize("where", [Where.NODE, Where.CONTROL])
async def test_unreachable_host_is_an_outcome_not_an_exception(tmp_path: Path, where: Where) -> None:
    fleet, transport = await open_fleet(tmp_path, nodes=1)
    await fleet.stop()  # everything down: connections refused
    try:
        outcome = await Executor(transport=transport, params={"control_host": "control"}).execute_step(
            Step(id="x", title="x", run="true", where=where), "gpu01"
        )
    finally:
        await transport.close()
    assert not outcome.ok and outcome.error_kind is ErrorKind.CONNECT_FAILED
