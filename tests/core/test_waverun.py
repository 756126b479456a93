"""The wave runner's pure rules: the fleet-wide bound on nodes out of service, how many
nodes may start, what the runner may take, and the wave's node set a person types."""

from __future__ import annotations

import pytest

from cockpit.engine import actions
from cockpit.engine.fold import Folder
from cockpit.engine.waverun import (
    admissible,
    confirmation_text,
    max_unavailable,
    out_of_service,
    progress_words,
    runner_may_take,
)
from cockpit.errors import BadInput
from cockpit.runbook.loader import load
from cockpit.runbook.model import Runbook

RUNBOOK = load("minimal-driver-upgrade").runbook
HOSTS = [f"gpu{i:04d}" for i in range(1, 21)]


def with_bound(value: int | str) -> Runbook:
    return RUNBOOK.model_copy(update={"waves": RUNBOOK.waves.model_copy(update={"max_unavailable": value})})


def test_max_unavailable_is_a_count_a_parameter_or_a_share_of_the_fleet() -> None:
    assert max_unavailable(with_bound(0), {}, 2000) is None
    assert max_unavailable(with_bound(5), {}, 2000) == 5
    assert max_unavailable(with_bound("10%"), {}, 2000) == 200
    assert max_unavailable(with_bound("10%"), {}, 4) == 1  # never 0
    assert max_unavailable(with_bound("budget"), {"budget": 7}, 2000) == 7
    assert max_unavailable(with_bound("budget"), {"budget": "5%"}, 2000) == 100
    assert max_unavailable(with_bound("budget"), {"budget": "0"}, 2000) is None
    for bad in ("ten%", "0%", "150%"):
        with pytest.raises(BadInput, match="max_unavailable"):
            max_unavailable(with_bound(bad), {}, 2000)


def test_how_many_nodes_may_start_follows_the_parallelism_and_the_fleets_bound() -> None:
    params = {**RUNBOOK.defaults(), "wave_size": 6, "control_host": "control"}
    state = Folder(RUNBOOK, params, HOSTS).state
    assert out_of_service(state) == []  # nothing started: every node in service
    assert admissible(state, 2, active=0, limit=None) == 1  # the runbook's max_parallel
    assert admissible(state, 2, active=0, limit=None, parallel=4) == 4
    assert admissible(state, 2, active=3, limit=None, parallel=4) == 1
    assert admissible(state, 2, active=0, limit=2, parallel=4) == 2  # the fleet's bound is tighter
    assert admissible(state, 2, active=5, limit=None, parallel=4) == 0
    assert confirmation_text(state, 2) == "gpu[0003-0008]"
    assert progress_words(state, 2) == "wave 3 (6 nodes): pending 6"


def test_the_runner_takes_steps_checks_and_gates_never_a_persons_part() -> None:
    assert runner_may_take(actions.RunStep(stage="upgrade", node="gpu0003", step="install"))
    assert runner_may_take(actions.VerifyItem(stage="smoke", node="gpu0003", item="gpus"))
    assert runner_may_take(actions.PassGate(stage="smoke", node="gpu0003"))
    assert not runner_may_take(actions.TickItem(stage="smoke", node="gpu0003", item="x", note=""))
    assert not runner_may_take(actions.SignOff(stage="arm", item="x", note=""))
    assert not runner_may_take(actions.StartRollback(node="gpu0003", reason=""))
    assert not runner_may_take(actions.RecordDecision(outcome="roll-back"))
