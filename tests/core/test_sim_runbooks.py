"""Every command the shipped runbooks run is answered sensibly by the simulator.

Walks each shipped runbook in document order on a one-node fleet, with default
parameters and the node facts a real session would record: each step succeeds (no
``not found``, exit 0), each command item meets its ``expect``, the reboot step is a
real reboot, and the rollback reinstalls the recorded package.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from cockpit.fleet.probes import probe_node
from cockpit.fleet.transport import Transport
from cockpit.runbook.backends import BackendName
from cockpit.runbook.conditions import WhenValue, recorded_facts, when_holds
from cockpit.runbook.loader import load_runbook, shipped_runbooks
from cockpit.runbook.model import Item, Step, StepKind, Verify, Where
from cockpit.runbook.placeholders import ParamValue, fill
from cockpit.runbook.targets import target_facts
from cockpit.sim import SimFleet
from cockpit.sim.inprocess import InProcessTransport

# the developer's own ~/.ssh and agent never leak into these tests
pytestmark = pytest.mark.usefixtures("isolated_home")


def test_shipped_runbooks_are_found() -> None:
    assert {"driver-upgrade-r580", "minimal-driver-upgrade"} <= set(shipped_runbooks())


async def reboot_and_wait(t: Transport, command: str) -> None:
    before = (await t.run("gpu01", "cat /proc/sys/kernel/random/boot_id")).stdout
    assert (await t.run("gpu01", command)).ok
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        r = await t.run("gpu01", "cat /proc/sys/kernel/random/boot_id", timeout=2)
        if r.ok and r.stdout != before:
            return
    raise AssertionError("gpu01 did not come back from the reboot")


#: the runbooks whose node work runs over SSH (the GPU Operator's runs through Kubernetes,
#: tested against its API emulator in test_kube_window.py)
SSH_RUNBOOKS = sorted(n for n, p in shipped_runbooks().items() if BackendName.SSH in load_runbook(p).runbook.backends)


def test_the_gpu_operator_runbook_is_the_one_not_run_over_ssh() -> None:
    assert set(shipped_runbooks()) - set(SSH_RUNBOOKS) == {"driver-upgrade-gpu-operator"}


@pytest.mark.parametrize("name", SSH_RUNBOOKS)
async def test_every_runbook_command_is_answered(name: str, tmp_path: Path) -> None:
    runbook = load_runbook(shipped_runbooks()[name]).runbook
    fleet = SimFleet(1, speed=400.0)
    fleet.serve_in_process()  # the subject is the simulator's answers, not SSH: called in process
    try:
        async with InProcessTransport(fleet, fleet.transport_options(None, backoff_initial_s=0.05)) as t:
            values: dict[str, ParamValue] = {**runbook.defaults(), "change_id": "CHG-4242", "operator": "alice"}
            values.update({"node": "gpu01", "node_name": "gpu01", "host": "gpu01", "control_host": "control"})
            values["backend"] = "ssh"  # the steps `when = { backend = ... }` chooses for the SSH backend

            facts: dict[str, object] = {}

            async def record() -> None:
                state = await probe_node(t, "gpu01", platform=True)
                assert state.platform is not None
                facts.update(recorded_facts(state.platform.model_dump()))
                # what {recorded_*} fills in: a simulated node reports every one of them
                assert state.driver_package and state.driver_version and state.boot_id, state
                values.update({k: v for k, v in facts.items() if isinstance(v, str | int | float | bool)})
                values.update(target_facts({**values, **facts}))  # the executor's target set
                values.update(
                    recorded_driver_package=state.driver_package,
                    recorded_driver_version=state.driver_version,
                    recorded_boot_id=state.boot_id,
                    recorded_gpu_count=state.gpu_count,
                )

            await record()
            checked: list[str] = []

            async def run(where: Where, template: str, what: str) -> tuple[int | None, str]:
                if where is Where.LOCAL:
                    return 0, ""
                command = fill(template, values)
                host = "control" if where is Where.CONTROL else "gpu01"
                result = await t.run(host, command, timeout=30)
                checked.append(command)
                assert result.error_kind is None, f"{what}: {result.error}"
                assert result.exit_status != 127 and "not found" not in result.stderr, (
                    f"{what}: {command!r}: {result.stderr}"
                )
                return result.exit_status, result.stdout

            def applies(when: Mapping[str, WhenValue]) -> bool:
                # what runs on this node: its runtime's smoke, apt's variants, no alert silence by default
                return when_holds(when, values, facts) is not False

            async def step(s: Step, where_from: str) -> None:
                if not applies(s.when):
                    return
                if s.kind is StepKind.REBOOT:
                    await reboot_and_wait(t, fill(s.run or "systemctl reboot", values))
                elif s.kind is StepKind.RECORD:
                    await record()
                elif s.run:
                    status, _ = await run(s.where, s.run, f"{where_from} step {s.id}")
                    assert status == 0, f"{where_from} step {s.id} exited {status}"

            async def item(i: Item, where_from: str) -> None:
                if i.verify is not Verify.COMMAND or not i.command or not applies(i.when):
                    return
                assert i.expect is not None  # the loader requires one for a command item
                deadline = time.monotonic() + 2
                while True:  # a drain may take a moment to empty the node
                    status, out = await run(i.where, i.command, f"{where_from} item {i.id}")
                    ok = status == i.expect.exit_status and (
                        i.expect.stdout_matches is None or re.search(i.expect.stdout_matches, out) is not None
                    )
                    if ok or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.1)
                assert ok, f"{where_from} item {i.id}: exit {status}, stdout {out!r} vs {i.expect}"

            for stage in runbook.stages:
                for s in stage.steps:
                    await step(s, stage.id)
                for i in stage.items:
                    await item(i, stage.id)
            assert runbook.rollback is not None
            for s in runbook.rollback.steps:
                await step(s, "rollback")
            for i in runbook.rollback.items:
                await item(i, "rollback")

            assert any(re.search(r"apt-get .*\binstall\b", c) for c in checked)
            after = await probe_node(t, "gpu01")
            assert after.driver_version == "575.57.08"  # rolled back to the recorded package
    finally:
        await fleet.stop()
