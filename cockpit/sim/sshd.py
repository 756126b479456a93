"""The simulated hosts' SSH servers: asyncssh serving a socket the fleet already listens on.

Apart from :mod:`cockpit.sim.fleet` so that a fleet can bind its ports, and a client
can queue on them, before asyncssh is imported (the demo's first frame needs no SSH).
Only the client key the fleet generates is authorised (public-key auth, no passwords).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncssh

from cockpit.sim.shell import Shell

log = logging.getLogger(__name__)

EOF_WAIT_S = 0.05  # how long a command waits for stdin EOF from clients that never send it


@dataclass(frozen=True)
class Served:
    """One host as its SSH server sees it."""

    make_shell: Callable[[], Shell]
    conns: set[asyncssh.SSHServerConnection]  # the fleet aborts these when the host reboots
    latency_s: float  # before each command answers (the scenario's slow link)
    sleep: Callable[[float], Awaitable[None]]  # the fleet's clock: scaled by its speed
    drops_next: Callable[[str], bool]  # flaky link: this command's connection drops halfway through its output


async def serve(
    sock: socket.socket, served: Served, *, host_key: bytes, client_key: str, backlog: int
) -> asyncssh.SSHAcceptor:
    """Serve SSH on ``sock`` (bound and listening) with ``host_key`` (OpenSSH private key),
    accepting only ``client_key`` (an OpenSSH public key line)."""
    return await asyncssh.listen(
        sock=sock,
        server_factory=lambda: _Server(served),
        server_host_keys=[asyncssh.import_private_key(host_key)],
        authorized_client_keys=asyncssh.import_authorized_keys(client_key),
        password_auth=False,
        kbdint_auth=False,
        allow_scp=False,
        agent_forwarding=False,
        x11_forwarding=False,
        keepalive_interval=0,
        backlog=backlog,
    )


class _Server(asyncssh.SSHServer):
    def __init__(self, served: Served) -> None:
        self.served = served
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        self.served.conns.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.served.conns.discard(self.conn)

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def session_requested(self) -> _Session | Awaitable[_Session]:
        if self.served.latency_s:
            # a slow link delays every reply, the channel open's confirmation too: a client
            # that cancels a command while its channel is still opening must be ready for it
            return self._slow_session()
        return _Session(self.served)

    async def _slow_session(self) -> _Session:
        await self.served.sleep(self.served.latency_s)
        return _Session(self.served)


class _Session(asyncssh.SSHServerSession[str]):
    """One exec request: run the command line through the host's shell."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.chan: asyncssh.SSHServerChannel[str] | None = None
        self.command = ""
        self.stdin: list[str] = []
        self.eof = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        # output is coalesced per event-loop turn, as sshd reading a pipe would send it:
        # a probe's 30 small echoes leave as one packet, apt-get's lines as it sleeps
        self._pending: list[tuple[bool, str]] = []

    def _write(self, text: str, stderr: bool = False) -> None:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append((stderr, text))

    def _flush(self) -> None:
        chan, pending = self.chan, self._pending
        self._pending = []
        if chan is None or chan.is_closing():
            return
        out = "".join(t for e, t in pending if not e)
        err = "".join(t for e, t in pending if e)
        try:
            if out:
                chan.write(out)
            if err:
                chan.write_stderr(err)
        except (asyncssh.Error, OSError):
            pass

    def connection_made(self, chan: asyncssh.SSHServerChannel[str]) -> None:
        self.chan = chan

    def shell_requested(self) -> bool:
        return False  # commands only: the cockpit never needs an interactive shell

    def exec_requested(self, command: str) -> bool:
        self.command = command
        return True

    def session_started(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: str, datatype: asyncssh.DataType) -> None:
        self.stdin.append(data)

    def eof_received(self) -> bool:
        self.eof.set()
        return True

    def signal_received(self, signal: str) -> None:
        self._stop()

    def break_received(self, msec: int) -> bool:
        self._stop()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop(finish=False)

    def _stop(self, finish: bool = True) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()

    async def _run(self) -> None:
        chan = self.chan
        assert chan is not None
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.eof.wait(), EOF_WAIT_S)
            if self.stdin and not self.eof.is_set():
                # A client that has begun piping input ends it with EOF, as a command
                # reading stdin on a real node would wait for; a loaded machine can
                # deliver the rest after the short wait above.
                await self.eof.wait()
            if self.served.latency_s:
                await self.served.sleep(self.served.latency_s)
            drop = self.served.drops_next(self.command)
            shell: Shell = self.served.make_shell()
            if drop:
                out: list[str] = []
                await shell.run(self.command, out.append, out.append, "".join(self.stdin))
                text = "".join(out)
                chan.write(text[: len(text) // 2])
                await asyncio.sleep(0.01)
                chan.get_connection().abort()
                return
            status = await shell.run(self.command, self._write, lambda t: self._write(t, True), "".join(self.stdin))
            self._flush()
            chan.exit(status)
        except asyncio.CancelledError:
            if not chan.is_closing():
                chan.exit_with_signal("TERM")
        except (asyncssh.Error, OSError, BrokenPipeError):
            pass
        except Exception as exc:
            log.exception("simulated command failed: %s", self.command)
            try:
                chan.write_stderr(f"sim: internal error: {type(exc).__name__}: {exc}\n")
                chan.exit(70)
            except (asyncssh.Error, OSError):
                pass
