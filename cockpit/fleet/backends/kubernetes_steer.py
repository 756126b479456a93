"""Steering the GPU Operator without taking it over: what the cockpit changes, recorded first.

The cockpit keeps a node out of scheduling from before it hands it to the operator until
its own smoke has passed: it cordons the node and sets the controller's own annotation
``nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable`` (k8s-operator-libs
pkg/upgrade/consts.go:31-33). The controller writes that annotation itself for a node
cordoned when its upgrade begins (common_manager.go:251-262) and, where it is there, goes
from validation straight to ``upgrade-done`` without uncordoning
(updateNodeToUncordonOrDoneState, common_manager.go:670-707); a cordoned node also goes
on when no upgrade slot is free (upgrade_inplace.go:87-97), so the cockpit never has to
touch ``maxParallelUpgrades`` or ``maxUnavailable``. The cockpit writes the annotation
itself because a node held back by the skip label is already ``upgrade-required`` when its
wave comes: the controller's own moment to write it has passed.

Every field and label the cockpit changes is put in a :class:`ChangeRecord` *before* the
change, kept as an annotation on the ClusterPolicy itself (:data:`RECORD_ANNOTATION`), so
a new process after a crash finds it on the cluster and :func:`restore` puts everything back.

Who else writes the ClusterPolicy is read from its metadata (:func:`policy_owner`): a GitOps
controller (Argo CD, Flux) would revert the cockpit's change behind the window, so the
cockpit refuses; a Helm release only overwrites it at its next ``helm upgrade``, so the
cockpit warns in one line and goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cockpit.fleet.backends import base
from cockpit.fleet.backends import kubernetes_states as ks
from cockpit.fleet.backends.kubernetes_api import KubeApi, KubeApiError

JsonObject = dict[str, Any]

#: where the record of what the cockpit changed lives: on the ClusterPolicy it changed
RECORD_ANNOTATION = "cockpit.nvidia.com/restore-record"
#: the taint a cordon adds; the smoke pod tolerates it (it must run on the cordoned node)
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
SMOKE_LABEL = "cockpit.nvidia.com/smoke"


class NodeRecord(BaseModel):
    """A node's labels and annotations as they were before the cockpit's first change to them
    (None: absent), and whether it was cordoned."""

    model_config = ConfigDict(extra="forbid")

    labels: dict[str, str | None] = Field(default_factory=dict)
    annotations: dict[str, str | None] = Field(default_factory=dict)
    unschedulable: bool | None = None


class ChangeRecord(BaseModel):
    """What the cockpit changed, each value as it was before (None: absent)."""

    model_config = ConfigDict(extra="forbid")

    change: str
    #: ``spec.driver`` paths (``version``, ``upgradePolicy.autoUpgrade``) -> the value before
    policy: dict[str, Any] = Field(default_factory=dict)
    #: NVIDIADriver name -> its ``spec`` paths -> the value before (per-pool drivers)
    drivers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    nodes: dict[str, NodeRecord] = Field(default_factory=dict)
    #: nodes whose every recorded label and annotation (``blank_labels``, ``blank_annotations``)
    #: was absent and that were not cordoned, by name only: most of a fleet, kept short because
    #: all of an object's annotations must fit in 256 KiB (apimachinery's TotalAnnotationSizeLimitB)
    blank: list[str] = Field(default_factory=list)
    blank_labels: list[str] = Field(default_factory=list)
    blank_annotations: list[str] = Field(default_factory=list)

    def compact(self) -> str:
        """The record as stored: blank nodes named only (see ``blank``)."""
        keys = sorted({k for n in self.nodes.values() for k in n.labels})
        notes = sorted({k for n in self.nodes.values() for k in n.annotations})
        plain = NodeRecord(labels=dict.fromkeys(keys), annotations=dict.fromkeys(notes), unschedulable=False)
        blank = sorted(n for n, r in self.nodes.items() if r == plain)
        kept = {n: r for n, r in self.nodes.items() if n not in set(blank)}
        out = self.model_copy(update={"nodes": kept, "blank": blank, "blank_labels": keys, "blank_annotations": notes})
        return out.model_dump_json(exclude_defaults=True)

    def expanded(self) -> ChangeRecord:
        nodes = dict(self.nodes)
        for name in self.blank:
            nodes[name] = NodeRecord(
                labels=dict.fromkeys(self.blank_labels),
                annotations=dict.fromkeys(self.blank_annotations),
                unschedulable=False,
            )
        return self.model_copy(update={"nodes": nodes, "blank": [], "blank_labels": [], "blank_annotations": []})


def read_record(policy: Mapping[str, Any]) -> ChangeRecord | None:
    raw = (policy.get("metadata", {}).get("annotations") or {}).get(RECORD_ANNOTATION)
    if not raw:
        return None
    try:
        return ChangeRecord.model_validate_json(raw).expanded()
    except ValidationError as e:
        name = policy.get("metadata", {}).get("name", "?")
        raise base.BackendError(
            f"ClusterPolicy {name}: {RECORD_ANNOTATION} is not a record the cockpit wrote: {e}"
        ) from e


def driver_path(policy: Mapping[str, Any], path: str) -> Any:
    cur: Any = policy.get("spec", {}).get("driver", {})
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return cur


def driver_patch(values: Mapping[str, Any]) -> JsonObject:
    """A merge patch setting ``spec.driver`` paths (a None value removes the field)."""
    driver: JsonObject = {}
    for path, value in values.items():
        cur = driver
        *parents, leaf = path.split(".")
        for part in parents:
            cur = cur.setdefault(part, {})
        cur[leaf] = value
    return {"spec": {"driver": driver}}


class Recorder:
    """Keeps the :class:`ChangeRecord` on the ClusterPolicy, written before each change it records."""

    def __init__(self, api: KubeApi, policy_name: str, change: str) -> None:
        self.api, self.policy_name = api, policy_name
        self.record = ChangeRecord(change=change)

    async def load(self) -> ChangeRecord:
        """The record already on the cluster (a window resumed after a crash) is continued, never
        restarted: its values are the ones from before the first change."""
        found = read_record(await self.api.cluster_policy(self.policy_name))
        if found is not None:
            self.record = found
        return self.record

    async def save(self) -> None:
        text = self.record.compact()
        patch = {"metadata": {"annotations": {RECORD_ANNOTATION: text}}}
        await self.api.patch_cluster_policy(self.policy_name, patch)

    async def policy_fields(self, policy: Mapping[str, Any], values: Mapping[str, Any]) -> JsonObject:
        """Record the fields of ``values`` that differ (first time only) and return the patch."""
        changed = {k: v for k, v in values.items() if driver_path(policy, k) != v}
        fresh = {k: driver_path(policy, k) for k in changed if k not in self.record.policy}
        if fresh:
            self.record.policy.update(fresh)
            await self.save()
        return driver_patch(changed) if changed else {}

    async def driver_fields(self, nvd: Mapping[str, Any], values: Mapping[str, Any]) -> JsonObject:
        """The same for an NVIDIADriver's ``spec``: record (first time only), return its spec patch."""
        name = str(nvd["metadata"]["name"])
        spec_doc = {"spec": {"driver": nvd.get("spec", {})}}  # read its spec with the same path walker
        changed = {k: v for k, v in values.items() if driver_path(spec_doc, k) != v}
        have = self.record.drivers.setdefault(name, {})
        fresh = {k: driver_path(spec_doc, k) for k in changed if k not in have}
        if fresh:
            have.update(fresh)
            await self.save()
        return driver_patch(changed)["spec"]["driver"] if changed else {}

    async def nodes(
        self, docs: Mapping[str, JsonObject], labels: tuple[str, ...], annotations: tuple[str, ...]
    ) -> None:
        """Record ``labels``/``annotations`` and the cordon of each node in ``docs`` not yet recorded."""
        dirty = False
        for name, doc in docs.items():
            have = self.record.nodes.setdefault(name, NodeRecord())
            meta = doc.get("metadata", {})
            for key in labels:
                if key not in have.labels:
                    have.labels[key] = (meta.get("labels") or {}).get(key)
                    dirty = True
            for key in annotations:
                if key not in have.annotations:
                    have.annotations[key] = (meta.get("annotations") or {}).get(key)
                    dirty = True
            if have.unschedulable is None:
                have.unschedulable = ks.unschedulable(doc)
                dirty = True
        if dirty:
            await self.save()


async def restore(
    api: KubeApi,
    policy_name: str,
    namespace: str,
    *,
    keep_version: bool = False,
    timeout_s: float = 120.0,
    poll_s: float = 1.0,
) -> list[str]:
    """Put back what the record on the ClusterPolicy says the cockpit changed, then remove the
    record; one line per thing put back. ``keep_version``: the window ended with every node
    at the target, so ``spec.driver.version`` is its result, not a change to undo.

    With the version put back (a rollback), the operator's own walk brings each node back once
    the driver DaemonSet's template is at it again: a node held back in ``upgrade-required``
    whose driver pod is in sync again has its state label removed before its skip label is
    lifted, so the controller finds it in sync and writes ``upgrade-done``
    (common_manager.go:229-291) instead of cordoning it and deleting its GPU pods for nothing
    (ProcessUpgradeRequiredNodes never looks at the pod, upgrade_inplace.go:43-104); a node in
    ``upgrade-failed`` with a driver pod of the failed version gets that pod deleted, as the
    controller's SchedulePodsRestart does (pod_manager.go:233-251), so it is walked through
    again at the recorded version (the controller only leaves upgrade-failed for a pod in
    sync, common_manager.go:528-570).

    A node the cockpit cordoned and still cordoned is left cordoned (a failed node waits for a
    person) and said so. Nothing recorded: nothing done."""
    policy = await api.cluster_policy(policy_name)
    record = read_record(policy)
    if record is None:
        return []
    said: list[str] = []
    fields = {k: v for k, v in record.policy.items() if not (keep_version and k == "version")}
    moved = {k: v for k, v in fields.items() if driver_path(policy, k) != v}  # a rollback may have pinned it back
    if moved:
        await api.patch_cluster_policy(policy_name, driver_patch(moved))
        said += [f"ClusterPolicy {policy_name} spec.driver.{k} back to {v!r}" for k, v in sorted(moved.items())]
    if keep_version and "version" in record.policy:
        said.append(f"ClusterPolicy {policy_name} spec.driver.version kept: every node of the window is at it")
    wanted: dict[str | None, str] = {}
    if "version" in fields and isinstance(fields["version"], str):
        wanted[None] = fields["version"]
    drivers = await api.nvidia_drivers() if record.drivers else {}
    for pool, values in sorted(record.drivers.items()):
        put = {k: v for k, v in values.items() if not (keep_version and k == "version")}
        spec_doc = {"spec": {"driver": drivers.get(pool, {}).get("spec", {})}}
        moved_pool = {k: v for k, v in put.items() if driver_path(spec_doc, k) != v}
        if moved_pool:
            await api.patch_nvidia_driver(pool, driver_patch(moved_pool)["spec"]["driver"])
            said += [f"NVIDIADriver {pool} spec.{k} back to {v!r}" for k, v in sorted(moved_pool.items())]
        if isinstance(put.get("version"), str):
            wanted[pool] = put["version"]
        if keep_version and "version" in values:
            said.append(f"NVIDIADriver {pool} spec.version kept: every node of the window is at it")
    templates = await template_images(api, namespace, wanted, timeout_s, poll_s)
    driver_pods = {
        str(p.get("spec", {}).get("nodeName", "")): p
        for p in await api.list_pods(namespace=namespace)
        if ks.is_driver(p) and not ks.terminating(p)
    }
    for name, node in sorted(record.nodes.items()):
        try:
            doc = await api.get_node(name)
        except KubeApiError as e:
            if e.status == 404:
                said.append(f"node {name} is gone: nothing to put back")
                continue
            raise
        meta = doc.get("metadata", {})
        labels: dict[str, str | None] = {k: v for k, v in node.labels.items() if (meta.get("labels") or {}).get(k) != v}
        notes = {k: v for k, v in node.annotations.items() if (meta.get("annotations") or {}).get(k) != v}
        state = ks.labels(doc).get(ks.STATE_LABEL, "")
        pod = driver_pods.get(name)
        synced = in_sync(pod, templates) if pod is not None else None
        in_sync_now = synced is True
        if state == "upgrade-required" and in_sync_now:
            labels[ks.STATE_LABEL] = None
        if state not in ("", "upgrade-done", "upgrade-required") or (state == "upgrade-required" and not in_sync_now):
            # mid-walk: the controller reads the initial-state annotation at its end and removes it
            # itself (common_manager.go:670-707); taken away now, it would uncordon the node
            notes.pop(ks.INITIAL_STATE_ANNOTATION, None)
        if state == "upgrade-failed" and pod is not None and synced is False:
            pod_meta = pod["metadata"]
            await api.delete_pod(str(pod_meta["namespace"]), str(pod_meta["name"]))
            said.append(f"node {name}: driver pod {pod_meta['name']} of the failed version deleted, to walk it back")
        patch: JsonObject = {"metadata": {}}
        if labels:
            patch["metadata"]["labels"] = labels
        if notes:
            patch["metadata"]["annotations"] = notes
        if labels or notes:
            await api.patch_node(name, patch)
            said.append(f"node {name}: " + ", ".join(f"{k}={v}" for k, v in sorted({**labels, **notes}.items())))
        if node.unschedulable is False and ks.unschedulable(doc):
            said.append(f"node {name} stays cordoned: the cockpit cordoned it and it never passed its smoke")
    left = {k for k in (policy.get("metadata", {}).get("annotations") or {}) if k != RECORD_ANNOTATION}
    # an empty map is no map on a real API server (omitempty): the policy reads as before
    kept: JsonObject | None = {RECORD_ANNOTATION: None} if left else None
    await api.patch_cluster_policy(policy_name, {"metadata": {"annotations": kept}})
    return said


def ds_pool(ds: Mapping[str, Any]) -> str | None:
    """The NVIDIADriver that owns a driver DaemonSet (None: the ClusterPolicy's)."""
    refs = ds.get("metadata", {}).get("ownerReferences") or []
    return next((str(o.get("name")) for o in refs if o.get("kind") == "NVIDIADriver"), None)


async def template_images(
    api: KubeApi, namespace: str, versions: Mapping[str | None, str], timeout_s: float, poll_s: float
) -> dict[str, str]:
    """Each driver DaemonSet's image by name, once the operator has rendered the version for its
    owner into it (``versions``: NVIDIADriver name, or None for the ClusterPolicy, -> version),
    or at the deadline, as they are then."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = await api.driver_daemonsets(namespace)
        except KubeApiError as e:
            if e.status == 404:
                return {}
            raise
        images, waiting = {}, False
        for ds in found:
            containers = ds.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
            if containers:
                image = str(containers[0].get("image", ""))
                images[str(ds["metadata"]["name"])] = image
                want = versions.get(ds_pool(ds))
                waiting = waiting or (want is not None and not ks.image_at(image, want))
        if not waiting or time.monotonic() >= deadline:
            return images
        await asyncio.sleep(poll_s)


def in_sync(pod: Mapping[str, Any], templates: Mapping[str, str]) -> bool | None:
    """Whether a driver pod runs its DaemonSet's template image (None: its DaemonSet is not known)."""
    owner = next(
        (o.get("name") for o in pod.get("metadata", {}).get("ownerReferences") or [] if o.get("kind") == "DaemonSet"),
        None,
    )
    template = templates.get(str(owner)) if owner else None
    if template is None:
        return None
    return template in ks.driver_images(pod)


# ---- who else writes the ClusterPolicy -------------------------------------------------
GITOPS_LABEL_PREFIXES = ("kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/")
GITOPS_MANAGERS = ("argocd-controller", "argocd-application-controller", "kustomize-controller", "helm-controller")


def policy_owner(policy: Mapping[str, Any]) -> tuple[str, str] | None:
    """``("gitops"|"helm", why)`` when another tool renders the ClusterPolicy, else None.

    Read from the marks those tools leave: Argo CD's ``argocd.argoproj.io/instance`` label or
    ``argocd.argoproj.io/tracking-id`` annotation; Flux's ``kustomize.toolkit.fluxcd.io/*`` and
    ``helm.toolkit.fluxcd.io/*`` labels; Helm's ``app.kubernetes.io/managed-by: Helm`` label and
    ``meta.helm.sh/release-name`` annotation; and the field managers in ``managedFields``."""
    meta = policy.get("metadata", {})
    labels: Mapping[str, str] = meta.get("labels") or {}
    notes: Mapping[str, str] = meta.get("annotations") or {}
    managers = [str(m.get("manager", "")) for m in meta.get("managedFields") or []]
    if "argocd.argoproj.io/instance" in labels:
        return "gitops", f"Argo CD application {labels['argocd.argoproj.io/instance']}"
    if "argocd.argoproj.io/tracking-id" in notes:
        return "gitops", f"Argo CD (tracking id {notes['argocd.argoproj.io/tracking-id']})"
    flux = sorted(k for k in labels if k.startswith(GITOPS_LABEL_PREFIXES))
    if flux:
        return "gitops", f"Flux ({', '.join(f'{k}={labels[k]}' for k in flux)})"
    gitops = [m for m in managers if m in GITOPS_MANAGERS]
    if gitops:
        return "gitops", f"field manager {gitops[0]}"
    release = notes.get("meta.helm.sh/release-name")
    if labels.get("app.kubernetes.io/managed-by") == "Helm" or release or "helm" in managers:
        return "helm", f"Helm release {release or '(unnamed)'}"
    return None


def owner_warning(doc: Mapping[str, Any]) -> str | None:
    """The one line for a ClusterPolicy or NVIDIADriver another tool renders (None: no one does);
    :class:`~cockpit.fleet.backends.base.BackendError` where a GitOps controller keeps it."""
    owner = policy_owner(doc)
    if owner is None:
        return None
    what = f"{doc.get('kind') or 'ClusterPolicy'} {doc.get('metadata', {}).get('name', '?')}"
    kind, who = owner
    if kind == "gitops":
        raise base.BackendError(
            f"{what} is kept by {who}: it would revert the cockpit's change behind the window; "
            "set the driver version in Git and sync, or take the policy out of GitOps first"
        )
    return (
        f"{what} is rendered by {who}: the cockpit's changes are recorded and put back when the "
        "window ends; a helm upgrade meanwhile overwrites them"
    )


def recorded_version(record: ChangeRecord, policy: str, pools: Mapping[str, Any]) -> str:
    """The driver version recorded before the window, for a rollback: one for the wave."""
    found = (
        {str(record.drivers.get(p, {}).get("version") or "") for p in pools}
        if pools
        else {str(record.policy.get("version") or "")}
    )
    where = f"NVIDIADriver {', '.join(sorted(pools))}" if pools else f"ClusterPolicy {policy}"
    if found == {""}:
        raise base.BackendError(f"{where} holds no recorded driver version: the window never changed it")
    if len(found) != 1 or "" in found:
        raise base.BackendError(f"{where}: the wave's pools were at different versions; roll them back one by one")
    return found.pop()


# ---- the smoke pod ---------------------------------------------------------------------
def smoke_pod(node: str, *, image: str, command: str, gpus: int, reason: str) -> JsonObject:
    """A one-shot pod pinned to ``node`` (no scheduler: the node is cordoned) asking for all its GPUs."""
    seed = hashlib.sha256(f"{node}/{time.time_ns()}".encode()).hexdigest()[:6]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"cockpit-smoke-{node}-{seed}"[:63],
            "labels": {SMOKE_LABEL: "true"},
            "annotations": {ks.CHANGE_ANNOTATION: reason[:250]},
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "tolerations": [{"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "smoke",
                    "image": image,
                    "command": shlex.split(command),
                    "resources": {"limits": {ks.GPU_RESOURCE: str(gpus)}},
                }
            ],
        },
    }


async def run_smoke(
    api: KubeApi, namespace: str, pod: JsonObject, *, timeout_s: float, poll_s: float
) -> tuple[str, str, int | None, str]:
    """Create ``pod``, wait for its end, read its log, delete it: (phase, log, exit code, why)."""
    name = str(pod["metadata"]["name"])
    await api.create_pod(namespace, pod)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            seen = await api.get_pod(namespace, name)
            status = seen.get("status", {})
            phase = str(status.get("phase", "Pending"))
            if phase in ("Succeeded", "Failed"):
                terminated = next(
                    (c.get("state", {}).get("terminated") for c in status.get("containerStatuses") or []), None
                )
                code = int(terminated["exitCode"]) if terminated else None
                why = str((terminated or {}).get("message") or status.get("message") or "")
                log = await api.pod_log(namespace, name) if terminated else ""
                return phase, log, code, " ".join(why.split())
            if time.monotonic() >= deadline:
                return phase, "", None, f"timed out after {timeout_s:g}s with the pod {phase}"
            await asyncio.sleep(poll_s)
    finally:
        try:
            await api.delete_pod(namespace, name)
        except KubeApiError as e:
            if e.status != 404:
                raise


def smoke_verdict(phase: str, log: str, code: int | None, why: str, target: str | None) -> str | None:
    """None when the smoke passed: it ran, exited 0 and, where a target is known, printed it."""
    if phase != "Succeeded" or code != 0:
        return f"the smoke pod {phase.lower()} (exit {code if code is not None else '?'})" + (f": {why}" if why else "")
    if target and target not in log:
        return f"the smoke pod ran but its output does not show driver {target}"
    return None


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
