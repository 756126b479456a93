"""Cockpit-managed mode: the cockpit does each node's steps through the API, the operator only deploys.

For it the operator must not act on its own: ``spec.driver.upgradePolicy.autoUpgrade`` off
(the upgrade controller then does nothing and removes its state labels,
gpu-operator controllers/upgrade_controller.go:120-125) and the driver DaemonSet's
``updateStrategy`` ``OnDelete`` (the operator's default, assets/state-driver/0500_daemonset.yaml:16-17),
so a driver pod changes only when someone deletes it. Then, per node, the same steps the
upgrade controller takes (NVIDIA/k8s-operator-libs pkg/upgrade): cordon
(cordon_manager.go), evict the workload pods but not DaemonSet pods (what
``kubectl drain --ignore-daemonsets`` leaves), delete the driver pod (pod_manager.go:233-251),
wait for the new one to be Ready and the validator pods with it and the allocatable GPUs back
to the baseline; the node stays cordoned through the cockpit's smoke (``smoke``), and
``resume`` uncordons it after. A new driver pod not Ready after more than 10 container
restarts is a failure, the controller's own rule (common_manager.go:636-648).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from cockpit.fleet.backends import base
from cockpit.fleet.backends import kubernetes_states as ks
from cockpit.fleet.backends.kubernetes_api import KubeApi
from cockpit.fleet.backends.kubernetes_watch import WaveTracker

JsonObject = dict[str, Any]
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # static pods: the API cannot evict them


class StepFailed(Exception):
    pass


class KubernetesBackend(Protocol):
    """What these steps use of the backend (cockpit.fleet.backends.kubernetes.KubernetesBackend)."""

    namespace: str
    poll_interval_s: float
    baselines: dict[str, int | None]
    cancelled: set[str]

    async def api(self) -> KubeApi: ...

    async def policy(self) -> JsonObject: ...


async def cockpit_release(
    backend: KubernetesBackend,
    request: base.ReleaseRequest,
    wave: list[str],
    all_nodes: Mapping[str, JsonObject],
    on_observation: base.ObservationCallback | None,
) -> list[base.ReleaseResult]:
    """``request`` for the ``wave`` (the requested nodes the cluster has), step by step through the API."""
    action = request.action
    api = await backend.api()
    policy = await backend.policy()
    policy_name = str(policy["metadata"]["name"])
    driver = policy.get("spec", {}).get("driver", {})
    if driver.get("useNvidiaDriverCRD"):
        # clusterpolicy_types.go:562-566: NVIDIADriver resources hold the version then, not this policy
        raise base.BackendError(
            f"ClusterPolicy {policy_name} hands the driver to NVIDIADriver resources (useNvidiaDriverCRD); "
            "cockpit-managed mode changes spec.driver of the ClusterPolicy: use operator-managed mode"
        )
    if (driver.get("upgradePolicy") or {}).get("autoUpgrade"):
        raise base.BackendError(
            f"ClusterPolicy {policy_name} has autoUpgrade on: the operator's upgrade controller would act on the "
            "same nodes; turn it off for cockpit-managed mode, or use operator-managed mode"
        )
    for ds in await api.driver_daemonsets(backend.namespace):
        strategy = ds.get("spec", {}).get("updateStrategy", {}).get("type")
        if strategy != "OnDelete":
            raise base.BackendError(
                f"the driver DaemonSet {backend.namespace}/{ds['metadata']['name']} updates "
                f"{strategy or 'RollingUpdate'}, not OnDelete: Kubernetes itself would restart drivers "
                "behind the window"
            )
    target = request.context.get("target_version") or request.context.get("driver_version")
    tracker = WaveTracker(
        operator_managed=False,
        baselines=backend.baselines,
        callback=on_observation,
        target_version=target if action is base.BackendAction.UPGRADE else None,
    )
    for name in wave:
        tracker.node(dict(all_nodes[name]))
    started = time.monotonic()
    deadline = started + request.timeout_s
    extra = {"cluster-policy": policy_name, **({"target-version": target} if target else {})}
    try:
        if action is base.BackendAction.UPGRADE and target:
            await _set_target(backend, policy_name, str(driver.get("version", "")), target, deadline)
    except StepFailed as e:
        return [
            tracker.result(n, request, started, extra, cancelled=n in backend.cancelled, error=str(e)) for n in wave
        ]
    # a drain or an upgrade ends with the node cordoned (DRAINED), its workloads back only at resume
    through = frozenset(
        {base.ObservedStage.DONE if action is base.BackendAction.RESUME else base.ObservedStage.DRAINED}
    )
    run = _Steps(backend, tracker, request.reason, deadline)
    outcomes = await asyncio.gather(*(run.node(action, n) for n in wave), return_exceptions=True)
    results = []
    for name, outcome in zip(wave, outcomes, strict=True):
        error = None
        if isinstance(outcome, StepFailed | base.BackendError):
            error = str(outcome)
        elif isinstance(outcome, BaseException):
            raise outcome
        results.append(
            tracker.result(
                name, request, started, extra, cancelled=name in backend.cancelled, error=error, through=through
            )
        )
    return results


async def _set_target(backend: KubernetesBackend, policy: str, current: str, target: str, deadline: float) -> None:
    """Set ``spec.driver.version`` and wait until the operator has put it in the DaemonSet's template."""
    api = await backend.api()
    if current != target:
        await api.patch_cluster_policy(policy, {"spec": {"driver": {"version": target}}})
    while True:
        images = [
            str(c.get("image", ""))
            for ds in await api.driver_daemonsets(backend.namespace)
            for c in ds.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])[:1]
        ]
        if images and all(ks.image_at(i, target) for i in images):
            return
        if time.monotonic() >= deadline:
            raise StepFailed(
                f"the operator did not put driver {target} in the DaemonSet's template (images: {', '.join(images)})"
            )
        await asyncio.sleep(backend.poll_interval_s)


class _Steps:
    def __init__(self, backend: KubernetesBackend, tracker: WaveTracker, reason: str, deadline: float) -> None:
        self.backend, self.tracker, self.reason, self.deadline = backend, tracker, reason, deadline

    async def node(self, action: base.BackendAction, name: str) -> None:
        """Drain (and for an upgrade restart the driver): the node stays cordoned for the cockpit's
        smoke; ``resume``, after it, uncordons."""
        if action in (base.BackendAction.DRAIN, base.BackendAction.UPGRADE):
            await self.drain(name)
        if action is base.BackendAction.UPGRADE:
            await self.restart_driver(name)
        if action is base.BackendAction.RESUME:
            await self.uncordon(name)

    async def look(self, name: str) -> list[JsonObject]:
        """Read the node, its pods and events into the tracker; the pods on it."""
        api = await self.backend.api()
        self.tracker.node(await api.get_node(name))
        pods = await api.list_pods(node=name)
        self.tracker.pods(name, pods)
        events = await api.list_events(kind="Node", name=name)
        driver = self.tracker.views[name].driver_pod
        if driver is not None:
            events += await api.list_events(kind="Pod", name=str(driver["metadata"]["name"]))
        self.tracker.events(name, events)
        return pods

    async def until(self, name: str, what: str, ready: Callable[[base.Observation, list[JsonObject]], bool]) -> None:
        while True:
            if name in self.backend.cancelled:
                raise StepFailed("cancelled by the operator")
            pods = await self.look(name)
            obs = self.tracker.last(name)
            assert obs is not None
            if ready(obs, pods):
                return
            if obs.stage is base.ObservedStage.FAILED:
                warnings = [e for e in self.tracker.views[name].events if e.startswith("Warning")]
                raise StepFailed(f"{obs.native_state}" + (f": {warnings[-1]}" if warnings else ""))
            if time.monotonic() >= self.deadline:
                raise StepFailed(f"timed out waiting for {what} ({obs.native_state})")
            await asyncio.sleep(self.backend.poll_interval_s)

    async def drain(self, name: str) -> None:
        api = await self.backend.api()
        await api.patch_node(
            name,
            {"metadata": {"annotations": {ks.CHANGE_ANNOTATION: self.reason[:250]}}, "spec": {"unschedulable": True}},
        )
        for pod in await self.look(name):
            if _evictable(pod) and not ks.terminating(pod):
                meta = pod["metadata"]
                await api.evict_pod(str(meta["namespace"]), str(meta["name"]))
        await self.until(name, "the node's pods to be evicted", lambda _o, pods: not [p for p in pods if _evictable(p)])

    async def restart_driver(self, name: str) -> None:
        api = await self.backend.api()
        await self.look(name)
        old = self.tracker.views[name].driver_pod
        if old is None:
            raise StepFailed("no driver pod on the node: is the driver containerised here?")
        old_uid = old["metadata"]["uid"]
        await api.delete_pod(str(old["metadata"]["namespace"]), str(old["metadata"]["name"]))

        def through(obs: base.Observation, _pods: list[JsonObject]) -> bool:
            pod = self.tracker.views[name].driver_pod
            new = pod is not None and pod["metadata"]["uid"] != old_uid
            return (
                new and obs.stage is base.ObservedStage.DRAINED
            )  # driver and validator Ready, GPUs back, still cordoned

        await self.until(name, "the new driver pod, the validator and the GPUs", through)

    async def uncordon(self, name: str) -> None:
        api = await self.backend.api()
        await api.patch_node(name, {"spec": {"unschedulable": None}})
        await self.until(name, "the node back in scheduling", lambda o, _p: o.stage is base.ObservedStage.DONE)


def _evictable(pod: JsonObject) -> bool:
    meta = pod.get("metadata", {})
    return not ks.owned_by_daemonset(pod) and MIRROR_ANNOTATION not in (meta.get("annotations") or {})
