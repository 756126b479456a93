"""The fabric re-join gate: a two-node all-reduce with the fabric's reference node, measured
before the change and held to that figure before the node returns to service.

The shipped runbook's own commands are filled and run through the simulated nodes' shells;
the multi-node output and Open MPI's launch failure are compared with real captures in
tests/fixtures/misc/ (nebius/soperator#428, Azure/aks-rdma-infiniband#30).
"""

from __future__ import annotations

import re
from pathlib import Path

from sim_nodes import quick_node, sh

from cockpit.runbook.conditions import when_holds
from cockpit.runbook.loader import load
from cockpit.runbook.model import Item, Step
from cockpit.runbook.placeholders import fill
from cockpit.sim.node import SimNode
from cockpit.sim.scenarios import SCENARIOS, SPARE_REFERENCE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "misc"
RANK = re.compile(r"^#  Rank +(\d+) Group +0 Pid +\d+ on +(\S+) device +(\d+) \[0x[0-9a-f]+\] NVIDIA H100", re.M)
RUNBOOK = load("driver-upgrade-r580").runbook


def record_step(step_id: str = "rejoin-baseline") -> Step:
    return next(s for s in RUNBOOK.stage("record").steps if s.id == step_id)


def smoke_item(item_id: str = "fabric-rejoin") -> Item:
    return next(i for i in RUNBOOK.stage("smoke").items if i.id == item_id)


def filled(template: str | None, **values: object) -> str:
    assert template is not None
    base = {**RUNBOOK.defaults(), "node_name": "gpu02", "change_id": "CHG-1", "recorded_gpu_count": 8}
    return fill(template, {**base, "rejoin_reference": SPARE_REFERENCE, **values})  # type: ignore[dict-item]  # ints and strs, as the session fills them


def pair(scenario: str = "happy") -> tuple[SimNode, SimNode]:
    """The scenario's target (gpu02) and a reference node of its fabric (gpu01), each reaching the other."""
    target = quick_node("gpu02", 1, SCENARIOS[scenario])
    reference = quick_node("gpu01", 0, SCENARIOS["happy"])
    nodes = {"gpu01": reference, "gpu02": target}
    for n in nodes.values():
        n.gputools.peer = lambda name: nodes[name].gputools.as_peer() if name in nodes else None
    return target, reference


def passes(item: Item, status: int, stdout: str) -> bool:
    assert item.expect is not None and item.expect.stdout_matches is not None
    return status == item.expect.exit_status and re.search(item.expect.stdout_matches, stdout) is not None


def test_the_gate_is_on_by_default_for_nvswitch_nodes_and_needs_a_reference() -> None:
    defaults = RUNBOOK.defaults()
    assert defaults["rejoin_gate"] == "nvswitch" and defaults["rejoin_reference"] == ""
    item, step = smoke_item(), record_step()
    with_ref = {**defaults, "rejoin_reference": "gpu-ref"}
    for spec in (item, step):
        assert when_holds(spec.when, with_ref, {"recorded_nvswitch": "true"}) is True
        assert when_holds(spec.when, with_ref, {"recorded_nvswitch": "false"}) is False
        assert when_holds(spec.when, defaults, {"recorded_nvswitch": "true"}) is False  # no reference: skipped
        assert when_holds(spec.when, {**with_ref, "rejoin_gate": "off"}, {"recorded_nvswitch": "true"}) is False
    # "on": every node, NVSwitch or not, through the twin item
    twin = smoke_item("fabric-rejoin-all")
    assert when_holds(twin.when, {**with_ref, "rejoin_gate": "on"}, {"recorded_nvswitch": "false"}) is True
    assert when_holds(twin.when, with_ref, {"recorded_nvswitch": "false"}) is False
    # the figure is a runbook fact, read back by the second record step after the measurement
    recorded = record_step("rejoin-recorded")
    steps = [s.id for s in RUNBOOK.stage("record").steps]
    assert steps.index("baseline") < steps.index("rejoin-baseline") < steps.index("rejoin-recorded")
    assert recorded.kind == "record" and "rejoin_busbw" in RUNBOOK.facts


async def test_the_two_node_run_prints_a_rank_per_gpu_on_each_host_as_nccl_tests_does() -> None:
    target, _ = pair()
    status, out, err = await sh(target, filled(record_step().run, rejoin_reference="gpu01"))
    assert status == 0, err
    figure = float(out.strip())
    assert figure > 0
    # the same lines as the real two-node capture: ranks 0-7 on the first host, 8-15 on the second
    real = RANK.findall((FIXTURES / "nccl-tests_all_reduce_perf_2x8xH100_mpi_soperator-428.txt").read_text())
    assert [(r, d) for r, _, d in real] == [(str(i), str(i % 8)) for i in range(12)]
    saved = target.files["/var/cache/cockpit/CHG-1/rejoin-before.txt"]
    ranks = RANK.findall(saved)
    assert [(int(r), h, int(d)) for r, h, d in ranks] == [(i, "gpu02" if i < 8 else "gpu01", i % 8) for i in range(16)]
    assert saved.startswith("# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor)")
    assert target.files["/var/cache/cockpit/rejoin-busbw"].strip() == out.strip()


async def test_a_reference_mpirun_cannot_reach_fails_as_open_mpi_does() -> None:
    target, _ = pair()
    status, out, err = await sh(target, filled(record_step().run, rejoin_reference="gpu99"))
    real = (FIXTURES / "openmpi_ssh-unresolved_aks-rdma-infiniband-30.txt").read_text()
    for line in ("ORTE was unable to reliably start one or more daemons.", "This usually is caused by:"):
        assert line in real and line in err
    assert "ssh: Could not resolve hostname gpu99: Name or service not known" in err
    assert status != 0 and out == ""
    # the old figure never survives a failed run: the fact reads an empty file
    assert target.files["/var/cache/cockpit/rejoin-busbw"] == ""


async def test_the_smoke_item_holds_the_node_to_its_record_stage_figure() -> None:
    item = smoke_item()
    target, _ = pair("rejoin-slow")
    status, before, err = await sh(target, filled(record_step().run, rejoin_reference="gpu01"))
    assert status == 0, err
    baseline = before.strip()
    # before the reboot the path is as recorded: the item passes at its own baseline
    status, out, _ = await sh(target, filled(item.command, rejoin_reference="gpu01", recorded_rejoin_busbw=baseline))
    assert passes(item, status, out), out[-400:]
    # the first boot after the install leaves ACS on: every single-node run still passes ...
    target.reboot_now()
    single = next(i for i in RUNBOOK.stage("smoke").items if i.id == "nccl-allreduce")
    status, out, _ = await sh(target, filled(single.command))
    assert passes(single, status, out)
    # ... and the two-node run falls far below the recorded figure: FAILED, exit 1
    status, out, _ = await sh(target, filled(item.command, rejoin_reference="gpu01", recorded_rejoin_busbw=baseline))
    assert status == 1 and not passes(item, status, out)
    avg = re.search(r"(?m)^# Avg bus bandwidth\s*: ([0-9.e+]+) FAILED$", out)
    assert avg is not None and float(avg.group(1)) < 0.9 * float(baseline) * 0.5


async def test_a_reference_whose_cuda_fails_fails_the_gate() -> None:
    item = smoke_item()
    target, reference = pair()
    reference.driver.module = None  # the reference lost its driver: the run cannot start there
    status, out, err = await sh(target, filled(item.command, rejoin_reference="gpu01", recorded_rejoin_busbw="50"))
    assert status != 0 and not passes(item, status, out)
    assert "gpu01: Test CUDA failure common.cu:941" in out and "non-zero exit code" in err
