"""`cockpit demo --backend kubernetes`: the headless autopilot walks a window through the GPU
Operator backend (operator-managed) against the simulated Kubernetes API and GPU Operator
(cockpit/sim/kube) to its end, and the change log holds the backend's evidence: the node's
upgrade-state label transitions as the operator's controller wrote them, and the outcome."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kube_cluster import OLD, REAL_ORDER

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.commands.demo import KUBE_EXPECTED_OUTCOME, KUBE_STOPPED_BY
from cockpit.session.kube_demo import DEFAULT_KUBE_SCENARIO, KUBE_SCENARIOS
from cockpit.session.opening import reopen
from cockpit.view.fleet import FLEET_COLUMNS, fleet_rows

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(120)]

#: the in-place sequence from upgrade-done round to it (kube_cluster.REAL_ORDER)
SEQUENCE = ["upgrade-done", *REAL_ORDER]


def demo(
    tmp_path: Path, change_id: str, *args: str, speed: float = 10
) -> tuple[subprocess.CompletedProcess[str], Path]:
    sessions = tmp_path / "sessions"
    result = subprocess.run(
        [sys.executable, "-m", "cockpit", "demo", "--backend", "kubernetes", "--autopilot", "--headless",
         "--nodes", "4", "--speed", str(speed), "--sessions", str(sessions), "--change-id", change_id, *args],
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    return result, sessions / f"{change_id}.toml"


def label_states(events: list, node: str) -> list[str]:
    """The node's upgrade-state label values in the order the backend saw them (repeats folded)."""
    out: list[str] = []
    for e in events:
        if e.kind is EventKind.NODE_OBSERVED and e.node == node and (not out or out[-1] != e.facts.native_state):
            out.append(e.facts.native_state)
    return out


def in_order(seen: list[str], sequence: list[str]) -> bool:
    rest = iter(sequence)
    return all(state in rest for state in seen)


def test_the_demo_scenarios_are_the_simulators() -> None:
    assert set(KUBE_EXPECTED_OUTCOME) == set(KUBE_SCENARIOS)
    assert set(KUBE_STOPPED_BY) <= set(KUBE_SCENARIOS) and DEFAULT_KUBE_SCENARIO in KUBE_SCENARIOS


@pytest.mark.binary
def test_the_default_story_stops_at_the_node_the_operator_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the default scenario, upgrade-failed; at speed 5 the crash loop's 11 restarts take a second
    # of the simulator's passes, and the backend's polls (scaled alike) see its BackOff events
    result, path = demo(tmp_path, "DEMO-K8S-FAIL", speed=5)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "4 simulated nodes through the kubernetes backend, scenario upgrade-failed" in out
    assert "trigger fired: engine-reported-failure: gpu02: kubernetes reports upgrade-failed (Warning BackOff" in out
    assert "outcome: stopped (expected stopped)" in out
    assert (
        "stopped: run step upgrade/release on gpu03 is refused: trigger 'engine-reported-failure' fired on gpu02" in out
    )
    log = read_session(path)
    # the header names the engine as cockpit run --backend kubernetes records it
    assert log.header.backend == "kubernetes"
    options = log.header.backend_options or {}
    assert (options["context"], options["mode"], options["namespace"]) == ("emulator", "operator", "gpu-operator")
    events = list(log.events)
    # the canary went the whole way through the operator's states, then the second node failed
    canary = label_states(events, "gpu01")
    assert in_order(canary, SEQUENCE) and canary[-1] == "upgrade-done", canary
    assert {"cordon-required", "pod-restart-required", "validation-required"} <= set(canary)
    # cordoned by the cockpit first, the operator left it cordoned for the smoke: no uncordon-required
    assert "uncordon-required" not in canary
    smoked = [e for e in events if e.kind is EventKind.STEP_FINISHED and e.step == "smoke-pod" and e.node == "gpu01"]
    assert smoked and smoked[-1].facts.evidence is not None
    assert "580.95.05" in smoked[-1].facts.evidence["smoke-log"]
    failed = label_states(events, "gpu02")
    assert in_order(failed[:-1], SEQUENCE) and failed[-1] == "upgrade-failed", failed
    assert "pod-restart-required" in failed
    observed = [e for e in events if e.kind is EventKind.NODE_OBSERVED]
    assert all(e.facts.backend == "kubernetes" for e in observed)
    assert any("Successfully updated node state label to" in (e.facts.reason or "") for e in observed)
    assert any("BackOff" in (e.facts.reason or "") for e in observed if e.node == "gpu02")
    (fired,) = [e for e in events if e.kind is EventKind.TRIGGER_FIRED]
    assert (fired.trigger, fired.node) == ("engine-reported-failure", "gpu02")
    assert fired.facts.evidence is not None and "upgrade-failed" in fired.facts.evidence
    # the rest of the wave never went to the operator; the window is paused for a person, not ended
    assert not label_states(events, "gpu03") or label_states(events, "gpu03")[-1] == "upgrade-required"
    kinds = [e.kind for e in events]
    assert EventKind.SESSION_ENDED not in kinds and kinds[-1] is EventKind.SESSION_PAUSED
    assert main(["verify", str(path)]) == 0
    capsys.readouterr()


@pytest.mark.binary
def test_a_clean_window_walks_every_node_through_the_operator(tmp_path: Path) -> None:
    result, path = demo(tmp_path, "DEMO-K8S-HAPPY", "--scenario", "happy")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outcome: window-through (expected window-through)" in result.stdout
    assert "trigger fired" not in result.stdout
    events = list(read_session(path).events)
    assert not [e for e in events if e.kind is EventKind.TRIGGER_FIRED]
    for node in ("gpu01", "gpu02", "gpu03", "gpu04"):
        states = label_states(events, node)
        assert in_order(states, SEQUENCE) and states[-1] == "upgrade-done", (node, states)
        assert "pod-restart-required" in states
    finished = [e for e in events if e.kind is EventKind.STEP_FINISHED and e.step == "release"]
    assert sorted(str(e.node) for e in finished) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert all(e.facts.backend == "kubernetes" and e.facts.native_state == "upgrade-done" for e in finished)
    # nothing probes these nodes over SSH: the fleet table's driver is the one the operator's
    # node labels report last, not N/A
    _log, _runbook, folder = reopen(path, operator=None, runbook=None)
    reported = {e.node: e.facts.driver_version for e in events if e.kind is EventKind.NODE_OBSERVED}
    assert all(reported.values()), reported
    rows = fleet_rows(folder.state, {}, datetime.now(UTC))
    driver_column = [k for k, _ in FLEET_COLUMNS].index("driver")
    assert {row.node: row.cells[driver_column] for row in rows} == reported


def finished(events: list, step: str, node: str) -> list:
    return [e for e in events if e.kind is EventKind.STEP_FINISHED and e.step == step and e.node == node]


@pytest.mark.binary
def test_a_failed_canary_is_rolled_back_to_the_recorded_driver(tmp_path: Path) -> None:
    result, path = demo(tmp_path, "DEMO-K8S-RB", "--scenario", "canary-rollback", speed=5)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outcome: stopped (expected stopped)" in result.stdout
    assert "stopped: wave 1 cannot go on (1 rolled back (gpu01)" in result.stdout
    events = list(read_session(path).events)
    (fired,) = [e for e in events if e.kind is EventKind.TRIGGER_FIRED]
    assert (fired.trigger, fired.node) == ("engine-reported-failure", "gpu01")
    (rolled,) = [e for e in events if e.kind is EventKind.ROLLBACK_FINISHED]
    assert rolled.node == "gpu01" and rolled.facts.ok is True
    (pinned,) = finished(events, "pin-back", "gpu01")
    evidence = pinned.facts.evidence or {}
    assert pinned.facts.ok and evidence["target-version"] == OLD and evidence["upgrade-state"] == "upgrade-done"
    assert f"{OLD}-ubuntu22.04" in evidence["driver-image"]
    # the node the controller walked back: upgrade-failed, then through again to upgrade-done
    states = label_states(events, "gpu01")
    assert states[-1] == "upgrade-done" and "upgrade-failed" in states, states
    assert not finished(events, "release", "gpu02")  # the rollout halted


@pytest.mark.binary
def test_precompiled_drivers_walk_every_node_through(tmp_path: Path) -> None:
    result, path = demo(tmp_path, "DEMO-K8S-PC", "--scenario", "precompiled")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outcome: window-through (expected window-through)" in result.stdout
    events = list(read_session(path).events)
    for node in ("gpu01", "gpu02", "gpu03", "gpu04"):
        (release,) = finished(events, "release", node)
        assert release.facts.ok and "-5.15.0-153-generic" in (release.facts.evidence or {})["driver-image"]
        (smoke,) = finished(events, "smoke-pod", node)
        assert smoke.facts.ok and (smoke.facts.evidence or {})["smoke-log"].count("580.95.05") == 8


@pytest.mark.binary
def test_a_gitops_kept_policy_is_refused_before_any_change(tmp_path: Path) -> None:
    result, path = demo(tmp_path, "DEMO-K8S-GO", "--scenario", "gitops-revert")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outcome: stopped (expected stopped)" in result.stdout
    events = list(read_session(path).events)
    (release,) = finished(events, "release", "gpu01")
    assert not release.facts.ok
    assert "ClusterPolicy cluster-policy is kept by Argo CD application gpu-operator" in (release.facts.error or "")
    # nothing moved: the operator never saw a new version, no node left upgrade-done
    assert {e.facts.native_state for e in events if e.kind is EventKind.NODE_OBSERVED} <= {"upgrade-done"}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--scenario", "xid"],
            "cockpit: unknown scenario 'xid' for --backend kubernetes; known: happy, upgrade-failed, "
            "canary-rollback, precompiled, gitops-revert",
        ),
        (["--nodes", "65"], "cockpit: --nodes must be between 1 and 64 with --backend kubernetes"),
        (["--nodes", "1"], "cockpit: scenario upgrade-failed needs at least 2 nodes (its fault hits the second)"),
        (
            ["--runbook", "driver-upgrade-r580"],
            "cockpit: --backend kubernetes: runbook driver-upgrade-r580 is not written for it",
        ),
    ],
)
def test_refused_in_one_line(capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    assert main(["demo", "--backend", "kubernetes", "--autopilot", "--headless", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(words), err
