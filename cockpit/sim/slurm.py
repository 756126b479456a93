"""The simulated Slurm controller: ``scontrol``, ``squeue`` and ``sinfo`` over the fleet's nodes.

Every node starts MIXED with one running job; draining it waits for the job to end
(DRAINING, then DRAINED), and a node that is down shows as DOWN.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.fleet.nodeset import expand_nodeset
from cockpit.sim.node import SimNode
from cockpit.sim.shell import Io, Sleep


@dataclass
class SlurmNode:
    state: str = "MIXED"  # MIXED (a job running), IDLE, DRAINING, DRAINED, DOWN
    reason: str = ""
    jobs: list[str] = field(default_factory=list)


class Slurm:
    def __init__(self, nodes: dict[str, SimNode], is_up: Callable[[str], bool], sleep: Sleep) -> None:
        self.nodes = nodes
        self.is_up = is_up
        self.sleep = sleep
        self.slurm_nodes = {name: SlurmNode(jobs=[f"{48100 + i}"]) for i, name in enumerate(nodes)}
        self._job_endings: set[asyncio.Task[None]] = set()  # held so the loop does not drop them

    async def scontrol(self, argv: list[str], io: Io) -> int:
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
                if name not in self.slurm_nodes:
                    io.err("slurm_update error: Invalid node name specified\n")
                    return 1
            state = kv.get("state", "").lower()
            for name in _expand_simple(names):
                s = self.slurm_nodes[name]
                if state == "drain":
                    if not kv.get("reason"):
                        io.err("You must specify a reason when DRAINING a node\nRequest aborted\n")
                        return 1
                    s.reason = kv["reason"]
                    s.state = "DRAINING" if s.jobs else "DRAINED"
                    if s.jobs:
                        ending = asyncio.get_running_loop().create_task(self._finish_jobs(name))
                        self._job_endings.add(ending)
                        ending.add_done_callback(self._job_endings.discard)
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
            if name not in self.slurm_nodes:
                io.err(f"Node {name} not found\n")
                return 1
            s = self.slurm_nodes[name]
            state = self._slurm_state(name)
            # Gres is what gres.conf configures, not what the node has now: slurmd finding fewer
            # GPUs gets the node drained with this reason (slurmctld's node registration check)
            configured, found = self.nodes[name].gpu_count, len(self.nodes[name].gpus)
            reason = s.reason
            if found < configured and self.is_up(name):
                reason = f"gres/gpu count reported lower than configured ({found} < {configured})"
                state = state if "DRAIN" in state else state + "+DRAIN"
            io.out(
                f"NodeName={name} Arch=x86_64 CoresPerSocket=56\n   Gres=gpu:h100:{configured}(S:0-1)\n"
                f"   State={state} ThreadsPerCore=2\n   Reason={reason or '(null)'}\n"
            )
            return 0
        if args[0] == "ping":
            io.out("Slurmctld(primary) at control is UP\n")
            return 0
        io.err(f"invalid keyword: {args[0]}\n")
        return 1

    async def _finish_jobs(self, name: str) -> None:
        await self.sleep(1.0)
        s = self.slurm_nodes[name]
        s.jobs.clear()
        if s.state == "DRAINING":
            s.state = "DRAINED"

    def _slurm_state(self, name: str) -> str:
        s = self.slurm_nodes[name]
        if not self.is_up(name):
            return "DOWN+DRAIN" if s.state.startswith("DRAIN") else "DOWN+NOT_RESPONDING"
        return {"MIXED": "MIXED", "IDLE": "IDLE", "DRAINING": "MIXED+DRAIN", "DRAINED": "IDLE+DRAIN", "DOWN": "DOWN"}[
            s.state
        ]

    async def squeue(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        nodes = list(self.slurm_nodes)
        for j, a in enumerate(args):
            if a in ("-w", "--nodelist") and j + 1 < len(args):
                nodes = _expand_simple(args[j + 1])
            elif a.startswith("--nodelist="):
                nodes = _expand_simple(a.split("=", 1)[1])
        if "-h" not in args and "--noheader" not in args:
            io.out("             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n")
        for name in nodes:
            if name not in self.slurm_nodes:
                io.err(f"squeue: error: Invalid node name {name}\n")
                return 1
            for job in self.slurm_nodes[name].jobs:
                io.out(f"{job:>18}       gpu vllm-srv    alice  R 2-03:04:05      1 {name}\n")
        return 0

    async def sinfo(self, argv: list[str], io: Io) -> int:
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
        nodes = list(self.slurm_nodes)
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
                if name not in self.slurm_nodes:
                    continue
                state = self._slurm_state(name)
                line = (
                    fmt.replace("%N", name)
                    .replace("%n", name)
                    .replace("%t", short.get(state, state.lower()))
                    .replace("%T", state)
                    .replace("%E", self.slurm_nodes[name].reason or "none")
                )
                io.out(re.sub(r"%[-0-9]*[a-zA-Z]", "", line) + "\n")
            return 0
        if header:
            io.out("PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n")
        by_state: dict[str, list[str]] = {}
        for name in nodes:
            if name in self.slurm_nodes:
                by_state.setdefault(short.get(self._slurm_state(name), "unk"), []).append(name)
        for state, names in sorted(by_state.items()):
            io.out(f"gpu*         up   infinite {len(names):>6} {state:>6} {','.join(names)}\n")
        return 0


def _kv(text: str) -> tuple[str, str]:
    k, _, v = text.partition("=")
    return k, v


def _expand_simple(spec: str) -> list[str]:
    """``gpu[01-03],gpu05`` -> names (the node set notation Slurm accepts)."""
    return list(expand_nodeset(spec))
