"""The Kubernetes backend: the NVIDIA GPU Operator changes containerised drivers, the cockpit keeps the window.

Two modes (docs/backends.md, "Kubernetes (NVIDIA GPU Operator)"):

- **operator-managed** (``autoUpgrade`` on): the operator's driver upgrade controller
  does each node's work, steered, never taken over (:mod:`.kubernetes_steer`). For a wave
  the cockpit labels every GPU node outside it with ``nvidia.com/gpu-driver-upgrade.skip=true``
  *first*, cordons the wave's nodes with the controller's initial-state annotation (so the
  controller leaves them cordoned at ``upgrade-done``), lifts their skip label, sets
  ``spec.driver.version`` on the ClusterPolicy (nothing else of it: a cordoned node needs no
  upgrade slot), and follows the state label until each node is ``upgrade-done`` with its
  validator pods Ready and its allocatable ``nvidia.com/gpu`` back to the baseline, or
  ``upgrade-failed``. ``smoke`` runs the runbook's smoke command in a pod on the node and
  ``resume`` uncordons it after. Every change is recorded on the ClusterPolicy before it is
  made and put back by :meth:`KubernetesBackend.end_window`, also from a new process.
- **cockpit-managed** (``autoUpgrade`` off, the driver DaemonSet ``OnDelete``): the cockpit
  cordons the node, evicts its pods (not DaemonSet pods), deletes its driver pod, waits
  for the new driver pod and the validator to be Ready and the GPUs back, and uncordons.

Host-installed drivers are outside the operator's reach; use the SSH backend for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, ClassVar

from cockpit.fleet.backends import base
from cockpit.fleet.backends import kubernetes_states as ks
from cockpit.fleet.backends import kubernetes_steer as steer
from cockpit.fleet.backends.kubernetes_api import KubeApi, KubeApiError
from cockpit.fleet.backends.kubernetes_watch import WaveTracker

JsonObject = dict[str, Any]
FINAL = {base.ObservedStage.DONE, base.ObservedStage.FAILED}


class KubernetesMode(StrEnum):
    OPERATOR = "operator-managed"
    COCKPIT = "cockpit-managed"


class KubernetesBackend(base.Backend):
    name: ClassVar[base.BackendName] = base.BackendName.KUBERNETES
    actions: ClassVar[frozenset[base.BackendAction]] = frozenset(
        {
            base.BackendAction.DRAIN,
            base.BackendAction.UPGRADE,
            base.BackendAction.RESUME,
            base.BackendAction.SMOKE,
            base.BackendAction.ROLLBACK,
        }
    )
    reports_state: ClassVar[bool] = True

    def __init__(
        self,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        mode: KubernetesMode = KubernetesMode.OPERATOR,
        namespace: str = "gpu-operator",
        cluster_policy: str | None = None,
        node_selector: str = "nvidia.com/gpu.present=true",
        poll_interval_s: float = 1.0,
        request_timeout_s: float = 10.0,
        smoke_namespace: str = "default",
    ) -> None:
        self.kubeconfig, self.context, self.mode = kubeconfig, context, KubernetesMode(mode)
        self.namespace, self.cluster_policy_name, self.node_selector = namespace, cluster_policy, node_selector
        self.poll_interval_s, self.request_timeout_s = poll_interval_s, request_timeout_s
        #: allocatable nvidia.com/gpu of each node when the cockpit first saw it, before any change
        self.baselines: dict[str, int | None] = {}
        self._api: KubeApi | None = None
        #: the nodes released and not yet ended, across concurrent calls (the executor releases a
        #: wave node by node): only these are kept free of the skip label
        self.released: set[str] = set()
        self._setup = asyncio.Lock()
        self.cancelled: set[str] = set()
        self.smoke_namespace = smoke_namespace
        #: what the cockpit changed on the cluster, kept on the ClusterPolicy (operator-managed)
        self.recorder: steer.Recorder | None = None
        #: one line each: what the cockpit was told before its first change (a Helm-rendered policy)
        self.warnings: list[str] = []
        self._told: set[str] = set()

    async def api(self) -> KubeApi:
        if self._api is None:
            self._api = await KubeApi.connect(
                kubeconfig=self.kubeconfig, context=self.context, request_timeout_s=self.request_timeout_s
            )
        return self._api

    async def close(self) -> None:
        if self._api is not None:
            await self._api.close()
            self._api = None

    # ---- what the cluster shows ------------------------------------------------------
    async def _nodes(self) -> dict[str, JsonObject]:
        doc = await (await self.api()).list_nodes(self.node_selector)
        nodes = {ks.node_name(n): n for n in doc.get("items") or []}
        for name, node in nodes.items():
            self.baselines.setdefault(name, ks.allocatable_gpus(node))
        return nodes

    async def _operator_pods(self) -> dict[str, list[JsonObject]]:
        """The driver and validator pods of the operator's namespace by node (a driver pod found
        by its component label: its DaemonSet may be named per kernel or RHCOS version)."""
        api = await self.api()
        by_node: dict[str, list[JsonObject]] = {}
        for pod in await api.list_pods(namespace=self.namespace):
            if ks.is_driver(pod) or ks.pod_app(pod) == ks.VALIDATOR_APP:
                by_node.setdefault(str(pod.get("spec", {}).get("nodeName", "")), []).append(pod)
        return by_node

    def _observe(self, node: JsonObject, pods: Sequence[JsonObject], *, released: bool) -> base.Observation:
        live = [p for p in pods if not ks.terminating(p)]
        driver = [p for p in live if ks.is_driver(p)]
        return ks.observe_node(
            node,
            driver_pod=driver[0] if driver else None,
            validators=[p for p in live if ks.pod_app(p) == ks.VALIDATOR_APP],
            baseline_gpus=self.baselines.get(ks.node_name(node)),
            released=released,
            operator_managed=self.mode is KubernetesMode.OPERATOR,
        )

    async def discover(self) -> list[base.Observation]:
        nodes, pods = await self._nodes(), await self._operator_pods()
        return [self._observe(n, pods.get(name, []), released=False) for name, n in sorted(nodes.items())]

    async def observe(self, nodes: Sequence[str]) -> list[base.Observation]:
        known, pods = await self._nodes(), await self._operator_pods()
        out = []
        for name in nodes:
            if name in known:
                out.append(self._observe(known[name], pods.get(name, []), released=False))
            else:
                out.append(_unknown(name, "not a node of the cluster (or not selected by the node selector)"))
        return out

    # ---- releasing a wave --------------------------------------------------------------
    async def release(
        self, request: base.ReleaseRequest, on_observation: base.ObservationCallback | None = None
    ) -> list[base.ReleaseResult]:
        action, nodes = request.action, request.nodes
        if action not in self.actions:
            raise base.BackendError(f"the Kubernetes backend cannot {action}: Kubernetes has no reboot of its own")
        self.cancelled -= set(nodes)
        all_nodes = await self._nodes()
        wave = [n for n in dict.fromkeys(nodes) if n in all_nodes]
        missing = [n for n in nodes if n not in all_nodes]
        results = [
            base.ReleaseResult(
                node=n,
                action=action,
                ok=False,
                final=_unknown(n, "not a node of the cluster"),
                error="not a node of the cluster",
            )
            for n in missing
        ]
        if not wave:
            return results
        if action is base.BackendAction.SMOKE:
            from cockpit.fleet.backends.kubernetes_smoke import smoke

            return results + [await smoke(self, request, name, on_observation) for name in wave]
        if self.mode is KubernetesMode.OPERATOR:
            if action is base.BackendAction.UPGRADE:
                return results + await self._operator_upgrade(request, wave, on_observation)
            if action is base.BackendAction.ROLLBACK:
                return results + await self._operator_upgrade(request, wave, on_observation, rollback=True)
            if action is base.BackendAction.RESUME:
                from cockpit.fleet.backends.kubernetes_smoke import resume

                return results + [await resume(self, request, name, on_observation) for name in wave]
            return results + request.refused(
                f"in operator-managed mode the GPU Operator drains the node itself; {action} is not the cockpit's",
                wave,
            )
        from cockpit.fleet.backends.kubernetes_cockpit import cockpit_release

        return results + await cockpit_release(self, request, wave, all_nodes, on_observation)

    async def policy(self) -> JsonObject:
        """The ClusterPolicy, refused in one line when it does not manage the driver this backend changes."""
        policy = await (await self.api()).cluster_policy(self.cluster_policy_name)
        driver = policy.get("spec", {}).get("driver", {})
        name = policy.get("metadata", {}).get("name", "?")
        if driver.get("enabled") is False:
            # spec.driver.enabled (clusterpolicy_types.go:591-595): off where the driver is host-installed
            raise base.BackendError(
                f"ClusterPolicy {name} has spec.driver.enabled false: the driver is host-installed, outside "
                "the operator's scope; change it over SSH (--backend ssh)"
            )
        return policy

    async def _held_nodes(self) -> dict[str, JsonObject]:
        """Every node the upgrade controller could act on: the GPU nodes the selector finds and
        any node a driver pod runs on or the controller has labelled, whatever its labels say."""
        api = await self.api()
        selected = await self._nodes()
        driven = {name for name, pods in (await self._operator_pods()).items() if any(ks.is_driver(p) for p in pods)}
        everyone = await api.list_nodes()
        for node in everyone.get("items") or []:
            name = ks.node_name(node)
            if name not in selected and (name in driven or ks.STATE_LABEL in ks.labels(node)):
                selected[name] = node
                self.baselines.setdefault(name, ks.allocatable_gpus(node))
        return selected

    async def _operator_upgrade(
        self,
        request: base.ReleaseRequest,
        wave: list[str],
        on_observation: base.ObservationCallback | None,
        *,
        rollback: bool = False,
    ) -> list[base.ReleaseResult]:
        """Release ``wave`` to the controller at the target version, or (``rollback``) at the
        version recorded before the window: the ClusterPolicy pinned back to it, a failed node's
        driver pod of the failed version deleted so the controller walks it through again."""
        api = await self.api()
        target = request.context.get("target_version") or request.context.get("driver_version")
        async with self._setup:  # one call at a time moves labels and the policy
            policy = await self.policy()
            name = str(policy["metadata"]["name"])
            await self._check_owner(policy)
            await api.driver_daemonsets(self.namespace)  # the operator's driver is there, or one line why not
            recorder = await self._recorder(name, request)
            self.released |= set(wave)
            all_nodes = await self._held_nodes()  # as they are now: another call may have just labelled them
            pools: dict[str, JsonObject] = {}
            try:
                if (policy.get("spec", {}).get("driver") or {}).get("useNvidiaDriverCRD"):
                    pools = await self._pools_of(wave, all_nodes)
                    # only the pools whose version the window changes can move: the others keep their labels
                    changing = set(pools) | set(recorder.record.drivers)
                    all_nodes = {
                        n: d for n, d in all_nodes.items() if ks.labels(d).get(ks.DRIVER_OWNER_LABEL) in changing
                    }
                target = steer.recorded_version(recorder.record, name, pools) if rollback else target
            except base.BackendError as e:
                self.released -= set(wave)
                return request.refused(str(e), wave)
            if self.warnings and on_observation is not None and self.warnings[-1] not in self._told:
                # the one-line warning reaches the change log before the first change the cockpit makes
                self._told.add(self.warnings[-1])
                pods = await self._operator_pods()
                for n in wave:
                    if n in all_nodes:
                        seen = self._observe(all_nodes[n], pods.get(n, []), released=False)
                        on_observation(seen.model_copy(update={"reason": self.warnings[-1]}))
            await recorder.nodes(all_nodes, (ks.SKIP_LABEL,), (ks.CHANGE_ANNOTATION, ks.INITIAL_STATE_ANNOTATION))
            await self._hold_back_all_but(self.released, all_nodes, request.reason)
            values: dict[str, Any] = {"upgradePolicy.autoUpgrade": True}
            if target:
                values["version"] = target
            if pools:
                for pool, nvd in sorted(pools.items()):
                    spec = await recorder.driver_fields(nvd, values)
                    if spec:
                        await api.patch_nvidia_driver(pool, spec)
            else:
                patch = await recorder.policy_fields(policy, values)
                if patch:
                    await api.patch_cluster_policy(name, patch)
            if rollback and target:
                await self._restart_failed(wave, {p: target for p in pools} if pools else {None: target})
        tracker = WaveTracker(
            operator_managed=True, baselines=self.baselines, callback=on_observation, target_version=target
        )
        started = time.monotonic()
        until = None
        if rollback:
            # the node starts upgrade-failed: only a failure of a driver pod at the recorded version ends it
            def until(n: str) -> bool:
                o = tracker.last(n)
                view = tracker.views.get(n)
                pod = view.driver_pod if view is not None else None
                at = (
                    pod is not None and bool(target) and any(ks.image_at(i, str(target)) for i in ks.driver_images(pod))
                )
                failing = at and pod is not None and ks.driver_failing(pod)
                return o is not None and (o.stage is base.ObservedStage.DONE or (o.stage in FINAL and failing))

        try:
            await self.follow(tracker, wave, request.timeout_s, until=until)
        finally:
            self.released -= set(wave)
        extra = {"cluster-policy": name, **({"target-version": target} if target else {})}
        if pools:
            extra["nvidia-drivers"] = ", ".join(sorted(pools))
        if self.warnings:
            extra["policy-owner"] = self.warnings[-1]
        return [tracker.result(n, request, started, extra, cancelled=n in self.cancelled) for n in wave]

    async def _pools_of(self, wave: Sequence[str], nodes: Mapping[str, JsonObject]) -> dict[str, JsonObject]:
        """The NVIDIADriver resources the wave's nodes are routed to (the operator's owner label,
        gpu-operator internal/consts/consts.go:71), each checked for who keeps it."""
        drivers = await (await self.api()).nvidia_drivers()
        pools: dict[str, JsonObject] = {}
        for name in wave:
            owner = ks.labels(nodes.get(name, {})).get(ks.DRIVER_OWNER_LABEL, "")
            if owner not in drivers:
                raise base.BackendError(
                    f"node {name} is routed to no NVIDIADriver ({ks.DRIVER_OWNER_LABEL}={owner or '(none)'}): "
                    "the operator would not change its driver"
                )
            pools[owner] = drivers[owner]
        for nvd in pools.values():
            await self._check_owner(nvd)
        return pools

    async def _restart_failed(self, wave: Sequence[str], versions: Mapping[str | None, str]) -> None:
        """Once the DaemonSet's template is at ``version`` again, delete the driver pod of each
        ``upgrade-failed`` node of the wave that runs another version: the controller leaves
        upgrade-failed only for a pod in sync (common_manager.go:528-570) and, OnDelete, nothing
        else replaces it; deleting it is the controller's own SchedulePodsRestart (pod_manager.go:233-251)."""
        api = await self.api()
        templates = await steer.template_images(api, self.namespace, versions, 60.0, self.poll_interval_s)
        pods = await self._operator_pods()
        for name in wave:
            node = await api.get_node(name)
            if ks.labels(node).get(ks.STATE_LABEL) != "upgrade-failed":
                continue
            for pod in pods.get(name, []):
                if ks.is_driver(pod) and not ks.terminating(pod) and steer.in_sync(pod, templates) is False:
                    await api.delete_pod(str(pod["metadata"]["namespace"]), str(pod["metadata"]["name"]))

    async def _check_owner(self, policy: JsonObject) -> None:
        """Refuse a ClusterPolicy (or NVIDIADriver) a GitOps controller keeps; warn, once, for one Helm renders."""
        line = steer.owner_warning(policy)
        if line is not None and line not in self.warnings:
            self.warnings.append(line)

    async def _recorder(self, policy_name: str, request: base.ReleaseRequest) -> steer.Recorder:
        """The window's record of its changes: the one on the ClusterPolicy when there is one (a
        window resumed in a new process), refused when another change left it there."""
        if self.recorder is None:
            change = request.context.get("change_id") or request.reason
            recorder = steer.Recorder(await self.api(), policy_name, change)
            found = await recorder.load()
            if found.change != change:
                raise base.BackendError(
                    f"ClusterPolicy {policy_name} holds the restore record of change {found.change!r}: that "
                    "window has not put its changes back yet (resume it, or restore it first)"
                )
            self.recorder = recorder
        return self.recorder

    async def end_window(self, *, through: bool) -> list[str]:
        """Put back everything the record on the ClusterPolicy names (:func:`.kubernetes_steer.restore`),
        from this process or a new one after a crash; ``through``: every node reached the target,
        which is then kept. In cockpit-managed mode the cockpit records nothing there."""
        api = await self.api()
        policy = await api.cluster_policy(self.cluster_policy_name)
        said = await steer.restore(
            api,
            str(policy["metadata"]["name"]),
            self.namespace,
            keep_version=through,
            poll_s=self.poll_interval_s,
        )
        self.recorder = None
        return said

    async def _hold_back_all_but(self, free: set[str], all_nodes: Mapping[str, JsonObject], reason: str) -> None:
        """The skip label on every node outside ``free`` *first*; then each of ``free``'s nodes
        cordoned with the initial-state annotation, and only then its skip label lifted; the
        ClusterPolicy changes only after, so a controller reconciling in between finds only the
        released nodes free to move, each of them cordoned."""
        api = await self.api()
        note = {"metadata": {"annotations": {ks.CHANGE_ANNOTATION: reason[:250]}}}
        for name in sorted(all_nodes):
            if name not in free and ks.labels(all_nodes[name]).get(ks.SKIP_LABEL) != "true":
                await api.patch_node(name, _merge(note, {"metadata": {"labels": {ks.SKIP_LABEL: "true"}}}))
        for name in sorted(free & set(all_nodes)):
            node = all_nodes[name]
            if not ks.unschedulable(node) or ks.INITIAL_STATE_ANNOTATION not in ks.node_annotations(node):
                hold = {
                    "metadata": {"annotations": {ks.INITIAL_STATE_ANNOTATION: "true"}},
                    "spec": {"unschedulable": True},
                }
                await api.patch_node(name, _merge(note, hold))
            if ks.SKIP_LABEL in ks.labels(node):
                await api.patch_node(name, _merge(note, {"metadata": {"labels": {ks.SKIP_LABEL: None}}}))

    async def follow(self, tracker: WaveTracker, wave: Sequence[str], timeout_s: float, *, until: Any = None) -> None:
        """Watch the wave's nodes and poll their pods and events until each is final (or ``until`` says so)."""
        api = await self.api()
        done = until or (lambda name: (o := tracker.last(name)) is not None and o.stage in FINAL)
        listed = await api.list_nodes(self.node_selector)
        for node in listed.get("items") or []:
            if ks.node_name(node) in wave:
                tracker.node(node)
        watcher = asyncio.get_running_loop().create_task(
            self._watch(api, tracker, set(wave), str(listed.get("metadata", {}).get("resourceVersion", "")))
        )
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                await self.refresh(tracker, wave)
                finished = [n for n in wave if done(n) or n in self.cancelled]
                if len(finished) == len(wave):
                    # confirm on a fresh read: a watch may lag, and "through" is judged on the node as it is now
                    for name in wave:
                        tracker.node(await api.get_node(name))
                    await self.refresh(tracker, wave)  # and the pods and events as they are with it
                    if all(done(n) or n in self.cancelled for n in wave):
                        return
                if time.monotonic() >= deadline:
                    return
                await asyncio.sleep(self.poll_interval_s)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, base.BackendError):
                await watcher

    async def refresh(self, tracker: WaveTracker, wave: Sequence[str]) -> None:
        api = await self.api()
        pods = await self._operator_pods()
        for name in wave:
            tracker.pods(name, pods.get(name, []))
            events = await api.list_events(kind="Node", name=name)
            view = tracker.views[name]
            if view.driver_pod is not None:
                events += await api.list_events(kind="Pod", name=str(view.driver_pod["metadata"]["name"]))
            tracker.events(name, events)

    async def _watch(self, api: KubeApi, tracker: WaveTracker, wave: set[str], version: str) -> None:
        while True:
            try:
                async for _kind, node in api.watch_nodes(version, timeout_s=60):
                    if not ks.node_name(node):
                        continue
                    version = str(node.get("metadata", {}).get("resourceVersion", version))
                    if ks.node_name(node) in wave:
                        tracker.node(node)
                await asyncio.sleep(self.poll_interval_s)  # the server ended the watch: go on after a breath
            except KubeApiError as e:
                if e.status != 410:
                    raise
                listed = await api.list_nodes(self.node_selector)  # too old: list again, watch from there
                version = str(listed.get("metadata", {}).get("resourceVersion", ""))
                for node in listed.get("items") or []:
                    if ks.node_name(node) in wave:
                        tracker.node(node)

    async def cancel(self, nodes: Sequence[str]) -> None:
        """Hold the nodes back: skip label on (a node the controller already took finishes its
        current upgrade; the operator has no abort), and stop waiting for them."""
        self.cancelled |= set(nodes)
        if self.mode is KubernetesMode.OPERATOR:
            api = await self.api()
            for name in nodes:
                await api.patch_node(name, {"metadata": {"labels": {ks.SKIP_LABEL: "true"}}})
            self.released -= set(nodes)


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        out[key] = (
            _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else value
        )
    return out


def _unknown(name: str, why: str) -> base.Observation:
    return base.Observation(
        backend=base.BackendName.KUBERNETES,
        node=name,
        native_state="(not found)",
        stage=base.ObservedStage.UNKNOWN,
        reason=why,
    )


def make(options: Any, *, transport: Any = None, runner: Any = None) -> KubernetesBackend:
    """The registry's door (cockpit.fleet.backends.registry.make_backend): ``--backend kubernetes``
    with its settings; the cluster is reached through the kubeconfig, not SSH or a runner."""
    settings = options.kubernetes
    return KubernetesBackend(
        kubeconfig=str(settings.kubeconfig) if settings.kubeconfig else None,
        context=settings.context,
        mode=KubernetesMode.COCKPIT if settings.mode == "cockpit" else KubernetesMode.OPERATOR,
        namespace=settings.namespace,
    )
