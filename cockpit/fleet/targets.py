"""What the SSH transport connects to and how: host targets and transport options.

Apart from :mod:`cockpit.fleet.transport` so that inventories, the simulator and the
session can name hosts without importing asyncssh (the demo's first frame needs none).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

OutputCallback = Callable[[str, str], None]

DEFAULT_SSH_PORT = 22


class HostTarget(BaseModel):
    """One node as the inventory names it."""

    model_config = ConfigDict(extra="forbid")

    name: str  # inventory name, shown everywhere ("gpu01")
    address: str | None = None  # ansible_host; None: ssh_config HostName decides, else name
    port: int | None = None
    user: str | None = None
    #: the node's name in its scheduler (Kubernetes node, Slurm node) where it differs from the
    #: inventory name: inventory variable ``cockpit_node_name``; {node_name} in runbooks
    node_name: str | None = None


class TransportOptions(BaseModel):
    """How the transport connects; defaults follow OpenSSH where it has one."""

    model_config = ConfigDict(extra="forbid")

    ssh_config: Path | None = None  # None: ~/.ssh/config if it exists
    known_hosts: Path | None = None  # None: ssh_config's UserKnownHostsFile, else ~/.ssh/known_hosts
    accept_new_host_keys: bool = False  # OpenSSH accept-new: record unknown keys; changed keys always refused
    client_keys: list[Path] | None = None  # None: ssh_config IdentityFile / asyncssh defaults / agent
    fanout: int = Field(default=64, ge=1)  # fleet-wide cap on concurrent connects
    connect_timeout_s: float = 10.0
    keepalive_interval_s: float = 2.0
    keepalive_count_max: int = 3
    command_timeout_s: float = 60.0
    connect_attempts: int = Field(default=3, ge=1)  # refused / unreachable / dropped handshake
    auth_attempts: int = Field(default=1, ge=1)  # smaller budget: repeated failures can lock accounts
    backoff_initial_s: float = 0.25
    backoff_max_s: float = 4.0


@dataclass(frozen=True)
class ConnectionSource:
    """How a window's nodes were named and reached, as the command line gave it."""

    ssh_config: Path | None = None
    known_hosts: Path | None = None
    host_spec: str | None = None
    inventory: Path | None = None

    def header_fields(self) -> dict[str, str | None]:
        """For :class:`SessionHeader`: the files as absolute paths, so any directory finds them."""
        return {
            "ssh_config": _absolute(self.ssh_config),
            "known_hosts": _absolute(self.known_hosts),
            "host_spec": self.host_spec,
            "inventory": _absolute(self.inventory),
        }


def _absolute(path: str | Path | None) -> str | None:
    return None if path is None else str(Path(path).resolve())
