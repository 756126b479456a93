"""Driver DaemonSets as the operator names them beyond the default: precompiled (one per kernel
and OS), OpenShift (one per RHCOS version, its app label renamed too), and a ClusterPolicy
pinned to an image digest. The backend finds them by the component label, as the upgrade
controller does, and matches a digest-pinned version."""

from __future__ import annotations

import asyncio

import pytest
from kube_cluster import CORDONED_ORDER, NEW, OLD, gpu_cluster, upgrade

from cockpit.fleet.backends.base import BackendAction, ReleaseRequest
from cockpit.fleet.backends.kubernetes import KubernetesBackend, KubernetesMode
from cockpit.fleet.backends.kubernetes_states import image_at

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(60)]

DIGEST = "sha256:" + "5e" * 32
SMOKE = "nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader"


@pytest.mark.parametrize(
    ("image", "version", "at"),
    [
        ("nvcr.io/nvidia/driver:580.95.05-ubuntu22.04", "580.95.05", True),
        ("nvcr.io/nvidia/driver:580.95.05-5.15.0-153-generic", "580.95.05", True),
        ("nvcr.io/nvidia/driver:580.95.05-rhcos4.17", "580.95.05", True),
        ("nvcr.io/nvidia/driver:580.95.050-ubuntu22.04", "580.95.05", False),
        ("nvcr.io/nvidia/driver:580.65.06-ubuntu22.04", "580.95.05", False),
        (f"nvcr.io/nvidia/driver@{DIGEST}", DIGEST, True),
        (f"nvcr.io/nvidia/driver@{DIGEST}", "580.95.05", False),
        ("registry:5000/nvidia/driver:580.95.05-ubuntu22.04", "580.95.05", True),
        ("registry:5000/nvidia/driver", "5000", False),
    ],
)
def test_an_image_runs_a_version_only_by_its_tag_or_digest(image: str, version: str, at: bool) -> None:
    assert image_at(image, version) is at


@pytest.mark.parametrize(
    ("flavor", "target", "image_tail", "ds_name"),
    [
        ("precompiled", NEW, f":{NEW}-5.15.0-153-generic", "nvidia-driver-daemonset-5.15.0-153-generic-ubuntu22.04"),
        ("openshift", NEW, f":{NEW}-rhcos4.17", "nvidia-driver-daemonset-417.94.202410090854-0"),
        ("default", DIGEST, f"@{DIGEST}", "nvidia-driver-daemonset"),
    ],
)
async def test_the_driver_daemonset_is_found_and_the_node_goes_through(tmp_path, flavor, target, image_tail, ds_name):
    async with gpu_cluster(tmp_path, nodes=3, flavor=flavor, digests={DIGEST: NEW}) as cluster:
        await asyncio.sleep(0.1)
        assert cluster.store.get("daemonsets", ds_name, "gpu-operator") is not None
        b = KubernetesBackend(kubeconfig=str(cluster.kubeconfig), poll_interval_s=0.05)
        request = ReleaseRequest(
            BackendAction.UPGRADE, ("gpu02",), reason="CHG-FL", timeout_s=15, context={"target_version": target}
        )
        smoke = ReleaseRequest(
            BackendAction.SMOKE, ("gpu02",), reason="CHG-FL", timeout_s=10,
            context={"target_version": target, "smoke_command": SMOKE,
                     "smoke_image": "nvcr.io/nvidia/cuda:13.0.0-base-ubuntu22.04"},
        )  # fmt: skip
        try:
            (result,) = await b.release(request)
            (smoked,) = await b.release(smoke)
        finally:
            await b.close()
        assert result.ok, result.error
        assert result.final is not None and result.final.driver_version == NEW
        assert cluster.driver_image("gpu02").endswith(image_tail)
        assert cluster.states("gpu02") == ["upgrade-done", *CORDONED_ORDER]
        assert smoked.ok, smoked.error
        for other in ("gpu01", "gpu03"):
            assert not cluster.driver_image(other).endswith(image_tail)


async def test_cockpit_managed_mode_finds_a_precompiled_daemonset(tmp_path):
    async with gpu_cluster(tmp_path, nodes=2, auto_upgrade=False, flavor="precompiled") as cluster:
        await asyncio.sleep(0.1)
        b = KubernetesBackend(kubeconfig=str(cluster.kubeconfig), poll_interval_s=0.05, mode=KubernetesMode.COCKPIT)
        try:
            (result,) = await b.release(upgrade("gpu01", reason="CHG-PC", timeout_s=15))
        finally:
            await b.close()
        assert result.ok, result.error
        assert cluster.driver_image("gpu01").endswith(f":{NEW}-5.15.0-153-generic")
        assert cluster.driver_image("gpu02").endswith(f":{OLD}-5.15.0-153-generic")
