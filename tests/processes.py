"""Process helpers shared by the tests that start and stop real processes (no tests here)."""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie left for an init that never reaps counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


#: the lowest port free_port hands out; the kernel's ephemeral range begins above it
_PORTS_FROM = 10_000
#: xdist workers the port range is sliced for (tests/conftest.py starts at most 16)
_WORKER_SLICES = 16
_handed_out: set[int] = set()


@functools.cache
def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default (ip(7), ip_local_port_range)


def free_port() -> int:
    """A loopback TCP port free right now, for a server the test starts next.

    A port the kernel hands out for bind(0) is an ephemeral one, and any outgoing connection
    (another test's SSH client) may take it as its source port before the server binds it:
    slurmd failed so ("Address already in use") in a loaded suite. So the port comes from
    below the ephemeral range, where connects never pick, and from this xdist worker's own
    slice of it, so that two workers never offer the same one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    size = (_ephemeral_low() - _PORTS_FROM) // _WORKER_SLICES
    first = _PORTS_FROM + (index % _WORKER_SLICES) * size
    for port in range(first, first + size):
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # someone else's (a service, a server a test still runs)
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free loopback port left in {first}-{first + size - 1}")
