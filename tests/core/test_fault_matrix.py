"""The fault matrix (issue 27): every known fault, injected on the second node of a simulated
window that Next alone walks, is caught before that node goes back into service, by the
trigger or item that names its cause; clean windows end with no stop.

Real parts only: the simulated fleet behind real SSH, the session engine and the autopilot,
as in tests/core/test_next_walks.py; the figures live in benchmarks/fault_matrix.py.
"""

from __future__ import annotations

import pytest

from cockpit.session.fault_matrix import FAULTS, render, run_matrix
from cockpit.session.kube_demo import KUBE_SCENARIOS
from cockpit.sim.scenarios import SCENARIOS


def test_every_fault_is_a_named_scenario_with_a_cause_to_name() -> None:
    assert len({f.scenario for f in FAULTS}) == len(FAULTS)
    for fault in FAULTS:
        named = KUBE_SCENARIOS if fault.backend == "kubernetes" else SCENARIOS
        assert fault.scenario in named and fault.names_cause, fault


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_no_false_pass_and_no_false_stop() -> None:
    rows, runs = await run_matrix(FAULTS, clean=3)
    table = render(rows, runs)
    for row in rows:
        assert row.caught_by is not None, table
        assert not row.returned_to_service, table
        assert row.names_cause, table
    assert [r.false_stop for r in runs] == [None, None, None], table
    assert "false passes: 0" in table and "false stops: 0" in table
