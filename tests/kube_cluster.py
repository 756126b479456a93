"""A GPU Operator cluster for a test: the API emulator on 127.0.0.1 with the simulated operator beside it.

Missing parts (kubernetes_asyncio, aiohttp): the test fails in CI (``CI=true``), skips locally.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

try:
    import aiohttp  # noqa: F401  (the emulator's server)

    # the backend's client, looked for, not imported: importing it takes a third of a second,
    # paid at every collection, the inner loop's too; the backend imports it when a test runs
    if importlib.util.find_spec("kubernetes_asyncio") is None:
        raise ImportError("No module named 'kubernetes_asyncio'")
except ImportError as e:  # pragma: no cover - installed with the package
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise RuntimeError(f"CI=true but a part of the Kubernetes tests is missing: {e}") from e
    pytest.skip(f"Kubernetes test parts missing: {e}", allow_module_level=True)

from cockpit.fleet.backends.base import BackendAction, ReleaseRequest
from cockpit.sim.kube.api import KubeEmulator, KubeObject, KubeStore
from cockpit.sim.kube.cluster import NODE_DRIVER, served_cluster
from cockpit.sim.kube.gpu_operator import SimCluster
from cockpit.sim.kube.objects import SKIP, STATE

OLD, NEW = NODE_DRIVER, "580.95.05"
#: k8s-operator-libs' in-place sequence after upgrade-done, as the simulated controller walks it
#: (cockpit/sim/kube/gpu_operator.py): a released node's states, back to upgrade-done
REAL_ORDER = [
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-done",
]

#: the same for a node the cockpit cordoned before releasing it: the controller keeps it cordoned
#: (the initial-state annotation, common_manager.go:670-707), so no uncordon-required
CORDONED_ORDER = [s for s in REAL_ORDER if s != "uncordon-required"]


def upgrade(*nodes: str, reason: str, timeout_s: float) -> ReleaseRequest:
    """The release the Kubernetes tests ask for: ``nodes`` to the NEW driver."""
    return ReleaseRequest(
        BackendAction.UPGRADE, nodes, reason=reason, timeout_s=timeout_s, context={"target_version": NEW}
    )


@dataclass
class Cluster:
    store: KubeStore
    api: KubeEmulator
    sim: SimCluster
    kubeconfig: Path
    names: list[str]

    def obj(self, resource: str, name: str, namespace: str = "") -> KubeObject:
        found = self.store.get(resource, name, namespace)
        assert found is not None, f"{resource} {namespace}/{name} is gone"
        return found

    def driver_image(self, node: str) -> str:
        pod = self.sim.driver_pod(node)
        assert pod is not None, f"no driver pod on {node}"
        return str(pod["spec"]["containers"][0]["image"])

    def label(self, node: str, key: str) -> str | None:
        obj = self.store.get("nodes", node)
        assert obj is not None
        return (obj["metadata"].get("labels") or {}).get(key)

    def skip_ever_removed(self, node: str) -> bool:
        """Whether the node, once the skip label was put on it, was ever seen without it."""
        labelled = False
        for labels in self.store.label_history(node):
            if labels.get(SKIP) == "true":
                labelled = True
            elif labelled:
                return True
        return False

    def states(self, node: str) -> list[str]:
        """The node's upgrade states in the order the controller wrote them (repeats folded)."""
        out: list[str] = []
        for labels in self.store.label_history(node):
            st = labels.get(STATE)
            if st is not None and (not out or out[-1] != st):
                out.append(st)
        return out


@asynccontextmanager
async def gpu_cluster(
    tmp_path: Path, nodes: int = 6, *, auto_upgrade: bool = True, **sim_options: object
) -> AsyncIterator[Cluster]:
    store = KubeStore()
    sim = SimCluster(store, version=OLD, **sim_options)  # type: ignore[arg-type]
    names = [f"gpu{i:02d}" for i in range(1, nodes + 1)]
    kubeconfig = tmp_path / "kubeconfig"
    async with served_cluster(sim, names, kubeconfig, auto_upgrade=auto_upgrade, extra_context="stranger") as api:
        yield Cluster(store, api, sim, kubeconfig, names)
