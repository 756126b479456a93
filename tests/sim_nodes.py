"""A simulated node driven through its own shell, as the simulator's tests drive it: the same
shell its SSH server runs, without SSH, its simulated seconds passing at once."""

from __future__ import annotations

import asyncio

from cockpit.sim.node import NodeHooks, SimNode
from cockpit.sim.platform import DEFAULT_PROFILE, NodeProfile
from cockpit.sim.scenarios import Scenario


async def no_wait(seconds: float) -> None:
    await asyncio.sleep(0)  # at once, yet other tasks still run (a second dnf waiting for the lock)


def quick_node(name: str, index: int, scenario: Scenario, profile: NodeProfile = DEFAULT_PROFILE) -> SimNode:
    """The fleet's node ``index`` (seed 0), whose reboots wait for the test's ``reboot_now()``."""
    node = SimNode.create(name, index, scenario, seed=0, profile=profile)
    node.hooks = NodeHooks(reboot=lambda _node: None, sleep=no_wait)
    return node


async def sh(node: SimNode, line: str) -> tuple[int, str, str]:
    """Run a command line on the node as its SSH login: (exit status, stdout, stderr)."""
    out: list[str] = []
    err: list[str] = []
    status = await node.shell().run(line, out.append, err.append)
    return status, "".join(out), "".join(err)
