"""A whole change window through the Slurm backend, against a real Slurm.

Real parts only: Debian's slurmctld, slurmd and munge on 127.0.0.1 (tests/slurm_fixture.py)
know the nodes gpu01 and gpu02; the simulated fleet (cockpit/sim) serves the same nodes
over SSH for the runbook's own steps (record, install, smoke). The shipped r580 runbook
runs with the Slurm backend: Slurm drains each node (its ``slurm-backend-drain`` step),
reboots it (the runbook's reboot step, released to Slurm as ``scontrol reboot ASAP``) and
resumes it. Slurm's RebootProgram reboots the simulated node, as a real RebootProgram
reboots the machine it runs on, and slurmd comes back only when that node is up again.

The scenario is the simulator's ``no-return``: the second node never comes back from its
reboot, neither over SSH nor in Slurm, and the ``node-not-back`` trigger fires with
Slurm's own evidence in the change log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurm_fixture
from walk_expectations import WALK_PARAMS, WALK_SPEED

from cockpit.changelog.events import EventKind, StepFinishedEvent
from cockpit.changelog.journal import read_session
from cockpit.export import export_text
from cockpit.fleet.backends.base import BackendName
from cockpit.fleet.backends.registry import BackendOptions
from cockpit.fleet.backends.runners import local_runner
from cockpit.fleet.backends.slurm import SlurmBackend
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session
from cockpit.session.slurm_demo import hand_reboots_to

pytestmark = pytest.mark.slurm

SCENARIO = "no-return"


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[slurm_fixture.SlurmCluster]:
    with slurm_fixture.running_slurm(("gpu01", "gpu02"), reboot_pause_s=0.2) as running:
        monkeypatch.setenv("SLURM_CONF", str(running.conf))
        yield running


@pytest.mark.slow  # about 20 s: started first, so no worker is left running it alone at the end
@pytest.mark.timeout(120)
async def test_a_window_through_slurm_with_a_node_that_never_returns(
    cluster: slurm_fixture.SlurmCluster, tmp_path: Path
) -> None:
    cluster.never_returns("gpu02")  # the scenario's target: slurmd does not come back either
    loop = asyncio.get_running_loop()
    async with demo_session(
        nodes=2,
        scenario=SCENARIO,
        sessions_dir=tmp_path,
        change_id="CHG-SLURM-1",
        speed=WALK_SPEED,
        # the reboot through slurmctld (drain, issue, register, the cockpit's hold) takes seconds
        # on a loaded machine: more than the walk's 5 s, still less than the fixture's ResumeTimeout
        params={"scheduler": "slurm", **WALK_PARAMS, "reboot_timeout_s": 20},
        backend=lambda _transport: SlurmBackend(local_runner(), poll_s=0.5),
        backend_options=BackendOptions(name=BackendName.SLURM),
    ) as (session, fleet):
        hand_reboots_to(cluster, fleet, loop)  # Slurm reboots the simulated node; slurmd returns with it
        result = await drive(session)
    loaded = session.loaded

    log = read_session(session.path)
    events = log.events

    def finished(node: str, step: str) -> list[StepFinishedEvent]:
        return [e for e in events if isinstance(e, StepFinishedEvent) and e.node == node and e.step == step]

    # the canary: drained, rebooted and resumed by Slurm, installed over SSH, and done
    assert session.state.nodes["gpu01"].current == "done", result.log[-5:]
    [preflight] = finished("gpu01", "slurm-backend-preflight")  # before the drain, changing nothing
    assert preflight.facts.ok and preflight.facts.evidence is not None, preflight.facts
    assert preflight.facts.evidence["resume_timeout_s"] == str(slurm_fixture.RESUME_TIMEOUT_S)
    assert preflight.facts.evidence["reboot_timeout_s"] == "20"
    [drain] = finished("gpu01", "slurm-backend-drain")
    assert drain.facts.ok and drain.facts.backend == "slurm" and drain.facts.action == "drain"
    assert drain.facts.native_state == "IDLE+DRAIN"
    [reboot] = finished("gpu01", "reboot")
    assert reboot.facts.ok and reboot.facts.backend == "slurm" and reboot.facts.action == "reboot"
    assert reboot.facts.evidence is not None  # Slurm's BootTime before and after: a new boot
    assert reboot.facts.evidence["boot_time"] != reboot.facts.evidence["boot_time_before"]
    # held out of service (nextstate=DOWN, the cockpit's drain) from the reboot until its smoke
    # test passed: only then did the expand stage's resume give it back to Slurm
    assert reboot.facts.native_state == "DOWN+DRAIN", reboot.facts
    [resume] = finished("gpu01", "slurm-backend-resume")
    assert resume.facts.ok and resume.facts.native_state == "IDLE"
    smoke = [e for e in events if isinstance(e, StepFinishedEvent) and e.node == "gpu01" and e.stage == "smoke"]
    assert smoke and all(e.facts.ok for e in smoke), smoke
    observed = [e for e in events if e.kind is EventKind.NODE_OBSERVED and e.node == "gpu01"]
    [asked] = [e for e in events if e.kind is EventKind.STEP_STARTED and e.node == "gpu01" and e.step == resume.step]
    assert all(e.seq < asked.seq for e in smoke)
    between = [e.facts.native_state for e in observed if reboot.seq < e.seq < asked.seq]
    assert between == [] or set(between) == {"DOWN+DRAIN"}, between
    assert [e for e in finished("gpu01", "install") if e.facts.ok]  # the install stayed the runbook's, over SSH
    assert "gpu01" in cluster.reboots and fleet.nodes["gpu01"].reboots >= 1
    assert cluster.client("sinfo", "-h", "-N", "-n", "gpu01", "-o", "%T").stdout.strip() == "idle"

    # the node that never came back: its trigger fired, Slurm's view of it is in the log
    fired = [e for e in events if e.kind is EventKind.TRIGGER_FIRED and e.node == "gpu02"]
    assert "node-not-back" in {e.trigger for e in fired}, [e.trigger for e in fired]
    [lost] = finished("gpu02", "reboot")
    assert not lost.facts.ok and lost.facts.backend == "slurm"
    assert "REBOOT_ISSUED" in (lost.facts.native_state or "")
    seen = [e.facts for e in events if e.kind is EventKind.NODE_OBSERVED and e.node == "gpu02"]
    assert any(f.native_state and "REBOOT_ISSUED" in f.native_state and f.stage == "rebooting" for f in seen)
    assert any(f.reason and f.reason.startswith("cockpit CHG-SLURM-1: reboot") for f in seen)
    assert "gpu02" in cluster.reboots
    # as over SSH: the rollback cannot reach the node (Slurm's drain of it ends at once)
    assert session.state.nodes["gpu02"].current == "rollback-failed"
    assert [e for e in finished("gpu02", "slurm-backend-drain") if e.stage == "rollback" and e.facts.ok]
    ticket = export_text(log, "markdown", loaded)
    assert "node-not-back" in ticket


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_window_held_in_a_maintenance_reservation_smokes_as_a_slurm_job(
    cluster: slurm_fixture.SlurmCluster, tmp_path: Path
) -> None:
    """``slurm_hold = "reservation"``: the canary comes back in the cockpit's reservation, the
    smoke stage runs a job there through srun with every GPU Slurm's GRES declares, and the
    expand stage deletes the reservation before the node takes other jobs."""
    loop = asyncio.get_running_loop()
    smoke = 'sh -c "echo gpus=$CUDA_VISIBLE_DEVICES"'
    async with demo_session(
        nodes=1,
        scenario="happy",
        sessions_dir=tmp_path,
        change_id="CHG-SLURM-RES",
        speed=WALK_SPEED,
        params={
            "scheduler": "slurm",
            **WALK_PARAMS,
            "reboot_timeout_s": 20,
            "slurm_hold": "reservation",
            "slurm_smoke_command": smoke,
        },
        backend=lambda _transport: SlurmBackend(local_runner(), poll_s=0.5),
        backend_options=BackendOptions(name=BackendName.SLURM),
    ) as (session, fleet):
        hand_reboots_to(cluster, fleet, loop)
        result = await drive(session)
    events = read_session(session.path).events
    assert session.state.nodes["gpu01"].current == "done", result.log[-5:]
    [job] = [e for e in events if isinstance(e, StepFinishedEvent) and e.step == "slurm-smoke-job"]
    assert job.facts.ok and job.facts.evidence is not None, job.facts
    assert job.facts.evidence["output"] == "gpus=0,1,2,3,4,5,6,7"
    [reboot] = [e for e in events if isinstance(e, StepFinishedEvent) and e.step == "reboot"]
    # back up in the reservation: its MAINTENANCE flag reaches the node a moment after it registered
    assert reboot.facts.ok and (reboot.facts.native_state or "").startswith("IDLE"), reboot.facts
    gone = cluster.client("scontrol", "show", "reservation", "cockpit-hold-CHG-SLURM-RES-gpu01", check=False)
    assert gone.returncode != 0, gone.stdout  # deleted by the resume
    assert cluster.client("sinfo", "-h", "-N", "-n", "gpu01", "-o", "%T").stdout.strip() == "idle"
