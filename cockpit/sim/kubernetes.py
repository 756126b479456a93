"""The simulated Kubernetes API as ``kubectl`` shows it: nodes, their GPU labels, cordon and drain.

It knows the nodes of the fleet, so ``kubectl get node`` shows a rebooting node
NotReady and the labels GPU feature discovery would publish for its driver.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from cockpit.sim.kernel import KERNEL
from cockpit.sim.node import SimNode
from cockpit.sim.shell import Io, Sleep

K8S_VERSION = "v1.31.4"

#: a Kubernetes object as ``kubectl -o json`` prints it (JSON: its values are of any shape)
KubeObject = dict[str, Any]


class Kubernetes:
    def __init__(self, nodes: dict[str, SimNode], is_up: Callable[[str], bool], sleep: Sleep) -> None:
        self.nodes = nodes
        self.is_up = is_up  # a node that is down (rebooting) is NotReady
        self.sleep = sleep
        self.cordoned: set[str] = set()

    def _node_or_error(self, name: str, io: Io) -> SimNode | None:
        node = self.nodes.get(name)
        if node is None:
            io.err(f'Error from server (NotFound): nodes "{name}" not found\n')
        return node

    def _ready(self, name: str) -> str:
        return "True" if self.is_up(name) else "Unknown"

    def _labels(self, node: SimNode) -> dict[str, str]:
        labels = {
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": node.gpus[0].name.replace(" ", "-") if node.gpus else "",
            "nvidia.com/gpu.count": str(len(node.gpus)),
        }
        if node.module is not None:
            major, minor, rev = ([*node.module.version.split("."), "", ""])[:3]
            cmaj, cmin = node.module.cuda.split(".")
            labels.update(
                {
                    "nvidia.com/cuda.driver-version.full": node.module.version,
                    "nvidia.com/cuda.driver.major": major,
                    "nvidia.com/cuda.driver.minor": minor,
                    "nvidia.com/cuda.driver.rev": rev,
                    "nvidia.com/cuda.runtime-version.major": cmaj,
                    "nvidia.com/cuda.runtime-version.minor": cmin,
                }
            )
        return labels

    def _node_doc(self, node: SimNode) -> KubeObject:
        doc: KubeObject = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name, "labels": self._labels(node)},
            "spec": {"unschedulable": True} if node.name in self.cordoned else {},
            "status": {
                "allocatable": {"nvidia.com/gpu": str(len(node.gpus)) if self.is_up(node.name) else "0"},
                "capacity": {"nvidia.com/gpu": str(len(node.gpus))},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": self._ready(node.name),
                        "reason": "KubeletReady" if self.is_up(node.name) else "NodeStatusUnknown",
                    }
                ],
                "nodeInfo": {
                    "kernelVersion": KERNEL,
                    "kubeletVersion": K8S_VERSION,
                    "osImage": "Ubuntu 24.04.2 LTS",
                    "containerRuntimeVersion": "containerd://1.7.27",
                    "bootID": node.boot_id,
                },
            },
        }
        if node.name in self.cordoned:
            doc["spec"] = {
                "unschedulable": True,
                "taints": [{"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable"}],
            }
        return doc

    async def kubectl(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        out_fmt = ""
        words: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-o", "--output"):
                out_fmt = args[i + 1]
                i += 2
                continue
            if a.startswith("-o") and len(a) > 2 and not a.startswith("--"):
                out_fmt = a[2:].lstrip("=")
            elif a.startswith("--output="):
                out_fmt = a.split("=", 1)[1]
            elif a in (
                "-n",
                "--namespace",
                "--context",
                "--kubeconfig",
                "-l",
                "--selector",
                "--field-selector",
                "--timeout",
                "--grace-period",
            ):
                words.append(a)
                if i + 1 < len(args):
                    words.append(args[i + 1])
                i += 2
                continue
            else:
                words.append(a)
            i += 1
        verbs = [w for w in words if not w.startswith("-")]
        if not verbs:
            io.err("kubectl controls the Kubernetes cluster manager.\n")
            return 1
        verb = verbs[0]
        if verb == "version":
            io.out(f"Client Version: {K8S_VERSION}\nServer Version: {K8S_VERSION}\n")
            return 0
        if verb in ("cordon", "uncordon", "drain"):
            if len(verbs) < 2:
                io.err(f"error: USAGE: {verb} NODE [flags]\n")
                return 1
            name = verbs[1]
            node = self._node_or_error(name, io)
            if node is None:
                return 1
            if verb == "uncordon":
                was = name in self.cordoned
                self.cordoned.discard(name)
                io.out(f"node/{name} {'uncordoned' if was else 'already uncordoned'}\n")
                return 0
            was = name in self.cordoned
            self.cordoned.add(name)
            io.out(f"node/{name} {'already cordoned' if was else 'cordoned'}\n")
            if verb == "drain":
                if "--ignore-daemonsets" not in words:
                    io.err(
                        f'error: unable to drain node "{name}" due to error: cannot delete DaemonSet-managed Pods '
                        "(use --ignore-daemonsets to ignore): "
                        f"gpu-operator/nvidia-device-plugin-daemonset-{_pod_suffix(name)}\n"
                    )
                    return 1
                io.err(
                    "Warning: ignoring DaemonSet-managed Pods: "
                    f"gpu-operator/nvidia-device-plugin-daemonset-{_pod_suffix(name)}, "
                    f"gpu-operator/nvidia-dcgm-exporter-{_pod_suffix(name + 'd')}, "
                    f"kube-system/kube-proxy-{_pod_suffix(name + 'k')}\n"
                )
                pod = f"vllm-serving-7c9f8d6b5-{_pod_suffix(name + 'v')}"
                io.out(f"evicting pod inference/{pod}\n")
                await self.sleep(0.5)
                io.out(f"pod/{pod} evicted\nnode/{name} drained\n")
            return 0
        if verb == "get" and len(verbs) >= 2 and verbs[1] in ("node", "nodes", "no"):
            names = verbs[2:] or list(self.nodes)
            docs = []
            for name in names:
                node = self._node_or_error(name, io)
                if node is None:
                    return 1
                docs.append(self._node_doc(node))
            return self._render_nodes(docs, out_fmt, single=len(verbs) > 2 and len(names) == 1, io=io)
        if verb == "get" and len(verbs) >= 2 and verbs[1] in ("pods", "pod", "po"):
            sel = next(
                (words[j + 1] for j, w in enumerate(words) if w == "--field-selector" and j + 1 < len(words)), ""
            )
            m = re.search(r"spec\.nodeName=([\w.-]+)", sel)
            names = [m.group(1)] if m else list(self.nodes)
            io.out("NAMESPACE      NAME                                   READY   STATUS    RESTARTS   AGE\n")
            for name in names:
                io.out(
                    f"gpu-operator   nvidia-device-plugin-daemonset-{_pod_suffix(name)}   "
                    "1/1     Running   0          12d\n"
                )
                if name not in self.cordoned:
                    io.out(
                        f"inference      vllm-serving-7c9f8d6b5-{_pod_suffix(name + 'v')}         "
                        "1/1     Running   0          3d\n"
                    )
            return 0
        if verb in ("label", "annotate"):
            if len(verbs) >= 3 and self._node_or_error(verbs[2], io) is None:
                return 1
            io.out(f"node/{verbs[2] if len(verbs) > 2 else ''} {'labeled' if verb == 'label' else 'annotated'}\n")
            return 0
        if verb == "wait":
            return 0
        io.err(f'error: unknown command "{verb}" for "kubectl"\n')
        return 1

    def _render_nodes(self, docs: list[KubeObject], fmt: str, *, single: bool, io: Io) -> int:
        if fmt == "json":
            io.out(
                json.dumps(docs[0] if single else {"apiVersion": "v1", "kind": "List", "items": docs}, indent=4) + "\n"
            )
            return 0
        if fmt.startswith("jsonpath="):
            expr = fmt.split("=", 1)[1]
            io.out("".join(_jsonpath(expr, d) for d in docs))
            return 0
        if fmt in ("name",):
            io.out("".join(f"node/{d['metadata']['name']}\n" for d in docs))
            return 0
        io.out("NAME     STATUS                     ROLES    AGE    VERSION\n")
        for d in docs:
            meta, status, spec = d["metadata"], d["status"], d["spec"]
            ready = status["conditions"][0]["status"] == "True"
            st = "Ready" if ready else "NotReady"
            if spec.get("unschedulable"):
                st += ",SchedulingDisabled"
            io.out(f"{meta['name']:<8} {st:<26} <none>   120d   {K8S_VERSION}\n")
        return 0


def _pod_suffix(seed: str) -> str:
    return hashlib.sha1(seed.encode()).hexdigest()[:5]


def _jsonpath(expr: str, doc: KubeObject) -> str:
    """The few kubectl jsonpath expressions runbooks use: ``{.a.b}``, Ready condition, labels."""
    out = []
    for part in re.split(r"(\{[^}]*\})", expr):
        if not (part.startswith("{") and part.endswith("}")):
            out.append(part.replace("\\n", "\n"))
            continue
        path = part[1:-1].strip()
        if path.startswith("range") or path == "end":
            continue
        m = re.fullmatch(r'\.status\.conditions\[\?\(@\.type==["\']?(\w+)["\']?\)\]\.(\w+)', path)
        if m:
            for cond in doc["status"]["conditions"]:
                if cond["type"] == m.group(1):
                    out.append(str(cond.get(m.group(2), "")))
            continue
        value: object = doc
        for key in re.findall(r"\.((?:[^.\\]|\\.)+)", path):
            key = key.replace("\\.", ".")
            value = value.get(key, "") if isinstance(value, dict) else ""
        out.append(json.dumps(value) if isinstance(value, (dict, list)) else ("true" if value is True else str(value)))
    return "".join(out)
