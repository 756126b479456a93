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


#: the kernel and OS of the captured node (its nodeInfo), which name a precompiled driver's DaemonSet
NODE_KERNEL, NODE_OS_TAG = "5.15.0-153-generic", "ubuntu22.04"
#: the RHCOS version an OpenShift cluster's driver DaemonSet is named after (driver toolkit)
RHCOS_VERSION = "417.94.202410090854-0"
DRIVER_COMPONENT = "app.kubernetes.io/component"
#: the site's own label choosing a node's pool (an NVIDIADriver's nodeSelector), and the
#: operator's label routing a node to one NVIDIADriver (gpu-operator internal/consts/consts.go:71)
POOL_LABEL = "example.com/gpu-pool"
OWNER_LABEL = "nvidia.com/gpu-operator.driver.owner"


@dataclass
class ClusterObjects:
    store: KubeStore
    version: str  # the driver the nodes run now
    #: how the operator deploys the driver: "default" (one DaemonSet ``nvidia-driver-daemonset``),
    #: "precompiled" (``driver.usePrecompiled``: one per kernel, named ``-<kernel>-<os>``,
    #: gpu-operator controllers/object_controls.go:3222-3235) or "openshift" (one per RHCOS
    #: version through the driver toolkit, its ``app`` label the name too, :3282-3296)
    flavor: str = "default"
    #: image digests ``sha256:...`` a ClusterPolicy may pin, and the driver version each one is
    digests: dict[str, str] = field(default_factory=dict)
    #: NVIDIADriver resources, one per node pool (name -> its nodes): the ClusterPolicy then has
    #: ``useNvidiaDriverCRD`` and each pool its own driver DaemonSet and upgrade policy
    pools: dict[str, list[str]] = field(default_factory=dict)
    _pool_ds: dict[str, str] = field(default_factory=dict)
    _events: int = field(default=0)

    @property
    def driver_ds(self) -> str:
        if self.flavor == "precompiled":
            return f"{DRIVER_DS}-{NODE_KERNEL}-{NODE_OS_TAG}"
        if self.flavor == "openshift":
            return f"{DRIVER_DS}-{RHCOS_VERSION}"
        return DRIVER_DS

    @property
    def driver_app(self) -> str:
        return self.driver_ds if self.flavor == "openshift" else DRIVER_DS

    def image_version(self, image: str) -> str:
        """The driver version an image runs: its tag's first part, or what its digest is."""
        if "@" in image:
            return self.digests.get(image.split("@", 1)[1], "0.0.0")
        return image.rsplit(":", 1)[1].split("-")[0]

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
        if self.pools:
            s.patch(
                "clusterpolicies",
                "cluster-policy",
                "",
                {"spec": {"driver": {"useNvidiaDriverCRD": True}}},
                strategic=False,
            )
            for pool in self.pools:
                nvd = s.create("nvidiadrivers", self._nvidia_driver(pool, auto_upgrade))
                # getDriverAppName (gpu-operator internal/state/driver.go:500-530): type, OS tag, a hash of the UID
                self._pool_ds[pool] = f"nvidia-gpu-driver-{NODE_OS_TAG}-{suffix(nvd['metadata']['uid'])}"
                self._create_ds(self._pool_ds[pool], self._pool_ds[pool], driver=True, owner=nvd, pool=pool)
        else:
            self._create_ds(self.driver_ds, self.driver_app, driver=True)
        for ds in (VALIDATOR_DS, "nvidia-dcgm-exporter"):
            self._create_ds(ds, ds, driver=False)
        owners = {n: pool for pool, members in self.pools.items() for n in members}
        for name in names:
            node = node_from_fixture(name, gpus=gpus)
            if name in owners:  # the site's pool label, and the operator's routing label (internal/consts/consts.go:71)
                node["metadata"]["labels"] |= {POOL_LABEL: owners[name], OWNER_LABEL: owners[name]}
            s.create("nodes", node)
            if not self.pools or name in owners:
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

    def _nvidia_driver(self, pool: str, auto_upgrade: bool) -> KubeObject:
        """An NVIDIADriver for one pool (gpu-operator api/nvidia/v1alpha1/nvidiadriver_types.go:46-228):
        cluster-scoped, its nodeSelector the pool's label, its own upgrade policy."""
        return {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "NVIDIADriver",
            "metadata": {"name": pool},
            "spec": {
                "default": False,
                "driverType": "gpu",
                "repository": "nvcr.io/nvidia",
                "image": "driver",
                "version": self.version,
                "usePrecompiled": self.flavor == "precompiled",
                "nodeSelector": {POOL_LABEL: pool},
                "upgradePolicy": {"autoUpgrade": auto_upgrade, "maxParallelUpgrades": 1, "maxUnavailable": "25%"},
            },
        }

    def _create_ds(
        self, ds: str, app: str, *, driver: bool, owner: KubeObject | None = None, pool: str | None = None
    ) -> None:
        # the driver DaemonSet's labels (assets/state-driver/0500_daemonset.yaml:4-7)
        marks = {DRIVER_COMPONENT: "nvidia-driver", "nvidia.com/precompiled": str(self.flavor == "precompiled").lower()}
        if self.flavor == "openshift" and not self.pools:
            marks |= {"openshift.driver-toolkit": "true", "openshift.driver-toolkit.rhcos": RHCOS_VERSION}
        meta: KubeObject = {"name": ds, "namespace": NAMESPACE, "labels": {"app": app, **(marks if driver else {})}}
        if owner is not None:
            meta["ownerReferences"] = [
                {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "name": owner["metadata"]["name"],
                 "uid": owner["metadata"]["uid"], "controller": True}
            ]  # fmt: skip
        template: KubeObject = {
            "metadata": {"labels": {"app": app}},
            "spec": {
                "containers": [
                    {"name": f"{app}-ctr", "image": self._image(self.version) if driver else f"nvcr.io/nvidia/{app}:v1"}
                ],
                **({"nodeSelector": {POOL_LABEL: pool}} if pool else {}),
            },
        }
        self.store.create(
            "daemonsets",
            {
                "metadata": meta,
                "spec": {
                    "selector": {"matchLabels": {"app": app}},
                    "updateStrategy": {"type": "OnDelete"} if driver else {"type": "RollingUpdate"},
                    "template": template,
                },
                "status": {},
            },
        )

    def ds_of_node(self, node: str) -> str:
        """The driver DaemonSet whose pod runs on ``node``: its pool's, or the ClusterPolicy's one."""
        if not self.pools:
            return self.driver_ds
        doc = self.store.get("nodes", node)
        owner = ((doc or {}).get("metadata", {}).get("labels") or {}).get(OWNER_LABEL, "")
        return self._pool_ds.get(owner, "")

    def _image(self, version: str) -> str:
        """The image the operator renders for ``version``: a digest as ``@sha256:...`` with no OS
        tag, a precompiled driver tagged with the kernel, else with the OS
        (gpu-operator api/nvidia/v1/clusterpolicy_types.go:2054-2076, controllers/object_controls.go:3375-3428)."""
        if version.startswith("sha256:"):
            return f"nvcr.io/nvidia/driver@{version}"
        if self.flavor == "precompiled" and self.pools:
            # GetPrecompiledImagePath (nvidiadriver_types.go:672-697): -<kernel>-<os>
            return f"nvcr.io/nvidia/driver:{version}-{NODE_KERNEL}-{NODE_OS_TAG}"
        if self.flavor == "precompiled":
            return f"nvcr.io/nvidia/driver:{version}-{NODE_KERNEL}"
        if self.flavor == "openshift":
            return f"nvcr.io/nvidia/driver:{version}-rhcos4.17"
        return f"nvcr.io/nvidia/driver:{version}-{NODE_OS_TAG}"

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
        ds = self.ds_of_node(node)
        return self._ds_pod(
            ds,
            node,
            ready_now=ready_now,
            seed=version,
            container="nvidia-driver-ctr",
            image=self._image(version),
            labels={"controller-revision-hash": revision_hash(version), DRIVER_COMPONENT: "nvidia-driver"},
            app=ds if self.pools else self.driver_app,
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
        app: str | None = None,
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
                    "labels": {"app": app or ds, **(labels or {})},
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

    def driver_pods_on(self, node: str) -> list[KubeObject]:
        """The driver pods on ``node``, found as the upgrade controller finds them: by their
        ``app.kubernetes.io/component=nvidia-driver`` label (gpu-operator controllers/upgrade_controller.go:232)."""
        return [
            p for p in self.pods_on(node) if p["metadata"].get("labels", {}).get(DRIVER_COMPONENT) == "nvidia-driver"
        ]

    def driver_pod(self, node: str) -> KubeObject | None:
        pods = [p for p in self.driver_pods_on(node) if not p["metadata"].get("deletionTimestamp")]
        return pods[0] if pods else None

    def policy(self) -> dict[str, Any]:
        cp = self.store.get("clusterpolicies", "cluster-policy")
        assert cp is not None
        driver: dict[str, Any] = cp["spec"]["driver"]
        return driver

    def target(self, ds_name: str | None = None) -> str:
        """The ``version`` a driver DaemonSet's template is rendered from (a version or a digest;
        the ClusterPolicy's or NVIDIADriver's controller keeps it in step)."""
        ds = self.store.get("daemonsets", ds_name or self.driver_ds, NAMESPACE)
        assert ds is not None
        image = str(ds["spec"]["template"]["spec"]["containers"][0]["image"])
        return image.split("@", 1)[1] if "@" in image else image.rsplit(":", 1)[1].split("-")[0]

    def policy_controller_pass(self) -> None:
        """The ClusterPolicy controller renders spec.driver.version into the driver DaemonSet's
        template; with NVIDIADriver resources, each one's spec.version into its own DaemonSet."""
        wanted = {self.driver_ds: str(self.policy()["version"])}
        if self.pools:
            wanted = {}
            for pool, ds_name in self._pool_ds.items():
                nvd = self.store.get("nvidiadrivers", pool)
                if nvd is not None:
                    wanted[ds_name] = str(nvd["spec"]["version"])
        for ds_name, version in wanted.items():
            if version.startswith("sha256:") and self.flavor == "precompiled":
                # no digest with precompiled drivers: the operator will not render it
                # (api/nvidia/v1alpha1/nvidiadriver_types.go:672-697)
                continue
            if self.target(ds_name) != version:
                ds = copy.deepcopy(self.store.get("daemonsets", ds_name, NAMESPACE))
                assert ds is not None
                ds["spec"]["template"]["spec"]["containers"][0]["image"] = self._image(version)
                self.store.replace("daemonsets", ds)
