"""The routine driver-upgrade runbook: the incident runbook's node stages, triggers and
rollback, copied verbatim, inside a short window; it runs a whole window on the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from walk_expectations import IN_PROCESS_WALK_SPEED, WALK_PARAMS

from cockpit.runbook.loader import load
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session

ROUTINE = load("driver-upgrade").runbook
INCIDENT = load("driver-upgrade-r580").runbook


def test_the_node_stages_triggers_and_rollback_are_the_incident_runbooks() -> None:
    # the copies are held equal here: after changing the r580 runbook's shared parts, run
    # `python tools/sync_routine_runbook.py` (TOML has no includes)
    assert ROUTINE.node_stages == INCIDENT.node_stages
    assert ROUTINE.triggers == INCIDENT.triggers
    assert ROUTINE.rollback == INCIDENT.rollback
    assert ROUTINE.facts == INCIDENT.facts
    assert ROUTINE.waves == INCIDENT.waves
    shared = {name: p for name, p in INCIDENT.parameters.items() if name in ROUTINE.parameters}
    assert shared == {name: ROUTINE.parameters[name] for name in shared}


def test_the_window_has_no_incident_stages() -> None:
    window = [s.id for s in ROUTINE.stages if s.scope == "window"]
    assert window == ["preflight", "arm", "decision", "closing"]
    assert not {"freeze", "compat", "path"} & set(window)
    assert ROUTINE.decision_outcomes == ("keep-upgraded-path", "roll-back")


@pytest.mark.timeout(120)
async def test_a_routine_window_runs_through_on_the_simulator(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True,
        nodes=2,
        scenario="happy",
        sessions_dir=tmp_path,
        speed=IN_PROCESS_WALK_SPEED,
        params=WALK_PARAMS,
        runbook="driver-upgrade",
    ) as (session, _fleet):
        result = await drive(session)
        assert result.stuck_on is None, result.stuck_on
        assert result.outcome == "keep-upgraded-path"
        assert {n: p.current for n, p in session.state.nodes.items()} == {"gpu01": "done", "gpu02": "done"}
