"""The real local Slurm of :mod:`cockpit.sim.slurm_cluster` for the tests: skipped where it
cannot start (failed instead with ``CI=true``: CI installs it), each xdist worker on its own ports."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from processes import free_port

from cockpit.sim.slurm_cluster import RESUME_TIMEOUT_S, SlurmCluster, slurm_available
from cockpit.sim.slurm_cluster import start_slurm as _start_slurm

__all__ = ["RESUME_TIMEOUT_S", "SlurmCluster", "require_slurm", "running_slurm", "slurm_available", "start_slurm"]


def require_slurm() -> None:
    """Skip the test when no Slurm can be started; with ``CI=true`` fail instead (CI installs it)."""
    why = slurm_available()
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and no real Slurm: {why}")
    pytest.skip(why)


def start_slurm(nodes: tuple[str, ...] = ("gpu01", "gpu02"), *, reboot_pause_s: float = 1.0) -> SlurmCluster:
    return _start_slurm(nodes, reboot_pause_s=reboot_pause_s, free_port=free_port)


@contextlib.contextmanager
def running_slurm(
    nodes: tuple[str, ...] = ("gpu01", "gpu02"), *, reboot_pause_s: float = 1.0
) -> Iterator[SlurmCluster]:
    """Skip (or fail in CI) without Slurm; otherwise a cluster, stopped afterwards."""
    require_slurm()
    cluster = start_slurm(nodes, reboot_pause_s=reboot_pause_s)
    try:
        yield cluster
    finally:
        cluster.stop()
