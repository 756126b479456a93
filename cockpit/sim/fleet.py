"""The simulated fleet: asyncssh servers on loopback that behave like GPU nodes.

One listening port per node plus one for the control host, each with its own host
key; only the client key the fleet generates is authorised (public-key auth, no
passwords). A reboot closes the node's connections and its port (connections are
refused while it is away), then the node comes back with a new boot id and the
kernel module that was built for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import asyncssh
from asyncssh.connection import SSHConnection  # what a channel's get_connection() is typed as

from cockpit.fleet.targets import HostTarget, TransportOptions
from cockpit.sim.control import SimControl
from cockpit.sim.node import NodeHooks, SimNode
from cockpit.sim.scenarios import SCENARIOS, Scenario
from cockpit.sim.shell import Shell

log = logging.getLogger(__name__)

CONTROL = "control"
USER = "operator"
#: seconds at speed 1.0
REBOOT_DOWN_S = 4.0
REBOOT_GRACE_S = 0.2  # the reboot command's exit status goes out before the link drops
EOF_WAIT_S = 0.05  # how long a command waits for stdin EOF from clients that never send it


@dataclass(frozen=True)
class SimClientFiles:
    ssh_config: Path
    known_hosts: Path
    identity: Path


def node_names(count: int) -> list[str]:
    width = 3 if count > 99 else 2
    return [f"gpu{i:0{width}d}" for i in range(1, count + 1)]


class _Host:
    """One listening endpoint: a node or the control host."""

    def __init__(self, name: str, key: asyncssh.SSHKey, make_shell: Callable[[], Shell]) -> None:
        self.name = name
        self.key = key
        self.make_shell = make_shell
        self.port = 0
        self.acceptor: asyncssh.SSHAcceptor | None = None
        self.conns: set[asyncssh.SSHServerConnection] = set()
        self.up = False
        self.rng = random.Random(name)


class _Server(asyncssh.SSHServer):
    def __init__(self, fleet: SimFleet, host: _Host) -> None:
        self.fleet = fleet
        self.host = host
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        self.host.conns.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.host.conns.discard(self.conn)

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def session_requested(self) -> _Session:
        return _Session(self.fleet, self.host)


class _Session(asyncssh.SSHServerSession[str]):
    """One exec request: run the command line through the host's shell."""

    def __init__(self, fleet: SimFleet, host: _Host) -> None:
        self.fleet = fleet
        self.host = host
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
            scenario = self.fleet.scenario
            if scenario.latency_s:
                await self.fleet.sleep(scenario.latency_s)
            drop = self.fleet.should_drop(self.host)
            shell: Shell = self.host.make_shell()
            if drop:
                out: list[str] = []
                await shell.run(self.command, out.append, out.append, "".join(self.stdin))
                text = "".join(out)
                chan.write(text[: len(text) // 2])
                await asyncio.sleep(0.01)
                self.fleet.abort_host_connections(self.host, only=chan.get_connection())
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


class SimFleet:
    """N simulated GPU nodes (``gpu01``..) plus a ``control`` host on loopback."""

    def __init__(
        self,
        nodes: int,
        scenario: str = "happy",
        *,
        host: str = "127.0.0.1",
        seed: int = 0,
        speed: float = 1.0,
        base_port: int = 0,
    ) -> None:
        if nodes < 1:
            raise ValueError("a fleet needs at least one node")
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.scenario: Scenario = SCENARIOS[scenario]
        self.host = host
        self.seed = seed
        self.speed = speed
        self.base_port = base_port
        self.node_names = node_names(nodes)
        self.nodes: dict[str, SimNode] = {}
        hooks = NodeHooks(reboot=self._request_reboot, sleep=self.sleep)
        for i, name in enumerate(self.node_names):
            node = SimNode.create(name, i, self.scenario, seed)
            node.hooks = hooks
            self.nodes[name] = node
        self.control = SimControl(self.nodes, is_up=self.is_up, sleep=self.sleep)
        self.client_key = asyncssh.generate_private_key("ssh-ed25519", comment="cockpit-sim-client")
        self._authorized = asyncssh.import_authorized_keys(self.client_key.export_public_key().decode())
        self._hosts: dict[str, _Host] = {}
        for name in [*self.node_names, CONTROL]:
            key = asyncssh.generate_private_key("ssh-ed25519")
            shell_factory = self.nodes[name].shell if name in self.nodes else self.control.shell
            self._hosts[name] = _Host(name, key, shell_factory)
        self._tasks: set[asyncio.Task[None]] = set()
        self._drop_rng = random.Random(f"{seed}:flaky")
        self.started = False

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        for i, h in enumerate(self._hosts.values()):
            if self.base_port:
                # control on the base port, gpuNN on base + N
                h.port = self.base_port if h.name == CONTROL else self.base_port + i + 1
            await self._listen(h)
        self.started = True

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for h in self._hosts.values():
            await self._take_down(h)
        self.started = False

    async def __aenter__(self) -> SimFleet:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _listen(self, h: _Host) -> None:
        h.acceptor = await asyncssh.listen(
            self.host,
            h.port,
            server_factory=lambda: _Server(self, h),
            server_host_keys=[h.key],
            authorized_client_keys=self._authorized,
            password_auth=False,
            kbdint_auth=False,
            allow_scp=False,
            agent_forwarding=False,
            x11_forwarding=False,
            keepalive_interval=0,
            reuse_address=True,
            backlog=1024,
        )
        h.port = h.acceptor.get_port()
        h.up = True

    async def _take_down(self, h: _Host) -> None:
        h.up = False
        if h.acceptor is not None:
            h.acceptor.close()
            await h.acceptor.wait_closed()
            h.acceptor = None
        for conn in list(h.conns):
            conn.abort()
        h.conns.clear()

    # -- behaviour hooks ------------------------------------------------------------

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds / self.speed)

    def is_up(self, name: str) -> bool:
        h = self._hosts.get(name)
        return bool(h and h.up)

    def should_drop(self, h: _Host) -> bool:
        rate = self.scenario.flaky_drop_rate
        node = self.nodes.get(h.name)
        return bool(rate and node is not None and node.is_target and self._drop_rng.random() < rate)

    def abort_host_connections(self, h: _Host, only: SSHConnection | None = None) -> None:
        for conn in list(h.conns):
            if only is None or conn is only:
                conn.abort()

    def _request_reboot(self, node: SimNode) -> None:
        task = asyncio.get_running_loop().create_task(self._reboot(node))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reboot(self, node: SimNode) -> None:
        h = self._hosts[node.name]
        await self.sleep(REBOOT_GRACE_S)
        await self._take_down(h)
        if self.scenario.never_returns and node.is_target:
            log.info("%s: rebooting, and never coming back (scenario %s)", node.name, self.scenario.name)
            return
        await self.sleep(REBOOT_DOWN_S)
        node.reboot_now()
        await self._listen(h)

    # -- what clients need ----------------------------------------------------------

    def endpoint(self, name: str) -> tuple[str, int]:
        h = self._hosts[name]
        if not h.port:
            raise RuntimeError("the fleet is not started")
        return self.host, h.port

    @property
    def all_names(self) -> list[str]:
        return [*self.node_names, CONTROL]

    def host_key(self, name: str) -> asyncssh.SSHKey:
        return self._hosts[name].key

    def known_hosts_line(self, name: str) -> str:
        host, port = self.endpoint(name)
        return f"[{host}]:{port} {self._hosts[name].key.export_public_key('openssh').decode().strip()}"

    def targets(self) -> list[HostTarget]:
        """Every host (nodes, then control) with its address, port and user."""
        out = []
        for name in self.all_names:
            host, port = self.endpoint(name)
            out.append(HostTarget(name=name, address=host, port=port, user=USER))
        return out

    def write_client_files(self, directory: Path | str) -> SimClientFiles:
        """Write ssh_config, known_hosts and the client identity for this fleet."""
        d = Path(directory).resolve()
        d.mkdir(parents=True, exist_ok=True)
        identity = d / "id_ed25519"
        identity.write_bytes(self.client_key.export_private_key("openssh"))
        os.chmod(identity, 0o600)
        (d / "id_ed25519.pub").write_bytes(self.client_key.export_public_key("openssh"))
        known_hosts = d / "known_hosts"
        known_hosts.write_text("".join(self.known_hosts_line(n) + "\n" for n in self.all_names), encoding="utf-8")
        blocks = []
        for name in self.all_names:
            host, port = self.endpoint(name)
            blocks.append(f"Host {name}\n    HostName {host}\n    Port {port}\n")
        blocks.append(
            "Host *\n"
            f"    User {USER}\n"
            f"    IdentityFile {identity}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {known_hosts}\n"
            "    StrictHostKeyChecking yes\n"
            "    ServerAliveInterval 2\n"
            "    ServerAliveCountMax 3\n"
        )
        ssh_config = d / "ssh_config"
        ssh_config.write_text("# written by cockpit sim; valid while it runs\n" + "\n".join(blocks), encoding="utf-8")
        return SimClientFiles(ssh_config=ssh_config, known_hosts=known_hosts, identity=identity)

    def transport_options(self, files: SimClientFiles, **overrides: object) -> TransportOptions:
        """Transport options that reach this fleet through the files it wrote."""
        return TransportOptions(ssh_config=files.ssh_config, **overrides)
