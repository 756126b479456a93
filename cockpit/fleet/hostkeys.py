"""Host keys: checked against known_hosts, recorded only when accept-new says so.

Never ``known_hosts=None``, even when an ssh_config says ``UserKnownHostsFile none``.
An unknown key is refused with its SHA256 fingerprint unless ``accept_new_host_keys``
is set (OpenSSH's ``accept-new``: the key is appended to known_hosts and the result
says so); a changed key is always refused, with both fingerprints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import asyncssh
from asyncssh.config import SSHConfig

from cockpit.fleet.results import ErrorKind
from cockpit.fleet.targets import DEFAULT_SSH_PORT


def known_hosts_pattern(host: str, port: int | None) -> str:
    """How known_hosts names ``host`` on ``port`` (``[host]:port`` off the default port)."""
    return host if port in (None, DEFAULT_SSH_PORT) else f"[{host}]:{port}"


class KnownHosts:
    """The parsed known_hosts files, shared by every host that uses the same files."""

    def __init__(self, configured: Path | None) -> None:
        self.configured = configured  # --known-hosts: overrides ssh_config
        self._parsed: dict[tuple[str, ...], asyncssh.SSHKnownHosts] = {}

    def files_for(self, cfg: SSHConfig) -> list[Path]:
        """The known_hosts files one host's resolved ssh_config names (the first is appended to)."""
        if self.configured is not None:
            return [self.configured]
        from_config = cfg.get("UserKnownHostsFile")
        # "UserKnownHostsFile none" parses as []: never let that switch checking off
        if isinstance(from_config, list) and from_config:
            return [Path(p).expanduser() for p in from_config]
        return [Path("~/.ssh/known_hosts").expanduser()]

    def parsed(self, files: Sequence[Path]) -> asyncssh.SSHKnownHosts:
        key = tuple(str(p) for p in files)
        cached = self._parsed.get(key)
        if cached is None:
            cached = asyncssh.SSHKnownHosts()
            for path in files:
                if path.is_file():
                    cached.load(path.read_text(encoding="utf-8", errors="replace"))
            self._parsed[key] = cached
        return cached

    def trusted(self, files: Sequence[Path], host: str, addr: str, port: int) -> list[asyncssh.SSHKey]:
        trusted, *_ = asyncssh.match_known_hosts(
            self.parsed(files), host, addr, None if port == DEFAULT_SSH_PORT else port
        )
        return list(trusted)

    def record(self, files: Sequence[Path], pattern: str, key: asyncssh.SSHKey) -> Path:
        """Append ``key`` for ``pattern`` to the first file (accept-new) and trust it from now on."""
        path = files[0]
        line = f"{pattern} {key.export_public_key('openssh').decode().strip()}\n"
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line)
        self.parsed(files).load(line)
        return path


class HostKeyCheck(asyncssh.SSHClient):
    """Called by asyncssh only for a host key that known_hosts does not trust."""

    def __init__(
        self,
        known_hosts: KnownHosts,
        files: Sequence[Path],
        *,
        accept_new: bool,
        on_lost: Callable[[asyncssh.SSHClientConnection | None], None],
    ) -> None:
        self._known_hosts = known_hosts
        self._files = files
        self._accept_new = accept_new
        self._on_lost = on_lost
        self.verdict: tuple[ErrorKind, str] | None = None
        self.accepted: str | None = None
        self.conn: asyncssh.SSHClientConnection | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(self.conn)

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        fingerprint = key.get_fingerprint("sha256")
        known = self._known_hosts.trusted(self._files, host, addr, port)
        where = known_hosts_pattern(host, port)
        if known:
            olds = ", ".join(sorted({k.get_fingerprint("sha256") for k in known}))
            self.verdict = (
                ErrorKind.HOST_KEY_CHANGED,
                f"host key for {where} CHANGED: known_hosts has {olds}, server offers {fingerprint}; "
                "refusing (remove the old line only if the change is expected)",
            )
            return False
        if not self._accept_new:
            self.verdict = (
                ErrorKind.HOST_KEY_UNKNOWN,
                f"host key for {where} is not in known_hosts: {key.get_algorithm()} {fingerprint}; "
                "verify it, then retry with --accept-new-host-keys to record it",
            )
            return False
        path = self._known_hosts.record(self._files, where, key)
        self.accepted = f"new host key for {where} recorded in {path}: {key.get_algorithm()} {fingerprint}"
        return True
