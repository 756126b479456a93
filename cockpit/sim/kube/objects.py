"""The objects of a GPU Operator cluster as the operator creates them, for :mod:`cockpit.sim.kube.gpu_operator`.

The ClusterPolicy with the chart's defaults (NVIDIA/gpu-operator
deployments/gpu-operator/values.yaml:167-198), the driver DaemonSet ``nvidia-driver-daemonset``
with ``updateStrategy: OnDelete`` (assets/state-driver/0500_daemonset.yaml), the validator
DaemonSet ``nvidia-operator-validator`` (assets/state-operator-validation/0500_daemonset.yaml),
a DaemonSet-owned exporter pod and a GPU workload pod per node; nodes from the captured node
document beside this module (``node-vks-a100-gpu-operator.json``, provenance in
tests/fixtures/README.md), and the helpers the simulated controllers share.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.sim.kube.api import KubeObject, KubeStore, now_iso

#: the captured node document every simulated node is made from
NODE_DOCUMENT = Path(__file__).with_name("node-vks-a100-gpu-operator.json")
NAMESPACE = "gpu-operator"
STATE = "nvidia.com/gpu-driver-upgrade-state"
SKIP = "nvidia.com/gpu-driver-upgrade.skip"
DRIVER_DS = "nvidia-driver-daemonset"
VALIDATOR_DS = "nvidia-operator-validator"
#: the controller's note that a node was cordoned when its upgrade began (k8s-operator-libs pkg/upgrade/consts.go:31-33)
INITIAL_STATE = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
IN_PROGRESS_EXCLUDED = {"", "upgrade-done", "upgrade-required"}


def revision_hash(version: str) -> str:
    return hashlib.sha256(version.encode()).hexdigest()[:10]


def suffix(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:5]


def node_from_fixture(name: str, *, gpus: int = 8) -> KubeObject:
    doc: KubeObject = json.loads(NODE_DOCUMENT.read_text())
    meta = doc["metadata"]
    meta["name"] = name
    meta["labels"]["kubernetes.io/hostname"] = name
    meta["labels"]["nvidia.com/gpu.count"] = str(gpus)
    meta.pop("uid"), meta.pop("resourceVersion")
    doc["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)
    doc["status"]["capacity"]["nvidia.com/gpu"] = str(gpus)
    return doc


def ready(pod: KubeObject) -> bool:
    st = pod.get("status", {})
    cs = st.get("containerStatuses") or []
    return st.get("phase") == "Running" and bool(cs) and all(c.get("ready") for c in cs)


@dataclass
class ClusterObjects:
    store: KubeStore
    version: str  # the driver the nodes run now
    _events: int = field(default=0)

    # ---- building the cluster ------------------------------------------------------
    def build(self, names: list[str], *, auto_upgrade: bool = True, gpus: int = 8) -> None:
        s = self.store
        s.create(
            "clusterpolicies",
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": "cluster-policy"},
                "spec": {
                    "driver": {
                        "enabled": True,
                        "repository": "nvcr.io/nvidia",
                        "image": "driver",
                        "version": self.version,
                        "upgradePolicy": {
                            # the chart's defaults (deployments/gpu-operator/values.yaml:167-198)
                            "autoUpgrade": auto_upgrade,
                            "maxParallelUpgrades": 1,
                            "maxUnavailable": "25%",
                            "waitForCompletion": {"timeoutSeconds": 0, "podSelector": ""},
                            "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
                            "drain": {
                                "enable": False,
                                "force": False,
                                "podSelector": "",
                                "timeoutSeconds": 300,
                                "deleteEmptyDir": False,
                            },
                        },
                    }
                },
            },
        )
        for ds, app in (
            (DRIVER_DS, DRIVER_DS),
            (VALIDATOR_DS, VALIDATOR_DS),
            ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter"),
        ):
            s.create(
                "daemonsets",
                {
                    "metadata": {"name": ds, "namespace": NAMESPACE, "labels": {"app": app}},
                    "spec": {
                        "selector": {"matchLabels": {"app": app}},
                        "updateStrategy": {"type": "OnDelete"} if ds == DRIVER_DS else {"type": "RollingUpdate"},
                        "template": {
                            "metadata": {"labels": {"app": app}},
                            "spec": {
                                "containers": [
                                    {
                                        "name": f"{app}-ctr",
                                        "image": self._image(self.version)
                                        if ds == DRIVER_DS
                                        else f"nvcr.io/nvidia/{app}:v1",
                                    }
                                ]
                            },
                        },
                    },
                    "status": {},
                },
            )
        for name in names:
            s.create("nodes", node_from_fixture(name, gpus=gpus))
            self._driver_pod(name, self.version, ready_now=True)
            self._ds_pod(VALIDATOR_DS, name, ready_now=True)
            self._ds_pod("nvidia-dcgm-exporter", name, ready_now=True)
            s.create(
                "pods",
                {
                    "metadata": {"name": f"train-{name}", "namespace": "ml", "labels": {"app": "train"}},
                    "spec": {
                        "nodeName": name,
                        "containers": [{"name": "train", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
                    },
                    "status": {
                        "phase": "Running",
                        "containerStatuses": [{"name": "train", "ready": True, "restartCount": 0}],
                    },
                },
            )

    @staticmethod
    def _image(version: str) -> str:
        return f"nvcr.io/nvidia/driver:{version}-ubuntu22.04"

    def _owner(self, ds: str) -> list[dict[str, Any]]:
        owner = self.store.get("daemonsets", ds, NAMESPACE)
        assert owner is not None
        return [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": ds,
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]

    def _driver_pod(self, node: str, version: str, *, ready_now: bool) -> KubeObject:
        return self._ds_pod(
            DRIVER_DS,
            node,
            ready_now=ready_now,
            seed=version,
            container="nvidia-driver-ctr",
            image=self._image(version),
            labels={"controller-revision-hash": revision_hash(version), "app.kubernetes.io/component": "nvidia-driver"},
        )

    def _ds_pod(
        self,
        ds: str,
        node: str,
        *,
        ready_now: bool,
        seed: str | None = None,
        container: str | None = None,
        image: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> KubeObject:
        """A pod of DaemonSet ``ds`` on ``node``: one container (named ``ds`` unless ``container``
        says), its name's suffix from ``seed`` (``ds`` by default) and the store's version."""
        ctr = container or ds
        pinned = {"image": image} if image is not None else {}
        return self.store.create(
            "pods",
            {
                "metadata": {
                    "name": f"{ds}-{suffix(node + (seed or ds) + str(self.store.rv))}",
                    "namespace": NAMESPACE,
                    "labels": {"app": ds, **(labels or {})},
                    "ownerReferences": self._owner(ds),
                },
                "spec": {"nodeName": node, "containers": [{"name": ctr, **pinned}]},
                "status": {
                    "phase": "Running" if ready_now else "Pending",
                    "containerStatuses": [{"name": ctr, "ready": ready_now, "restartCount": 0, **pinned}],
                },
            },
        )

    # ---- helpers -------------------------------------------------------------------
    def event(
        self,
        obj: KubeObject,
        reason: str,
        message: str,
        *,
        type_: str = "Normal",
        component: str = "nvidia-gpu-operator",
    ) -> None:
        self._events += 1
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"  # events about nodes land in "default"
        self.store.create(
            "events",
            {
                "metadata": {"name": f"{meta['name']}.{self._events:016x}", "namespace": ns},
                "involvedObject": {
                    "kind": obj["kind"],
                    "name": meta["name"],
                    "namespace": meta.get("namespace", ""),
                    "uid": meta["uid"],
                },
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": now_iso(),
                "lastTimestamp": now_iso(),
                "source": {"component": component},
            },
        )

    def _set_state(self, node: KubeObject, state: str) -> None:
        name = node["metadata"]["name"]
        patched = self.store.patch("nodes", name, "", {"metadata": {"labels": {STATE: state}}}, strategic=True)
        self.event(patched, "GPUDriverUpgrade", f"Successfully updated node state label to {state}")

    def _cordon(self, name: str, on: bool) -> None:
        self.store.patch("nodes", name, "", {"spec": {"unschedulable": True if on else None}}, strategic=True)

    def pods_on(self, node: str, app: str | None = None) -> list[KubeObject]:
        return [
            p
            for p in self.store.list("pods")
            if p["spec"].get("nodeName") == node and (app is None or p["metadata"].get("labels", {}).get("app") == app)
        ]

    def driver_pod(self, node: str) -> KubeObject | None:
        pods = [p for p in self.pods_on(node, DRIVER_DS) if not p["metadata"].get("deletionTimestamp")]
        return pods[0] if pods else None

    def policy(self) -> dict[str, Any]:
        cp = self.store.get("clusterpolicies", "cluster-policy")
        assert cp is not None
        driver: dict[str, Any] = cp["spec"]["driver"]
        return driver

    def target(self) -> str:
        """The driver version in the DaemonSet's template (which the ClusterPolicy controller keeps in step)."""
        ds = self.store.get("daemonsets", DRIVER_DS, NAMESPACE)
        assert ds is not None
        return str(ds["spec"]["template"]["spec"]["containers"][0]["image"]).split(":")[1].split("-")[0]

    def policy_controller_pass(self) -> None:
        """The ClusterPolicy controller renders spec.driver.version into the driver DaemonSet's template."""
        wanted = str(self.policy()["version"])
        if self.target() != wanted:
            ds = copy.deepcopy(self.store.get("daemonsets", DRIVER_DS, NAMESPACE))
            assert ds is not None
            ds["spec"]["template"]["spec"]["containers"][0]["image"] = self._image(wanted)
            self.store.replace("daemonsets", ds)
