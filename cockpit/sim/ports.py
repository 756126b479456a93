"""Loopback ports for the servers the simulator and its real daemons start (sshd, slurmctld, slurmd)."""

from __future__ import annotations

import functools
import socket
from pathlib import Path

#: the lowest port free_port hands out; the kernel's ephemeral range begins above it
PORTS_FROM = 10_000
_handed_out: set[int] = set()


@functools.cache
def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default (ip(7), ip_local_port_range)


def free_port(slice_index: int = 0, slices: int = 1) -> int:
    """A loopback TCP port free right now, for a server started next.

    A port the kernel hands out for bind(0) is an ephemeral one, and any outgoing connection
    (an SSH client) may take it as its source port before the server binds it: slurmd failed
    so ("Address already in use") in a loaded test suite. So the port comes from below the
    ephemeral range, where connects never pick, and from slice ``slice_index`` of ``slices``
    of it, so that processes handing out ports side by side (test workers) never offer the
    same one."""
    size = (_ephemeral_low() - PORTS_FROM) // slices
    first = PORTS_FROM + (slice_index % slices) * size
    for port in range(first, first + size):
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # someone else's (a service, a server still running)
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free loopback port left in {first}-{first + size - 1}")
