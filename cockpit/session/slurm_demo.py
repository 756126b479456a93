"""``cockpit demo --backend slurm``: the simulated fleet's window with a real Slurm as its engine.

A throwaway Slurm on 127.0.0.1 (:mod:`cockpit.sim.slurm_cluster`: Debian's munged, slurmctld
and one slurmd per simulated node, as root) drains, reboots and resumes the nodes through the
Slurm backend, exactly as ``cockpit run --backend slurm`` asks a site's Slurm; the runbook's
own steps (record, install, smoke) go to the simulated nodes over SSH. Slurm's RebootProgram
reboots the simulated node, and that node's slurmd starts again only when the node is up, as
a real slurmd starts with its machine; a node the scenario keeps down never registers, and
Slurm says so ("reboot timed out") as it would.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from cockpit.fleet.backends.base import BackendName
from cockpit.fleet.backends.registry import BackendOptions
from cockpit.fleet.backends.runners import local_runner
from cockpit.fleet.backends.slurm import SlurmBackend
from cockpit.runbook.loader import DEFAULT_RUNBOOK
from cockpit.session.demo import demo_session
from cockpit.session.operator import Session
from cockpit.sim.fleet import SimFleet, node_names
from cockpit.sim.slurm_cluster import SlurmCluster, slurm_available, start_slurm

#: one slurmd process a node: a demo's worth
SLURM_MAX_NODES = 16
#: longer than any reboot the demo's runbook waits for (its reboot_timeout_s, scaled): the
#: preflight holds ResumeTimeout to it, and the cockpit's own timeout is the one that fires
DEMO_RESUME_TIMEOUT_S = 3600
#: what the demo says when this machine cannot run one (one line, no traceback)
NEEDS = (
    "cockpit demo --backend slurm starts a real Slurm on 127.0.0.1 and needs root and Slurm's daemons: "
    "apt-get install slurmctld slurmd slurm-client munge"
)


def why_not() -> str | None:
    """Why this machine cannot run the Slurm demo, or None when it can."""
    missing = slurm_available()
    return f"{NEEDS} ({missing})" if missing else None


@contextmanager
def _slurm_conf(conf: Path) -> Iterator[None]:
    """The Slurm clients the backend runs find the demo's cluster as a site's find theirs."""
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before


@asynccontextmanager
async def slurm_demo_session(
    *,
    nodes: int,
    scenario: str,
    sessions_dir: Path,
    change_id: str | None,
    speed: float,
    seed: int = 0,
    runbook: str | None = None,
) -> AsyncIterator[tuple[Session, SimFleet]]:
    cluster: SlurmCluster = await asyncio.to_thread(
        start_slurm, tuple(node_names(nodes)), reboot_pause_s=0.2, resume_timeout_s=DEMO_RESUME_TIMEOUT_S
    )
    try:
        with _slurm_conf(cluster.conf):
            async with demo_session(
                nodes=nodes,
                scenario=scenario,
                sessions_dir=sessions_dir,
                change_id=change_id,
                speed=speed,
                seed=seed,
                runbook=runbook or DEFAULT_RUNBOOK,
                params={"scheduler": "slurm"},
                backend=lambda _transport: SlurmBackend(local_runner(), poll_s=1.0),
                backend_options=BackendOptions(name=BackendName.SLURM),
            ) as (session, fleet):
                hand_reboots_to(cluster, fleet, asyncio.get_running_loop())
                yield session, fleet
    finally:
        await asyncio.to_thread(cluster.stop)


def hand_reboots_to(cluster: SlurmCluster, fleet: SimFleet, loop: asyncio.AbstractEventLoop) -> None:
    """Slurm's RebootProgram reboots the simulated node; its slurmd comes back with the node."""
    reboots_before: dict[str, int] = {}

    def on_reboot(node: str) -> None:  # the cluster's supervisor thread: the fleet lives on the loop
        reboots_before[node] = fleet.nodes[node].reboots
        loop.call_soon_threadsafe(fleet.request_reboot, node)

    def is_back(node: str) -> bool:
        return fleet.nodes[node].reboots > reboots_before.get(node, 0) and fleet.is_up(node)

    cluster.on_reboot, cluster.is_back = on_reboot, is_back
