"""Process helpers shared by the tests that start and stop real processes (no tests here)."""

from __future__ import annotations

import socket
from pathlib import Path


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie left for an init that never reaps counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def free_port() -> int:
    """A loopback TCP port free right now, for a server the test starts next."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
