"""A whole window through an engine: the session drives tests/fixtures/runbooks/backend-drain.toml
on the simulated fleet with a real backend (tests/backend_double.py: scontrol on the
simulated control host, called in process). The engine drains and resumes, the reboot goes to
the node as ever; every word the engine said is in the change log, folds back from disk the same,
passes ``cockpit verify``; a node the engine reports failed fires the trigger; the header
names the engine and a resume asks the same one."""

from __future__ import annotations

from pathlib import Path

import pytest
from backend_double import ScontrolDouble
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import EventKind, NodeObservedEvent, StepFinishedEvent, TriggerFiredEvent
from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.engine.fold import fold
from cockpit.engine.planner import OUTCOME_KEEP_UPGRADE
from cockpit.fleet.backends.base import Backend, BackendName
from cockpit.fleet.backends.registry import BackendOptions, SlurmSettings
from cockpit.fleet.backends.runners import ssh_runner
from cockpit.fleet.transport import Transport
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session

pytestmark = pytest.mark.timeout(240)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runbooks" / "backend-drain.toml"
FAST = IN_PROCESS_WALK_SPEED
OPTIONS = BackendOptions(name=BackendName.SLURM, slurm=SlurmSettings(control_host="control"))


def engine(transport: Transport) -> Backend:
    return ScontrolDouble(ssh_runner(transport, "control"))


async def test_a_window_through_the_engine_records_its_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with demo_session(in_process=True,
        nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-ENGINE", speed=FAST, runbook=str(FIXTURE),
        backend=engine, backend_options=OPTIONS,
    ) as (session, fleet):  # fmt: skip
        result = await drive(session)
        assert result.outcome == OUTCOME_KEEP_UPGRADE, result.stuck_on
        live = {n: p.observation for n, p in session.state.nodes.items()}
        controller = fleet.control.slurm.slurm_nodes
        assert {n: s.state for n, s in controller.items()} == {"gpu01": "IDLE", "gpu02": "IDLE"}  # resumed
        path = session.path
    log = read_session(path)
    assert (log.header.backend, log.header.backend_options) == ("slurm", {"control_host": "control"})
    seen = [e for e in log.events if isinstance(e, NodeObservedEvent)]
    words = [(e.node, e.stage, e.step, e.facts.native_state) for e in seen]
    for node in ("gpu01", "gpu02"):
        assert (node, "drain", "engine-drain", "IDLE+DRAIN") in words
        assert (node, "expand", "engine-resume", "IDLE") in words
    assert all(e.actor == "cockpit" and e.facts.backend == "slurm" for e in seen)
    finished = {(e.node, e.step): e.facts for e in log.events if isinstance(e, StepFinishedEvent)}
    drained = finished[("gpu01", "engine-drain")]
    assert (drained.backend, drained.action, drained.native_state, drained.observed_stage) == (
        "slurm", "drain", "IDLE+DRAIN", "drained"
    )  # fmt: skip
    assert drained.evidence == {"scontrol_state": "IDLE+DRAIN"}
    # under slurm the kubectl steps never ran; the reboot went over SSH with a new boot id
    assert ("gpu01", "cordon") not in finished
    reboot = finished[("gpu01", "reboot")]
    assert reboot.backend is None and reboot.boot_id_after != reboot.boot_id_before
    # the file folds back to the same last words, as replay and review read it
    state = fold(
        session.runbook, log.header.window_parameters(), log.header.hosts, log.events, operator=log.header.operator
    )
    assert {n: p.observation for n, p in state.nodes.items()} == live
    assert {p.current for p in state.nodes.values()} == {"done"}
    assert main(["verify", str(path)]) == 0
    capsys.readouterr()


async def test_a_node_the_engine_reports_failed_fires_the_trigger(tmp_path: Path) -> None:
    async with demo_session(in_process=True,
        nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-ENGINE-FAIL", speed=FAST,
        runbook=str(FIXTURE), backend=engine, backend_options=OPTIONS,
    ) as (session, _fleet):  # fmt: skip
        assert session.transport is not None
        down = await session.transport.run(
            "control", "scontrol update nodename=gpu02 state=down reason=ECC", timeout=10
        )
        assert down.ok, down.stderr
        await drive(session)
        fired = [e for e in read_session(session.path).events if isinstance(e, TriggerFiredEvent)]
        assert [(e.trigger, e.node, e.facts.evidence) for e in fired] == [
            ("engine-reported-failure", "gpu02", "gpu02: slurm reports DOWN (ECC)")
        ]
        drain = session.state.nodes["gpu02"].stages["drain"].steps["engine-drain"]
        assert drain.status == "failed" and drain.error == "gpu02: drain through slurm: the controller reports DOWN"
        assert session.state.nodes["gpu01"].current == "done"  # the canary went through


async def test_the_header_names_the_engine_and_a_resume_asks_the_same_one(tmp_path: Path) -> None:
    async with demo_session(in_process=True,
        nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-ENGINE-RESUME", speed=FAST,
        runbook=str(FIXTURE), backend=engine, backend_options=OPTIONS, operator="alice",
    ) as (session, _fleet):  # fmt: skip
        assert session.params["backend"] == "slurm" and session.backend is not None
        path = session.path
    asked: list[BackendOptions] = []

    def factory(options: BackendOptions, transport: Transport | None) -> Backend | None:
        asked.append(options)
        return None

    resumed = Session.resume(path, backend_factory=factory)
    try:
        assert asked == [OPTIONS]
        assert resumed.params["backend"] == "slurm"
        kinds = [e.kind for e in read_session(path).events]
        assert kinds[-1] is EventKind.SESSION_RESUMED
    finally:
        resumed.pause()
        await resumed.close()
