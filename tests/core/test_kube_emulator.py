"""The Kubernetes API emulator and the simulated GPU Operator are not kinder than the real ones."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from kube_cluster import NEW, gpu_cluster, upgrade

from cockpit.fleet.backends.kubernetes import KubernetesBackend

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(60)]

STATE = "nvidia.com/gpu-driver-upgrade-state"


async def test_the_api_refuses_what_the_real_server_refuses(tmp_path):
    async with gpu_cluster(tmp_path, nodes=2) as cluster:
        base = f"http://127.0.0.1:{cluster.api.port}"
        auth = {"Authorization": f"Bearer {cluster.api.token}"}
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/api/v1/nodes") as r:
                assert r.status == 401  # no token
            async with http.get(f"{base}/api/v1/pods?fieldSelector=spec.hostname%3Dx", headers=auth) as r:
                assert r.status == 400 and "field label not supported" in (await r.json())["message"]
            async with http.get(f"{base}/api/v1/nodes?labelSelector=a%20in%20(b)", headers=auth) as r:
                assert r.status == 400  # set-based: not implemented, so refused, never half-matched
            patch = json.dumps({"spec": {"driver": {"version": NEW}}})
            url = f"{base}/apis/nvidia.com/v1/clusterpolicies/cluster-policy"
            smp = {**auth, "Content-Type": "application/strategic-merge-patch+json"}
            async with http.patch(url, data=patch, headers=smp) as r:
                assert r.status == 415  # custom resources take no strategic merge patch
            async with http.patch(
                url, data=patch, headers={**auth, "Content-Type": "application/json-patch+json"}
            ) as r:
                assert r.status == 415
            async with http.post(
                f"{base}/api/v1/namespaces/ml/pods/train-gpu01/eviction", data="{}", headers=auth
            ) as r:
                assert r.status == 400  # the body must be an Eviction
            watch = f"{base}/api/v1/nodes?watch=true&timeoutSeconds=1&resourceVersion="
            async with http.get(watch + "1", headers=auth) as r:  # older than the history kept
                (gone,) = [json.loads(x) for x in (await r.text()).splitlines()]
                assert gone["type"] == "ERROR" and gone["object"]["code"] == 410
            first = cluster.store.history[0].rv
            async with http.get(watch + str(first), headers=auth) as r:
                lines = [json.loads(x) for x in (await r.text()).splitlines()]
                assert lines and all(e["type"] in ("ADDED", "MODIFIED") for e in lines)
                versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in lines]
                assert versions == sorted(versions) and versions[0] > first


async def test_the_controller_moves_at_most_max_parallel_and_skips_the_labelled(tmp_path):
    """Chart defaults (maxParallelUpgrades 1, maxUnavailable 25%): one node at a time, never a skipped one."""
    async with gpu_cluster(tmp_path, nodes=4) as cluster:
        await asyncio.sleep(0.1)
        cluster.store.patch(
            "nodes",
            "gpu04",
            "",
            {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade.skip": "true"}}},
            strategic=True,
        )
        cluster.store.patch(
            "clusterpolicies", "cluster-policy", "", {"spec": {"driver": {"version": NEW}}}, strategic=False
        )
        for _ in range(400):
            await asyncio.sleep(0.02)
            if all(cluster.label(n, STATE) == "upgrade-done" for n in ("gpu01", "gpu02", "gpu03")):
                break
        busy_at_once = 0
        states: dict[str, str] = {}
        for e in cluster.store.history:
            if e.resource == "nodes":
                states[e.obj["metadata"]["name"]] = (e.obj["metadata"].get("labels") or {}).get(STATE, "")
                busy_at_once = max(
                    busy_at_once, sum(1 for s in states.values() if s not in ("", "upgrade-done", "upgrade-required"))
                )
        assert busy_at_once == 1
        assert [cluster.states(n)[-1] for n in cluster.names] == ["upgrade-done"] * 3 + ["upgrade-required"]


async def test_cancel_holds_the_node_back_and_ends_the_wait(tmp_path):
    async with gpu_cluster(tmp_path, nodes=2, stuck={"gpu01"}) as cluster:
        await asyncio.sleep(0.1)
        b = KubernetesBackend(kubeconfig=str(cluster.kubeconfig), poll_interval_s=0.05)
        try:
            task = asyncio.create_task(b.release(upgrade("gpu01", reason="CHG", timeout_s=20)))
            for _ in range(200):
                await asyncio.sleep(0.02)
                if cluster.label("gpu01", STATE) == "pod-restart-required":
                    break
            await b.cancel(["gpu01"])
            (result,) = await asyncio.wait_for(task, 5)
        finally:
            await b.close()
        assert not result.ok and result.error == "cancelled by the operator" and not result.timed_out
        assert cluster.label("gpu01", "nvidia.com/gpu-driver-upgrade.skip") == "true"


async def test_a_node_cordoned_when_its_upgrade_begins_goes_on_without_a_slot_and_stays_cordoned(tmp_path):
    """common_manager.go:251-262 and :670-707, upgrade_inplace.go:87-97: the initial-state annotation."""
    initial = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
    async with gpu_cluster(tmp_path, nodes=4) as cluster:
        await asyncio.sleep(0.1)
        # no slot free: maxParallelUpgrades 1 and another node already in progress (held there)
        cluster.store.patch("nodes", "gpu01", "", {"spec": {"unschedulable": True}}, strategic=True)
        for other in ("gpu03", "gpu04"):
            cluster.store.patch(
                "nodes",
                other,
                "",
                {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade.skip": "true"}}},
                strategic=True,
            )
        cluster.store.patch("nodes", "gpu02", "", {"metadata": {"labels": {STATE: "upgrade-failed"}}}, strategic=True)
        cluster.store.patch(
            "clusterpolicies", "cluster-policy", "", {"spec": {"driver": {"version": NEW}}}, strategic=False
        )
        for _ in range(400):
            await asyncio.sleep(0.02)
            if cluster.label("gpu01", STATE) == "upgrade-done" and cluster.states("gpu01")[-2:] != ["upgrade-done"]:
                break
        assert cluster.states("gpu01")[-1] == "upgrade-done" and "uncordon-required" not in cluster.states("gpu01")
        node = cluster.obj("nodes", "gpu01")
        assert node["spec"].get("unschedulable") is True and initial not in node["metadata"].get("annotations", {})
        assert any(
            initial in (e.obj["metadata"].get("annotations") or {})
            for e in cluster.store.history
            if e.resource == "nodes" and e.obj["metadata"]["name"] == "gpu01"
        )
        assert cluster.driver_image("gpu01").endswith(f"{NEW}-ubuntu22.04")


async def test_a_gitops_kept_policy_is_reverted_by_its_controller(tmp_path):
    """The gitops-revert scenario's Argo CD is real to the backend: a change to the spec does not stay."""
    async with gpu_cluster(tmp_path, nodes=2, gitops=True) as cluster:
        await asyncio.sleep(0.1)
        policy = cluster.obj("clusterpolicies", "cluster-policy")
        assert policy["metadata"]["labels"]["argocd.argoproj.io/instance"] == "gpu-operator"
        cluster.store.patch(
            "clusterpolicies", "cluster-policy", "", {"spec": {"driver": {"version": NEW}}}, strategic=False
        )
        await asyncio.sleep(0.1)
        assert cluster.obj("clusterpolicies", "cluster-policy")["spec"]["driver"]["version"] != NEW
        assert all(cluster.driver_image(n).endswith("580.65.06-ubuntu22.04") for n in cluster.names)


async def test_annotations_past_the_api_servers_limit_are_refused(tmp_path):
    async with gpu_cluster(tmp_path, nodes=1) as cluster:
        base = f"http://127.0.0.1:{cluster.api.port}"
        headers = {"Authorization": f"Bearer {cluster.api.token}", "Content-Type": "application/merge-patch+json"}
        patch = json.dumps({"metadata": {"annotations": {"x": "y" * (256 * 1024)}}})
        async with aiohttp.ClientSession() as http:
            url = f"{base}/apis/nvidia.com/v1/clusterpolicies/cluster-policy"
            async with http.patch(url, data=patch, headers=headers) as r:
                assert r.status == 422 and "Too long" in (await r.json())["message"]
        assert "annotations" not in cluster.obj("clusterpolicies", "cluster-policy")["metadata"]
