"""The simulated fleet: SSH servers on loopback that behave like GPU nodes.

One listening port per node plus one for the control host, each with its own host
key; only the client key the fleet generates is authorised (public-key auth, no
passwords). A reboot closes the node's connections and its port (connections are
refused while it is away), then the node comes back with a new boot id and the
kernel module that was built for it.

Ports and keys exist from :meth:`SimFleet.bind` on, made with the ``socket`` module
and ``cryptography``; asyncssh (:mod:`cockpit.sim.sshd`) is imported only to serve
them, so the demo can write its change log's header and paint its first frame first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import socket
import weakref
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cockpit.fleet.targets import HostTarget, TransportOptions
from cockpit.sim.scenarios import SCENARIOS, SPARE_REFERENCE, Scenario

if TYPE_CHECKING:
    import asyncssh

    from cockpit.sim.control import SimControl
    from cockpit.sim.gputools import Peer
    from cockpit.sim.node import SimNode
    from cockpit.sim.shell import Shell

log = logging.getLogger(__name__)

CONTROL = "control"
USER = "operator"
#: seconds at speed 1.0
REBOOT_DOWN_S = 4.0
_DIGITS = re.compile(r"[0-9]+")
REBOOT_GRACE_S = 0.2  # the reboot command's exit status goes out before the link drops
#: real seconds: the shortest wait the event loop keeps (epoll waits whole milliseconds)
MIN_REAL_WAIT_S = 0.001
BACKLOG = 1024  # a whole fleet's first connects may queue before the servers run
#: the most nodes one simulated fleet has (2,000 is the size the cockpit is measured at)
MAX_NODES = 4096


@dataclass(frozen=True)
class SimClientFiles:
    ssh_config: Path
    known_hosts: Path
    identity: Path


def open_files_needed(nodes: int, *, clients_too: bool) -> int:
    """File descriptors a fleet of ``nodes`` needs: a listening socket and a served
    connection per host, and (in the demo, where the cockpit shares the process) the
    client's end of each connection too; with room for the rest."""
    per_host = 3 if clients_too else 2
    return (nodes + 1) * per_host + 256


def raise_open_file_limit(needed: int) -> None:
    """Raise this process's soft limit on open files to ``needed`` when it is lower (a
    distribution's 1,024 is too few for a fleet of a few hundred nodes), up to the hard
    limit; ValueError when even the hard limit is too low."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise ValueError(f"this fleet needs {needed} open files, and the hard limit (ulimit -Hn) is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def node_names(count: int) -> list[str]:
    """``gpu01``.., zero-padded to the widest number (at least two digits): ``gpu0001``..``gpu2000``."""
    width = max(2, len(str(count)))
    return [f"gpu{i:0{width}d}" for i in range(1, count + 1)]


class Link(Protocol):
    """An in-process client's link to a host (:mod:`cockpit.sim.inprocess`): the fleet
    aborts it where it would abort an SSH connection (a reboot, a cut-off, a flaky drop)."""

    def abort(self) -> None: ...


class _KeyPair:
    """An ed25519 key in the two OpenSSH encodings the fleet writes and serves. The private
    encoding is made when first asked for (the host is served): half of a key's cost, and a
    2,000-node fleet's hosts are served only as they are connected to."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        self.public = public.decode()  # "ssh-ed25519 AAAA..."

    @classmethod
    def generate(cls) -> _KeyPair:
        return cls(Ed25519PrivateKey.generate())

    @cached_property
    def private(self) -> bytes:
        """ "-----BEGIN OPENSSH PRIVATE KEY-----" ..."""
        return self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )


class _Host:
    """One listening endpoint: a node or the control host."""

    def __init__(self, name: str, key: _KeyPair, make_shell: Callable[[], Shell]) -> None:
        self.name = name
        self.key = key
        self.make_shell = make_shell
        self.port = 0
        self.sock: socket.socket | None = None  # bound and listening; served once acceptor is set
        self.acceptor: asyncssh.SSHAcceptor | None = None
        self.conns: set[asyncssh.SSHServerConnection] = set()
        self.links: set[Link] = set()  # in-process clients: dropped where conns are
        self.up = False
        self.waiting = False  # bound and watched: served at its first connection (the node is up)
        self.rng = random.Random(name)


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
        self.client_key = _KeyPair.generate()
        self._hosts = {name: _Host(name, _KeyPair.generate(), partial(self._shell, name)) for name in self.all_names}
        self._tasks: set[asyncio.Task[None]] = set()
        #: runs of each (host, command text) so far: a flaky drop is drawn per run of a command
        self._runs: dict[tuple[str, str], int] = {}
        self._knocked_on: list[socket.socket] = []  # sockets watched for the first connection
        self.started = False
        #: served to an in-process transport (:meth:`serve_in_process`): no ports, no SSH
        self.in_process = False
        #: per task, the real seconds of simulated waits not yet slept (see :meth:`sleep`)
        self._owed: weakref.WeakKeyDictionary[asyncio.Task[Any], float] = weakref.WeakKeyDictionary()

    @cached_property
    def nodes(self) -> dict[str, SimNode]:
        """The simulated GPU nodes, built when first asked for (to serve a command, or by a
        test): their modules are most of the simulator's import time, which the demo's
        first frame does without."""
        from cockpit.sim.node import NodeHooks, SimNode
        from cockpit.sim.platform import PROFILES

        hooks = NodeHooks(reboot=self._request_reboot, sleep=self.sleep)
        built: dict[str, SimNode] = {}
        for i, name in enumerate(self.node_names):
            sc = self.scenario
            kind = sc.target_profile if sc.target_profile is not None and i == sc.target else sc.profile
            built[name] = SimNode.create(name, i, sc, self.seed, profile=PROFILES[kind])
            built[name].hooks = hooks
        for node in built.values():
            node.gputools.peer = partial(self._peer, built, node)
        return built

    def _peer(self, built: dict[str, SimNode], asking: SimNode, name: str) -> Peer | None:
        """A host as mpirun on ``asking`` reaches it: a node of the fleet while it is up, or the fabric's
        spare reference node (outside the window, healthy, of the asking node's type); else None."""
        from cockpit.sim.gputools import Peer

        if name == SPARE_REFERENCE:
            return Peer(name, list(asking.gputools.gpus), lambda: None, lambda: 1.0)
        node = built.get(name)
        return node.gputools.as_peer() if node is not None and self.is_up(name) else None

    @cached_property
    def control(self) -> SimControl:
        from cockpit.sim.control import SimControl

        return SimControl(self.nodes, is_up=self.is_up, sleep=self.sleep)

    def _shell(self, name: str) -> Shell:
        return self.control.shell() if name == CONTROL else self.nodes[name].shell()

    # -- lifecycle ------------------------------------------------------------------

    def bind(self) -> None:
        """Listen on every host's port now, without serving SSH yet (no asyncssh needed).

        From here on the ports are known and a client may connect: it waits in the
        listen backlog for the server's banner, as it would for a slow sshd."""
        for i, h in enumerate(self._hosts.values()):
            if h.sock is None and h.acceptor is None:
                if self.base_port:
                    # control on the base port, gpuNN on base + N
                    h.port = self.base_port if h.name == CONTROL else self.base_port + i + 1
                self._bind(h)

    async def start(self) -> None:
        """Bind (if not yet) and serve every host."""
        self._stop_watching()
        self.bind()
        for h in self._hosts.values():
            if h.acceptor is None:
                await self._listen(h)
            h.waiting = False
        self.started = True

    def start_on_first_connection(self) -> None:
        """Bind now; serve each host from the first time a client connects to it.

        The demo's way to write its change log's header (ports) and paint its first
        frame before asyncssh is imported: its first probe round connects after that.
        Host by host, because serving costs (asyncssh reads the host key and sets up an
        acceptor: seconds for a 2,000-node fleet, most of whose nodes wait for a later
        wave); a client meanwhile waits in the listen backlog, as for a slow sshd."""
        self.bind()
        loop = asyncio.get_running_loop()
        for h in self._hosts.values():
            assert h.sock is not None
            if h.acceptor is None and not h.waiting:
                # by its number: the selector's lookup of a new socket object formats its repr
                # into a KeyError first, a third of the bind of a 2,000-node fleet
                loop.add_reader(h.sock.fileno(), self._first_connection, h)
                self._knocked_on.append(h.sock)
                h.waiting = True

    def serve_in_process(self) -> None:
        """Serve every host to :class:`cockpit.sim.inprocess.InProcessTransport` alone: no port
        is bound and asyncssh is never imported. Reboots, cut-offs and flaky drops still take a
        host down and drop its links, as they would its SSH connections."""
        if any(h.sock is not None or h.acceptor is not None for h in self._hosts.values()):
            raise RuntimeError("this fleet already serves SSH")
        self.in_process = True
        for h in self._hosts.values():
            h.up = True
        self.started = True

    def _first_connection(self, h: _Host) -> None:
        if not h.waiting:
            return
        # at once: a pending connection makes the reader fire every loop turn
        assert h.sock is not None
        asyncio.get_running_loop().remove_reader(h.sock.fileno())
        self._knocked_on.remove(h.sock)
        self._spawn(self._serve_waiting(h))

    async def _serve_waiting(self, h: _Host) -> None:
        await self._listen(h)
        h.waiting = False
        self.started = True

    def _stop_watching(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in self._knocked_on:
            loop.remove_reader(sock.fileno())
        self._knocked_on.clear()

    async def stop(self) -> None:
        self._stop_watching()
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

    def _bind(self, h: _Host) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        h.sock = socket.create_server((self.host, h.port), family=family, backlog=BACKLOG)  # SO_REUSEADDR on POSIX
        h.port = h.sock.getsockname()[1]

    async def _listen(self, h: _Host) -> None:
        if self.in_process:  # back from a reboot or a cut-off: links may connect again
            h.up = True
            return
        from cockpit.sim import sshd  # asyncssh: only now that something is to be served

        if h.sock is None:  # back from a reboot: the same port again
            self._bind(h)
        assert h.sock is not None
        served = sshd.Served(
            make_shell=h.make_shell,
            conns=h.conns,
            latency_s=self.scenario.latency_s,
            sleep=self.sleep,
            drops_next=lambda command: self.should_drop(h, command),
        )
        h.acceptor = await sshd.serve(
            h.sock, served, host_key=h.key.private, client_key=self.client_key.public, backlog=BACKLOG
        )
        h.up = True

    async def _take_down(self, h: _Host) -> None:
        h.up = False
        h.waiting = False
        if h.acceptor is not None:
            h.acceptor.close()  # closes its socket too
            await h.acceptor.wait_closed()
            h.acceptor = None
        elif h.sock is not None:  # bound, never served
            h.sock.close()
        h.sock = None
        for conn in list(h.conns):
            conn.abort()
        h.conns.clear()
        for link in list(h.links):
            link.abort()
        h.links.clear()

    async def cut_off(self, name: str) -> None:
        """The network to ``name`` is lost: its connections drop and new ones are refused;
        nothing on the node changes (no reboot, the same boot id when it is back)."""
        await self._take_down(self._hosts[name])

    async def reconnect(self, name: str) -> None:
        """The network to ``name`` is back (after :meth:`cut_off`): it serves on the same port."""
        h = self._hosts[name]
        if not h.up:
            await self._listen(h)

    # -- behaviour hooks ------------------------------------------------------------

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of simulated time: ``seconds / speed`` real ones.

        The event loop waits whole milliseconds (epoll rounds a timeout up), so at a high speed
        each of a command's many short waits (a line of a stream, a sweep's row) would take a
        millisecond, not its share: a sped-up fleet ran slower than its speed. Waits under
        :data:`MIN_REAL_WAIT_S` are owed instead (per task, so each command keeps its own pace):
        the task yields to the others at once, and sleeps what it owes once that adds up to a
        wait the loop can keep. Each command's time stays its simulated time over ``speed``."""
        task = asyncio.current_task()
        owed = seconds / self.speed + (self._owed.pop(task, 0.0) if task is not None else 0.0)
        if owed >= MIN_REAL_WAIT_S or task is None:
            await asyncio.sleep(owed)
            return
        self._owed[task] = owed
        await asyncio.sleep(0)

    def is_up(self, name: str) -> bool:
        h = self._hosts.get(name)
        return bool(h and (h.up or h.waiting))

    def open_shell(self, name: str) -> Shell:
        """A shell on host ``name`` as its SSH login, as its SSH server runs each command."""
        return self._hosts[name].make_shell()

    def drops_next(self, name: str, command: str) -> bool:
        """Whether this command's link to ``name`` drops halfway through its output (flaky)."""
        return self.should_drop(self._hosts[name], command)

    def attach(self, name: str, link: Link) -> None:
        """An in-process link to ``name`` is open: dropped with the host's connections."""
        self._hosts[name].links.add(link)

    def detach(self, name: str, link: Link) -> None:
        self._hosts[name].links.discard(link)

    def should_drop(self, h: _Host, command: str) -> bool:
        """Drawn from the seed, the host, the command's text and how many times it ran
        there: the same walk drops the same step's same attempt however many probes a
        loaded machine's timing slipped in between (one draw sequence shifted by them)."""
        rate = self.scenario.flaky_drop_rate
        node = self.nodes.get(h.name)
        if not (rate and node is not None and node.is_target):
            return False
        # digits out of the key: a window's change id (a demo's is its start time) and
        # other run-made numbers in a step's command do not make it another command
        shape = _DIGITS.sub("#", command)
        key = (h.name, shape)
        run = self._runs[key] = self._runs.get(key, 0) + 1
        return random.Random(f"{self.seed}:flaky:{h.name}:{run}:{shape}").random() < rate

    def _request_reboot(self, node: SimNode) -> None:
        self._spawn(self._reboot(node))

    def request_reboot(self, name: str) -> None:
        """Reboot node ``name`` as its own ``reboot`` would: what a site's RebootProgram does
        (a real Slurm's, in ``cockpit demo --backend slurm``). On the fleet's event loop."""
        self._request_reboot(self.nodes[name])

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the background; :meth:`stop` cancels what is still running."""
        task = asyncio.get_running_loop().create_task(work)
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
        import asyncssh

        return asyncssh.import_private_key(self._hosts[name].key.private)

    def known_hosts_line(self, name: str) -> str:
        host, port = self.endpoint(name)
        return f"[{host}]:{port} {self._hosts[name].key.public}"

    def login_user(self, name: str) -> str:
        """The SSH user of a host: the control host's operator, the scenario's login on a node."""
        return USER if name == CONTROL else self.scenario.ssh_user

    def targets(self) -> list[HostTarget]:
        """Every host (nodes, then control) with its address, port and user (served in process:
        no port)."""
        out = []
        for name in self.all_names:
            host, port = (self.host, None) if self.in_process else self.endpoint(name)
            out.append(HostTarget(name=name, address=host, port=port, user=self.login_user(name)))
        return out

    def write_client_files(self, directory: Path | str) -> SimClientFiles:
        """Write ssh_config, known_hosts and the client identity for this fleet."""
        d = Path(directory).resolve()
        d.mkdir(parents=True, exist_ok=True)
        identity = d / "id_ed25519"
        identity.write_bytes(self.client_key.private)
        os.chmod(identity, 0o600)
        (d / "id_ed25519.pub").write_text(f"{self.client_key.public} cockpit-sim-client\n", encoding="utf-8")
        known_hosts = d / "known_hosts"
        known_hosts.write_text("".join(self.known_hosts_line(n) + "\n" for n in self.all_names), encoding="utf-8")
        blocks = []
        for name in self.all_names:
            host, port = self.endpoint(name)
            # a node's own User comes first: ssh_config(5) keeps the first value it finds
            user = f"    User {self.login_user(name)}\n" if name != CONTROL else ""
            blocks.append(f"Host {name}\n    HostName {host}\n    Port {port}\n{user}")
        blocks.append(
            "Host *\n"
            f"    User {USER}\n"
            f"    IdentityFile {identity}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {known_hosts}\n"
            # the fleet's keys are throwaway: only its own file vouches for them (a site's
            # global file, an @cert-authority * line say, must not judge them)
            "    GlobalKnownHostsFile none\n"
            "    StrictHostKeyChecking yes\n"
            "    ServerAliveInterval 2\n"
            "    ServerAliveCountMax 3\n"
        )
        ssh_config = d / "ssh_config"
        ssh_config.write_text("# written by cockpit sim; valid while it runs\n" + "\n".join(blocks), encoding="utf-8")
        return SimClientFiles(ssh_config=ssh_config, known_hosts=known_hosts, identity=identity)

    def transport_options(self, files: SimClientFiles | None, **overrides: object) -> TransportOptions:
        """Transport options that reach this fleet through the files it wrote.

        The pause between connect retries is on the fleet's clock, as the demo's timeouts
        are (``scaled_timeouts``): a node that refuses connections costs as many retries,
        each ``speed`` times sooner, so a sped-up walk past a dead node is not spent waiting."""
        defaults = TransportOptions()
        scaled: dict[str, object] = {
            "backoff_initial_s": defaults.backoff_initial_s / self.speed,
            "backoff_max_s": defaults.backoff_max_s / self.speed,
        }
        ssh_config = files.ssh_config if files is not None else None  # None: served in process
        return TransportOptions(ssh_config=ssh_config, **{**scaled, **overrides})
