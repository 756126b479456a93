"""The envelope every remote or local command comes back in, success or failure."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class ErrorKind(StrEnum):
    """Why a command produced no exit status (or a transport-level failure)."""

    TIMEOUT = "timeout"
    CANCELLED = "cancelled"  # the operator cancelled it explicitly
    INTERRUPTED = "interrupted"  # stopped by a quit or a signal: the outcome on the node is unknown
    CONNECT_FAILED = "connect-failed"  # refused, unreachable, DNS
    AUTH_FAILED = "auth-failed"
    HOST_KEY_UNKNOWN = "host-key-unknown"
    HOST_KEY_CHANGED = "host-key-changed"
    HOST_KEY_REVOKED = "host-key-revoked"  # @revoked in known_hosts: refused even with accept-new
    CONNECTION_LOST = "connection-lost"  # the link dropped mid-command (a reboot, a dead link)
    BAD_INPUT = "bad-input"  # refused before anything ran (an unsafe placeholder value)
    PRIVILEGE = "privilege"  # sudo -n refused (it wants a password, or is not installed): the command never ran


class CommandResult(BaseModel):
    """One command on one host. ``exit_status`` is None when it never finished."""

    model_config = ConfigDict(extra="forbid")

    host: str
    command: str
    exit_status: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    error_kind: ErrorKind | None = None
    error: str | None = None  # one line
    notice: str | None = None  # one line worth recording though nothing failed (a host key accepted and recorded)

    @property
    def ok(self) -> bool:
        return self.error_kind is None and self.exit_status == 0
