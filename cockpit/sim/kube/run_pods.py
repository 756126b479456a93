"""The simulated kubelet running a one-shot pod pinned to a node: the cockpit's smoke pod.

A pod with ``spec.nodeName`` set skips the scheduler and goes straight to that node's
kubelet (https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename),
which admits it only where the node has the extended resources it requests
(``OutOf<resource>``, ``Node didn't have enough resource``: pkg/kubelet/lifecycle/predicate.go).
Stricter than a real kubelet where unsure: a pod on a cordoned node must tolerate
``node.kubernetes.io/unschedulable:NoSchedule`` (the taint a cordon adds).

The NVIDIA Container Toolkit's hook refuses the container when the driver is not loaded
(``nvidia-container-cli: initialization error: nvml error: driver not loaded``) and when an
image's ``cuda>=`` requirement is above the driver's CUDA ceiling (``requirement error:
unsatisfied condition``); the kubelet reports either as a ``StartError`` with exit code 128.
The one program the images here carry is ``nvidia-smi`` (:mod:`cockpit.sim.smi` prints what
it would), seeing only the GPUs the pod was given.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable
from datetime import UTC, datetime

from cockpit.sim.debs import CUDA_CEILING
from cockpit.sim.kube.api import KubeObject, KubeStore
from cockpit.sim.smi import DriverRelease, SimGpu, list_gpus, query_gpu, table

GPU = "nvidia.com/gpu"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def tolerates_cordon(pod: KubeObject) -> bool:
    for t in pod["spec"].get("tolerations") or []:
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if t.get("key") == UNSCHEDULABLE_TAINT and t.get("effect") in (None, "", "NoSchedule"):
            return True
    return False


def requested_gpus(pod: KubeObject) -> int:
    total = 0
    for c in pod["spec"].get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        total += int(limits.get(GPU, 0) or 0)
    return total


def node_gpus(node: KubeObject, count: int) -> list[SimGpu]:
    """The node's GPUs as nvidia-smi in a container given ``count`` of them lists them."""
    labels = node["metadata"].get("labels") or {}
    name = labels.get("nvidia.com/gpu.product", "NVIDIA GPU")
    memory = int(labels.get("nvidia.com/gpu.memory", "81920") or 81920)
    out = []
    for i in range(count):
        seed = hashlib.sha256(f"{node['metadata']['name']}/{i}".encode()).hexdigest()
        out.append(
            SimGpu(
                index=i,
                name=name,
                uuid=f"GPU-{seed[:8]}-{seed[8:12]}-{seed[12:16]}-{seed[16:20]}-{seed[20:32]}",
                serial=str(int(seed[:10], 16)),
                bus_id=f"00000000:{0x18 + i:02X}:00.0",
                memory_total_mib=memory,
                memory_used_mib=0,
                utilization_pct=0,
                temperature_c=31,
                power_draw_w=61.0,
            )
        )
    return out


def run_argv(argv: list[str], gpus: list[SimGpu], driver: DriverRelease) -> tuple[str, int]:
    """What ``argv`` prints and its exit status, in a container on a node with ``driver`` loaded."""
    if not argv or argv[0] != "nvidia-smi":
        return f'exec: "{argv[0] if argv else ""}": executable file not found in $PATH', 128
    args = argv[1:]
    if not args:
        return table(gpus, driver, datetime.now(UTC)), 0
    if args == ["-L"]:
        return list_gpus(gpus), 0
    fields: list[str] = []
    formats: set[str] = set()
    for a in args:
        if a.startswith("--query-gpu="):
            fields = a.split("=", 1)[1].split(",")
        elif a.startswith("--format="):
            formats = set(a.split("=", 1)[1].split(","))
        else:
            return f"Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n({a})\n", 2
    if not fields or "csv" not in formats:
        return "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", 2
    return query_gpu(gpus, driver, fields, formats)


def run_pending_pods(
    store: KubeStore,
    logs: dict[tuple[str, str], str],
    loaded_driver: Callable[[str], str | None],
) -> None:
    """Start every pending one-shot pod pinned to a node and end it at once with its output.

    ``loaded_driver(node)``: the driver version the node's Ready driver pod runs, None while
    none is Ready (the driver container is what loads the kernel module)."""
    for pod in store.list("pods"):
        spec, meta = pod["spec"], pod["metadata"]
        if pod["status"].get("phase") not in (None, "Pending") or spec.get("restartPolicy") != "Never":
            continue
        if meta.get("deletionTimestamp") or not spec.get("nodeName"):
            continue
        node = store.get("nodes", spec["nodeName"])
        if node is None:
            continue
        key = (meta["namespace"], meta["name"])
        pod = copy.deepcopy(pod)
        want = requested_gpus(pod)
        have = int(node["status"].get("allocatable", {}).get(GPU, "0") or 0)
        used = sum(
            requested_gpus(p)
            for p in store.list("pods")
            if p["spec"].get("nodeName") == node["metadata"]["name"]
            and p["metadata"]["uid"] != meta["uid"]
            and p["status"].get("phase") in ("Running", "Pending")
            and not p["metadata"].get("deletionTimestamp")
            and requested_gpus(p)
        )
        if node["spec"].get("unschedulable") and not tolerates_cordon(pod):
            _reject(store, pod, "NodeAffinity", f"Pod was rejected: node had untolerated taint {UNSCHEDULABLE_TAINT}")
            continue
        if want and used + want > have:
            msg = f"Node didn't have enough resource: {GPU}, requested: {want}, used: {used}, capacity: {have}"
            _reject(store, pod, f"OutOf{GPU}", f"Pod was rejected: {msg}")
            continue
        container = pod["spec"]["containers"][0]
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        version = loaded_driver(node["metadata"]["name"])
        if want and version is None:
            text, code = (
                "failed to create containerd task: OCI runtime create failed: nvidia-container-cli: "
                "initialization error: nvml error: driver not loaded: unknown",
                128,
            )
        else:
            branch = (version or "").split(".", 1)[0]
            driver = DriverRelease(version or "", CUDA_CEILING.get(branch, "0.0"))
            needed = re.search(r"cuda:(\d+)\.(\d+)", str(container.get("image", "")))
            ceiling = tuple(int(x) for x in driver.cuda.split("."))
            if needed and (int(needed.group(1)), int(needed.group(2))) > ceiling:
                text, code = (
                    "failed to create containerd task: OCI runtime create failed: nvidia-container-cli: "
                    f"requirement error: unsatisfied condition: cuda>={needed.group(1)}.{needed.group(2)}, please "
                    "update your driver to a newer version, or use an earlier cuda container: unknown",
                    128,
                )
            else:
                text, code = run_argv(argv, node_gpus(node, want), driver)
        reason = "Completed" if code == 0 else "StartError" if code == 128 else "Error"
        logs[key] = "" if reason == "StartError" else text
        pod["status"] = {
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": container["name"],
                    "ready": False,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": code,
                            "reason": reason,
                            **({"message": text.strip()} if reason == "StartError" else {}),
                        }
                    },
                }
            ],
        }
        store.replace("pods", pod)


def _reject(store: KubeStore, pod: KubeObject, reason: str, message: str) -> None:
    pod["status"] = {"phase": "Failed", "reason": reason, "message": message}
    store.replace("pods", pod)
