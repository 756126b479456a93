"""The GPU Operator steered, never taken over: who owns the ClusterPolicy, the record of every
change kept on it, and everything put back when the window ends, also from a new process."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from kube_cluster import NEW, OLD, Cluster, gpu_cluster, upgrade

from cockpit.fleet.backends.base import BackendAction, BackendError, ReleaseRequest
from cockpit.fleet.backends.kubernetes import KubernetesBackend
from cockpit.fleet.backends.kubernetes_steer import RECORD_ANNOTATION, policy_owner

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(90)]

STATE = "nvidia.com/gpu-driver-upgrade-state"


def backend(cluster: Cluster) -> KubernetesBackend:
    return KubernetesBackend(kubeconfig=str(cluster.kubeconfig), poll_interval_s=0.05)


def snapshot(cluster: Cluster) -> dict[str, Any]:
    """The ClusterPolicy's spec, labels and annotations, and every node's labels, annotations and cordon."""
    policy = cluster.obj("clusterpolicies", "cluster-policy")
    out: dict[str, Any] = {
        "policy": copy.deepcopy(
            {k: policy["metadata"].get(k) for k in ("labels", "annotations")} | {"spec": policy["spec"]}
        )
    }
    for node in cluster.store.list("nodes"):
        meta = node["metadata"]
        out[meta["name"]] = copy.deepcopy(
            {
                "labels": meta.get("labels"),
                "annotations": meta.get("annotations"),
                "cordon": node["spec"].get("unschedulable"),
            }
        )
    return out


async def settled(cluster: Cluster, want: dict[str, Any], seconds: float = 30) -> dict[str, Any]:
    """The cluster's snapshot once it equals ``want`` (the controller walks nodes back), or at the deadline."""
    now = snapshot(cluster)
    for _ in range(int(seconds / 0.05)):
        if now == want:
            break
        await asyncio.sleep(0.05)
        now = snapshot(cluster)
    return now


def smoke(node: str) -> ReleaseRequest:
    command = "nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader"
    context = {"smoke_image": "nvcr.io/nvidia/cuda:13.0.0-base-ubuntu22.04", "smoke_command": command}
    return ReleaseRequest(
        BackendAction.SMOKE, (node,), reason="CHG-R", timeout_s=10, context={**context, "target_version": NEW}
    )


@pytest.mark.parametrize(
    ("metadata", "kind", "words"),
    [
        ({"labels": {"argocd.argoproj.io/instance": "gpu-operator"}}, "gitops", "Argo CD application gpu-operator"),
        ({"annotations": {"argocd.argoproj.io/tracking-id": "gpu:nvidia.com/ClusterPolicy:/cp"}}, "gitops", "Argo CD"),
        ({"labels": {"kustomize.toolkit.fluxcd.io/name": "gpu"}}, "gitops", "Flux"),
        ({"labels": {"helm.toolkit.fluxcd.io/name": "gpu-operator"}}, "gitops", "Flux"),
        ({"managedFields": [{"manager": "kustomize-controller"}]}, "gitops", "kustomize-controller"),
        ({"labels": {"app.kubernetes.io/managed-by": "Helm"}}, "helm", "Helm release"),
        ({"annotations": {"meta.helm.sh/release-name": "gpu-operator"}}, "helm", "Helm release gpu-operator"),
        ({"managedFields": [{"manager": "kubectl-edit"}]}, None, None),
    ],
)
def test_who_owns_the_policy_is_read_from_its_marks(metadata, kind, words) -> None:
    found = policy_owner({"metadata": {"name": "cluster-policy", **metadata}})
    if kind is None:
        assert found is None
    else:
        assert found is not None and found[0] == kind and words in found[1]


async def test_a_gitops_kept_policy_is_refused_before_any_change(tmp_path):
    async with gpu_cluster(tmp_path, nodes=3) as cluster:
        await asyncio.sleep(0.1)
        cluster.store.patch(
            "clusterpolicies", "cluster-policy", "",
            {"metadata": {"labels": {"argocd.argoproj.io/instance": "gpu-operator"}}}, strategic=False,
        )  # fmt: skip
        before = snapshot(cluster)
        writes = len(cluster.store.history)
        b = backend(cluster)
        try:
            with pytest.raises(BackendError, match=r"is kept by Argo CD application gpu-operator: it would revert"):
                await b.release(upgrade("gpu01", reason="CHG-G", timeout_s=5))
        finally:
            await b.close()
        assert snapshot(cluster) == before
        assert not [e for e in cluster.store.history[writes:] if e.resource in ("nodes", "clusterpolicies")]


async def test_a_canary_rolled_back_leaves_the_policy_and_every_node_label_as_before(tmp_path):
    """The canary goes through and passes its smoke, the window is abandoned (not through): the
    version is put back, the operator walks the canary back, and nothing the cockpit touched differs."""
    async with gpu_cluster(tmp_path, nodes=4) as cluster:
        await asyncio.sleep(0.2)  # the controller's first pass: upgrade-done everywhere
        cluster.store.patch(
            "clusterpolicies", "cluster-policy", "",
            {"metadata": {"labels": {"app.kubernetes.io/managed-by": "Helm"}}}, strategic=False,
        )  # fmt: skip
        before = snapshot(cluster)
        b = backend(cluster)
        heard: list = []
        writes = len(cluster.store.history)
        try:
            (up,) = await b.release(upgrade("gpu01", reason="CHG-R", timeout_s=15), heard.append)
            assert up.ok, up.error
            assert up.evidence["policy-owner"].startswith("ClusterPolicy cluster-policy is rendered by Helm release")
            # the warning was the first thing heard of the node, before anything on the cluster changed
            assert (heard[0].reason or "").startswith("ClusterPolicy cluster-policy is rendered by Helm release")
            assert heard[0].native_state == "upgrade-done" and heard[0].evidence.get("kubectl-status") == "Ready"
            first_write = cluster.store.history[writes]
            assert first_write.resource == "clusterpolicies"  # the restore record, then the rest
            (smoked,) = await b.release(smoke("gpu01"))
            assert smoked.ok, smoked.error
            (back,) = await b.release(ReleaseRequest(BackendAction.RESUME, ("gpu01",), reason="CHG-R", timeout_s=5))
            assert back.ok, back.error
            policy = cluster.obj("clusterpolicies", "cluster-policy")
            assert RECORD_ANNOTATION in policy["metadata"]["annotations"]
            said = await b.end_window(through=False)
        finally:
            await b.close()
        assert f"ClusterPolicy cluster-policy spec.driver.version back to '{OLD}'" in said
        after = await settled(cluster, before)
        assert after == before
        assert cluster.driver_image("gpu01").endswith(f"{OLD}-ubuntu22.04")
        # the held-back nodes were never walked for nothing: no cordon, their GPU pods untouched
        for node in ("gpu02", "gpu03", "gpu04"):
            assert "cordon-required" not in cluster.states(node)
            assert cluster.store.get("pods", f"train-{node}", "ml") is not None


async def test_a_failed_canary_is_rolled_back_by_a_new_process_after_a_crash(tmp_path):
    """The canary's new driver crash-loops (upgrade-failed); the cockpit's process dies; a new one
    finds the record on the ClusterPolicy, pins the recorded version back and walks the node
    back through: it ends at the recorded driver, everything else as before."""
    async with gpu_cluster(tmp_path, nodes=3, fail={"gpu01"}, fail_version=NEW) as cluster:
        await asyncio.sleep(0.2)
        before = snapshot(cluster)
        first = backend(cluster)
        try:
            (up,) = await first.release(upgrade("gpu01", reason="CHG-F", timeout_s=15))
        finally:
            await first.close()  # the process ends here: nothing of it is kept but the cluster
        assert not up.ok and cluster.label("gpu01", STATE) == "upgrade-failed"
        second = backend(cluster)
        try:
            said = await second.end_window(through=False)
        finally:
            await second.close()
        assert any("driver pod" in line and "deleted, to walk it back" in line for line in said), said
        # the node was cordoned by the cockpit and never passed a smoke: it stays cordoned, said so
        assert "node gpu01 stays cordoned: the cockpit cordoned it and it never passed its smoke" in said
        want = copy.deepcopy(before)
        want["gpu01"]["cordon"] = True
        after = await settled(cluster, want)
        assert after == want
        assert cluster.driver_image("gpu01").endswith(f"{OLD}-ubuntu22.04")
        assert cluster.states("gpu01")[-2:] == ["upgrade-failed", "upgrade-done"]


async def test_a_failed_canary_rolled_back_through_the_backend_is_at_the_recorded_version(tmp_path):
    """upgrade-failed -> rollback: the ClusterPolicy pinned back to the recorded version, the
    crash-looping driver pod deleted, the controller walks the node back; it stays cordoned."""
    async with gpu_cluster(tmp_path, nodes=3, fail={"gpu02"}, fail_version=NEW) as cluster:
        await asyncio.sleep(0.2)
        b = backend(cluster)
        try:
            (up,) = await b.release(upgrade("gpu02", reason="CHG-RB", timeout_s=15))
            assert not up.ok and cluster.label("gpu02", STATE) == "upgrade-failed"
            rollback = ReleaseRequest(
                BackendAction.ROLLBACK, ("gpu02",), reason="CHG-RB", timeout_s=15, context={"target_version": NEW}
            )
            (back,) = await b.release(rollback)
        finally:
            await b.close()
        assert back.ok, back.error
        assert back.final is not None and back.final.driver_version == OLD
        assert back.evidence["target-version"] == OLD and back.evidence["upgrade-state"] == "upgrade-done"
        assert cluster.obj("clusterpolicies", "cluster-policy")["spec"]["driver"]["version"] == OLD
        assert cluster.driver_image("gpu02").endswith(f"{OLD}-ubuntu22.04")
        assert cluster.obj("nodes", "gpu02")["spec"].get("unschedulable") is True  # a person's, or a smoke's, next
        assert cluster.states("gpu02")[-2:] == ["upgrade-failed", "upgrade-done"]
        for node in ("gpu01", "gpu03"):  # held back all along
            assert cluster.driver_image(node).endswith(f"{OLD}-ubuntu22.04") and not cluster.skip_ever_removed(node)


def test_the_record_of_a_large_fleet_fits_in_the_annotations_limit() -> None:
    """3000 nodes: the record names the untouched ones only, and reads back whole."""
    from cockpit.fleet.backends.kubernetes_steer import ChangeRecord, NodeRecord, read_record
    from cockpit.sim.kube.rules import ANNOTATIONS_LIMIT

    skip, note = "nvidia.com/gpu-driver-upgrade.skip", "cockpit.nvidia.com/change"
    nodes = {
        f"gpu-node-{i:05d}": NodeRecord(labels={skip: None}, annotations={note: None}, unschedulable=False)
        for i in range(3000)
    }
    nodes["gpu-node-00007"] = NodeRecord(labels={skip: "true"}, annotations={note: None}, unschedulable=True)
    record = ChangeRecord(change="CHG-BIG", policy={"version": OLD}, nodes=nodes)
    text = record.compact()
    assert len(text) + len(RECORD_ANNOTATION) < ANNOTATIONS_LIMIT / 4
    assert read_record({"metadata": {"annotations": {RECORD_ANNOTATION: text}}}) == record


async def test_a_new_process_goes_on_with_the_record_and_another_change_is_refused(tmp_path):
    """After a crash the record on the ClusterPolicy is continued, never restarted: the values
    from before the window's first change are the ones put back. A different change finds it
    there and is refused before touching anything."""
    skip = "nvidia.com/gpu-driver-upgrade.skip"

    def release(node: str, change: str) -> ReleaseRequest:
        return ReleaseRequest(
            BackendAction.UPGRADE, (node,), reason=f"cockpit {change}: release", timeout_s=15,
            context={"target_version": NEW, "change_id": change},
        )  # fmt: skip

    async with gpu_cluster(tmp_path, nodes=3) as cluster:
        await asyncio.sleep(0.2)
        first = backend(cluster)
        try:
            (one,) = await first.release(release("gpu01", "CHG-A"))
        finally:
            await first.close()  # the process dies; gpu02 and gpu03 carry the skip label now
        assert one.ok, one.error
        assert cluster.label("gpu03", skip) == "true"
        writes = len(cluster.store.history)
        other = backend(cluster)
        try:
            with pytest.raises(BackendError, match=r"holds the restore record of change 'CHG-A'"):
                await other.release(release("gpu02", "CHG-B"))
        finally:
            await other.close()
        assert not [e for e in cluster.store.history[writes:] if e.resource in ("nodes", "clusterpolicies")]
        second = backend(cluster)
        try:
            (two,) = await second.release(release("gpu02", "CHG-A"))
            said = await second.end_window(through=False)
        finally:
            await second.close()
        assert two.ok, two.error
        # gpu03's skip label was recorded absent by the first process, and is absent again
        assert any(line.startswith("node gpu03:") and f"{skip}=None" in line for line in said), said
        assert cluster.label("gpu03", skip) is None
        assert RECORD_ANNOTATION not in (
            cluster.obj("clusterpolicies", "cluster-policy")["metadata"].get("annotations") or {}
        )
