"""A window through the cockpit and the GPU Operator backend, operator-managed, against the
API emulator and the simulated upgrade controller: Next alone (the autopilot) walks it.

Done-when of the scale-out issue: only the current wave's nodes ever lose the skip label,
and a node the controller puts in upgrade-failed stops the window with the
engine-reported-failure trigger fired and the evidence in the change log.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kube_cluster import NEW, gpu_cluster

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.engine.planner import WINDOW_THROUGH
from cockpit.fleet.backends.kubernetes import KubernetesBackend
from cockpit.fleet.backends.registry import BackendOptions
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load
from cockpit.session.autopilot import drive
from cockpit.session.operator import Session

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(90)]

SKIP = "nvidia.com/gpu-driver-upgrade.skip"
STATE = "nvidia.com/gpu-driver-upgrade-state"
RUNBOOK = Path(__file__).parents[2] / "checklists" / "driver-upgrade-gpu-operator.toml"


def start(cluster, tmp_path: Path, change_id: str) -> Session:
    backend = KubernetesBackend(kubeconfig=str(cluster.kubeconfig), poll_interval_s=0.05)
    return Session.start(
        sessions_dir=tmp_path / "sessions",
        change_id=change_id,
        loaded=load(RUNBOOK),
        params={"target_version": NEW, "wave_size": 2, "upgrade_timeout_s": 20},
        targets=[HostTarget(name=n) for n in cluster.names],
        operator="alice",
        transport=None,
        backend=backend,
        backend_options=BackendOptions(name="kubernetes"),
    )


def wave_of(session: Session) -> dict[str, int]:
    return {n: p.wave for n, p in session.state.nodes.items() if p.wave is not None}


async def test_a_window_moves_only_the_current_wave_and_stops_at_upgrade_failed(tmp_path):
    # waves: gpu01 (canary), then gpu02+gpu03, then gpu04+gpu05; gpu03 fails in wave 2
    async with gpu_cluster(tmp_path, nodes=5, fail={"gpu03"}) as cluster:
        session = start(cluster, tmp_path, "CHG-K8S-1")
        try:
            result = await drive(session, refresh_s=0.2, wait_s=0.02)
        finally:
            await session.close()
        events = list(read_session(session.path).events)
        fired = [e for e in events if e.kind is EventKind.TRIGGER_FIRED]
        assert fired, result.log[-10:]
        (trigger,) = fired
        assert trigger.trigger == "engine-reported-failure" and trigger.node == "gpu03"
        assert trigger.facts.evidence is not None
        assert trigger.facts.evidence.startswith("gpu03: kubernetes reports upgrade-failed (Warning BackOff pod/")
        # the trigger rolls gpu03 back (the ClusterPolicy pinned to the recorded version); its driver
        # crash-loops on that one too, so the rollback fails and the window stops there for a person;
        # the last wave never started
        rolled = [e for e in events if e.kind is EventKind.ROLLBACK_FINISHED and e.node == "gpu03"]
        assert rolled and rolled[-1].facts.ok is False
        assert any(
            "rollback through kubernetes: the GPU Operator set upgrade-failed" in b
            for b in rolled[-1].facts.blocked_by or []
        ), rolled[-1].facts
        assert result.stuck_on is not None and "rollback FAILED (gpu03)" in result.stuck_on, result.stuck_on
        # the roll-back decision halted the rollout: the last wave's nodes are held, never released
        assert [session.state.nodes[n].current for n in ("gpu04", "gpu05")] == ["held", "held"]
        # the evidence in the change log: the label transitions and the operator's and kubelet's events
        observed = [e for e in events if e.kind is EventKind.NODE_OBSERVED and e.node == "gpu03"]
        natives = [e.facts.native_state for e in observed]
        assert "pod-restart-required" in natives and natives[-1] == "upgrade-failed"
        assert any("BackOff" in (e.facts.reason or "") for e in observed)
        # only the nodes of the waves released so far ever lost the skip label
        released = {"gpu01", "gpu02", "gpu03"}
        for node in cluster.names:
            if node not in released:
                assert cluster.label(node, SKIP) == "true"
                assert not cluster.skip_ever_removed(node), node
                assert cluster.states(node)[-1] == "upgrade-required"
        for node in ("gpu01", "gpu02"):
            done_at_new = [
                e
                for e in cluster.store.history
                if e.resource == "nodes"
                and e.obj["metadata"]["name"] == node
                and (e.obj["metadata"].get("labels") or {}).get(STATE) == "upgrade-done"
                and (e.obj["metadata"].get("labels") or {}).get("nvidia.com/cuda.driver-version.full") == NEW
            ]
            assert done_at_new, node
            # gpu03's rollback pinned the recorded version back: these wait in upgrade-required, held
            # by the skip label, for a person's decision, not walked back by the operator on its own
            assert cluster.states(node)[-1] == "upgrade-required" and cluster.label(node, SKIP) == "true"
        # while the canary ran, gpu02 and gpu03 were held back: their skip label came off only
        # after gpu01 was through (upgrade-done at the new driver)
        history = [e for e in cluster.store.history if e.resource == "nodes"]

        def labels(e):
            return e.obj["metadata"].get("labels") or {}

        canary_done = next(
            e.rv
            for e in history
            if e.obj["metadata"]["name"] == "gpu01"
            and labels(e).get(STATE) == "upgrade-done"
            and labels(e).get("nvidia.com/cuda.driver-version.full") == NEW
        )
        for node in ("gpu02", "gpu03"):
            mine = [e for e in history if e.obj["metadata"]["name"] == node]
            first_skip = next(i for i, e in enumerate(mine) if labels(e).get(SKIP) == "true")
            freed = next(e.rv for e in mine[first_skip:] if SKIP not in labels(e))
            assert mine[first_skip].rv < canary_done < freed


async def test_a_clean_window_walks_every_wave_through_the_operator(tmp_path):
    async with gpu_cluster(tmp_path, nodes=3) as cluster:
        session = start(cluster, tmp_path, "CHG-K8S-2")
        try:
            result = await drive(session, refresh_s=0.2, wait_s=0.02)
        finally:
            await session.close()
        # every node through every stage, and Next says the window is through (this runbook
        # has no closing stages: its last wave ends it)
        assert {n: p.current for n, p in session.state.nodes.items()} == {n: "done" for n in cluster.names}
        assert result.stuck_on is None, result.stuck_on
        assert session.next_plan().person_must == WINDOW_THROUGH
        for node in cluster.names:
            assert cluster.states(node)[-1] == "upgrade-done"
            assert cluster.driver_image(node).endswith(f"{NEW}-ubuntu22.04")
        events = list(read_session(session.path).events)
        assert not [e for e in events if e.kind is EventKind.TRIGGER_FIRED]
        observed = {
            e.node for e in events if e.kind is EventKind.NODE_OBSERVED and e.facts.native_state == "upgrade-done"
        }
        assert observed == set(cluster.names)
        # each node smoked in a pod while cordoned, then uncordoned by the cockpit, not the operator
        for node in cluster.names:
            assert "uncordon-required" not in cluster.states(node)
            assert not cluster.obj("nodes", node)["spec"].get("unschedulable")
            smoked = [
                e for e in events if e.kind is EventKind.STEP_FINISHED and e.step == "smoke-pod" and e.node == node
            ]
            assert smoked and smoked[-1].facts.evidence is not None
            assert smoked[-1].facts.evidence["smoke-log"].count(NEW) == 8
        # the window through: what the cockpit changed is put back, the version it reached is kept
        policy = cluster.obj("clusterpolicies", "cluster-policy")
        assert "annotations" not in policy["metadata"] and policy["spec"]["driver"]["version"] == NEW
        for node in cluster.names:
            meta = cluster.obj("nodes", node)["metadata"]
            assert SKIP not in meta["labels"] and "cockpit.nvidia.com/change" not in meta["annotations"]
        notes = [e.note or "" for e in events if e.kind is EventKind.NOTE]
        assert any("spec.driver.version kept: every node of the window is at it" in n for n in notes), notes


async def test_a_window_whose_canary_fails_ends_with_the_cluster_as_before(tmp_path):
    """The whole runbook under the autopilot: the canary's new driver crash-loops, the trigger rolls
    it back through the operator, the window stops for a person; ending it puts back everything
    the cockpit changed. The ClusterPolicy and every node's labels and annotations read as
    before the window (the canary stays cordoned: it never passed a smoke at any driver)."""
    import copy

    from kube_cluster import OLD

    def snapshot(cluster) -> dict[str, Any]:
        policy = cluster.obj("clusterpolicies", "cluster-policy")
        out: dict[str, Any] = {
            "policy": copy.deepcopy({"meta": policy["metadata"].get("annotations"), "spec": policy["spec"]})
        }
        for node in cluster.store.list("nodes"):
            meta = node["metadata"]
            out[meta["name"]] = copy.deepcopy(
                {"labels": meta.get("labels"), "annotations": meta.get("annotations"), "spec": node["spec"]}
            )
        return out

    async with gpu_cluster(tmp_path, nodes=3, fail={"gpu01"}, fail_version=NEW) as cluster:
        await asyncio.sleep(0.2)
        before = snapshot(cluster)
        session = start(cluster, tmp_path, "CHG-K8S-3")
        try:
            result = await drive(session, refresh_s=0.2, wait_s=0.02)
            assert result.stuck_on is not None and "1 rolled back (gpu01)" in result.stuck_on, result.stuck_on
            said = await session.end_window()
        finally:
            await session.close()
        assert f"ClusterPolicy cluster-policy spec.driver.version back to '{OLD}'" not in said  # pinned back already
        want = copy.deepcopy(before)
        want["gpu01"]["spec"]["unschedulable"] = True
        now = snapshot(cluster)
        for _ in range(200):
            if now == want:
                break
            await asyncio.sleep(0.05)
            now = snapshot(cluster)
        assert now == want
        assert cluster.driver_image("gpu01").endswith(f"{OLD}-ubuntu22.04")
        events = list(read_session(session.path).events)
        notes_said = [e.note or "" for e in events if e.kind is EventKind.NOTE]
        assert any("node gpu01 stays cordoned" in n for n in notes_said), notes_said
