"""SSH transport: one persistent asyncssh connection per node, shared by its commands.

Every command comes back as a :class:`~cockpit.fleet.results.CommandResult`; transport and
remote failures are mapped to an :class:`~cockpit.fleet.results.ErrorKind`, never raised
(only task cancellation propagates, after the remote command was stopped).

asyncssh (and what needs it: host-key checking, the ssh_config index, the command
channel) is imported at the first connect, not with this module: the session and
the demo's first frame name a Transport but need no SSH yet.

Host keys are always checked against known_hosts (:mod:`cockpit.fleet.hostkeys`); each
host's ssh_config is parsed from only the blocks that can apply to it
(:mod:`cockpit.fleet.sshconfig`). What to connect to and how is in
:mod:`cockpit.fleet.targets`, which needs no asyncssh.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import signal as signal_module
import socket
import time
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from cockpit.fleet.results import CommandResult, ErrorKind
from cockpit.fleet.targets import DEFAULT_SSH_PORT, HostTarget, OutputCallback, TransportOptions

if TYPE_CHECKING:
    import asyncssh

    from cockpit.fleet.hostkeys import KnownHosts, KnownHostsFiles
    from cockpit.fleet.sshconfig import SshConfigIndex

# the names callers have always imported from here, wherever they now live
__all__ = ["DEFAULT_SSH_PORT", "HostTarget", "OutputCallback", "Transport", "TransportOptions"]

log = logging.getLogger(__name__)

#: The cheapest safe algorithms, moved to the front of what asyncssh would offer anyway
#: (nothing is added, nothing dropped, so any server still connects; an ssh_config that sets
#: KexAlgorithms, Ciphers or PreferredAuthentications is obeyed as it is). Measured with
#: benchmarks/bench_probe_vs_clush.py: asyncssh's chacha20-poly1305 builds three cipher
#: contexts per packet in Python, a third of a cold probe's client CPU; AES-GCM is one call.
#: curve25519-sha256 (RFC 8731) is what OpenSSH itself picks on every server that lacks the
#: post-quantum hybrids; those stay offered right after it.
PREFERRED_KEX = ("curve25519-sha256", "curve25519-sha256@libssh.org")
PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com")

#: failures a retry cannot change: the host key, or the input
_FINAL = (ErrorKind.HOST_KEY_UNKNOWN, ErrorKind.HOST_KEY_CHANGED, ErrorKind.HOST_KEY_REVOKED, ErrorKind.BAD_INPUT)


def dial_name(host: str) -> str:
    """What to connect to for a host name: an IPv6 literal without its brackets (``[::1]`` is
    how a node set and ``--hosts`` write it; a resolver and ssh_config's Host see ``::1``)."""
    if host.startswith("[") and host.endswith("]") and ":" in host:
        return host[1:-1]
    return host


class _ConnectFailure(Exception):
    """A connect that gave up: carries the envelope fields."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class _Host:
    """Per-host connection state: the connection, its connect lock, its options."""

    def __init__(self, target: HostTarget) -> None:
        self.target = target
        self.conn: asyncssh.SSHClientConnection | None = None
        self.lock = asyncio.Lock()
        self.options: asyncssh.SSHClientConnectionOptions | None = None
        self.known_hosts_files: KnownHostsFiles | None = None  # resolved with the options
        self.generation = 0  # bumped on drop, so a stale connection_lost does not forget a new conn


class Transport:
    """A pool of SSH connections to the fleet, one per host, created lazily."""

    def __init__(self, targets: Sequence[HostTarget], options: TransportOptions | None = None) -> None:
        self.options = options or TransportOptions()
        self._hosts: dict[str, _Host] = {t.name: _Host(t) for t in targets}
        self._connect_slots: asyncio.Semaphore | None = None
        self._keypairs: list[asyncssh.SSHKeyPair] | None = None
        self._config_index: SshConfigIndex | None = None
        self._local_user = _local_user()
        #: host -> the one-line note of a host key recorded by accept-new (for the change log)
        self.accepted_host_keys: dict[str, str] = {}

    @cached_property
    def _known_hosts(self) -> KnownHosts:
        from cockpit.fleet.hostkeys import KnownHosts

        return KnownHosts(self.options.known_hosts)

    # -- public API -------------------------------------------------------------------

    @property
    def hosts(self) -> list[str]:
        return list(self._hosts)

    def target(self, host: str) -> HostTarget:
        return self._hosts[host].target

    def connected(self, host: str) -> bool:
        state = self._hosts.get(host)
        return bool(state and state.conn is not None and not state.conn.is_closed())

    async def run(
        self,
        host: str,
        command: str,
        *,
        timeout: float | None = None,
        stdin: str | None = None,
        on_output: OutputCallback | None = None,
    ) -> CommandResult:
        """Run one complete, already safely quoted shell command line on ``host``.

        ``timeout`` (default ``command_timeout_s``) bounds the command once connected;
        connecting has its own ``connect_timeout_s`` per attempt. On timeout or
        cancellation the remote process is signalled and its channel closed.
        """
        import asyncssh

        from cockpit.fleet.command_session import CommandSession

        started = time.monotonic()

        def result(**kw: Any) -> CommandResult:
            return CommandResult(host=host, command=command, duration_s=round(time.monotonic() - started, 3), **kw)

        state = self._hosts.get(host)
        if state is None:
            return result(error_kind=ErrorKind.BAD_INPUT, error=f"{host}: not in this transport's inventory")
        try:
            conn, notice = await self._connection(state)
        except _ConnectFailure as failure:
            return result(error_kind=failure.kind, error=f"{host}: {failure.message}")
        limit = self.options.command_timeout_s if timeout is None else timeout
        opening = asyncio.ensure_future(
            conn.create_session(lambda: CommandSession(on_output), command, encoding="utf-8", errors="replace")
        )
        try:
            # shielded: a cancel (k, a quit) while the channel opens must not abandon the open
            # half-way, with the exec request perhaps sent and the command running out of reach
            chan, opened = await asyncio.shield(opening)
            session = cast(CommandSession, opened)  # what the factory above built
        except asyncio.CancelledError:
            opening.add_done_callback(_stop_once_open)  # the cancel takes effect as soon as it opens
            raise
        except (asyncssh.Error, OSError) as exc:
            await self._drop_conn(state, conn)
            return result(
                error_kind=ErrorKind.CONNECTION_LOST, error=f"{host}: could not open a session: {_one_line(exc)}"
            )
        try:
            if stdin is not None:
                chan.write(stdin)
            chan.write_eof()
        except (asyncssh.Error, OSError):
            pass  # the session's own close reports what happened
        try:
            await asyncio.wait_for(asyncio.shield(session.done), timeout=limit)
        except TimeoutError:
            _stop_remote(chan)
            return result(
                stdout="".join(session.stdout),
                stderr="".join(session.stderr),
                error_kind=ErrorKind.TIMEOUT,
                error=f"{host}: timed out after {limit:g} s; remote command stopped",
                **_notice(notice),
            )
        except asyncio.CancelledError:
            _stop_remote(chan)
            raise
        out, err = "".join(session.stdout), "".join(session.stderr)
        status = chan.get_exit_status()
        exit_signal = chan.get_exit_signal()
        if exit_signal is not None:
            name = str(exit_signal[0])
            signo = getattr(signal_module, f"SIG{name}", None)
            return result(
                exit_status=128 + int(signo) if signo is not None else None,
                stdout=out,
                stderr=err,
                error=f"{host}: remote command killed by signal {name}",
                **_notice(notice),
            )
        if status is None:
            await self._drop_conn(state, conn)
            why = _one_line(session.lost) if session.lost else "channel closed without an exit status"
            return result(
                stdout=out,
                stderr=err,
                error_kind=ErrorKind.CONNECTION_LOST,
                error=f"{host}: connection lost mid-command ({why})",
                **_notice(notice),
            )
        return result(exit_status=status, stdout=out, stderr=err, **_notice(notice))

    async def run_many(self, hosts: Sequence[str], command: str, **kw: Any) -> dict[str, CommandResult]:
        """Run the same command on many hosts concurrently; one envelope per host."""
        results = await asyncio.gather(*(self.run(h, command, **kw) for h in hosts))
        return dict(zip(hosts, results, strict=True))

    async def connect(self, host: str) -> CommandResult:
        """Open (or reuse) the connection to ``host`` without running anything."""
        started = time.monotonic()
        state = self._hosts.get(host)
        if state is None:
            return CommandResult(host=host, command="", error_kind=ErrorKind.BAD_INPUT, error=f"{host}: unknown host")
        try:
            _, notice = await self._connection(state)
        except _ConnectFailure as failure:
            return CommandResult(
                host=host,
                command="",
                error_kind=failure.kind,
                error=f"{host}: {failure.message}",
                duration_s=round(time.monotonic() - started, 3),
            )
        return CommandResult(
            host=host, command="", exit_status=0, duration_s=round(time.monotonic() - started, 3), **_notice(notice)
        )

    async def drop(self, host: str) -> None:
        """Close that host's connection (after a reboot was issued)."""
        state = self._hosts.get(host)
        if state is not None and state.conn is not None:
            await self._drop_conn(state, state.conn)

    async def close(self) -> None:
        conns = [s.conn for s in self._hosts.values() if s.conn is not None]
        for state in self._hosts.values():
            state.conn = None
            state.generation += 1
        if conns:
            import asyncssh  # loaded by the connects that made them

            for conn in conns:
                conn.close()
            for conn in conns:
                with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
                    await asyncio.wait_for(conn.wait_closed(), timeout=2.0)
        if self._config_index is not None:
            self._config_index.cleanup()
            self._config_index = None

    async def __aenter__(self) -> Transport:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- connections ----------------------------------------------------------------

    async def _connection(self, state: _Host) -> tuple[asyncssh.SSHClientConnection, str | None]:
        conn = state.conn
        if conn is not None and not conn.is_closed():
            return conn, None
        async with state.lock:
            conn = state.conn
            if conn is not None and not conn.is_closed():
                return conn, None
            if self._connect_slots is None:
                self._connect_slots = asyncio.Semaphore(self.options.fanout)
            async with self._connect_slots:
                conn, notice = await self._connect_with_retries(state)
            state.conn = conn
            return conn, notice

    async def _connect_with_retries(self, state: _Host) -> tuple[asyncssh.SSHClientConnection, str | None]:
        opts = self.options
        delay = opts.backoff_initial_s
        connect_failures = auth_failures = 0
        while True:
            started = time.monotonic()
            try:
                connected = await self._connect_once(state)
                log.info("%s: connected in %.3f s", state.target.name, time.monotonic() - started)
                return connected
            except _ConnectFailure as failure:
                log.info(
                    "%s: connect failed after %.3f s: %s: %s",
                    state.target.name, time.monotonic() - started, failure.kind, failure.message,
                )  # fmt: skip
                if failure.kind in _FINAL:
                    raise
                if failure.kind == ErrorKind.AUTH_FAILED:
                    auth_failures += 1
                    if auth_failures >= opts.auth_attempts:
                        raise
                else:
                    connect_failures += 1
                    if connect_failures >= opts.connect_attempts:
                        raise
                log.debug("%s: %s; retrying in %.2f s", state.target.name, failure.message, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, opts.backoff_max_s)

    async def _connect_once(self, state: _Host) -> tuple[asyncssh.SSHClientConnection, str | None]:
        import asyncssh

        from cockpit.fleet.hostkeys import HostKeyCheck

        target = state.target
        if state.options is None:
            try:
                config = self._config_for(dial_name(target.address or target.name))  # event loop: no lock needed
                state.options = await asyncio.to_thread(self._host_options, state, config)
            except (OSError, ValueError, asyncssh.Error) as exc:
                raise _ConnectFailure(ErrorKind.BAD_INPUT, f"ssh options: {_one_line(exc)}") from None
            state.known_hosts_files = self._known_hosts.files_for(state.options.config)
        assert state.known_hosts_files is not None  # set with state.options
        try:  # parsed here, once, so a bad line is one clear refusal rather than a failed handshake
            for path in state.known_hosts_files.all:
                self._known_hosts.parsed(path)
        except (OSError, ValueError) as exc:
            raise _ConnectFailure(ErrorKind.BAD_INPUT, _one_line(exc)) from None
        client = HostKeyCheck(
            self._known_hosts,
            state.known_hosts_files,
            accept_new=self.options.accept_new_host_keys,
            on_lost=lambda conn: self._forget(target.name, conn),
        )
        generation = state.generation
        try:
            # options carries the parsed ssh_config: config=() means no re-parse per connect
            conn = await asyncssh.connect(
                dial_name(target.address or target.name),
                target.port or (),
                options=state.options,
                config=(),
                client_factory=lambda: client,
                known_hosts=client.known_hosts,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            kind, message = client.refused(exc)
            raise _ConnectFailure(kind, message) from None
        except asyncssh.PermissionDenied as exc:
            raise _ConnectFailure(ErrorKind.AUTH_FAILED, f"authentication failed ({_one_line(exc)})") from None
        except TimeoutError:
            raise _ConnectFailure(
                ErrorKind.CONNECT_FAILED, f"connect timed out after {self.options.connect_timeout_s:g} s"
            ) from None
        except (asyncssh.ConnectionLost, asyncssh.DisconnectError, ConnectionResetError, BrokenPipeError) as exc:
            raise _ConnectFailure(
                ErrorKind.CONNECT_FAILED, f"connection closed during login ({_one_line(exc)})"
            ) from None
        except socket.gaierror as exc:  # its errno is a resolver code (-2), not an errno os.strerror knows
            raise _ConnectFailure(
                ErrorKind.CONNECT_FAILED,
                f"cannot connect to {state.options.host}: the name does not resolve"
                f" ({(exc.strerror or _one_line(exc)).lower()})",
            ) from None
        except OSError as exc:
            why = os.strerror(exc.errno).lower() if exc.errno else _one_line(exc)
            where = f"{state.options.host}:{state.options.port}"
            raise _ConnectFailure(ErrorKind.CONNECT_FAILED, f"cannot connect to {where}: {why}") from None
        except (asyncssh.Error, ValueError) as exc:
            raise _ConnectFailure(ErrorKind.CONNECT_FAILED, _one_line(exc)) from None
        if generation != state.generation:  # dropped while connecting
            conn.close()
            raise _ConnectFailure(ErrorKind.CONNECT_FAILED, "connection dropped while connecting")
        if client.accepted:
            self.accepted_host_keys[target.name] = client.accepted
        return conn, client.accepted

    def _host_options(self, state: _Host, config: list[str]) -> asyncssh.SSHClientConnectionOptions:
        """Resolve ssh_config for this host once; reconnects reuse the parsed result."""
        import asyncssh

        target = state.target
        opts = self.options
        host = dial_name(target.address or target.name)
        kwargs: dict[str, Any] = {
            "host": host,
            "config": config,
            # placeholder so construction never falls back to no checking; the live
            # lookup (hostkeys.HostKeyCheck.known_hosts) is passed per connect
            "known_hosts": ([], [], []),
            "connect_timeout": opts.connect_timeout_s,
            "keepalive_interval": opts.keepalive_interval_s,
            "keepalive_count_max": opts.keepalive_count_max,
        }
        if target.port:
            kwargs["port"] = target.port
        if target.user:
            kwargs["username"] = target.user
        keypairs = self._client_keypairs()
        if keypairs is not None:
            kwargs["client_keys"] = keypairs
            kwargs["agent_path"] = None  # the keys are given: no agent to ask
        options = asyncssh.SSHClientConnectionOptions(**kwargs)
        _prefer_cheap_algorithms(options, keys_given=keypairs is not None)
        return options

    def _config_for(self, host: str) -> list[str]:
        if self._config_index is None:
            from cockpit.fleet.sshconfig import SshConfigIndex

            self._config_index = SshConfigIndex(self._config_paths())
        return self._config_index.paths_for(host)

    def _config_paths(self) -> list[str]:
        if self.options.ssh_config is not None:
            if not self.options.ssh_config.is_file():
                raise ValueError(f"ssh_config {self.options.ssh_config} does not exist")
            return [str(self.options.ssh_config)]
        default = Path("~/.ssh/config").expanduser()
        return [str(default)] if default.is_file() and os.access(default, os.R_OK) else []

    def _client_keypairs(self) -> list[asyncssh.SSHKeyPair] | None:
        if self.options.client_keys is None:
            return None
        if self._keypairs is None:
            import asyncssh

            self._keypairs = list(asyncssh.load_keypairs([str(p) for p in self.options.client_keys]))
        return self._keypairs

    def _forget(self, name: str, conn: asyncssh.SSHClientConnection | None) -> None:
        state = self._hosts.get(name)
        if state is not None and conn is not None and state.conn is conn:
            state.conn = None

    async def _drop_conn(self, state: _Host, conn: asyncssh.SSHClientConnection) -> None:
        if state.conn is conn:
            state.conn = None
            state.generation += 1
        conn.abort()


def _prefer_cheap_algorithms(options: asyncssh.SSHClientConnectionOptions, *, keys_given: bool) -> None:
    """Offer :data:`PREFERRED_KEX` and :data:`PREFERRED_CIPHERS` first, and with client keys
    given try publickey before any other method (no GSSAPI or keyboard round trip first),
    unless this host's ssh_config chose for itself. Host-key algorithms stay asyncssh's
    default: the ones the known_hosts entries for this host can verify.

    Written into the options' keyword arguments: ``asyncssh.connect`` prepares its options
    again from them (with the per-connect host-key check), so that is where they must be."""
    config = options.config
    extra: dict[str, list[str]] = {}
    if not config.get("KexAlgorithms"):
        # GSS key exchange (only ever used with Kerberos set up) keeps its place in front
        gss = [a.decode("ascii") for a in options.kex_algs if a.startswith(b"gss-")]
        rest = [a.decode("ascii") for a in options.kex_algs if not a.startswith(b"gss-")]
        extra["kex_algs"] = gss + _to_front(rest, PREFERRED_KEX)
    if not config.get("Ciphers"):
        extra["encryption_algs"] = _to_front([a.decode("ascii") for a in options.encryption_algs], PREFERRED_CIPHERS)
    if keys_given and not options.preferred_auth:
        from asyncssh.auth import get_supported_client_auth_methods

        methods = [m.decode("ascii") for m in get_supported_client_auth_methods()]
        extra["preferred_auth"] = _to_front(methods, ("publickey",))
    options.kwargs.update(extra)
    for name, value in extra.items():  # and on this object too, for whoever reads it
        setattr(options, name, [v.encode("ascii") for v in value] if name != "preferred_auth" else value)


def _to_front(names: list[str], first: Sequence[str]) -> list[str]:
    """``names`` reordered: those in ``first`` (in that order) lead, the rest follow as they were."""
    return [n for n in first if n in names] + [n for n in names if n not in first]


def _stop_remote(chan: asyncssh.SSHClientChannel[str]) -> None:
    """Really stop the remote command: signal it, then close the channel (SIGHUP/EPIPE on OpenSSH)."""
    import asyncssh

    with contextlib.suppress(asyncssh.Error, OSError):
        chan.send_signal("TERM")
    chan.close()


def _stop_once_open(
    opening: asyncio.Future[tuple[asyncssh.SSHClientChannel[Any], asyncssh.SSHClientSession[Any]]],
) -> None:
    """A command cancelled while its channel was opening: stop it the moment the open
    ends (or just read the failure, so that asyncio does not report it as unretrieved)."""
    if opening.cancelled() or opening.exception() is not None:
        return
    chan, _ = opening.result()
    log.info("command cancelled while its channel opened: stopping it now")
    _stop_remote(chan)


def _notice(notice: str | None) -> dict[str, str]:
    return {"notice": notice} if notice else {}


def _one_line(exc: BaseException | str | None) -> str:
    text = str(exc) if exc is not None else ""
    if not text and isinstance(exc, BaseException):
        text = type(exc).__name__
    return " ".join(text.split())


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "root"
