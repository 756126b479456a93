"""`cockpit probe`: probe nodes headless and print their driver state, folded like ``clush -b``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.fleet.backends.base import Observation
    from cockpit.fleet.backends.registry import BackendOptions
    from cockpit.gpu.nodestate import NodeState


#: From this many nodes on, a terminal on stderr sees how far the probe is.
PROGRESS_FROM = 32


class _Progress:
    """One line on stderr, rewritten as nodes answer: a big probe is never silent for long."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = self.unreachable = 0
        self._shown = 0.0

    def node_done(self, state: NodeState) -> None:
        import time

        self.done += 1
        self.unreachable += not state.reachable
        now = time.monotonic()
        if now - self._shown >= 0.2 or self.done == self.total:
            self._shown = now
            sys.stderr.write(f"\rprobing: {self.done}/{self.total} nodes done, {self.unreachable} unreachable ")
            sys.stderr.flush()

    def clear(self) -> None:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def configure(parser: argparse.ArgumentParser) -> None:
    from cockpit.commands.run import add_ssh_arguments  # light: run imports its machinery only when it runs

    parser.add_argument("spec", nargs="?", metavar="SPEC", help="hosts: gpu[01-16],login1 or @inventory[:group]")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--local", action="store_true", help="probe this machine through NVML instead of SSH")
    add_ssh_arguments(parser)
    parser.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="per-node probe timeout in seconds (default 30)"
    )
    parser.add_argument("--expect-gpus", type=int, metavar="N", help="GPUs each node should show; fewer is gpu-missing")
    parser.add_argument("--fanout", type=int, default=64, metavar="N", help="concurrent SSH connects (default 64)")
    from cockpit.commands.backend_flags import add_backend_arguments

    # a backend that reports node state (Slurm, Kubernetes) is read instead of opening SSH to each node
    add_backend_arguments(parser)


def group_key(state: NodeState) -> tuple[object, ...]:
    """What must be equal for two nodes to share one folded line."""
    gpu_names = tuple(sorted({g.name or "?" for g in state.gpus}))
    return (
        str(state.health),
        _evidence(state) if str(state.health) != "ok" else "",
        state.driver_version,
        state.kernel_module_version,
        state.cuda_version,
        state.driver_package,
        state.gpu_count,
        gpu_names,
        state.fabric_manager,
        tuple(sorted({x.code for x in state.xid_errors})),
    )


def _evidence(state: NodeState) -> str:
    """The node's evidence with its own name taken out, so the same failure on many nodes folds
    into one line ("cannot connect to <node>:22: connection refused")."""
    import re

    text = (state.health_evidence or state.error or "").removeprefix(f"{state.host}: ")
    return re.sub(rf"(?<![\w.-]){re.escape(state.host)}(?![\w-]|\.\w)", "<node>", text)


def describe(state: NodeState) -> list[str]:
    """The lines shown under a folded node set."""
    from cockpit.gpu.nodestate import show

    lines = [f"health      {state.health}: {_evidence(state)}"]
    if state.reachable:
        models = sorted({g.name or "?" for g in state.gpus})
        lines += [
            f"driver      {show(state.driver_version)}  "
            f"(CUDA {show(state.cuda_version)}, kernel module {show(state.kernel_module_version)})",
            f"package     {show(state.driver_package)}",
            f"gpus        {state.gpu_count}" + (f" x {', '.join(models)}" if models else ""),
            f"fabric mgr  {show(state.fabric_manager) if state.fabric_manager is not None else 'not installed'}",
        ]
        if state.xid_errors:
            codes = ", ".join(str(c) for c in sorted({x.code for x in state.xid_errors}))
            lines.append(f"xid         {len(state.xid_errors)} since boot (codes {codes}): {state.xid_errors[0].text}")
    return lines


def render_folded(states: Sequence[NodeState]) -> str:
    from cockpit.fleet.nodeset import fold_nodeset

    groups: dict[tuple[object, ...], list[NodeState]] = {}
    for state in states:
        groups.setdefault(group_key(state), []).append(state)
    out: list[str] = []
    # worst first, like an operator reads it
    from cockpit.gpu.nodestate import HEALTH_SEVERITY

    ordered = sorted(groups.values(), key=lambda g: (-HEALTH_SEVERITY[g[0].health], g[0].host))
    for members in ordered:
        names = fold_nodeset(s.host for s in members)
        title = f"{names} ({len(members)})" if len(members) > 1 else names
        rule = "-" * max(15, len(title))
        out += [rule, title, rule, *describe(members[0])]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json
    from pathlib import Path

    from cockpit.errors import BadInput
    from cockpit.view.inert import inert

    if args.timeout <= 0:
        raise BadInput("--timeout must be positive")
    if args.fanout < 1:
        raise BadInput("--fanout must be at least 1")
    if getattr(args, "backend", "ssh") != "ssh" and not args.local:
        from cockpit.commands.backend_flags import backend_options
        from cockpit.fleet.backends.registry import backend_class

        engine = backend_options(args)
        if backend_class(engine.name).reports_state:
            return _probe_through_backend(args, engine)
    if args.local:
        from cockpit.fleet.nvml_probe import probe_local

        states = [probe_local()]
    else:
        if not args.spec:
            raise BadInput("probe: give a host SPEC (gpu[01-04], @inventory.ini) or --local")
        from cockpit.fleet.inventory import parse_host_spec
        from cockpit.fleet.probes import probe_fleet
        from cockpit.fleet.transport import Transport, TransportOptions

        targets = parse_host_spec(args.spec)
        for flag, value in (("--ssh-config", args.ssh_config), ("--known-hosts", args.known_hosts)):
            if value and not Path(value).is_file() and not (flag == "--known-hosts" and args.accept_new_host_keys):
                raise BadInput(f"{flag} {value}: no such file")
        options = TransportOptions(
            ssh_config=args.ssh_config,
            known_hosts=args.known_hosts,
            accept_new_host_keys=args.accept_new_host_keys,
            fanout=args.fanout,
            connect_timeout_s=min(10.0, args.timeout),
            connect_attempts=2,
        )
        baseline = {t.name: args.expect_gpus for t in targets} if args.expect_gpus is not None else None

        progress = _Progress(len(targets)) if len(targets) >= PROGRESS_FROM and sys.stderr.isatty() else None

        async def probe_all() -> list[NodeState]:
            async with Transport(targets, options) as transport:
                found = await probe_fleet(
                    transport,
                    [t.name for t in targets],
                    baseline_gpus=baseline,
                    timeout=args.timeout,
                    on_done=progress.node_done if progress else None,
                )
                return [found[t.name] for t in targets]

        try:
            states = asyncio.run(probe_all())
        finally:
            if progress is not None:
                progress.clear()
    if args.json:
        print(json.dumps({"nodes": [s.model_dump(mode="json") for s in states]}, indent=2))
    else:
        print(inert(render_folded(states), newlines=True), end="")  # GPU names and errors come from nodes
    return 0 if all(s.reachable and str(s.health) == "ok" for s in states) else 1


def render_observations(observations: Sequence[Observation]) -> str:
    """What an engine reports of the nodes, folded like the SSH probe: one block per state."""
    from cockpit.fleet.nodeset import fold_nodeset

    groups: dict[tuple[str, str, str, str], list[Observation]] = {}
    for seen in observations:
        key = (str(seen.stage), seen.native_state, seen.driver_version or "", seen.reason or "")
        groups.setdefault(key, []).append(seen)
    out: list[str] = []
    for (stage, native, driver, reason), members in sorted(groups.items(), key=lambda g: (g[0][0], g[1][0].node)):
        names = fold_nodeset(s.node for s in members)
        title = f"{names} ({len(members)})" if len(members) > 1 else names
        rule = "-" * max(15, len(title))
        out += [rule, title, rule, f"{members[0].backend:<11} {native} ({stage})"]
        if driver:
            out.append(f"driver      {driver}")
        if reason:
            out.append(f"reason      {reason}")
        evidence = members[0].evidence if len(members) == 1 else {}
        out += [f"{key:<11} {value}" for key, value in evidence.items()]
    return "\n".join(out) + "\n"


#: an engine's words for a node that say nothing good: a probe through it exits 1 on them
_NOT_GOOD = frozenset({"failed", "down", "unknown"})


def _probe_through_backend(args: argparse.Namespace, options: BackendOptions) -> int:
    """Read the nodes' state from the engine (Slurm node states and GRES, Kubernetes labels
    and allocatable GPUs): no SSH to any node, only to the engine's control host when its
    settings name one."""
    import asyncio
    import json

    from cockpit.fleet.backends.registry import make_backend
    from cockpit.fleet.inventory import parse_host_spec
    from cockpit.fleet.transport import HostTarget, Transport, TransportOptions
    from cockpit.view.inert import inert

    nodes = [t.name for t in parse_host_spec(args.spec)] if args.spec else None
    control = options.control_host()
    transport = (
        Transport(
            [HostTarget(name=control)],
            TransportOptions(
                ssh_config=args.ssh_config, known_hosts=args.known_hosts, accept_new_host_keys=args.accept_new_host_keys
            ),
        )
        if control
        else None
    )

    async def read() -> list[Observation]:
        backend = make_backend(options, transport=transport)
        try:
            return await backend.observe(nodes) if nodes is not None else await backend.discover()
        finally:
            await backend.close()
            if transport is not None:
                await transport.close()

    from cockpit.errors import BadInput
    from cockpit.fleet.backends.base import BackendError

    try:
        seen = asyncio.run(read())
    except BackendError as exc:
        raise BadInput(f"backend {options.name}: {exc}") from None
    if args.json:
        print(json.dumps({"backend": str(options.name), "nodes": [s.model_dump(mode="json") for s in seen]}, indent=2))
    else:
        print(inert(render_observations(seen), newlines=True), end="")  # the engine's words come from outside
    return 0 if seen and all(str(s.stage) not in _NOT_GOOD for s in seen) else 1
