"""A simulated NVIDIA GPU Operator beside the Kubernetes emulator: its driver upgrade
controller, the DaemonSet controller and the kubelet, as far as a driver upgrade sees them.

The upgrade controller walks the real state machine of NVIDIA/k8s-operator-libs
pkg/upgrade (commit 11e747a5), one state per node per reconcile pass, as
``ClusterUpgradeStateManagerImpl.ApplyState`` (upgrade_state.go:171-280) does from a
snapshot built once per pass:

- autoUpgrade off: the state labels are removed from every node and nothing else
  happens (gpu-operator controllers/upgrade_controller.go:120-125);
- ``""``/``upgrade-done`` -> ``upgrade-required`` when the node's driver pod is not at the
  DaemonSet's current revision (common_manager.go:229-291; the skip label is **not**
  consulted here, so a skipped node sits in ``upgrade-required``); a node cordoned at that
  moment gets the annotation ``nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable``
  (:251-262); ``""`` -> ``upgrade-done`` when it is;
- ``upgrade-required`` -> ``cordon-required`` unless the node carries
  ``nvidia.com/gpu-driver-upgrade.skip=true`` (upgrade_inplace.go:82), at most
  ``maxParallelUpgrades`` in progress (0: no limit) and ``maxUnavailable`` cordoned or
  not ready (common_manager.go:747-776, where ``upgrade-failed`` nodes count as in
  progress: GetUpgradesInProgress, :733-739); a cordoned node goes on with no slot free
  (upgrade_inplace.go:87-97);
- ``cordon-required`` -> cordon -> ``wait-for-jobs-required`` (:361-380) ->
  ``pod-deletion-required`` (no waitForCompletion selector, :392-401) -> the pods using
  ``nvidia.com/gpu`` deleted -> ``pod-restart-required`` (pod_manager.go:210-222; the GPU
  Operator enables pod deletion, cmd/gpu-operator/main.go:191); a deletion that fails
  -> ``drain-required`` when drain is enabled, else ``upgrade-failed`` (pod_manager.go:393-403);
  ``drain-required`` -> every non-DaemonSet pod evicted -> ``pod-restart-required``;
- ``pod-restart-required``: an out-of-date driver pod is deleted (SchedulePodsRestart,
  pod_manager.go:233-251); an up-to-date one that is Ready -> ``validation-required``;
  not Ready with a container restarted more than 10 times -> ``upgrade-failed``
  (common_manager.go:457-524, isDriverPodFailing :636-648);
- ``validation-required`` -> ``uncordon-required`` when every ``app=nvidia-operator-validator``
  pod on the node is Ready (validation_manager.go:71-116; main.go:192), or straight to
  ``upgrade-done``, still cordoned, with the initial-state annotation removed, where it is
  there (updateNodeToUncordonOrDoneState, common_manager.go:670-707);
- ``uncordon-required`` -> uncordon -> ``upgrade-done`` (upgrade_inplace.go:124-146);
- ``upgrade-failed`` -> ``uncordon-required`` (or ``upgrade-done`` by the same initial-state
  rule) once the driver pod is in sync and Ready (common_manager.go:528-570).

One-shot pods pinned to a node (the cockpit's smoke pod) run in :mod:`cockpit.sim.kube.run_pods`.

Each label change is a patch of the node and an Event with reason ``GPUDriverUpgrade``
(util.go:158-160, ``"Successfully updated node state label to %s"``,
node_upgrade_state_provider.go:129-130) from ``nvidia-gpu-operator`` (main.go:183).

The DaemonSet controller recreates a deleted driver pod at the DaemonSet's current
revision (``updateStrategy: OnDelete``, assets/state-driver/0500_daemonset.yaml:16-17: a
pod changes only when deleted). The new driver's k8s-driver-manager first takes the
operator's components off the node (their ``nvidia.com/gpu.deploy.*`` labels set to
``paused-for-driver-upgrade``, controllers/nodelabeling_controller_test.go:371), so the
validator pod goes and ``allocatable nvidia.com/gpu`` drops to 0 until the device plugin is
back after the validator; GPU Feature Discovery then relabels the driver version.

A node can be told to fail (its new driver container crash-loops: ``BackOff`` events
from the kubelet, restartCount past 10, so the controller says ``upgrade-failed``), to
stick (the new driver container never becomes Ready and never restarts: the node stays
in ``pod-restart-required``), or to come back with fewer GPUs.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from dataclasses import dataclass, field
from typing import Any

from cockpit.sim.kube.api import KubeObject, now_iso
from cockpit.sim.kube.objects import (
    IN_PROGRESS_EXCLUDED,
    INITIAL_STATE,
    NAMESPACE,
    OWNER_LABEL,
    SKIP,
    STATE,
    VALIDATOR_DS,
    ClusterObjects,
    ready,
    revision_hash,
)
from cockpit.sim.kube.run_pods import run_pending_pods


@dataclass
class SimCluster(ClusterObjects):
    tick_s: float = 0.02
    fail: set[str] = field(default_factory=set)
    #: only a driver pod of this version crash-loops on a ``fail`` node (None: any new one)
    fail_version: str | None = None
    #: an Argo CD application keeps the ClusterPolicy: its marks on it, and any change to its
    #: spec reverted on the next pass (selfHeal)
    gitops: bool = False
    _rendered: dict[str, Any] | None = None
    stuck: set[str] = field(default_factory=set)
    lose_gpu: set[str] = field(default_factory=set)
    driver_load_ticks: int = 3
    #: node -> ticks since its new driver pod started
    _loading: dict[str, int] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    # ---- the loop ------------------------------------------------------------------
    def start(self) -> None:
        if self.gitops:
            # the marks Argo CD leaves on what it applies (its instance label, tracking annotation)
            marks = {
                "labels": {"argocd.argoproj.io/instance": "gpu-operator"},
                "annotations": {
                    "argocd.argoproj.io/tracking-id": "gpu-operator:nvidia.com/ClusterPolicy:/cluster-policy"
                },
            }
            policy = self.store.patch("clusterpolicies", "cluster-policy", "", {"metadata": marks}, strategic=False)
            self._rendered = copy.deepcopy(policy["spec"])
        self._task = asyncio.get_running_loop().create_task(self._run())

    def gitops_pass(self) -> None:
        """Argo CD's selfHeal: the ClusterPolicy's spec back to what Git renders, whoever changed it."""
        if self._rendered is None:
            return
        policy = self.store.get("clusterpolicies", "cluster-policy")
        if policy is not None and policy["spec"] != self._rendered:
            policy = copy.deepcopy(policy)
            policy["spec"] = copy.deepcopy(self._rendered)
            self.store.replace("clusterpolicies", policy)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            self.gitops_pass()
            self.policy_controller_pass()
            self.kubelet_pass()
            run_pending_pods(self.store, self.store.logs, self.loaded_driver)
            self.upgrade_pass()
            await asyncio.sleep(self.tick_s)

    def kubelet_pass(self) -> None:
        """The kubelets, the DaemonSet controller, the driver manager, device plugin and GFD."""
        s = self.store
        for pod in s.list("pods"):
            if pod["metadata"].get("deletionTimestamp"):
                s.delete("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
        for node in s.list("nodes"):
            name = node["metadata"]["name"]
            found = self.driver_pod(name)
            if found is None and not self.driver_pods_on(name) and self.ds_of_node(name):
                # OnDelete: a new pod only where the old one was deleted, at the current revision
                self._driver_pod(name, self.target(self.ds_of_node(name)), ready_now=False)
                self._loading[name] = 0
                for v in self.pods_on(name, VALIDATOR_DS):  # the driver manager pauses the operands
                    s.delete("pods", v["metadata"]["name"], NAMESPACE)
                s.patch("nodes", name, "", {"status": {"allocatable": {"nvidia.com/gpu": "0"}}}, strategic=True)
                continue
            if found is None or name not in self._loading:
                continue
            self._loading[name] += 1
            t = self._loading[name]
            pod = copy.deepcopy(found)
            cs = pod["status"]["containerStatuses"][0]
            image_version = self.image_version(str(pod["spec"]["containers"][0]["image"]))
            if name in self.fail and self.fail_version in (None, image_version):
                pod["status"]["phase"] = "Running"
                cs["restartCount"] += 1
                cs["ready"] = False
                cs["state"] = {
                    "waiting": {"reason": "CrashLoopBackOff", "message": "back-off restarting failed container"}
                }
                s.replace("pods", pod)
                if cs["restartCount"] in (1, 5, 11):
                    meta = pod["metadata"]
                    msg = (
                        "Back-off restarting failed container nvidia-driver-ctr in pod "
                        f"{meta['name']}_{NAMESPACE}({meta['uid']})"
                    )
                    self.event(pod, "BackOff", msg, type_="Warning", component="kubelet")
                continue
            if name in self.stuck:
                if pod["status"]["phase"] != "Running":
                    pod["status"]["phase"] = "Running"
                    s.replace("pods", pod)
                    self.event(
                        pod,
                        "Unhealthy",
                        "Startup probe failed: nvidia driver is not loaded yet",
                        type_="Warning",
                        component="kubelet",
                    )
                continue
            if t == 1:
                pod["status"]["phase"] = "Running"
                s.replace("pods", pod)
            elif t == self.driver_load_ticks:
                cs["ready"] = True
                s.replace("pods", pod)
                version = self.image_version(str(pod["spec"]["containers"][0]["image"]))
                major, minor, rev_ = version.split(".")
                labels = {
                    "nvidia.com/cuda.driver-version.full": version,
                    "nvidia.com/cuda.driver-version.major": major,
                    "nvidia.com/cuda.driver-version.minor": minor,
                    "nvidia.com/cuda.driver-version.revision": rev_,
                    "nvidia.com/cuda.driver.major": major,
                    "nvidia.com/cuda.driver.minor": minor,
                    "nvidia.com/cuda.driver.rev": rev_,
                }
                s.patch("nodes", name, "", {"metadata": {"labels": labels}}, strategic=True)
                self._ds_pod(VALIDATOR_DS, name, ready_now=False)
            elif t == self.driver_load_ticks + 2:
                for v in self.pods_on(name, VALIDATOR_DS):
                    v = copy.deepcopy(v)
                    v["status"] = {
                        "phase": "Running",
                        "containerStatuses": [{"name": VALIDATOR_DS, "ready": True, "restartCount": 0}],
                    }
                    s.replace("pods", v)
            elif t == self.driver_load_ticks + 3:
                count = int(node["status"]["capacity"]["nvidia.com/gpu"]) - (1 if name in self.lose_gpu else 0)
                s.patch("nodes", name, "", {"status": {"allocatable": {"nvidia.com/gpu": str(count)}}}, strategic=True)
                del self._loading[name]

    def loaded_driver(self, node: str) -> str | None:
        """The driver version loaded on ``node``: its driver pod's, once that pod is Ready."""
        pod = self.driver_pod(node)
        if pod is None or not ready(pod):
            return None
        return self.image_version(str(pod["spec"]["containers"][0]["image"]))

    def upgrade_pass(self) -> None:
        """One reconcile of the upgrade controller: the ClusterPolicy's upgrade policy over every
        driver node, or, with NVIDIADriver resources, each one's own policy over the nodes its
        owner label routes to it (gpu-operator controllers/upgrade_controller.go:102-105, :205-300)."""
        s = self.store
        nodes = [n for n in s.list("nodes") if self.driver_pods_on(n["metadata"]["name"])]
        if not self.pools:
            self._upgrade_partition(nodes, self.policy().get("upgradePolicy") or {})
            return
        for nvd in s.list("nvidiadrivers"):
            pool = nvd["metadata"]["name"]
            mine = [n for n in nodes if (n["metadata"].get("labels") or {}).get(OWNER_LABEL) == pool]
            self._upgrade_partition(mine, nvd["spec"].get("upgradePolicy") or {})

    def _upgrade_partition(self, nodes: list[KubeObject], up: dict[str, Any]) -> None:
        s = self.store
        if not up.get("autoUpgrade"):
            for n in nodes:
                if STATE in (n["metadata"].get("labels") or {}):
                    s.patch("nodes", n["metadata"]["name"], "", {"metadata": {"labels": {STATE: None}}}, strategic=True)
            return
        snapshot = [(n, (n["metadata"].get("labels") or {}).get(STATE, "")) for n in nodes]
        total = len(snapshot)
        in_progress = sum(1 for _, st in snapshot if st not in IN_PROGRESS_EXCLUDED)
        unavailable = sum(1 for n, _ in snapshot if n["spec"].get("unschedulable")) + sum(
            1 for _, st in snapshot if st == "cordon-required"
        )
        max_par = int(up.get("maxParallelUpgrades", 1))
        max_unavail = self._scaled(up.get("maxUnavailable", "25%"), total)
        available = sum(1 for _, st in snapshot if st == "upgrade-required") if max_par == 0 else max_par - in_progress
        available = min(available, max_unavail)
        if unavailable >= max_unavail:
            available = 0
        elif max_unavail < total and unavailable + available > max_unavail:
            available = max_unavail - unavailable
        for node, state in snapshot:
            name = node["metadata"]["name"]
            labels = node["metadata"].get("labels") or {}
            pod = self.driver_pod(name)
            rev = revision_hash(self.target(self.ds_of_node(name)))
            synced = pod is not None and pod["metadata"]["labels"].get("controller-revision-hash") == rev
            if state in ("", "upgrade-done"):
                if pod is not None and not synced:
                    if node["spec"].get("unschedulable"):
                        # cordoned when its upgrade begins: remembered, so the node stays cordoned at
                        # upgrade-done (common_manager.go:251-262)
                        self._annotate(name, INITIAL_STATE, "true")
                    self._set_state(node, "upgrade-required")
                elif state == "":
                    self._set_state(node, "upgrade-done")
            elif state == "upgrade-required":
                if labels.get(SKIP) == "true":
                    continue
                if available <= 0 and not node["spec"].get("unschedulable"):
                    continue  # a cordoned node goes on with no slot free (upgrade_inplace.go:87-97)
                self._set_state(node, "cordon-required")
                available -= 1
            elif state == "cordon-required":
                self._cordon(name, True)
                self._set_state(node, "wait-for-jobs-required")
            elif state == "wait-for-jobs-required":
                self._set_state(node, "pod-deletion-required")
            elif state == "pod-deletion-required":
                for p in self.pods_on(name):
                    limits = [c.get("resources", {}).get("limits", {}) for c in p["spec"].get("containers", [])]
                    if any("nvidia.com/gpu" in lim for lim in limits):
                        self._delete_pod(p)
                self._set_state(node, "pod-restart-required")
                self.event(node, "GPUDriverUpgrade", "Deleted workload pods on the node for the driver upgrade")
            elif state == "drain-required":
                for p in self.pods_on(name):
                    if not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences", [])):
                        self._delete_pod(p)
                self._set_state(node, "pod-restart-required")
            elif state == "pod-restart-required":
                if pod is None:
                    continue  # terminating; the DaemonSet controller brings the new one
                if not synced:
                    self._delete_pod(pod)
                elif ready(pod):
                    self._set_state(node, "validation-required")
                elif any(
                    c.get("restartCount", 0) > 10 and not c.get("ready")
                    for c in pod["status"].get("containerStatuses", [])
                ):
                    self._set_state(node, "upgrade-failed")
            elif state == "validation-required":
                validators = self.pods_on(name, VALIDATOR_DS)
                if validators and all(ready(v) for v in validators):
                    self._uncordon_or_done(node)
            elif state == "uncordon-required":
                self._cordon(name, False)
                self._set_state(node, "upgrade-done")
            elif state == "upgrade-failed" and pod is not None and synced and ready(pod):
                self._uncordon_or_done(node)  # common_manager.go:528-570, the same initial-state rule

    def _uncordon_or_done(self, node: KubeObject) -> None:
        """updateNodeToUncordonOrDoneState (common_manager.go:670-707): a node that was cordoned
        when its upgrade began goes straight to upgrade-done, still cordoned, and the annotation
        that remembered it is removed; any other goes to uncordon-required."""
        if INITIAL_STATE in (node["metadata"].get("annotations") or {}):
            self._set_state(node, "upgrade-done")
            self._annotate(node["metadata"]["name"], INITIAL_STATE, None)
        else:
            self._set_state(node, "uncordon-required")

    def _annotate(self, node: str, key: str, value: str | None) -> None:
        self.store.patch("nodes", node, "", {"metadata": {"annotations": {key: value}}}, strategic=True)

    def _delete_pod(self, pod: KubeObject) -> None:
        """The controller deletes ``pod``: its deletionTimestamp is set, and the kubelet pass removes it."""
        meta = pod["metadata"]
        self.store.patch(
            "pods", meta["name"], meta["namespace"], {"metadata": {"deletionTimestamp": now_iso()}}, strategic=True
        )

    @staticmethod
    def _scaled(value: Any, total: int) -> int:
        # intstr.GetScaledValueFromIntOrPercent(..., roundUp=true)
        if isinstance(value, str) and value.endswith("%"):
            return -(-int(value[:-1]) * total // 100)
        return int(value)
