"""`cockpit sim`: run the fleet simulator alone, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import contextlib

SCENARIO_NAMES = (
    *("happy", "gpu-missing", "no-return", "fabric-manager", "mismatch", "flaky-link", "slow", "xid"),
    *("smoke-false-pass", "hgx-lockstep", "held-packages", "rollback-repo-gone", "rhel9", "non-root", "sudo-password"),
    *("secure-boot", "gpu-holders", "containerd-only"),
    *("ubuntu-archive-hgx", "precompiled-rollback", "r590-rename", "open-only-gpu", "rhel9-precompiled"),
    # the fault matrix's (cockpit/session/fault_matrix.py) and the fleets it runs clean
    *("fabric-incomplete", "nvlink-down", "sxid", "xid-94", "xid-95", "xid-143", "xid-149"),
    *("gpu-missing-no-xid", "pcie-downtrained", "peermem-missing", "rejoin-slow", "flavour-flip", "mig-lost"),
    *("load-ecc", "dcgm-old", "imex", "imex-skew", "k8s-holders", "podman", "cdi-stale"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nodes", type=int, default=8, help="number of GPU nodes (gpu01..gpuNN, up to 4096), default 8"
    )
    parser.add_argument("--scenario", default="happy", help=f"fault scenario: {', '.join(SCENARIO_NAMES)}")
    parser.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="loopback address; PORT is the control host's port and gpuNN listens on PORT+N (0: any free ports)",
    )
    parser.add_argument(
        "--dir", default=None, help="where to write ssh_config, known_hosts and the identity (default: a new temp dir)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for the simulated values and faults")
    parser.add_argument(
        "--speed", type=float, default=1.0, help="time scale: 2 makes installs and reboots twice as fast"
    )


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` on a loopback address only (the simulator accepts any user with its key)."""
    import ipaddress

    from cockpit.errors import BadInput

    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise BadInput(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:0")
    host = host.strip("[]")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise BadInput(f"--listen {text!r}: HOST must be a loopback IP address (127.0.0.1 or ::1)") from None
    if not address.is_loopback:
        raise BadInput(f"--listen {text!r}: the simulator only listens on loopback addresses, not {host}")
    port = int(port_text)
    if port > 65535:
        raise BadInput(f"--listen {text!r}: port out of range")
    return host, port


def run(args: argparse.Namespace) -> int:
    import asyncio
    import signal
    import sys
    import tempfile
    from pathlib import Path

    from cockpit.errors import BadInput
    from cockpit.fleet.nodeset import fold_nodeset
    from cockpit.sim import SCENARIOS, SimFleet
    from cockpit.sim.fleet import MAX_NODES, open_files_needed, raise_open_file_limit

    host, port = parse_listen(args.listen)
    if not 1 <= args.nodes <= MAX_NODES:
        raise BadInput(f"--nodes {args.nodes}: expected 1..{MAX_NODES}")
    if args.scenario not in SCENARIOS:
        raise BadInput(f"--scenario {args.scenario!r}: unknown; known: {', '.join(SCENARIOS)}")
    if args.speed <= 0:
        raise BadInput("--speed must be positive")
    if port and port + args.nodes > 65535:
        raise BadInput(f"--listen {args.listen}: not enough ports above {port} for {args.nodes} nodes")
    try:
        raise_open_file_limit(open_files_needed(args.nodes, clients_too=False))
    except ValueError as exc:
        raise BadInput(f"--nodes {args.nodes}: {exc}") from None
    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="cockpit-sim-"))

    async def main() -> None:
        fleet = SimFleet(args.nodes, args.scenario, host=host, seed=args.seed, speed=args.speed, base_port=port)
        try:
            # each host is served from its first connection on: a 2,000-node fleet is ready
            # in a second, not after seconds of asyncssh setting up servers nobody calls yet
            fleet.start_on_first_connection()
        except OSError as exc:
            raise BadInput(f"--listen {args.listen}: cannot listen: {exc.strerror or exc}") from None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            files = fleet.write_client_files(directory)
            nodes = fold_nodeset(fleet.node_names)
            scenario = SCENARIOS[args.scenario]
            print(
                f"cockpit sim: {args.nodes} GPU nodes {nodes} + control on {host}, "
                f"scenario {scenario.name}: {scenario.summary}"
            )
            print(f"  ssh_config   {files.ssh_config}")
            print(f"  known_hosts  {files.known_hosts}")
            print(f"  identity     {files.identity}")
            print("try:")
            print(f"  cockpit probe '{nodes}' --ssh-config {files.ssh_config}")
            print(f"  ssh -F {files.ssh_config} {fleet.node_names[0]} nvidia-smi")
            print("ready; Ctrl-C stops the fleet", flush=True)
            await stop.wait()
        finally:
            await fleet.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    print("cockpit sim: stopped", file=sys.stderr)
    return 0
