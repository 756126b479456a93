"""What the NVIDIA GPU Operator's objects say about a node, in the cockpit's words (pure).

The facts, from the operator's own sources (NVIDIA/k8s-operator-libs at 11e747a5,
NVIDIA/gpu-operator at a22dbf67):

- The driver upgrade controller keeps each node's state in the label
  ``nvidia.com/<driver>-driver-upgrade-state`` (pkg/upgrade/consts.go:21) with the driver
  name ``gpu`` (gpu-operator cmd/gpu-operator/main.go:176), and leaves alone a node
  labelled ``nvidia.com/gpu-driver-upgrade.skip=true`` (consts.go:23;
  common_manager.go:665-668 compares with ``"true"``; upgrade_inplace.go:82).
- Its states, in order: ``upgrade-required``, ``cordon-required``,
  ``wait-for-jobs-required``, ``pod-deletion-required``, ``drain-required``,
  ``pod-restart-required``, ``validation-required``, ``uncordon-required``,
  ``upgrade-done``, and ``upgrade-failed`` (consts.go:48-82); with a maintenance operator
  also ``node-maintenance-required`` and ``post-maintenance-required``.
- Validation waits for the pods ``app=nvidia-operator-validator`` on the node to be
  Running with every container Ready (main.go:192; validation_manager.go:71-136).
- The driver runs as the DaemonSet ``nvidia-driver-daemonset`` (pods ``app=`` that name,
  controllers/upgrade_controller.go:67-70) with ``updateStrategy: OnDelete``
  (assets/state-driver/0500_daemonset.yaml:16-17).
- The ClusterPolicy (``clusterpolicies.nvidia.com/v1``, cluster-scoped,
  api/nvidia/v1/clusterpolicy_types.go:2026) holds ``spec.driver.version`` and
  ``spec.driver.upgradePolicy`` (``autoUpgrade``, ``maxParallelUpgrades``: 0 is no limit,
  ``maxUnavailable``: a number or a percentage, ``drain``, ``podDeletion``,
  ``waitForCompletion``; k8s-operator-libs api/upgrade/v1alpha1/upgrade_spec.go:27-49).
- GPU Feature Discovery labels the driver version (``nvidia.com/cuda.driver-version.full``,
  or ``nvidia.com/cuda.driver.major/minor/rev`` from older releases).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cockpit.fleet.backends.base import BackendName, Observation, ObservedStage

STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
GPU_RESOURCE = "nvidia.com/gpu"
DRIVER_APP = "nvidia-driver-daemonset"
#: the label every driver DaemonSet and pod carries whatever it is named
#: (gpu-operator assets/state-driver/0500_daemonset.yaml:4-7), which the upgrade controller selects
#: by for NVIDIADriver resources (controllers/upgrade_controller.go:232; for the ClusterPolicy it
#: selects app=nvidia-driver-daemonset, or the driver toolkit's label on OpenShift, :131-141): a
#: precompiled driver's DaemonSet is named per kernel and OS (controllers/object_controls.go:3222-3235),
#: an OpenShift one per RHCOS version with its ``app`` label renamed too (:3282-3296)
DRIVER_COMPONENT = ("app.kubernetes.io/component", "nvidia-driver")
#: the operator's label routing a node to one NVIDIADriver (gpu-operator internal/consts/consts.go:71)
DRIVER_OWNER_LABEL = "nvidia.com/gpu-operator.driver.owner"
VALIDATOR_APP = "nvidia-operator-validator"
#: the annotation that says which change asked (the cockpit's own, on the nodes it labels)
CHANGE_ANNOTATION = "cockpit.nvidia.com/change"
#: the controller keeps a node carrying it cordoned at upgrade-done (k8s-operator-libs
#: pkg/upgrade/consts.go:31-33, common_manager.go:670-707)
INITIAL_STATE_ANNOTATION = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"

#: the controller's states in the cockpit's words; one it does not list is UNKNOWN
STATE_STAGES: dict[str, ObservedStage] = {
    "upgrade-required": ObservedStage.IN_SERVICE,  # queued; nothing done to the node yet
    "cordon-required": ObservedStage.DRAINING,
    "wait-for-jobs-required": ObservedStage.DRAINING,
    "pod-deletion-required": ObservedStage.DRAINING,
    "drain-required": ObservedStage.DRAINING,
    "node-maintenance-required": ObservedStage.DRAINING,
    "post-maintenance-required": ObservedStage.UPGRADING,
    "pod-restart-required": ObservedStage.UPGRADING,
    "validation-required": ObservedStage.VALIDATING,
    "uncordon-required": ObservedStage.VALIDATING,
    "upgrade-done": ObservedStage.DONE,
    "upgrade-failed": ObservedStage.FAILED,
}
NO_STATE = "(no upgrade state)"
#: states the controller does not count as in progress (common_manager.go:733-739)
IDLE_STATES = frozenset({"", "upgrade-done", "upgrade-required"})

KubeObject = Mapping[str, Any]


def labels(node: KubeObject) -> Mapping[str, str]:
    found: Mapping[str, str] = node.get("metadata", {}).get("labels") or {}
    return found


def node_annotations(obj: KubeObject) -> Mapping[str, str]:
    found: Mapping[str, str] = obj.get("metadata", {}).get("annotations") or {}
    return found


def node_name(obj: KubeObject) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def node_ready(node: KubeObject) -> bool:
    for cond in node.get("status", {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def unschedulable(node: KubeObject) -> bool:
    return bool(node.get("spec", {}).get("unschedulable"))


def kubectl_status(node: KubeObject) -> str:
    """The STATUS column of ``kubectl get nodes``: Ready or NotReady, then SchedulingDisabled."""
    words = ["Ready" if node_ready(node) else "NotReady"]
    if unschedulable(node):
        words.append("SchedulingDisabled")
    return ",".join(words)


def allocatable_gpus(node: KubeObject) -> int | None:
    raw = node.get("status", {}).get("allocatable", {}).get(GPU_RESOURCE)
    try:
        return int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None


def driver_version(node: KubeObject) -> str | None:
    lab = labels(node)
    full = lab.get("nvidia.com/cuda.driver-version.full")
    if full:
        return full
    parts = [lab.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
    if parts[0] and parts[1]:
        return ".".join(p for p in parts if p)
    return None


def pod_ready(pod: KubeObject) -> bool:
    """Running, with at least one container and every container Ready (validation_manager.go:118-136)."""
    status = pod.get("status", {})
    containers = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(containers) and all(c.get("ready") for c in containers)


def driver_failing(pod: KubeObject) -> bool:
    """A container not Ready after more than 10 restarts: the upgrade controller's own
    ``isDriverPodFailing`` (common_manager.go:636-648), which moves a node to upgrade-failed."""
    status = pod.get("status", {})
    containers = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return any(not c.get("ready") and int(c.get("restartCount", 0)) > 10 for c in containers)


def driver_images(pod: KubeObject) -> list[str]:
    return [str(c.get("image", "")) for c in pod.get("spec", {}).get("containers") or []]


def is_driver(obj: KubeObject) -> bool:
    """A driver DaemonSet or pod: the component label, or the default name's ``app`` label (older operators)."""
    lab: Mapping[str, str] = obj.get("metadata", {}).get("labels") or {}
    key, value = DRIVER_COMPONENT
    return lab.get(key) == value or lab.get("app") == DRIVER_APP


def image_at(image: str, version: str) -> bool:
    """Whether a driver image runs ``version``: ``repo/driver@sha256:...`` for a digest (no OS tag
    then), else a tag that is the version or starts with it and ``-`` (``-ubuntu22.04``,
    ``-<kernel>`` for a precompiled driver, ``-rhcos4.17``); gpu-operator
    api/nvidia/v1/clusterpolicy_types.go:2054-2076, controllers/object_controls.go:3375-3428."""
    if version.startswith("sha256:"):
        return image.endswith("@" + version)
    if "@" in image:
        return False
    tail = image.rsplit("/", 1)[-1]
    if ":" not in tail:
        return False
    tag = tail.split(":", 1)[1]
    return tag == version or tag.startswith(version + "-")


def pod_app(pod: KubeObject) -> str:
    return str((pod.get("metadata", {}).get("labels") or {}).get("app", ""))


def terminating(pod: KubeObject) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


def owned_by_daemonset(pod: KubeObject) -> bool:
    return any(o.get("kind") == "DaemonSet" for o in pod.get("metadata", {}).get("ownerReferences") or [])


def pod_summary(pod: KubeObject) -> str:
    """``name phase ready restarts=N`` the way a person reads ``kubectl get pod``."""
    status = pod.get("status", {})
    containers = status.get("containerStatuses") or []
    ready = sum(1 for c in containers if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in containers)
    phase = "Terminating" if terminating(pod) else str(status.get("phase", "Unknown"))
    waiting = [c.get("state", {}).get("waiting", {}).get("reason") for c in containers]
    reason = next((w for w in waiting if w), None)
    return f"{pod.get('metadata', {}).get('name', '?')} {reason or phase} {ready}/{len(containers)} restarts={restarts}"


def event_line(event: KubeObject) -> str:
    """``Warning BackOff pod/name: message`` (one line, as ``kubectl get events`` reads)."""
    inv = event.get("involvedObject", {})
    message = " ".join(str(event.get("message", "")).split())
    what = f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}"
    return f"{event.get('type', 'Normal')} {event.get('reason', '')} {what}: {message}"


def event_key(event: KubeObject) -> str:
    meta = event.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}/{event.get('count', 1)}"


def observe_node(
    node: KubeObject,
    *,
    driver_pod: KubeObject | None,
    validators: Sequence[KubeObject],
    baseline_gpus: int | None,
    released: bool,
    operator_managed: bool,
    reason: str | None = None,
    events: Sequence[str] = (),
    target_version: str | None = None,
) -> Observation:
    """One observation of a node from its object, its driver and validator pods and its events.

    Before the cockpit released a node, ``upgrade-done`` reads as in service; after, it is
    DONE only when the validator pods are Ready and the allocatable GPUs are back to the
    baseline (VALIDATING until then). Without the state label (cockpit-managed mode, the
    operator removes the labels when autoUpgrade is off) the stage comes from the node's
    schedulability and its driver pod. With a ``target_version``, a node whose driver pod
    does not run it yet is not through whatever the label says (the controller may not
    have noticed the new version yet: its ``upgrade-done`` is the old driver's).
    """
    lab = labels(node)
    state = lab.get(STATE_LABEL)
    gpus = allocatable_gpus(node)
    validators_ready = bool(validators) and all(pod_ready(v) for v in validators)
    evidence: dict[str, str] = {
        "kubectl-status": kubectl_status(node),
        "allocatable-gpus": "" if gpus is None else str(gpus),
    }
    if state is not None:
        evidence["upgrade-state"] = state
    if SKIP_LABEL in lab:
        evidence["skip"] = lab[SKIP_LABEL]
    if baseline_gpus is not None:
        evidence["baseline-gpus"] = str(baseline_gpus)
    at_target = True
    if driver_pod is not None:
        evidence["driver-pod"] = pod_summary(driver_pod)
        images = driver_images(driver_pod)
        evidence["driver-image"] = ", ".join(images)
        at_target = target_version is None or any(image_at(i, target_version) for i in images)
    evidence["validator"] = ", ".join(pod_summary(v) for v in validators) if validators else "none on the node"
    if events:
        evidence["events"] = " | ".join(events[-3:])
    gpus_back = gpus is not None and (baseline_gpus is None or gpus == baseline_gpus)
    if operator_managed and state is not None:
        native = state
        stage = STATE_STAGES.get(state, ObservedStage.UNKNOWN)
        if stage is ObservedStage.DONE and (not released or not at_target):
            stage = ObservedStage.IN_SERVICE
        elif stage is ObservedStage.DONE and not (validators_ready and gpus_back):
            stage = ObservedStage.VALIDATING
    else:
        driver_word = pod_summary(driver_pod).split(" ", 1)[1] if driver_pod is not None else "no driver pod"
        native = f"{kubectl_status(node)} driver:{driver_word}"
        if operator_managed:
            native = f"{NO_STATE} {native}"
        stage = _cockpit_stage(
            node, driver_pod, validators_ready=validators_ready, gpus_back=gpus_back, released=released and at_target
        )
    if not node_ready(node) and stage is not ObservedStage.FAILED:
        stage = ObservedStage.DOWN
    return Observation(
        backend=BackendName.KUBERNETES,
        node=node_name(node),
        native_state=native,
        stage=stage,
        driver_version=driver_version(node),
        reason=reason,
        evidence=evidence,
    )


def _cockpit_stage(
    node: KubeObject, driver_pod: KubeObject | None, *, validators_ready: bool, gpus_back: bool, released: bool
) -> ObservedStage:
    if driver_pod is None or terminating(driver_pod):
        return ObservedStage.UPGRADING
    if not pod_ready(driver_pod):
        if driver_failing(driver_pod):
            return ObservedStage.FAILED
        return ObservedStage.UPGRADING
    if not (validators_ready and gpus_back):
        return ObservedStage.VALIDATING
    if unschedulable(node):
        return ObservedStage.DRAINED
    return ObservedStage.DONE if released else ObservedStage.IN_SERVICE
