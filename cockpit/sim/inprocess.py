"""An in-process transport: the simulated fleet's hosts called directly, without SSH.

What httpx's ``MockTransport`` is to its client: the tests of the logic above the transport
(the session, the executor, the engine's walks) hand each command line straight to the
simulated host's shell, the same shell its SSH server runs (:mod:`cockpit.sim.sshd`), and
get the same :class:`~cockpit.fleet.results.CommandResult` back, without the handshakes and
the per-packet crypto that are most of a simulated window's CPU.

It is :class:`~cockpit.fleet.transport.Transport` with its two SSH parts replaced: the
connect (a host the fleet has down refuses, retried and backed off by the pool's own code)
and the channel (streamed output coalesced per event-loop turn as the server sends it, the
command's timeout, its stop on cancel, a link the fleet drops mid-command). The host-key
checks, ssh_config and algorithms are the SSH path's alone, and so are their tests (and the
tests of the transport itself, against the simulator's and OpenSSH's real servers).
``tests/core/test_inprocess_transport.py`` runs the same commands both ways and compares.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from cockpit.fleet.results import CommandResult, ErrorKind
from cockpit.fleet.targets import DEFAULT_SSH_PORT, OutputCallback, TransportOptions
from cockpit.fleet.transport import Transport, _ConnectFailure, _Host, dial_name
from cockpit.sim.fleet import SimFleet

if TYPE_CHECKING:
    import asyncssh

log = logging.getLogger(__name__)

#: how long a flaky link takes to drop after the first half of the output (as :mod:`.sshd`)
DROP_AFTER_S = 0.01


class _Link:
    """One client's link to a host: what an SSH connection is to the pool. The fleet aborts
    it where it aborts SSH connections (reboot, cut-off); aborting it stops its commands."""

    def __init__(self, fleet: SimFleet, name: str, on_lost: Callable[[_Link], None]) -> None:
        self.fleet = fleet
        self.name = name
        self.on_lost = on_lost
        self.closed = False
        self.channels: set[_Channel] = set()

    def is_closed(self) -> bool:
        return self.closed

    def abort(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.fleet.detach(self.name, self)
        for chan in list(self.channels):
            chan.stop()
        self.on_lost(self)

    close = abort  # a clean close ends the link's commands too, as closing an SSH connection does

    async def wait_closed(self) -> None:
        return None


class _Channel:
    """One command on one link: the server's side (:class:`cockpit.sim.sshd._Session`) and the
    client's (:class:`cockpit.fleet.command_session.CommandSession`) in one object."""

    def __init__(self, link: _Link, command: str, stdin: str, on_output: OutputCallback | None) -> None:
        self.link = link
        self.command = command
        self.stdin = stdin
        self.on_output = on_output
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.exit_status: int | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending: list[tuple[bool, str]] = []
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.link.channels.add(self)
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def stop(self) -> None:
        """The command is stopped (TERM, a closed channel or a dropped link): its output so far stays."""
        if self.task is not None and not self.task.done() and self.task is not asyncio.current_task():
            self.task.cancel()

    # -- the server's side: as sshd._Session runs it ----------------------------------------

    def _write(self, text: str, stderr: bool = False) -> None:
        # coalesced per event-loop turn, as the simulator's SSH server sends it
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append((stderr, text))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if self.done.done():
            return  # the channel closed: what is still pending never reaches the client
        out = "".join(t for e, t in pending if not e)
        err = "".join(t for e, t in pending if e)
        if out:
            self._deliver("stdout", out)
        if err:
            self._deliver("stderr", err)

    async def _serve(self) -> None:
        fleet, name = self.link.fleet, self.link.name
        try:
            latency = fleet.scenario.latency_s
            if latency:
                await fleet.sleep(latency)
            drop = fleet.drops_next(name, self.command)
            shell = fleet.open_shell(name)
            if drop:  # the flaky link: half the output, then the connection goes
                both: list[str] = []
                await shell.run(self.command, both.append, both.append, self.stdin)
                text = "".join(both)
                self._deliver("stdout", text[: len(text) // 2])
                await asyncio.sleep(DROP_AFTER_S)
                self.link.abort()
                return
            status = await shell.run(self.command, self._write, lambda t: self._write(t, True), self.stdin)
            self._flush()
            self.exit_status = status
        except asyncio.CancelledError:
            pass  # stopped: the client's timeout or cancel, or the link dropped; no exit status
        except Exception as exc:
            log.exception("simulated command failed: %s", self.command)
            self._deliver("stderr", f"sim: internal error: {type(exc).__name__}: {exc}\n")
            self.exit_status = 70
        finally:
            self.link.channels.discard(self)
            if not self.done.done():
                self.done.set_result(None)

    # -- the client's side: as CommandSession collects it ---------------------------------

    def _deliver(self, stream: str, data: str) -> None:
        (self.stderr if stream == "stderr" else self.stdout).append(data)
        if self.on_output is not None:
            try:
                self.on_output(stream, data)
            except Exception:
                log.exception("on_output callback failed")


class InProcessTransport(Transport):
    """The pool of :class:`~cockpit.fleet.transport.Transport` over a :class:`SimFleet` served in
    process (:meth:`SimFleet.serve_in_process`): one link per host, created lazily."""

    def __init__(
        self, fleet: SimFleet, options: TransportOptions | None = None, *, hosts: Sequence[str] | None = None
    ) -> None:
        if not fleet.in_process:
            raise ValueError("the fleet serves SSH: call its serve_in_process() first")
        targets = fleet.targets()
        if hosts is not None:
            targets = [t for t in targets if t.name in set(hosts)]
        super().__init__(targets, options)
        self.fleet = fleet

    async def run(
        self,
        host: str,
        command: str,
        *,
        timeout: float | None = None,
        stdin: str | None = None,
        on_output: OutputCallback | None = None,
    ) -> CommandResult:
        """As :meth:`Transport.run`: one complete command line on ``host``, its result as an envelope."""
        started = time.monotonic()

        def result(**kw: Any) -> CommandResult:
            return CommandResult(host=host, command=command, duration_s=round(time.monotonic() - started, 3), **kw)

        state = self._hosts.get(host)
        if state is None:
            return result(error_kind=ErrorKind.BAD_INPUT, error=f"{host}: not in this transport's inventory")
        try:
            conn, _ = await self._connection(state)
        except _ConnectFailure as failure:
            return result(error_kind=failure.kind, error=f"{host}: {failure.message}")
        link = cast(_Link, conn)
        limit = self.options.command_timeout_s if timeout is None else timeout
        latency = self.fleet.scenario.latency_s
        if latency:  # a slow link delays the channel open's confirmation too
            await self.fleet.sleep(latency)
        if link.closed:
            await self._drop_conn(state, conn)
            return result(
                error_kind=ErrorKind.CONNECTION_LOST, error=f"{host}: could not open a session: connection lost"
            )
        chan = _Channel(link, command, stdin or "", on_output)
        chan.start()
        try:
            await asyncio.wait_for(asyncio.shield(chan.done), timeout=limit)
        except TimeoutError:
            chan.stop()
            return result(
                stdout="".join(chan.stdout),
                stderr="".join(chan.stderr),
                error_kind=ErrorKind.TIMEOUT,
                error=f"{host}: timed out after {limit:g} s; remote command stopped",
            )
        except asyncio.CancelledError:
            chan.stop()
            raise
        out, err = "".join(chan.stdout), "".join(chan.stderr)
        if chan.exit_status is None:
            await self._drop_conn(state, conn)
            return result(
                stdout=out,
                stderr=err,
                error_kind=ErrorKind.CONNECTION_LOST,
                error=f"{host}: connection lost mid-command (connection lost)",
            )
        return result(exit_status=chan.exit_status, stdout=out, stderr=err)

    async def close(self) -> None:
        for state in self._hosts.values():
            conn, state.conn = state.conn, None
            state.generation += 1
            if conn is not None:
                conn.abort()

    async def _connect_once(self, state: _Host) -> tuple[asyncssh.SSHClientConnection, str | None]:
        """A link to the host, or the refusal an SSH connect to a host that is down gets."""
        target = state.target
        if not self.fleet.is_up(target.name):
            where = f"{dial_name(target.address or target.name)}:{target.port or DEFAULT_SSH_PORT}"
            raise _ConnectFailure(ErrorKind.CONNECT_FAILED, f"cannot connect to {where}: connection refused")
        link = _Link(self.fleet, target.name, on_lost=lambda lost: self._forget(target.name, cast(Any, lost)))
        self.fleet.attach(target.name, link)
        # the pool asks of its connections only is_closed, close, abort and wait_closed
        return cast("asyncssh.SSHClientConnection", link), None
