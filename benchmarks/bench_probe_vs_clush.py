"""Cold SSH probe: the cockpit vs ClusterShell's clush, on a fleet of REAL OpenSSH sshd nodes.

Starts N (default 64) real ``sshd`` processes on 127.0.0.1, one port and one ed25519 host
key each (a temporary known_hosts holds them all; host-key checking stays strict on both
sides), one ed25519 client key, and stub GPU tools on the sessions' PATH (the same stubs
as tests/sshd_fixture.py: ``nvidia-smi`` prints a real captured table, ``cat`` answers the
boot id and the kernel module version). Then, alternately, round after round:

* **cockpit**: a fresh child process builds a Transport and runs ``probe_fleet`` on all N
  nodes, fan-out 64: connect, authenticate, run the probe command line, parse it into
  NodeStates. ``cold s`` is that probe's wall time (the process's imports are before it,
  as in the running cockpit, where a probe round starts long after start-up); ``proc s``
  is the whole child process, Python start-up and imports included;
* **clush**: ``clush -f 64 -w NODES -o '-oKexAlgorithms=curve25519-sha256 ...'`` running
  the SAME command line text (:func:`cockpit.fleet.probes.probe_command`), OpenSSH client,
  same key type, same fan-out; its wall is the whole clush process.

Prints medians and the ratio cockpit / clush. Skips clush (saying so) when it is not
installed (``pip install ClusterShell``). Never fails on speed: the target (≤ 0.8) is read.

    python benchmarks/bench_probe_vs_clush.py [--nodes 64] [--rounds 5] [--platform]
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# the sshd_config and the cat stub are the ones tests/sshd_fixture.py writes for its server
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from sshd_fixture import cat_stub, sshd_config_text

ROOT = Path(__file__).resolve().parents[1]
#: what clush's OpenSSH is told: the key exchange the issue names, and strict host keys
CLUSH_SSH_OPTIONS = "-oKexAlgorithms=curve25519-sha256 -oBatchMode=yes -oStrictHostKeyChecking=yes"


def _find_sshd() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return next((c for c in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.access(c, os.X_OK)), None)


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):  # all bound at once, so no port is handed out twice
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class Fleet:
    """N real sshd processes on loopback and the client files that reach them."""

    def __init__(self, workdir: Path, n: int, *, machine_home: bool = False) -> None:
        self.workdir = workdir
        self.machine_home = machine_home
        self.names = [f"node{i:02d}" for i in range(1, n + 1)]
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ssh_config = workdir / "ssh_config"
        self.known_hosts = workdir / "known_hosts"
        self.client_key = workdir / "client_ed25519"

    def start(self) -> None:
        import asyncssh

        sshd = _find_sshd()
        if sshd is None:
            raise SystemExit("bench_probe_vs_clush: sshd not installed (apt-get install openssh-server)")
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
        bin_dir = self._stubs()
        client = asyncssh.generate_private_key("ssh-ed25519")
        client.write_private_key(self.client_key)
        self.client_key.chmod(0o600)
        authorized = self.workdir / "authorized_keys"
        client.write_public_key(authorized)
        user = getpass.getuser()
        # the sessions' HOME: an empty one, so that each login shell reads no rc file of this
        # machine's (a developer's ~/.bashrc running `pyenv init` costs more server CPU than the
        # whole SSH login); a GPU node's login shell starts plain. --machine-home keeps it.
        home = self.workdir / "home"
        home.mkdir()
        if self.machine_home:
            home = Path(os.path.expanduser(f"~{user}"))
        known, config = [], []
        for name, port in zip(self.names, _free_ports(len(self.names)), strict=True):
            node = self.workdir / name
            node.mkdir()
            host_key = asyncssh.generate_private_key("ssh-ed25519")
            host_key.write_private_key(node / "host_ed25519")
            (node / "host_ed25519").chmod(0o600)
            known.append(f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}")
            config.append(f"Host {name}\n  HostName 127.0.0.1\n  Port {port}\n")
            (node / "sshd_config").write_text(
                sshd_config_text(
                    port=port,
                    host_key=node / "host_ed25519",
                    pidfile=node / "sshd.pid",
                    authorized=authorized,
                    user=user,
                    session_env=f"PATH={bin_dir}:/usr/bin:/bin HOME={home}",
                    extra=["MaxStartups 200"],  # 64 at once: the default 10:30:100 drops some early
                )
            )
            log = (node / "sshd.log").open("ab")
            self.procs.append(
                subprocess.Popen(
                    [sshd, "-D", "-e", "-f", str(node / "sshd_config")],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                )
            )
        self.known_hosts.write_text("\n".join(known) + "\n")
        self.ssh_config.write_text(
            f"Host *\n  User {user}\n  IdentityFile {self.client_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.known_hosts}\n  GlobalKnownHostsFile /dev/null\n\n" + "\n".join(config)
        )
        self._wait_listening()

    def _stubs(self) -> Path:
        """The GPU node's tools on the sessions' PATH, answering what the simulator's node would
        (cockpit.sim: the same nvidia-smi CSV, --version and kernel module text), so the probe
        reads an OK node; ``cat`` intercepts the two /proc files as tests/sshd_fixture.py does."""
        from cockpit.gpu.parsers.query_gpu import PROBE_FIELDS
        from cockpit.sim.node import SimNode
        from cockpit.sim.scenarios import SCENARIOS
        from cockpit.sim.smi import query_gpu, table, version_text

        sim = SimNode.create("node01", 0, SCENARIOS["happy"], 1)
        bin_dir, node = self.workdir / "bin", self.workdir / "node"
        bin_dir.mkdir()
        node.mkdir()
        release = sim.driver.userspace
        assert release is not None
        csv, _ = query_gpu(sim._gpus, release, list(PROBE_FIELDS), {"csv", "noheader", "nounits"})
        (node / "query.csv").write_text(csv)
        (node / "smi-version.txt").write_text(version_text(release))
        (node / "table.txt").write_text(table(sim._gpus, release, datetime.now(UTC)))
        (node / "version").write_text(sim.kernel.read_file("/proc/driver/nvidia/version") or "")
        (node / "boot_id").write_text(f"{uuid.uuid4()}\n")
        stubs = {
            "nvidia-smi": (
                "#!/bin/sh\n"
                'case "$1" in\n'
                f'  --query-gpu=*) exec /bin/cat "{node}/query.csv" ;;\n'
                f'  --version) exec /bin/cat "{node}/smi-version.txt" ;;\n'
                "esac\n"
                f'exec /bin/cat "{node}/table.txt"\n'
            ),
            "cat": cat_stub(node),
        }
        for name, text in stubs.items():
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        return bin_dir

    def _wait_listening(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        for name in self.names:
            port = int(self.ssh_config.read_text().split(f"Host {name}\n")[1].split("Port ")[1].split()[0])
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                        sock.settimeout(2.0)
                        if sock.recv(64).startswith(b"SSH-2.0-"):
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit(f"bench_probe_vs_clush: sshd for {name} did not start")
                time.sleep(0.05)

    def server_cpu_s(self) -> float:
        """CPU seconds of every sshd and what it ran: the listeners' own and their reaped
        children's (each sshd reaps its connection's processes), from /proc/PID/stat."""
        ticks = 0
        for proc in self.procs:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        return ticks / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


# -- the cockpit, in a child process of its own -----------------------------------------


async def _cockpit_worker(
    ssh_config: Path, known_hosts: Path, key: Path, names: list[str], platform: bool
) -> dict[str, Any]:
    from cockpit.fleet.probes import probe_fleet
    from cockpit.fleet.transport import HostTarget, Transport, TransportOptions
    from cockpit.gpu.nodestate import Health

    options = TransportOptions(ssh_config=ssh_config, known_hosts=known_hosts, client_keys=[key], fanout=64)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    async with Transport([HostTarget(name=n) for n in names], options) as transport:
        states = await probe_fleet(transport, names, platform=platform)
        wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    bad = {h: s.health_evidence for h, s in states.items() if s.health is not Health.OK}
    return {
        "cold_s": wall,
        "cpu_s": (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
        "ok": len(names) - len(bad),
        "bad": dict(list(bad.items())[:2]),
    }


def _cockpit(fleet: Fleet, platform: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    # -S passed on: `python -S` with PYTHONPATH times another checkout's cockpit (no editable install)
    python = [sys.executable, *(["-S"] if sys.flags.no_site else [])]
    argv = [*python, __file__, "--worker", str(fleet.workdir), "--nodes", str(len(fleet.names))]
    t0 = time.perf_counter()
    out = subprocess.run(argv + (["--platform"] if platform else []), capture_output=True, text=True, env=env)
    proc_s = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"cockpit worker failed: {out.stderr.strip()[-800:]}")
    figures: dict[str, Any] = json.loads(out.stdout)
    figures["proc_s"] = proc_s
    return figures


def _clush(fleet: Fleet, command: str) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        ["clush", "-f", "64", "-w", ",".join(fleet.names), "-o", f"-F {fleet.ssh_config} {CLUSH_SSH_OPTIONS}",
         "-L", "--", command],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ends = sum(1 for line in out.stdout.splitlines() if line.endswith("@@cockpit-probe end"))
    return {
        "cold_s": wall,
        "proc_s": wall,
        "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "ok": ends,
        "rc": out.returncode,
        "stderr": out.stderr.strip()[-300:],
    }


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _figures(f: dict[str, Any]) -> str:
    return (
        f"cold {f['cold_s']:6.3f} s  proc {f['proc_s']:6.3f} s  "
        f"client cpu {f['cpu_s']:6.3f} s  server cpu {f['server_cpu_s']:6.3f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--platform", action="store_true", help="the record step's probe (platform sections too)")
    parser.add_argument(
        "--machine-home", action="store_true", help="sessions get the login's real HOME (its rc files run per login)"
    )
    parser.add_argument("--keep", action="store_true", help="leave the fleet running until Enter (for profiling)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        workdir = Path(args.worker)
        names = [f"node{i:02d}" for i in range(1, args.nodes + 1)]
        figures = asyncio.run(
            _cockpit_worker(
                workdir / "ssh_config", workdir / "known_hosts", workdir / "client_ed25519", names, args.platform
            )
        )
        print(json.dumps(figures))
        return 0

    from cockpit.fleet.probes import probe_command

    command = probe_command(platform=args.platform)
    has_clush = shutil.which("clush") is not None
    if not has_clush:
        print("clush not installed (pip install ClusterShell): timing the cockpit only")
    # a TERM (timeout, kill) unwinds like Ctrl-C, so the sshd processes are stopped and the files removed
    signal.signal(signal.SIGTERM, _interrupt)
    with tempfile.TemporaryDirectory(prefix="probe-vs-clush-") as tmp:
        os.environ["HOME"] = tmp  # no developer ssh config, keys or agent leak into either client
        os.environ.pop("SSH_AUTH_SOCK", None)
        fleet = Fleet(Path(tmp), args.nodes, machine_home=args.machine_home)
        try:
            fleet.start()
            if args.keep:
                print(f"fleet up in {tmp}; worker: {sys.executable} {__file__} --worker {tmp}; Enter stops it")
                input()
            runs: dict[str, list[dict[str, Any]]] = {"cockpit": [], "clush": []}
            for r in range(args.rounds):
                order = ["cockpit", "clush"] if r % 2 == 0 else ["clush", "cockpit"]
                for method in order:
                    if method == "clush" and not has_clush:
                        continue
                    server0 = fleet.server_cpu_s()
                    f = _cockpit(fleet, args.platform) if method == "cockpit" else _clush(fleet, command)
                    time.sleep(0.5)  # the last sshd children exit and are reaped
                    f["server_cpu_s"] = fleet.server_cpu_s() - server0
                    if f["ok"] != args.nodes:
                        print(f"round {r + 1} {method}: only {f['ok']}/{args.nodes} nodes answered: "
                              f"{f.get('bad') or f.get('stderr')}")  # fmt: skip
                    runs[method].append(f)
                    print(f"round {r + 1} {method:<8} {_figures(f)}  ok {f['ok']}/{args.nodes}")
        finally:
            fleet.stop()

    print(f"\n{args.nodes} real sshd nodes, {args.rounds} rounds alternately, medians:")
    med: dict[str, dict[str, float]] = {}
    for method, fs in runs.items():
        if not fs:
            continue
        med[method] = {k: statistics.median(f[k] for f in fs) for k in ("cold_s", "proc_s", "cpu_s", "server_cpu_s")}
        print(f"  {method:<8} {_figures(med[method])}")
    if "clush" in med:
        c, k = med["cockpit"], med["clush"]
        probe, whole = c["cold_s"] / k["cold_s"], c["proc_s"] / k["proc_s"]
        print(f"  ratio cockpit/clush: probe {probe:.2f}  whole process {whole:.2f}  (target <= 0.8)")
    print(f"\nsame command line for both ({len(command)} chars, {shlex.split(command)[0]} ...), fan-out 64, "
          "ed25519 keys; clush cpu includes its ssh children")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
