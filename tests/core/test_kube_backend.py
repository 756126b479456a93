"""The Kubernetes backend against the API emulator and the simulated GPU Operator (cockpit/sim/kube/gpu_operator.py)."""

from __future__ import annotations

import asyncio
import re

import pytest
from kube_cluster import CORDONED_ORDER, NEW, OLD, gpu_cluster, upgrade

from cockpit.fleet.backends.base import BackendAction, BackendError, Observation, ObservedStage
from cockpit.fleet.backends.kubernetes import KubernetesBackend, KubernetesMode

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(60)]

SKIP = "nvidia.com/gpu-driver-upgrade.skip"
STATE = "nvidia.com/gpu-driver-upgrade-state"
INITIAL = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"


def backend(cluster, **kw) -> KubernetesBackend:
    return KubernetesBackend(kubeconfig=str(cluster.kubeconfig), poll_interval_s=0.05, **kw)


async def test_discover_reads_labels_allocatable_and_records_the_baseline(tmp_path):
    async with gpu_cluster(tmp_path, nodes=3) as cluster:
        await asyncio.sleep(0.1)  # the controller writes upgrade-done on its first pass
        b = backend(cluster)
        try:
            seen = await b.discover()
            assert [o.node for o in seen] == cluster.names
            for o in seen:
                assert o.native_state == "upgrade-done" and o.stage is ObservedStage.IN_SERVICE  # nothing released
                assert o.driver_version == OLD  # GPU Feature Discovery's label from the fixture
                assert o.evidence["allocatable-gpus"] == "8" and o.evidence["kubectl-status"] == "Ready"
                assert (
                    o.evidence["validator"].startswith("nvidia-operator-validator-")
                    and "Running 1/1" in o.evidence["validator"]
                )
            assert b.baselines == {n: 8 for n in cluster.names}
            (unknown,) = await b.observe(["nope"])
            assert unknown.stage is ObservedStage.UNKNOWN
        finally:
            await b.close()


async def test_operator_managed_wave_moves_only_its_nodes_through_the_real_states(tmp_path):
    async with gpu_cluster(tmp_path, nodes=6) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster)
        heard: list[Observation] = []
        wave = ["gpu02", "gpu05"]
        # a GPU node whose GFD labels are gone is still the operator's: its driver pod runs there
        cluster.store.patch(
            "nodes", "gpu06", "", {"metadata": {"labels": {"nvidia.com/gpu.present": None}}}, strategic=True
        )
        try:
            await b.discover()
            results = await b.release(
                upgrade(*wave, reason="CHG-7 driver 580.95.05", timeout_s=15),
                heard.append,
            )
        finally:
            await b.close()
        assert [(r.node, r.ok, r.error) for r in results] == [(n, True, None) for n in wave]
        for r in results:
            assert r.final is not None and r.final.stage is ObservedStage.DONE and r.final.driver_version == NEW
            assert r.evidence["upgrade-state"] == "upgrade-done" and r.evidence["allocatable-gpus"] == "8"
        policy = cluster.obj("clusterpolicies", "cluster-policy")["spec"]["driver"]
        assert policy["version"] == NEW
        # the upgrade policy as the chart rendered it: two cordoned nodes went on with one slot
        assert (
            policy["upgradePolicy"]["maxParallelUpgrades"] == 1 and policy["upgradePolicy"]["maxUnavailable"] == "25%"
        )
        for node in cluster.names:
            if node in wave:
                assert cluster.states(node) == ["upgrade-done", *CORDONED_ORDER]
                assert cluster.label(node, SKIP) is None
                # left cordoned for the cockpit's smoke, the controller's annotation gone with its use
                doc = cluster.obj("nodes", node)
                assert doc["spec"].get("unschedulable") is True
                assert INITIAL not in (doc["metadata"].get("annotations") or {})
            else:
                # held back: the skip label from before the policy changed, never lifted; the
                # controller only ever marked it upgrade-required
                assert cluster.label(node, SKIP) == "true" and not cluster.skip_ever_removed(node)
                assert cluster.states(node) == ["upgrade-done", "upgrade-required"]
                assert cluster.driver_image(node).endswith(f"{OLD}-ubuntu22.04")
        # every skip label went on before the ClusterPolicy changed
        history = cluster.store.history
        policy_rv = min(
            e.rv
            for e in history
            if e.resource == "clusterpolicies" and e.obj["spec"]["driver"]["version"] == NEW and e.type == "MODIFIED"
        )
        # and the restore record was on the ClusterPolicy before any of them
        record_rv = min(e.rv for e in history if e.resource == "clusterpolicies" and e.type == "MODIFIED")
        assert record_rv < min(
            e.rv
            for e in history
            if e.resource == "nodes" and e.type == "MODIFIED" and SKIP in (e.obj["metadata"].get("labels") or {})
        )
        skip_rvs = [
            e.rv
            for e in history
            if e.resource == "nodes" and (e.obj["metadata"].get("labels") or {}).get(SKIP) == "true"
        ]
        assert skip_rvs and max(skip_rvs[: len(cluster.names) - len(wave)]) < policy_rv
        # each label transition and the operator's events reached the change log's callback
        for node in wave:
            natives = [o.native_state for o in heard if o.node == node]
            it = iter(natives)
            assert all(state in it for state in CORDONED_ORDER[1:]), natives
            reasons = [o.reason or "" for o in heard if o.node == node]
            assert any("Successfully updated node state label to upgrade-done" in r for r in reasons)
        assert not [o for o in heard if o.node not in wave]


async def test_operator_managed_failed_node_is_failed_with_its_evidence(tmp_path):
    async with gpu_cluster(tmp_path, nodes=4, fail={"gpu03"}) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster)
        heard: list[Observation] = []
        try:
            results = await b.release(
                upgrade("gpu01", "gpu03", reason="CHG-8", timeout_s=15),
                heard.append,
            )
        finally:
            await b.close()
        ok, failed = results
        assert ok.ok and ok.node == "gpu01"
        assert not failed.ok and failed.final is not None and failed.final.stage is ObservedStage.FAILED
        assert failed.final.native_state == "upgrade-failed"
        assert failed.error is not None and failed.error.startswith(
            "the GPU Operator set upgrade-failed: Warning BackOff pod/nvidia-driver-daemonset-"
        )
        found = re.search(r"CrashLoopBackOff 0/1 restarts=(\d+)$", failed.evidence["driver-pod"])
        assert found is not None, failed.evidence
        restarts = int(found.group(1))
        assert restarts > 10  # the controller's isDriverPodFailing threshold
        assert "Back-off restarting failed container nvidia-driver-ctr" in failed.evidence["events"]
        assert any(o.node == "gpu03" and o.stage is ObservedStage.FAILED for o in heard)
        assert cluster.states("gpu03")[-1] == "upgrade-failed"


async def test_a_node_stuck_in_pod_restart_required_times_out_with_evidence(tmp_path):
    async with gpu_cluster(tmp_path, nodes=3, stuck={"gpu01"}) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster)
        try:
            (result,) = await b.release(upgrade("gpu01", reason="CHG-9", timeout_s=2.5))
        finally:
            await b.close()
        assert not result.ok and result.error == "timed out after 2.5s in pod-restart-required"
        assert result.final is not None and result.final.stage is ObservedStage.UPGRADING
        assert "Running 0/1 restarts=0" in result.evidence["driver-pod"]
        assert "Startup probe failed" in result.evidence["events"]
        assert result.waited_s >= 2.5 and result.timed_out


async def test_upgrade_done_with_a_gpu_missing_is_not_through(tmp_path):
    async with gpu_cluster(tmp_path, nodes=2, lose_gpu={"gpu02"}) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster)
        try:
            await b.discover()  # the baseline: 8 GPUs
            (result,) = await b.release(upgrade("gpu02", reason="CHG-10", timeout_s=4))
        finally:
            await b.close()
        assert cluster.label("gpu02", STATE) == "upgrade-done"
        assert not result.ok and result.error == "timed out after 4s in upgrade-done"
        assert result.final is not None and result.final.stage is ObservedStage.VALIDATING
        assert result.evidence["allocatable-gpus"] == "7" and result.evidence["baseline-gpus"] == "8"


async def test_cockpit_managed_cordons_evicts_restarts_the_driver_and_uncordons(tmp_path):
    async with gpu_cluster(tmp_path, nodes=3, auto_upgrade=False) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster, mode=KubernetesMode.COCKPIT)
        exporter = next(
            p for p in cluster.sim.pods_on("gpu02") if p["metadata"]["labels"]["app"] == "nvidia-dcgm-exporter"
        )
        heard: list[Observation] = []
        try:
            (result,) = await b.release(
                upgrade("gpu02", reason="CHG-11", timeout_s=15),
                heard.append,
            )
            # through the driver restart, still cordoned for the cockpit's smoke; resume uncordons
            assert result.ok, result.error
            assert result.final is not None and result.final.stage is ObservedStage.DRAINED
            assert result.final.driver_version == NEW
            assert cluster.obj("nodes", "gpu02")["spec"].get("unschedulable") is True
            from cockpit.fleet.backends.base import ReleaseRequest

            resume = ReleaseRequest(BackendAction.RESUME, ("gpu02",), reason="CHG-11", timeout_s=10)
            (back,) = await b.release(resume, heard.append)
        finally:
            await b.close()
        assert back.ok, back.error
        assert back.final is not None and back.final.stage is ObservedStage.DONE
        node = cluster.obj("nodes", "gpu02")
        assert not node["spec"].get("unschedulable") and STATE not in node["metadata"]["labels"]
        assert any(
            h.get("spec", {}).get("unschedulable")
            for h in (
                e.obj for e in cluster.store.history if e.resource == "nodes" and e.obj["metadata"]["name"] == "gpu02"
            )
        )
        assert cluster.store.get("pods", "train-gpu02", "ml") is None  # evicted
        assert (
            cluster.store.get("pods", exporter["metadata"]["name"], "gpu-operator") is not None
        )  # a DaemonSet pod stays
        assert cluster.driver_image("gpu02").endswith(f"{NEW}-ubuntu22.04")
        for other in ("gpu01", "gpu03"):  # OnDelete: the others keep their driver
            assert cluster.driver_image(other).endswith(f"{OLD}-ubuntu22.04")
            assert cluster.store.get("pods", f"train-{other}", "ml") is not None
        stages = [o.stage for o in heard]
        assert (
            ObservedStage.DRAINED in stages and ObservedStage.UPGRADING in stages and stages[-1] is ObservedStage.DONE
        )
        assert any(o.native_state.startswith("Ready,SchedulingDisabled driver:") for o in heard)


async def test_cockpit_managed_crash_looping_driver_fails_the_node(tmp_path):
    async with gpu_cluster(tmp_path, nodes=2, auto_upgrade=False, fail={"gpu01"}) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster, mode=KubernetesMode.COCKPIT)
        try:
            (result,) = await b.release(upgrade("gpu01", reason="CHG-12", timeout_s=15))
        finally:
            await b.close()
        assert not result.ok and result.final is not None and result.final.stage is ObservedStage.FAILED
        assert (
            result.error is not None
            and "CrashLoopBackOff" in result.error
            and "Back-off restarting failed container" in result.error
        )
        assert cluster.obj("nodes", "gpu01")["spec"].get("unschedulable")  # left cordoned for a person


async def test_cockpit_managed_refuses_when_the_operator_would_act_too(tmp_path):
    async with gpu_cluster(tmp_path, nodes=2, auto_upgrade=True) as cluster:
        b = backend(cluster, mode=KubernetesMode.COCKPIT)
        try:
            with pytest.raises(BackendError, match="autoUpgrade on"):
                await b.release(upgrade("gpu01", reason="CHG", timeout_s=2))
        finally:
            await b.close()
        assert not cluster.obj("nodes", "gpu01")["spec"].get("unschedulable")


async def test_kubeconfig_and_context_as_kubectl_reads_them(tmp_path, monkeypatch):
    async with gpu_cluster(tmp_path, nodes=1) as cluster:
        monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{cluster.kubeconfig}")
        b = KubernetesBackend(poll_interval_s=0.05)  # KUBECONFIG, current-context
        try:
            assert [o.node for o in await b.discover()] == ["gpu01"]
        finally:
            await b.close()
        wrong = KubernetesBackend(kubeconfig=str(cluster.kubeconfig), context="stranger")
        try:
            with pytest.raises(BackendError, match=r"^list nodes: 401 Unauthorized$"):
                await wrong.discover()
        finally:
            await wrong.close()
        missing = KubernetesBackend(kubeconfig=str(cluster.kubeconfig), context="no-such-context")
        with pytest.raises(BackendError, match="no-such-context"):
            await missing.discover()


async def test_a_wave_released_node_by_node_concurrently_frees_only_its_nodes(tmp_path):
    """The executor releases a wave's nodes one call each; the calls must not hold each other back."""
    async with gpu_cluster(tmp_path, nodes=5) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster)
        try:
            await b.discover()
            done = await asyncio.gather(
                *(b.release(upgrade(n, reason="CHG-13", timeout_s=15)) for n in ("gpu01", "gpu04"))
            )
        finally:
            await b.close()
        assert [(r.node, r.ok, r.error) for (r,) in done] == [("gpu01", True, None), ("gpu04", True, None)]
        for node in ("gpu02", "gpu03", "gpu05"):
            assert not cluster.skip_ever_removed(node) and cluster.states(node) == ["upgrade-done", "upgrade-required"]
        assert b.released == set()


async def test_the_registry_builds_it_from_the_recorded_options(tmp_path):
    from cockpit.fleet.backends.registry import BackendOptions, backend_actions, make_backend

    async with gpu_cluster(tmp_path, nodes=2, auto_upgrade=False) as cluster:
        options = BackendOptions.from_recorded(
            "kubernetes", {"kubeconfig": str(cluster.kubeconfig), "context": "emulator", "mode": "cockpit"}
        )
        b = make_backend(options, transport=None)
        try:
            assert isinstance(b, KubernetesBackend) and b.mode is KubernetesMode.COCKPIT and b.reports_state
            assert [o.native_state for o in await b.discover()] == ["Ready driver:Running 1/1 restarts=0"] * 2
        finally:
            await b.close()
        assert backend_actions("kubernetes") == {
            BackendAction.DRAIN,
            BackendAction.UPGRADE,
            BackendAction.RESUME,
            BackendAction.SMOKE,
            BackendAction.ROLLBACK,
        }


async def test_a_host_installed_driver_is_refused_in_one_line(tmp_path):
    async with gpu_cluster(tmp_path, nodes=1) as cluster:
        cluster.store.patch(
            "clusterpolicies", "cluster-policy", "", {"spec": {"driver": {"enabled": False}}}, strategic=False
        )
        b = backend(cluster)
        try:
            with pytest.raises(BackendError, match=r"spec.driver.enabled false: the driver is host-installed"):
                await b.release(upgrade("gpu01", reason="CHG", timeout_s=2))
        finally:
            await b.close()
        assert "nvidia.com/gpu-driver-upgrade.skip" not in cluster.obj("nodes", "gpu01")["metadata"]["labels"]


def smoke(node: str, *, image: str = "nvcr.io/nvidia/cuda:13.0.0-base-ubuntu22.04", target: str = NEW):
    from cockpit.fleet.backends.base import ReleaseRequest

    command = "nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader"
    return ReleaseRequest(
        BackendAction.SMOKE,
        (node,),
        reason="CHG-S smoke",
        timeout_s=10,
        context={"smoke_image": image, "smoke_command": command, "target_version": target, "change_id": "CHG-S"},
    )


async def test_the_node_stays_cordoned_through_the_smoke_and_is_uncordoned_after(tmp_path):
    from cockpit.fleet.backends.base import ReleaseRequest

    async with gpu_cluster(tmp_path, nodes=3) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster)
        heard: list[Observation] = []
        try:
            await b.discover()
            (up,) = await b.release(upgrade("gpu02", reason="CHG-S", timeout_s=15))
            assert up.ok, up.error
            assert cluster.obj("nodes", "gpu02")["spec"].get("unschedulable") is True  # the operator left it so
            (smoked,) = await b.release(smoke("gpu02"), heard.append)
            assert smoked.ok, smoked.error
            assert cluster.obj("nodes", "gpu02")["spec"].get("unschedulable") is True  # smoke before uncordon
            rows = smoked.evidence["smoke-log"].splitlines()
            assert len(rows) == 8 and all(r.endswith(f", {NEW}") for r in rows), rows
            assert smoked.evidence["smoke-exit"] == "0" and smoked.evidence["smoke-phase"] == "Succeeded"
            assert heard and (heard[-1].reason or "").startswith("smoke pod cockpit-smoke-gpu02-")
            # the pod asked for every GPU, tolerated the cordon, and is gone after
            created = [e.obj for e in cluster.store.history if e.resource == "pods" and e.type == "ADDED"]
            (pod,) = [p for p in created if p["metadata"]["name"] == smoked.evidence["smoke-pod"]]
            assert pod["spec"]["nodeName"] == "gpu02"
            assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
            resume = ReleaseRequest(BackendAction.RESUME, ("gpu02",), reason="CHG-S", timeout_s=5)
            (back,) = await b.release(resume)
        finally:
            await b.close()
        assert back.ok, back.error
        assert not cluster.obj("nodes", "gpu02")["spec"].get("unschedulable")
        left = cluster.store.get("pods", smoked.evidence["smoke-pod"], "default")
        assert left is None or left["metadata"].get("deletionTimestamp")  # deleted (gracefully)


async def test_a_smoke_image_the_driver_cannot_run_fails_with_the_toolkits_words(tmp_path):
    async with gpu_cluster(tmp_path, nodes=1) as cluster:
        await asyncio.sleep(0.1)
        b = backend(cluster)
        try:
            # the workload still holds every GPU: the kubelet admits no pod asking for them
            (busy,) = await b.release(smoke("gpu01", target=OLD))
            assert not busy.ok and busy.error is not None
            assert "Node didn't have enough resource: nvidia.com/gpu, requested: 8, used: 8" in busy.error
            cluster.store.delete("pods", "train-gpu01", "ml")
            (result,) = await b.release(smoke("gpu01", image="nvcr.io/nvidia/cuda:13.1.0-base-ubuntu22.04", target=OLD))
        finally:
            await b.close()
        assert not result.ok and result.evidence["smoke-exit"] == "128"
        assert result.error is not None and "requirement error: unsatisfied condition: cuda>=13.1" in result.error
