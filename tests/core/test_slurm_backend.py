"""The Slurm backend against a real Slurm: Debian's slurmctld, slurmd and munge, started on
127.0.0.1 by tests/slurm_fixture.py (one slurmd per node, reboots simulated by the
fixture's RebootProgram). Each test has its own node, so they share one cluster."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import slurm_fixture

from cockpit.fleet.backends.base import (
    BackendAction,
    BackendError,
    BackendName,
    Observation,
    ObservedStage,
    ReleaseRequest,
)
from cockpit.fleet.backends.registry import BackendOptions, backend_actions, make_backend
from cockpit.fleet.backends.runners import local_runner
from cockpit.fleet.backends.slurm import SlurmBackend
from cockpit.fleet.backends.slurm_nodes import time_left_s
from cockpit.fleet.executor import Executor
from cockpit.fleet.results import CommandResult
from cockpit.runbook.loader import load
from cockpit.runbook.model import Step, StepKind

pytestmark = pytest.mark.slurm

#: a change's words with shell in them: they must reach Slurm as they are, and never run
REASON = "CHG-7 driver r580 $(touch cockpit-pwned); `touch cockpit-pwned` 'quoted' \"double\""
#: the runbook whose drain and reboot steps name this change's reasons ("cockpit CHG-7: reboot")
R580 = load("driver-upgrade-r580")
NODES = tuple(f"gpu{i:02d}" for i in range(1, 18))


@pytest.fixture(scope="module")
def cluster() -> Iterator[slurm_fixture.SlurmCluster]:
    with slurm_fixture.running_slurm(NODES, reboot_pause_s=0.8) as running:
        yield running


@pytest.fixture(autouse=True)
def slurm_conf(cluster: slurm_fixture.SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Slurm clients find this cluster as a site's find theirs: through SLURM_CONF."""
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))


async def until_heard(
    heard: list[Observation], task: asyncio.Future[Any], native: str = "", limit_s: float = 20
) -> None:
    """Wait until the release ``task`` reported a state holding ``native`` (any state when
    empty), or ended, or ``limit_s`` passed; the caller asserts which."""
    for _ in range(int(limit_s / 0.05)):
        if any(native in o.native_state for o in heard) or task.done():
            return
        await asyncio.sleep(0.05)


async def job_state_within(cluster: slurm_fixture.SlurmCluster, job: str, want: str, limit_s: float = 20) -> str:
    """The job's squeue state once it is ``want``, or the last one seen when ``limit_s`` passed."""
    state = ""
    for _ in range(int(limit_s / 0.2)):
        state = cluster.client("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()
        if state == want:
            break
        await asyncio.sleep(0.2)
    return state


def backend(form: str = "auto") -> SlurmBackend:
    return SlurmBackend(local_runner(), poll_s=0.5, command_timeout_s=10, form=form)  # type: ignore[arg-type]


@pytest.mark.parametrize("form", ["json", "text"])
async def test_discover_and_observe_in_both_forms(cluster: slurm_fixture.SlurmCluster, form: str) -> None:
    slurm = backend(form)
    seen = {o.node: o for o in await slurm.discover()}
    assert set(seen) == set(NODES)
    one = await slurm.observe(["gpu01", "nosuch"])
    assert one[0].node == "gpu01" and one[0].stage is ObservedStage.IN_SERVICE
    assert one[0].native_state == "IDLE"
    assert one[0].evidence["gpus"] == "8" and one[0].evidence["gres"] == "gpu:8"
    assert one[0].evidence["boot_time"]
    assert one[1].stage is ObservedStage.UNKNOWN and one[1].native_state == "not in slurm"


async def test_slurm_that_cannot_be_read_is_a_backend_error(
    cluster: slurm_fixture.SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(cluster.workdir / "no-such-slurm.conf"))
    # Slurm's clients retry a missing slurm.conf for 60 s ("retrying in 1sec up to 60sec"):
    # the command's timeout is what ends it, and the operator reads one line
    slurm = SlurmBackend(local_runner(), command_timeout_s=1)
    with pytest.raises(BackendError, match=r"^slurm: sinfo --json failed: local: timed out after 1 s"):
        await slurm.observe(["gpu01"])


async def test_drain_waits_for_the_running_job_then_resume(cluster: slurm_fixture.SlurmCluster) -> None:
    # the job runs until the drain has been seen waiting for it, then ends (a timer would race
    # a loaded machine to the drain's first look)
    job = cluster.submit_sleep("gpu02", 600)
    slurm = backend()
    heard: list[Observation] = []

    def end_the_job_once_seen(observation: Observation) -> None:
        heard.append(observation)
        if observation.stage is ObservedStage.DRAINING:
            cluster.client("scancel", job)

    [drained] = await slurm.release(
        ReleaseRequest(BackendAction.DRAIN, ("gpu02",), reason=REASON, timeout_s=20), end_the_job_once_seen
    )
    assert drained.ok, drained.error
    assert drained.evidence["jobs"] == job  # the job the drain waited for is its evidence
    assert [o.stage for o in heard][:1] == [ObservedStage.DRAINING]
    assert heard[0].native_state == "MIXED+DRAIN" and heard[0].evidence["jobs"] == job
    assert heard[-1].stage is ObservedStage.DRAINED and heard[-1].native_state == "IDLE+DRAIN"
    # the reason reached Slurm as one word, through sh -c and shlex.join: nothing in it ran
    assert drained.final is not None and drained.final.reason == "cockpit: " + REASON.replace('"', "'")
    assert not Path("cockpit-pwned").exists()  # the runner runs in the current folder
    [resumed] = await slurm.release(ReleaseRequest(BackendAction.RESUME, ("gpu02",), reason="CHG-7 done", timeout_s=20))
    assert resumed.ok, resumed.error
    assert resumed.final is not None and resumed.final.stage is ObservedStage.IN_SERVICE
    [again] = await slurm.release(ReleaseRequest(BackendAction.RESUME, ("gpu02",), reason="CHG-7 done", timeout_s=5))
    assert again.ok and again.waited_s < 2  # already in service: nothing sent, nothing waited for


async def test_reboot_through_slurm_comes_back(cluster: slurm_fixture.SlurmCluster) -> None:
    slurm = backend()
    [before] = await slurm.observe(["gpu03"])
    heard: list[Observation] = []
    [rebooted] = await slurm.release(
        ReleaseRequest(BackendAction.REBOOT, ("gpu03",), reason="CHG-7 reboot", timeout_s=30), heard.append
    )
    assert rebooted.ok, rebooted.error
    assert "gpu03" in cluster.reboots  # Slurm ran its RebootProgram for it
    assert ObservedStage.REBOOTING in [o.stage for o in heard]
    assert any("REBOOT_ISSUED" in o.native_state for o in heard)
    assert rebooted.evidence["boot_time"] != before.evidence["boot_time"]
    assert rebooted.evidence["boot_time_before"] == before.evidence["boot_time"]
    # nextstate=DOWN, then the cockpit's drain: out of service until the resume step
    assert rebooted.final is not None and rebooted.final.native_state == "DOWN+DRAIN", rebooted.final
    assert rebooted.final.reason == "cockpit: CHG-7 reboot"
    assert rebooted.evidence["held"] == "DOWN until its smoke test passes"
    [resumed] = await slurm.release(ReleaseRequest(BackendAction.RESUME, ("gpu03",), reason="CHG-7", timeout_s=30))
    assert resumed.ok, resumed.error
    assert resumed.final is not None and resumed.final.stage is ObservedStage.IN_SERVICE, resumed.final


@pytest.mark.slow  # a real Slurm: the node rebooted, its smoke test waited for, ~23 s
async def test_a_rebooted_node_takes_no_job_until_its_smoke_test_passed(cluster: slurm_fixture.SlurmCluster) -> None:
    """The leak nextstate=RESUME left open: a job waiting for the node starts only after the
    resume step (which the runbook puts after the smoke test), not when slurmd registers."""
    slurm = backend()
    slurm.use_runbook(R580.runbook)
    change = {"change_id": "CHG-7"}
    [rebooted] = await slurm.release(
        ReleaseRequest(BackendAction.REBOOT, ("gpu12",), reason="cockpit CHG-7: reboot", timeout_s=30, context=change)
    )
    assert rebooted.ok, rebooted.error
    waiting = cluster.client(
        "sbatch", "--parsable", "-w", "gpu12", "-J", "cockpit-leak", f"--chdir={cluster.workdir}",
        f"--output={cluster.workdir}/jobs/%j.out", "--wrap", "sleep 600",
    ).stdout.strip().split(";")[0]  # fmt: skip
    # the smoke test's time: slurmctld schedules every few seconds; the job must stay pending
    for _ in range(12):
        await asyncio.sleep(0.5)
        state = cluster.client("squeue", "-h", "-j", waiting, "-o", "%T|%r").stdout.strip()
        assert state.startswith("PENDING|"), state
        [held] = await slurm.observe(["gpu12"])
        assert held.native_state == "DOWN+DRAIN" and held.stage is ObservedStage.DOWN, held
    # a new process (the cockpit resumed after a crash) knows the hold for this change's own, by
    # the change id and the runbook's reboot step: the exact reason it wrote
    again = backend()
    again.use_runbook(R580.runbook)
    [resumed] = await again.release(
        ReleaseRequest(BackendAction.RESUME, ("gpu12",), reason="cockpit CHG-7: resume", timeout_s=30, context=change)
    )
    assert resumed.ok, resumed.error
    assert await job_state_within(cluster, waiting, "RUNNING") == "RUNNING"
    cluster.client("scancel", waiting)


async def test_a_node_rebooted_inside_a_maintenance_reservation_is_back(cluster: slurm_fixture.SlurmCluster) -> None:
    """scontrol(1) advises keeping nodes in a maintenance reservation around a reboot; the real
    slurmctld shows such a node IDLE+MAINTENANCE+RESERVED once back. It is back, never a
    node-not-back: read as UNKNOWN it timed out and a healthy node was rolled back."""
    cluster.client(
        "scontrol", "create", "reservation", "reservationname=cockpit-maint", "starttime=now",
        "duration=10", "nodes=gpu11", "flags=maint", "users=root",
    )  # fmt: skip
    try:
        slurm = backend()
        heard: list[Observation] = []
        [rebooted] = await slurm.release(
            ReleaseRequest(BackendAction.REBOOT, ("gpu11",), reason="CHG-7 reboot", timeout_s=30), heard.append
        )
        assert rebooted.ok, rebooted.error
        [resumed] = await slurm.release(
            ReleaseRequest(BackendAction.RESUME, ("gpu11",), reason="CHG-7", timeout_s=30), heard.append
        )
        assert resumed.ok, resumed.error
        [now] = await slurm.observe(["gpu11"])
        for _ in range(40):  # the reservation's flags show on the node a moment after it registered
            if "MAINTENANCE" in now.native_state:
                break
            await asyncio.sleep(0.25)
            [now] = await slurm.observe(["gpu11"])
        assert now.native_state == "IDLE+MAINTENANCE+RESERVED" and now.stage is ObservedStage.IN_SERVICE, now
    finally:
        cluster.client("scontrol", "delete", "reservationname=cockpit-maint", check=False)


async def test_reboot_that_never_returns_fails_with_slurms_evidence(cluster: slurm_fixture.SlurmCluster) -> None:
    cluster.never_returns("gpu04")
    slurm = backend("text")
    [lost] = await slurm.release(ReleaseRequest(BackendAction.REBOOT, ("gpu04",), reason="CHG-7 reboot", timeout_s=2))
    assert not lost.ok
    assert lost.error is not None and lost.error.startswith("not back from the reboot after 2 s: Slurm says DOWN+")
    assert "REBOOT_ISSUED" in lost.evidence["slurm_state"]
    assert lost.evidence["reason"] == "cockpit: CHG-7 reboot : reboot issued"
    assert lost.evidence["boot_time"] == lost.evidence["boot_time_before"]
    assert lost.final is not None and lost.final.stage is ObservedStage.REBOOTING
    # the node that never came back is not put back into service either
    [resumed] = await slurm.release(ReleaseRequest(BackendAction.RESUME, ("gpu04",), reason="CHG-7", timeout_s=1))
    assert not resumed.ok and resumed.error is not None
    assert resumed.error.startswith("not resumed: still rebooting (DOWN+DRAIN+REBOOT_ISSUED"), resumed.error
    # a rollback's drain of it ends at once: nothing runs there and nothing new will
    [drained] = await slurm.release(
        ReleaseRequest(BackendAction.DRAIN, ("gpu04",), reason="CHG-7 rollback", timeout_s=5)
    )
    assert drained.ok, drained.error
    assert drained.evidence["jobs"] == "none" and drained.evidence["slurm_state"].startswith("DOWN+DRAIN")
    assert drained.final is not None and drained.final.stage in (ObservedStage.REBOOTING, ObservedStage.DOWN)


async def test_resume_leaves_a_drain_someone_else_made(cluster: slurm_fixture.SlurmCluster) -> None:
    cluster.client("scontrol", "update", "nodename=gpu05", "state=drain", "reason=fan 3 failed (ops)")
    slurm = backend()
    [refused] = await slurm.release(ReleaseRequest(BackendAction.RESUME, ("gpu05",), reason="CHG-7", timeout_s=5))
    assert not refused.ok and refused.error == "drained by someone else (Reason=fan 3 failed (ops)): not resumed"
    [still] = await slurm.observe(["gpu05"])
    assert still.stage is ObservedStage.DRAINED and still.reason == "fan 3 failed (ops)"


@pytest.mark.parametrize(
    "reason",
    [
        "cockpit said GPU3 missing - RMA 4711 DO NOT RESUME",  # a person's words, starting with "cockpit"
        "cockpit CHG-6: slurm-backend-drain",  # left drained by an earlier change's window
        "cockpit CHG-6: reboot : reboot issued : reboot complete",  # an earlier window's held reboot
        "cockpit CHG-7: slurm-backend-drain DO NOT RESUME",  # this change's text, and more after it
        "cockpit CHG-7: slurm-backend-drain : reboot complete (ops: keep out)",
        "cockpit CHG-70: reboot",  # another change whose id starts with this one's
        "cockpit CHG-7: resume",  # this change's words, but no step of its drains or reboots
    ],
)
async def test_resume_leaves_every_drain_whose_reason_is_not_exactly_this_changes(
    cluster: slurm_fixture.SlurmCluster, reason: str
) -> None:
    """Ownership is by the exact text this change writes (its id and the step that drained),
    never by a prefix: a new process for CHG-7 resumes none of these, and each stays drained
    with its owner's reason."""
    cluster.client("scontrol", "update", "nodename=gpu17", "state=drain", f"reason={reason}")
    slurm = backend()
    slurm.use_runbook(R580.runbook)
    [refused] = await slurm.release(
        ReleaseRequest(
            BackendAction.RESUME, ("gpu17",), reason="cockpit CHG-7: resume", timeout_s=5,
            context={"change_id": "CHG-7"},
        )
    )  # fmt: skip
    assert not refused.ok and refused.error == f"drained by someone else (Reason={reason}): not resumed"
    [still] = await slurm.observe(["gpu17"])
    assert still.stage is ObservedStage.DRAINED and still.reason == reason, still


async def test_resume_takes_back_this_changes_own_drain_from_a_new_process(cluster: slurm_fixture.SlurmCluster) -> None:
    """The counterpart: the exact text CHG-7's drain step writes is CHG-7's, whichever process resumes it."""
    cluster.client("scontrol", "update", "nodename=gpu17", "state=drain", "reason=cockpit CHG-7: slurm-backend-drain")
    slurm = backend()
    slurm.use_runbook(R580.runbook)
    [resumed] = await slurm.release(
        ReleaseRequest(
            BackendAction.RESUME, ("gpu17",), reason="cockpit CHG-7: resume", timeout_s=20,
            context={"change_id": "CHG-7"},
        )
    )  # fmt: skip
    assert resumed.ok, resumed.error
    assert resumed.final is not None and resumed.final.stage is ObservedStage.IN_SERVICE, resumed.final


async def test_cancel_takes_back_a_pending_reboot_and_only_its_own_drain(cluster: slurm_fixture.SlurmCluster) -> None:
    cluster.client("scontrol", "update", "nodename=gpu05", "state=drain", "reason=fan 3 failed (ops)")
    job = cluster.submit_sleep("gpu06", 600)  # holds the reboot pending until the test ends it
    slurm = backend()
    heard: list[Observation] = []
    # the inventory says rack2-n6, Slurm says gpu06 (cockpit_node_name): the executor's cancel
    # names the cockpit's node, and Slurm's pending reboot is taken back all the same
    reboot = ReleaseRequest(
        BackendAction.REBOOT, ("rack2-n6",), reason="CHG-7", timeout_s=20, context={"node_name": "gpu06"}
    )
    task = asyncio.create_task(slurm.release(reboot, heard.append))
    await until_heard(heard, task, limit_s=10)  # the first look comes right after scontrol reboot
    assert heard, await task
    assert heard[0].native_state == "MIXED+DRAIN+REBOOT_REQUESTED"  # ASAP: drained until the job ends
    assert heard[0].node == "rack2-n6"
    await slurm.cancel(["rack2-n6", "gpu05"])
    [result] = await task
    assert not result.ok and result.error is not None and "cleared without a reboot" in result.error
    assert "gpu06" not in cluster.reboots
    [gpu05] = await slurm.observe(["gpu05"])
    assert gpu05.reason == "fan 3 failed (ops)"  # cancel undrains only what the cockpit drained
    cluster.client("scancel", job)


async def test_a_cancel_that_cannot_put_back_someone_elses_drain_is_kept_for_the_steps_outcome(
    cluster: slurm_fixture.SlurmCluster,
) -> None:
    """Slurm refuses to put the owner's drain back (the runner sends the put-back to a node
    name Slurm does not know: scontrol's own refusal): the executor keeps, for the cancelled
    step's recorded outcome, that the node lost its drain and must be drained by hand."""
    ops = "PSU 2 failed (ops)"
    job = cluster.submit_sleep("gpu10", 600)  # holds the reboot pending
    cluster.client("scontrol", "update", "nodename=gpu10", "state=drain", f"reason={ops}")
    real = local_runner()

    async def put_back_refused(argv: Sequence[str], *, timeout: float) -> CommandResult:
        if "state=drain" in argv:
            argv = [a.replace("nodename=gpu10", "nodename=nosuch10") for a in argv]
        return await real(argv, timeout=timeout)

    slurm = SlurmBackend(put_back_refused, poll_s=0.5, command_timeout_s=10)
    executor = Executor(None, {}, backend=slurm)
    heard: list[Observation] = []
    step = Step(id="reboot", title="reboot", kind=StepKind.BACKEND, action=BackendAction.REBOOT, timeout_s=30)
    task = asyncio.ensure_future(executor.execute_step(step, "gpu10", on_observation=heard.append))
    await until_heard(heard, task, "REBOOT_REQUESTED")
    assert not task.done() and heard, heard
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    said = executor.cancel_failures["gpu10"]
    assert said.startswith(f"backend slurm: cancel failed: slurm: the cancel cleared gpu10's drain (Reason={ops})")
    assert "putting it back failed: " in said and said.endswith("drain it again by hand"), said
    [now] = await slurm.observe(["gpu10"])
    assert "DRAIN" not in now.native_state, now  # what the message warns of, as Slurm has it
    cluster.client("scancel", job)


async def test_bad_names_never_reach_scontrol(cluster: slurm_fixture.SlurmCluster) -> None:
    slurm = backend()
    results = await slurm.release(
        ReleaseRequest(BackendAction.DRAIN, ("gpu01;reboot", "nosuch"), reason="x", timeout_s=1)
    )
    assert [r.ok for r in results] == [False, False]
    assert results[0].error == "not a Slurm node name: 'gpu01;reboot'"
    assert results[1].error == "slurmctld does not know this node"
    [gpu01] = await slurm.observe(["gpu01"])
    assert gpu01.native_state == "IDLE"


async def test_the_registry_makes_it_and_slurm_is_asked_by_the_nodes_slurm_name() -> None:
    assert backend_actions("slurm") == {
        BackendAction.PREFLIGHT,
        BackendAction.DRAIN,
        BackendAction.REBOOT,
        BackendAction.SMOKE,
        BackendAction.RESUME,
    }
    slurm = make_backend(BackendOptions(name=BackendName.SLURM), transport=None)
    assert isinstance(slurm, SlurmBackend) and slurm.reports_state
    heard: list[Observation] = []
    # the inventory says node-a; Slurm knows it as gpu01 (cockpit_node_name), as the executor's facts say
    drain = ReleaseRequest(
        BackendAction.DRAIN, ("node-a",), reason="cockpit CHG-7: drain", timeout_s=10, context={"node_name": "gpu01"}
    )
    [drained] = await slurm.release(drain, heard.append)
    assert drained.ok, drained.error
    assert drained.node == "node-a" and drained.final is not None and drained.final.node == "node-a"
    assert drained.evidence["slurm_node"] == "gpu01" and {o.node for o in heard} == {"node-a"}
    [resumed] = await slurm.release(replace(drain, action=BackendAction.RESUME, reason="cockpit CHG-7: resume"))
    assert resumed.ok, resumed.error


def test_cockpit_probe_reads_slurms_view_without_ssh(cluster: slurm_fixture.SlurmCluster) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cockpit", "probe", "gpu01,nosuch", "--backend", "slurm", "--json"],
        env=cluster.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # a node Slurm does not know is a finding
    seen = {n["node"]: n for n in json.loads(done.stdout)["nodes"]}
    assert seen["gpu01"]["native_state"] == "IDLE" and seen["gpu01"]["stage"] == "in-service"
    assert seen["gpu01"]["evidence"]["gres"] == "gpu:8" and seen["gpu01"]["evidence"]["gpus"] == "8"
    assert seen["nosuch"]["stage"] == "unknown"


async def test_one_reboot_asked_for_a_drained_and_an_undrained_node(cluster: slurm_fixture.SlurmCluster) -> None:
    # gpu07 drained by the cockpit, gpu08 not drained: both rebooted, both back and held
    # (nextstate=DOWN, then the cockpit's drain) until the resume step
    slurm = backend()
    [drained] = await slurm.release(ReleaseRequest(BackendAction.DRAIN, ("gpu07",), reason=REASON, timeout_s=20))
    assert drained.ok, drained.error
    before = {o.node: o for o in await slurm.observe(["gpu07", "gpu08"])}
    results = await slurm.release(
        ReleaseRequest(BackendAction.REBOOT, ("gpu07", "gpu08"), reason="CHG-7 reboot", timeout_s=30)
    )
    for result in results:
        assert result.ok, result.error
        assert result.node in cluster.reboots
        assert result.evidence["boot_time"] != before[result.node].evidence["boot_time"]
        assert result.final is not None and result.final.native_state == "DOWN+DRAIN", result.final
    resumed = await slurm.release(ReleaseRequest(BackendAction.RESUME, ("gpu07", "gpu08"), reason=REASON, timeout_s=30))
    for result in resumed:
        assert result.ok, result.error
        assert result.final is not None and result.final.stage is ObservedStage.IN_SERVICE, result.final


async def test_someone_elses_drain_outlives_the_windows_reboot_its_cancel_and_its_resume(
    cluster: slurm_fixture.SlurmCluster,
) -> None:
    ops = "fan 3 failed (ops)"
    # the job holds the reboot pending until the test ends it (a timer would race a loaded
    # machine to the cancel); a reboot without ASAP waits for a drained node's jobs (scontrol(1))
    job = cluster.submit_sleep("gpu09", 600)
    cluster.client("scontrol", "update", "nodename=gpu09", "state=drain", f"reason={ops}")
    slurm = backend()
    heard: list[Observation] = []
    task = asyncio.create_task(
        slurm.release(ReleaseRequest(BackendAction.REBOOT, ("gpu09",), reason="CHG-7", timeout_s=30), heard.append)
    )
    await until_heard(heard, task, "REBOOT_REQUESTED")
    assert not task.done() and any("REBOOT_REQUESTED" in o.native_state for o in heard), heard
    await slurm.cancel(["gpu09"])
    [cancelled] = await task
    assert not cancelled.ok and "gpu09" not in cluster.reboots
    [now] = await slurm.observe(["gpu09"])
    assert "DRAIN" in now.native_state and now.reason == ops, now  # put back as it was
    cluster.client("scancel", job)
    # the window's drain asks nothing of a node already drained: its reason stays the owner's
    [drained] = await slurm.release(ReleaseRequest(BackendAction.DRAIN, ("gpu09",), reason=REASON, timeout_s=20))
    assert drained.ok and drained.final is not None and drained.final.reason == ops, drained
    [refused] = await slurm.release(ReleaseRequest(BackendAction.RESUME, ("gpu09",), reason="CHG-7", timeout_s=5))
    assert not refused.ok and refused.error == f"drained by someone else (Reason={ops}): not resumed"
    # rebooted to the end once its job is over: still drained, still the owner's reason
    [rebooted] = await slurm.release(
        ReleaseRequest(BackendAction.REBOOT, ("gpu09",), reason="CHG-7 reboot", timeout_s=30)
    )
    assert rebooted.ok, rebooted.error
    [after] = await slurm.observe(["gpu09"])
    assert after.stage is ObservedStage.DRAINED and (after.reason or "").startswith(ops), after
    [again] = await slurm.release(ReleaseRequest(BackendAction.RESUME, ("gpu09",), reason="CHG-7", timeout_s=5))
    assert not again.ok


async def test_preflight_weighs_slurms_timeouts_and_the_jobs_time_left(cluster: slurm_fixture.SlurmCluster) -> None:
    """Nothing changes; what would make Slurm fail the window is said before the node is touched."""
    job = cluster.client(
        "sbatch", "--parsable", "-w", "gpu13", "-t", "5", "-J", "cockpit-test", f"--chdir={cluster.workdir}",
        f"--output={cluster.workdir}/jobs/%j.out", "--wrap", "sleep 600",
    ).stdout.strip().split(";")[0]  # fmt: skip
    for _ in range(100):  # the job has started and has its time left
        if cluster.client("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING":
            break
        await asyncio.sleep(0.1)
    slurm = backend()
    fits = {"reboot_timeout_s": "30", "drain_timeout_s": "600"}
    [ok] = await slurm.release(
        ReleaseRequest(BackendAction.PREFLIGHT, ("gpu13",), reason=REASON, timeout_s=20, context=fits)
    )
    assert ok.ok, ok.error
    assert ok.evidence["resume_timeout_s"] == str(slurm_fixture.RESUME_TIMEOUT_S)
    listed, left = ok.evidence["jobs_time_left"].split("=")
    seconds = time_left_s(left)
    assert listed == job and seconds is not None and 200 < seconds <= 300, ok.evidence  # -t 5: five minutes
    # an HGX's POST against Slurm's 60 s, and a job with five minutes left against a one-minute drain
    slow = {"reboot_timeout_s": "900", "drain_timeout_s": "60"}
    [refused] = await slurm.release(
        ReleaseRequest(BackendAction.PREFLIGHT, ("gpu13",), reason=REASON, timeout_s=20, context=slow)
    )
    assert not refused.ok and refused.error is not None
    assert refused.error.startswith(
        f"ResumeTimeout is {slurm_fixture.RESUME_TIMEOUT_S} s, shorter than the reboot's 900 s"
    )
    assert f"; job {job} has " in refused.error and "longer than the drain's 60 s" in refused.error
    [now] = await slurm.observe(["gpu13"])
    assert now.stage is ObservedStage.IN_SERVICE and now.reason is None  # nothing was changed
    cluster.client("scancel", job)


async def test_features_that_name_the_old_driver_are_renamed_when_the_node_is_resumed(
    cluster: slurm_fixture.SlurmCluster,
) -> None:
    cluster.client(
        "scontrol", "update", "nodename=gpu14", "AvailableFeatures=hgx,driver575", "ActiveFeatures=hgx,driver575"
    )
    slurm = backend()
    target = {"target_branch": "580", "reboot_timeout_s": "30", "drain_timeout_s": "60"}
    [checked] = await slurm.release(
        ReleaseRequest(BackendAction.PREFLIGHT, ("gpu14",), reason=REASON, timeout_s=20, context=target)
    )
    assert checked.ok and checked.evidence["features_to_rename"] == "driver575->driver580", checked
    [drained] = await slurm.release(ReleaseRequest(BackendAction.DRAIN, ("gpu14",), reason=REASON, timeout_s=20))
    assert drained.ok, drained.error
    [resumed] = await slurm.release(
        ReleaseRequest(BackendAction.RESUME, ("gpu14",), reason=REASON, timeout_s=30, context=target)
    )
    assert resumed.ok, resumed.error
    node = (await slurm.nodes(["gpu14"]))["gpu14"]
    assert node.features == ("hgx", "driver580") and node.active_features == ("hgx", "driver580"), node


async def test_a_maintenance_reservation_holds_the_node_when_the_runbook_chooses_it(
    cluster: slurm_fixture.SlurmCluster,
) -> None:
    """``slurm_hold = "reservation"``: the node comes back up, in the cockpit's maintenance
    reservation (IDLE+MAINTENANCE+RESERVED), and a job that does not name the reservation waits
    until the resume step deleted it."""
    slurm = backend()
    held = {"slurm_hold": "reservation"}
    [rebooted] = await slurm.release(
        ReleaseRequest(BackendAction.REBOOT, ("gpu15",), reason="CHG-7 reboot", timeout_s=30, context=held)
    )
    assert rebooted.ok, rebooted.error
    shown = cluster.client("scontrol", "show", "reservation", "cockpit-hold-gpu15").stdout
    assert "Nodes=gpu15 " in shown and "Users=root " in shown and "MAINT" in shown, shown
    waiting = cluster.client(
        "sbatch", "--parsable", "-w", "gpu15", "-J", "cockpit-leak", f"--chdir={cluster.workdir}",
        f"--output={cluster.workdir}/jobs/%j.out", "--wrap", "sleep 600",
    ).stdout.strip().split(";")[0]  # fmt: skip
    for _ in range(60):  # the reservation's flags reach the node a moment after it registered
        [now] = await slurm.observe(["gpu15"])
        if now.native_state == "IDLE+MAINTENANCE+RESERVED":
            break
        await asyncio.sleep(0.1)
    assert now.native_state == "IDLE+MAINTENANCE+RESERVED", now
    for _ in range(8):  # the smoke test's time: the job stays pending
        await asyncio.sleep(0.5)
        state = cluster.client("squeue", "-h", "-j", waiting, "-o", "%T").stdout.strip()
        assert state == "PENDING", state
    # the smoke as a job in the reservation: Slurm hands it every GPU the GRES declares
    every_gpu = {
        **held,
        "slurm_smoke_command": 'sh -c "test $CUDA_VISIBLE_DEVICES = 0,1,2,3,4,5,6,7 && echo $CUDA_VISIBLE_DEVICES"',
    }
    [smoked] = await slurm.release(
        ReleaseRequest(BackendAction.SMOKE, ("gpu15",), reason="CHG-7", timeout_s=60, context=every_gpu)
    )
    assert smoked.ok and smoked.evidence["output"] == "0,1,2,3,4,5,6,7", smoked
    one_gpu = {**held, "slurm_smoke_command": 'sh -c "test $CUDA_VISIBLE_DEVICES = 0"'}
    [refused] = await slurm.release(
        ReleaseRequest(BackendAction.SMOKE, ("gpu15",), reason="CHG-7", timeout_s=60, context=one_gpu)
    )
    assert not refused.ok and refused.error is not None and refused.error.startswith("the smoke job failed")
    [resumed] = await backend().release(  # a new process: the reservation's name says it is the cockpit's
        ReleaseRequest(BackendAction.RESUME, ("gpu15",), reason="CHG-7", timeout_s=30, context=held)
    )
    assert resumed.ok, resumed.error
    assert resumed.final is not None and "MAINTENANCE" not in resumed.final.native_state, resumed.final
    gone = cluster.client("scontrol", "show", "reservation", "cockpit-hold-gpu15", check=False)
    assert gone.returncode != 0 or "not found" in (gone.stdout + gone.stderr), gone.stdout
    assert await job_state_within(cluster, waiting, "RUNNING") == "RUNNING"
    cluster.client("scancel", waiting)


async def test_the_smoke_job_runs_only_inside_the_cockpits_reservation(cluster: slurm_fixture.SlurmCluster) -> None:
    [refused] = await backend().release(
        ReleaseRequest(
            BackendAction.SMOKE, ("gpu16",), reason="x", timeout_s=30, context={"slurm_smoke_command": "true"}
        )
    )
    assert not refused.ok and refused.error is not None
    assert refused.error.startswith("not run: the smoke runs as a Slurm job only inside the cockpit's maintenance")


async def test_a_hold_the_backend_does_not_know_is_refused_before_anything_is_asked(
    cluster: slurm_fixture.SlurmCluster,
) -> None:
    [refused] = await backend().release(
        ReleaseRequest(BackendAction.REBOOT, ("gpu16",), reason="x", timeout_s=5, context={"slurm_hold": "later"})
    )
    assert not refused.ok and refused.error == "slurm_hold 'later': not one of down, reservation, resume"
    [now] = await backend().observe(["gpu16"])
    assert now.native_state == "IDLE" and "gpu16" not in cluster.reboots, now
