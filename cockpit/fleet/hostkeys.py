"""Host keys: checked as OpenSSH checks them, recorded only where its ``accept-new`` would.

What OpenSSH reads (ssh_config(5) ``GlobalKnownHostsFile``, ``UserKnownHostsFile``;
sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"), all of it honoured here:

- the user's files (``--known-hosts``, else ssh_config's ``UserKnownHostsFile``, else
  ``~/.ssh/known_hosts ~/.ssh/known_hosts2``) and the global ones (ssh_config's
  ``GlobalKnownHostsFile``, else ``/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2``);
  ``none`` never switches checking off;
- hashed names (``|1|salt|hash``), ``[host]:port`` off port 22 (looked up only so:
  OpenSSH does not fall back to the port-22 entry, asyncssh's own ``match`` would),
  patterns, ``HostKeyAlias``;
- ``@revoked``: that key is refused, for this host and under any name it was listed for
  (also by address: stricter than OpenSSH's default ``CheckHostIP no``);
- ``@cert-authority``: a host certificate signed by a listed CA, for a principal that is
  this host, is accepted (asyncssh validates the certificate).

``--accept-new-host-keys`` is OpenSSH's ``StrictHostKeyChecking accept-new``: a key is
recorded only for a host that has no key and no CA at all in any of those files (OpenSSH
would also take a new key *type* for a known host; refusing is stricter). A host whose
known key differs is refused with OpenSSH's warning; so is a revoked key, always.
Matching uses asyncssh's own known_hosts parser (``SSHKnownHosts``), never a hand parser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
from asyncssh.config import SSHConfig

from cockpit.fleet.results import ErrorKind
from cockpit.fleet.targets import DEFAULT_SSH_PORT

#: OpenSSH's defaults (ssh_config(5))
DEFAULT_USER_FILES = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_FILES = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")


def known_hosts_pattern(host: str, port: int | None) -> str:
    """How known_hosts names ``host`` on ``port`` (``[host]:port`` off the default port)."""
    return host if port in (None, DEFAULT_SSH_PORT) else f"[{host}]:{port}"


@dataclass(frozen=True)
class KnownHostsFiles:
    """The files one host is checked against; accept-new appends to ``user[0]``."""

    user: tuple[Path, ...]
    global_: tuple[Path, ...] = ()

    @property
    def all(self) -> tuple[Path, ...]:
        return self.user + self.global_


@dataclass
class HostMatch:
    """What the files say about one host: the keys and CAs listed for it, where, and revoked keys."""

    trusted: list[tuple[Path, asyncssh.SSHKey]] = field(default_factory=list)
    cas: list[tuple[Path, asyncssh.SSHKey]] = field(default_factory=list)
    revoked: list[asyncssh.SSHKey] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return bool(self.trusted or self.cas)


def _config_files(cfg: SSHConfig, option: str) -> list[Path] | None:
    """An ssh_config file list (``none`` parses as []), or None where the option is unset."""
    value = cfg.get(option)
    if isinstance(value, list):
        return [Path(p).expanduser() for p in value]
    return None


class KnownHosts:
    """The parsed known_hosts files, shared by every host that uses the same files."""

    def __init__(self, configured: Path | None) -> None:
        self.configured = configured  # --known-hosts: overrides ssh_config's UserKnownHostsFile
        self._parsed: dict[Path, asyncssh.SSHKnownHosts] = {}

    def files_for(self, cfg: SSHConfig) -> KnownHostsFiles:
        """The known_hosts files one host's resolved ssh_config names."""
        if self.configured is not None:
            user = [self.configured]
        else:
            # "UserKnownHostsFile none" is []: never let that switch checking off
            user = _config_files(cfg, "UserKnownHostsFile") or [Path(p).expanduser() for p in DEFAULT_USER_FILES]
        global_ = _config_files(cfg, "GlobalKnownHostsFile")
        if global_ is None:
            global_ = [Path(p) for p in DEFAULT_GLOBAL_FILES]
        return KnownHostsFiles(tuple(user), tuple(p for p in global_ if p not in user))

    def parsed(self, path: Path) -> asyncssh.SSHKnownHosts:
        """One file, parsed once; a line asyncssh cannot read is refused with its number."""
        cached = self._parsed.get(path)
        if cached is None:
            cached = asyncssh.SSHKnownHosts()
            if path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                for number, line in enumerate(text.splitlines(), start=1):
                    try:
                        cached.load(line)
                    except ValueError:
                        # OpenSSH skips a bad line; a skipped @revoked line would be kinder than refusing
                        raise ValueError(f"known_hosts {path} line {number}: not a valid entry") from None
            self._parsed[path] = cached
        return cached

    def match(self, files: KnownHostsFiles, host: str, addr: str, port: int | None) -> HostMatch:
        """What every file lists for ``host`` (the HostName, or HostKeyAlias) on ``port``."""
        name = known_hosts_pattern(host, port)
        address = known_hosts_pattern(addr, port) if addr else ""
        out = HostMatch()
        for path in files.all:
            parsed = self.parsed(path)
            # port None: no fallback from [host]:port to host (OpenSSH has none); addr "" so
            # asyncssh matches the name alone (OpenSSH's CheckHostIP defaults to no)
            trusted, cas, revoked, *_ = parsed.match(name, "", None)
            out.trusted += [(path, k) for k in trusted]
            out.cas += [(path, k) for k in cas]
            out.revoked += list(revoked)
            if address and address != name:
                out.revoked += list(parsed.match(address, "", None)[2])
        return out

    def record(self, files: KnownHostsFiles, pattern: str, key: asyncssh.SSHKey) -> Path:
        """Append ``key`` for ``pattern`` to the first user file (accept-new) and trust it from now on."""
        path = files.user[0]
        line = f"{pattern} {key.export_public_key('openssh').decode().strip()}\n"
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line)
        self.parsed(path).load(line)
        return path


def _fingerprints(keys: Sequence[asyncssh.SSHKey]) -> str:
    return ", ".join(sorted({k.get_fingerprint("sha256") for k in keys}))


class HostKeyCheck(asyncssh.SSHClient):
    """One connect's host-key judge: gives asyncssh what the files list, says why it refused."""

    def __init__(
        self,
        known_hosts: KnownHosts,
        files: KnownHostsFiles,
        *,
        accept_new: bool,
        on_lost: Callable[[asyncssh.SSHClientConnection | None], None],
    ) -> None:
        self._known_hosts = known_hosts
        self._files = files
        self._accept_new = accept_new
        self._on_lost = on_lost
        self._match = HostMatch()
        self._where = ""
        self.verdict: tuple[ErrorKind, str] | None = None
        self.accepted: str | None = None
        self.conn: asyncssh.SSHClientConnection | None = None

    def known_hosts(self, host: str, addr: str, port: int | None) -> Any:
        """asyncssh's ``known_hosts`` callable: trusted keys, CA keys and revoked keys for this host."""
        self._match = self._known_hosts.match(self._files, host, addr, port)
        self._where = known_hosts_pattern(host, port)
        m = self._match
        return ([k for _, k in m.trusted], [k for _, k in m.cas], m.revoked)

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(self.conn)

    def refused(self, exc: Exception) -> tuple[ErrorKind, str]:
        """Why asyncssh's check failed, in OpenSSH's terms (a revoked key never reaches a callback)."""
        if self.verdict is not None:
            return self.verdict
        message = str(exc).split(" for host ")[0]
        where = self._where or "this host"
        if "revoked" in message.lower():
            return (
                ErrorKind.HOST_KEY_REVOKED,
                f"host key for {where} is REVOKED in known_hosts (@revoked {_fingerprints(self._match.revoked)}); "
                "refusing, whatever --accept-new-host-keys says",
            )
        return ErrorKind.HOST_KEY_UNKNOWN, f"host key for {where} not verified: {message}"

    def validate_host_ca_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        where = known_hosts_pattern(host, port or None)
        self.verdict = (
            ErrorKind.HOST_KEY_UNKNOWN,
            f"host certificate for {where} is signed by CA {key.get_fingerprint('sha256')}, which no "
            "@cert-authority line in known_hosts trusts for it; refusing",
        )
        return False

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        """Called by asyncssh only for a key that is neither listed for this host nor revoked."""
        fingerprint = key.get_fingerprint("sha256")
        where = known_hosts_pattern(host, port or None)
        m = self._match
        if m.known:
            listed = [(p, k) for p, k in m.trusted] + [(p, k) for p, k in m.cas]
            files = ", ".join(sorted({str(p) for p, _ in listed}))
            olds = _fingerprints([k for _, k in listed])
            self.verdict = (
                ErrorKind.HOST_KEY_CHANGED,
                f"host key for {where} CHANGED: {files} has {olds}, server offers {fingerprint}; someone could "
                "be eavesdropping (a man-in-the-middle attack); refusing (remove the old line only if the "
                "change is expected)",
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
