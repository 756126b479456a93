"""Operator-managed mode, after the operator: the cockpit's own smoke on the still-cordoned node,
then the uncordon (the runbook's ``smoke`` and ``resume`` steps, :mod:`.kubernetes`).

The smoke is a pod pinned to the node (no scheduler: the node is cordoned, the pod tolerates
it) asking for all its GPUs and running the runbook's ``smoke_command`` in ``smoke_image``;
it passes when it exits 0 and prints the target driver version, and its log is the step's
evidence (:func:`.kubernetes_steer.run_smoke`). Resume uncordons only a node the cockpit
cordoned (the restore record on the ClusterPolicy says which), and only once the operator
says ``upgrade-done``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from cockpit.fleet.backends import base
from cockpit.fleet.backends import kubernetes_states as ks
from cockpit.fleet.backends import kubernetes_steer as steer
from cockpit.fleet.backends.kubernetes_api import KubeApi
from cockpit.fleet.backends.kubernetes_watch import WaveTracker

JsonObject = dict[str, Any]


class KubernetesBackend(Protocol):
    """What these steps use of the backend (cockpit.fleet.backends.kubernetes.KubernetesBackend)."""

    baselines: dict[str, int | None]
    smoke_namespace: str
    poll_interval_s: float
    cluster_policy_name: str | None
    recorder: steer.Recorder | None

    async def api(self) -> KubeApi: ...

    async def _operator_pods(self) -> dict[str, list[JsonObject]]: ...

    def _observe(self, node: JsonObject, pods: Sequence[JsonObject], *, released: bool) -> base.Observation: ...

    async def refresh(self, tracker: WaveTracker, wave: Sequence[str]) -> None: ...


async def smoke(
    backend: KubernetesBackend,
    request: base.ReleaseRequest,
    name: str,
    on_observation: base.ObservationCallback | None,
) -> base.ReleaseResult:
    """The runbook's smoke command in a pod on the node, asking for all its GPUs; its log is the evidence."""
    image, command = request.context.get("smoke_image"), request.context.get("smoke_command")
    if not image or not command:
        (refused,) = request.refused("the runbook gives no smoke_image and smoke_command to run", [name])
        return refused
    api = await backend.api()
    node = await api.get_node(name)
    gpus = backend.baselines.get(name) or ks.allocatable_gpus(node) or 1
    pod = steer.smoke_pod(name, image=image, command=command, gpus=gpus, reason=request.reason)
    started = time.monotonic()
    phase, log, code, why = await steer.run_smoke(
        api, backend.smoke_namespace, pod, timeout_s=request.timeout_s, poll_s=backend.poll_interval_s
    )
    target = request.context.get("target_version") or request.context.get("driver_version")
    if target and target.startswith("sha256:"):
        # a digest names no version nvidia-smi prints: the pod must see the driver the node reports
        target = ks.driver_version(node)
    error = steer.smoke_verdict(phase, log, code, why, target)
    pods = (await backend._operator_pods()).get(name, [])
    said = f"smoke pod {pod['metadata']['name']}: {phase}" + (f" ({why})" if why else "")
    final = backend._observe(await api.get_node(name), pods, released=True).model_copy(update={"reason": said})
    if on_observation is not None:
        on_observation(final)
    evidence = {
        "smoke-pod": str(pod["metadata"]["name"]),
        "smoke-image": image,
        "smoke-command": command,
        "smoke-phase": phase,
        "smoke-exit": "" if code is None else str(code),
        "smoke-log": log[-4000:],
    }
    return base.ReleaseResult(
        node=name,
        action=request.action,
        ok=error is None,
        final=final,
        error=error,
        waited_s=round(time.monotonic() - started, 3),
        timed_out=phase not in ("Succeeded", "Failed"),
        evidence=evidence,
    )


async def resume(
    backend: KubernetesBackend,
    request: base.ReleaseRequest,
    name: str,
    on_observation: base.ObservationCallback | None,
) -> base.ReleaseResult:
    """Uncordon a node the cockpit cordoned, once the operator says ``upgrade-done``; a node
    that was cordoned before the window stays so, as the operator itself leaves one."""
    api = await backend.api()
    node = await api.get_node(name)
    state = ks.labels(node).get(ks.STATE_LABEL, "")
    if state not in ("", "upgrade-done"):
        why = f"the GPU Operator has the node in {state}: it is not the cockpit's to uncordon"
        (refused,) = request.refused(why, [name])
        return refused
    if backend.recorder is None:
        policy = await api.cluster_policy(backend.cluster_policy_name)
        found = steer.read_record(policy)  # a window resumed in a new process
        if found is not None:
            backend.recorder = steer.Recorder(api, str(policy["metadata"]["name"]), found.change)
            backend.recorder.record = found
    held = backend.recorder.record.nodes.get(name) if backend.recorder is not None else None
    if held is not None and held.unschedulable is False and ks.unschedulable(node):
        await api.patch_node(name, {"spec": {"unschedulable": None}})
    tracker = WaveTracker(operator_managed=True, baselines=backend.baselines, callback=on_observation)
    started = time.monotonic()
    tracker.node(await api.get_node(name))
    await backend.refresh(tracker, [name])
    before = "not recorded" if held is None else "yes" if held.unschedulable else "no"
    return tracker.result(name, request, started, {"cordoned-before-the-window": before}, cancelled=False)
