"""Canary and waves through per-pool NVIDIADriver resources (ClusterPolicy useNvidiaDriverCRD):
the cockpit changes only the version of the pool a wave's nodes are routed to, so the other
pools' nodes never see a new version at all; a failed canary's pool is pinned back."""

from __future__ import annotations

import asyncio

import pytest
from kube_cluster import CORDONED_ORDER, NEW, OLD, gpu_cluster, upgrade

from cockpit.fleet.backends.base import BackendAction, BackendError, ReleaseRequest
from cockpit.fleet.backends.kubernetes import KubernetesBackend, KubernetesMode

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(60)]

SKIP = "nvidia.com/gpu-driver-upgrade.skip"
STATE = "nvidia.com/gpu-driver-upgrade-state"
POOLS = {"canary": ["gpu01"], "main": ["gpu02", "gpu03", "gpu04"]}


def backend(cluster, **kw) -> KubernetesBackend:
    return KubernetesBackend(kubeconfig=str(cluster.kubeconfig), poll_interval_s=0.05, **kw)


async def test_the_canary_pool_moves_alone_then_a_wave_of_the_main_pool(tmp_path):
    async with gpu_cluster(tmp_path, nodes=4, pools=POOLS) as cluster:
        await asyncio.sleep(0.1)
        policy_before = cluster.obj("clusterpolicies", "cluster-policy")["spec"]
        b = backend(cluster)
        try:
            (canary,) = await b.release(upgrade("gpu01", reason="CHG-P", timeout_s=15))
            assert canary.ok, canary.error
            assert canary.evidence["nvidia-drivers"] == "canary"
            # only the canary's NVIDIADriver changed; the main pool never saw a new version
            assert cluster.obj("nvidiadrivers", "canary")["spec"]["version"] == NEW
            assert cluster.obj("nvidiadrivers", "main")["spec"]["version"] == OLD
            for node in POOLS["main"]:
                assert cluster.states(node) == ["upgrade-done"] and cluster.label(node, SKIP) is None
            assert cluster.states("gpu01") == ["upgrade-done", *CORDONED_ORDER]
            (wave,) = await b.release(upgrade("gpu02", reason="CHG-P", timeout_s=15))
        finally:
            await b.close()
        assert wave.ok, wave.error
        assert cluster.obj("nvidiadrivers", "main")["spec"]["version"] == NEW
        assert cluster.driver_image("gpu02").endswith(f"{NEW}-ubuntu22.04")
        # the rest of the main pool held back by the skip label, only marked upgrade-required
        for node in ("gpu03", "gpu04"):
            assert cluster.label(node, SKIP) == "true" and cluster.states(node) == ["upgrade-done", "upgrade-required"]
            assert cluster.driver_image(node).endswith(f"{OLD}-ubuntu22.04")
        # the canary pool's version is the window's too: its node (through already) is held as well
        assert cluster.label("gpu01", SKIP) == "true" and cluster.states("gpu01")[-1] == "upgrade-done"
        # the ClusterPolicy's spec was never the cockpit's to change here
        assert cluster.obj("clusterpolicies", "cluster-policy")["spec"] == policy_before


async def test_a_failed_canary_pool_is_pinned_back_and_the_node_walked_through(tmp_path):
    async with gpu_cluster(tmp_path, nodes=4, pools=POOLS, fail={"gpu01"}, fail_version=NEW) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster)
        try:
            (canary,) = await b.release(upgrade("gpu01", reason="CHG-PF", timeout_s=15))
            assert not canary.ok and cluster.label("gpu01", STATE) == "upgrade-failed"
            rollback = ReleaseRequest(
                BackendAction.ROLLBACK, ("gpu01",), reason="CHG-PF", timeout_s=15, context={"target_version": NEW}
            )
            (back,) = await b.release(rollback)
            said = await b.end_window(through=False)
        finally:
            await b.close()
        assert back.ok, back.error
        assert back.evidence["target-version"] == OLD and back.final is not None and back.final.driver_version == OLD
        assert cluster.obj("nvidiadrivers", "canary")["spec"]["version"] == OLD
        assert cluster.driver_image("gpu01").endswith(f"{OLD}-ubuntu22.04")
        assert "node gpu01 stays cordoned: the cockpit cordoned it and it never passed its smoke" in said
        for node in POOLS["main"]:
            assert cluster.states(node) == ["upgrade-done"]
            meta = cluster.obj("nodes", node)["metadata"]
            assert SKIP not in meta["labels"] and "cockpit.nvidia.com/change" not in meta["annotations"]


async def test_a_node_routed_to_no_nvidia_driver_is_refused(tmp_path):
    async with gpu_cluster(tmp_path, nodes=3, pools={"canary": ["gpu01"], "main": ["gpu02"]}) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster)
        try:
            (result,) = await b.release(upgrade("gpu03", reason="CHG-PN", timeout_s=5))
        finally:
            await b.close()
        assert not result.ok and result.error is not None
        assert result.error.startswith("node gpu03 is routed to no NVIDIADriver")
        assert cluster.label("gpu01", SKIP) is None and cluster.label("gpu02", SKIP) is None


async def test_cockpit_managed_mode_refuses_per_pool_drivers(tmp_path):
    async with gpu_cluster(tmp_path, nodes=2, auto_upgrade=False, pools={"all": ["gpu01", "gpu02"]}) as cluster:
        b = backend(cluster, mode=KubernetesMode.COCKPIT)
        try:
            with pytest.raises(BackendError, match="use operator-managed mode"):
                await b.release(upgrade("gpu01", reason="CHG", timeout_s=2))
        finally:
            await b.close()
