"""A simulated GPU Operator cluster served on 127.0.0.1: the API emulator with the simulated
operator beside it, and a kubeconfig that reaches it, as the backend would be pointed at a real one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from cockpit.sim.kube.api import KubeEmulator
from cockpit.sim.kube.gpu_operator import SimCluster

#: the driver the captured node document runs (its nvidia.com/cuda.driver-version.full label)
NODE_DRIVER = "580.65.06"


@asynccontextmanager
async def served_cluster(
    sim: SimCluster,
    names: Sequence[str],
    kubeconfig: Path,
    *,
    auto_upgrade: bool = True,
    context: str = "emulator",
    extra_context: str | None = None,
) -> AsyncIterator[KubeEmulator]:
    """Serve ``sim``'s store over HTTP, build the cluster's nodes ``names`` (the operator's
    ``autoUpgrade`` as given), start its controllers and write ``kubeconfig`` (current context
    ``context``; ``extra_context``: a second one with a wrong token). Everything stops on exit."""
    api = KubeEmulator(sim.store)
    await api.start()
    try:
        sim.build(list(names), auto_upgrade=auto_upgrade)
        sim.start()
        try:
            api.write_kubeconfig(kubeconfig, context=context, extra_context=extra_context)
            yield api
        finally:
            await sim.stop()
    finally:
        await api.stop()
