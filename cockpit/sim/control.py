"""The simulated control host: Kubernetes (kubectl) and Slurm (scontrol, squeue, sinfo).

It knows the nodes of the fleet, so ``kubectl get node`` shows a rebooting node
NotReady and the labels GPU feature discovery would publish for its driver.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.sim import coreutils
from cockpit.sim.node import SimNode
from cockpit.sim.shell import Handler, Io, Shell

K8S_VERSION = "v1.31.4"


@dataclass
class SlurmNode:
    state: str = "MIXED"  # MIXED (a job running), IDLE, DRAINING, DRAINED, DOWN
    reason: str = ""
    jobs: list[str] = field(default_factory=list)


@dataclass
class SimControl:
    nodes: dict[str, SimNode]
    is_up: Callable[[str], bool]
    sleep: Callable[[float], asyncio.Future[None] | object]
    cordoned: set[str] = field(default_factory=set)
    slurm: dict[str, SlurmNode] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, name in enumerate(self.nodes):
            self.slurm[name] = SlurmNode(jobs=[f"{48100 + i}"])

    def shell(self) -> Shell:
        return Shell(self._resolve, lambda p: self.files.get(p), self._write)

    def _write(self, path: str, data: str, append: bool) -> None:
        self.files[path] = (self.files.get(path, "") + data) if append else data

    def _resolve(self, name: str) -> Handler | None:
        table: dict[str, Handler] = dict(coreutils.COMMANDS)
        table.update(
            {
                "kubectl": self._kubectl,
                "scontrol": self._scontrol,
                "squeue": self._squeue,
                "sinfo": self._sinfo,
                "hostname": self._hostname,
                "sudo": self._sudo,
                "sh": self._sh,
                "bash": self._sh,
                "cat": self._cat,
            }
        )
        return table.get(name)

    async def _hostname(self, argv: list[str], io: Io) -> int:
        io.out("control\n")
        return 0

    async def _cat(self, argv: list[str], io: Io) -> int:
        if len(argv) == 1:
            io.out(io.stdin)
            return 0
        for path in argv[1:]:
            if path not in self.files:
                io.err(f"cat: {path}: No such file or directory\n")
                return 1
            io.out(self.files[path])
        return 0

    async def _sudo(self, argv: list[str], io: Io) -> int:
        args = [a for a in argv[1:]]
        while args and args[0].startswith("-"):
            args.pop(0)
        if not args:
            return 0
        handler = self._resolve(args[0])
        if handler is None:
            io.err(f"sudo: {args[0]}: command not found\n")
            return 1
        return await handler(args, io)

    async def _sh(self, argv: list[str], io: Io) -> int:
        if len(argv) >= 3 and argv[1] == "-c":
            return await self.shell().run(argv[2], io.out, io.err, io.stdin)
        return await self.shell().run(io.stdin, io.out, io.err)

    # -- kubernetes -----------------------------------------------------------------

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

    def _node_doc(self, node: SimNode) -> dict[str, object]:
        doc: dict[str, object] = {
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
                    "kernelVersion": "6.8.0-60-generic",
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

    async def _kubectl(self, argv: list[str], io: Io) -> int:
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
                        f"(use --ignore-daemonsets to ignore): gpu-operator/nvidia-device-plugin-daemonset-{_pod_suffix(name)}\n"
                    )
                    return 1
                io.err(
                    f"Warning: ignoring DaemonSet-managed Pods: gpu-operator/nvidia-device-plugin-daemonset-{_pod_suffix(name)}, "
                    f"gpu-operator/nvidia-dcgm-exporter-{_pod_suffix(name + 'd')}, kube-system/kube-proxy-{_pod_suffix(name + 'k')}\n"
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
                    f"gpu-operator   nvidia-device-plugin-daemonset-{_pod_suffix(name)}   1/1     Running   0          12d\n"
                )
                if name not in self.cordoned:
                    io.out(
                        f"inference      vllm-serving-7c9f8d6b5-{_pod_suffix(name + 'v')}         1/1     Running   0          3d\n"
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

    def _render_nodes(self, docs: list[dict[str, object]], fmt: str, *, single: bool, io: Io) -> int:
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
            io.out("".join(f"node/{d['metadata']['name']}\n" for d in docs))  # type: ignore[index]
            return 0
        io.out("NAME     STATUS                     ROLES    AGE    VERSION\n")
        for d in docs:
            meta, status, spec = d["metadata"], d["status"], d["spec"]
            ready = status["conditions"][0]["status"] == "True"  # type: ignore[index]
            st = "Ready" if ready else "NotReady"
            if spec.get("unschedulable"):  # type: ignore[union-attr]
                st += ",SchedulingDisabled"
            io.out(f"{meta['name']:<8} {st:<26} <none>   120d   {K8S_VERSION}\n")  # type: ignore[index]
        return 0

    # -- slurm ----------------------------------------------------------------------

    async def _scontrol(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        if not args:
            io.err("scontrol: error: no command given\n")
            return 1
        if args[0] == "update":
            kv = dict(_kv(a) for a in args[1:] if "=" in a)
            kv = {k.lower(): v for k, v in kv.items()}
            names = kv.get("nodename") or kv.get("node")
            if not names:
                io.err("scontrol: error: Invalid input: update needs NodeName\n")
                return 1
            for name in _expand_simple(names):
                if name not in self.slurm:
                    io.err("slurm_update error: Invalid node name specified\n")
                    return 1
            state = kv.get("state", "").lower()
            for name in _expand_simple(names):
                s = self.slurm[name]
                if state == "drain":
                    if not kv.get("reason"):
                        io.err("You must specify a reason when DRAINING a node\nRequest aborted\n")
                        return 1
                    s.reason = kv["reason"]
                    s.state = "DRAINING" if s.jobs else "DRAINED"
                    if s.jobs:
                        asyncio.get_running_loop().create_task(self._finish_jobs(name))
                elif state in ("resume", "undrain", "idle"):
                    s.state = "IDLE"
                    s.reason = ""
                elif state == "down":
                    s.state = "DOWN"
                    s.reason = kv.get("reason", "")
                elif state:
                    io.err("scontrol: error: Invalid node state specified\n")
                    return 1
            return 0
        if args[0] == "show" and len(args) >= 3 and args[1] == "node":
            name = args[2]
            if name not in self.slurm:
                io.err(f"Node {name} not found\n")
                return 1
            s = self.slurm[name]
            state = self._slurm_state(name)
            io.out(
                f"NodeName={name} Arch=x86_64 CoresPerSocket=56\n   Gres=gpu:h100:{len(self.nodes[name].gpus)}\n"
                f"   State={state} ThreadsPerCore=2\n   Reason={s.reason or '(null)'}\n"
            )
            return 0
        if args[0] == "ping":
            io.out("Slurmctld(primary) at control is UP\n")
            return 0
        io.err(f"invalid keyword: {args[0]}\n")
        return 1

    async def _finish_jobs(self, name: str) -> None:
        await self.sleep(1.0)
        s = self.slurm[name]
        s.jobs.clear()
        if s.state == "DRAINING":
            s.state = "DRAINED"

    def _slurm_state(self, name: str) -> str:
        s = self.slurm[name]
        if not self.is_up(name):
            return "DOWN+DRAIN" if s.state.startswith("DRAIN") else "DOWN+NOT_RESPONDING"
        return {"MIXED": "MIXED", "IDLE": "IDLE", "DRAINING": "MIXED+DRAIN", "DRAINED": "IDLE+DRAIN", "DOWN": "DOWN"}[
            s.state
        ]

    async def _squeue(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        nodes = list(self.slurm)
        for j, a in enumerate(args):
            if a in ("-w", "--nodelist") and j + 1 < len(args):
                nodes = _expand_simple(args[j + 1])
            elif a.startswith("--nodelist="):
                nodes = _expand_simple(a.split("=", 1)[1])
        if "-h" not in args and "--noheader" not in args:
            io.out("             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n")
        for name in nodes:
            if name not in self.slurm:
                io.err(f"squeue: error: Invalid node name {name}\n")
                return 1
            for job in self.slurm[name].jobs:
                io.out(f"{job:>18}       gpu vllm-srv    alice  R 2-03:04:05      1 {name}\n")
        return 0

    async def _sinfo(self, argv: list[str], io: Io) -> int:
        short = {
            "IDLE": "idle",
            "MIXED": "mix",
            "MIXED+DRAIN": "drng",
            "IDLE+DRAIN": "drain",
            "DOWN": "down",
            "DOWN+DRAIN": "drain*",
            "DOWN+NOT_RESPONDING": "down*",
        }
        args = argv[1:]
        nodes = list(self.slurm)
        fmt = None
        for j, a in enumerate(args):
            if a in ("-n", "--nodes") and j + 1 < len(args):
                nodes = _expand_simple(args[j + 1])
            elif a in ("-o", "--format") and j + 1 < len(args):
                fmt = args[j + 1]
            elif a.startswith("--format="):
                fmt = a.split("=", 1)[1]
        header = "-h" not in args and "--noheader" not in args
        if fmt:
            for name in nodes:
                if name not in self.slurm:
                    continue
                state = self._slurm_state(name)
                line = (
                    fmt.replace("%N", name)
                    .replace("%n", name)
                    .replace("%t", short.get(state, state.lower()))
                    .replace("%T", state)
                    .replace("%E", self.slurm[name].reason or "none")
                )
                io.out(re.sub(r"%[-0-9]*[a-zA-Z]", "", line) + "\n")
            return 0
        if header:
            io.out("PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n")
        by_state: dict[str, list[str]] = {}
        for name in nodes:
            if name in self.slurm:
                by_state.setdefault(short.get(self._slurm_state(name), "unk"), []).append(name)
        for state, names in sorted(by_state.items()):
            io.out(f"gpu*         up   infinite {len(names):>6} {state:>6} {','.join(names)}\n")
        return 0


def _kv(text: str) -> tuple[str, str]:
    k, _, v = text.partition("=")
    return k, v


def _expand_simple(spec: str) -> list[str]:
    """``gpu[01-03],gpu05`` -> names (the node set notation Slurm accepts)."""
    from cockpit.fleet.nodeset import expand_nodeset

    return list(expand_nodeset(spec))


def _pod_suffix(seed: str) -> str:
    import hashlib

    return hashlib.sha1(seed.encode()).hexdigest()[:5]


def _jsonpath(expr: str, doc: dict[str, object]) -> str:
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
            for cond in doc["status"]["conditions"]:  # type: ignore[index]
                if cond["type"] == m.group(1):
                    out.append(str(cond.get(m.group(2), "")))
            continue
        value: object = doc
        for key in re.findall(r"\.((?:[^.\\]|\\.)+)", path):
            key = key.replace("\\.", ".")
            value = value.get(key, "") if isinstance(value, dict) else ""
        out.append(json.dumps(value) if isinstance(value, (dict, list)) else ("true" if value is True else str(value)))
    return "".join(out)
