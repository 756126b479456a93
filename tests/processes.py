"""Process helpers shared by the tests that start and stop real processes (no tests here)."""

from __future__ import annotations

import os
from pathlib import Path

from cockpit.sim import ports


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie left for an init that never reaps counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


#: xdist workers the port range is sliced for (tests/conftest.py starts at most 16)
_WORKER_SLICES = 16


def free_port() -> int:
    """A loopback TCP port free right now, below the ephemeral range, from this xdist worker's
    own slice of it (:func:`cockpit.sim.ports.free_port`), so two workers never offer the same one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    return ports.free_port(index, _WORKER_SLICES)
