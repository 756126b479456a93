"""A real Slurm (Debian's slurmctld, slurmd and munge) on 127.0.0.1: the Slurm backend's tests
and ``cockpit demo --backend slurm`` run against it.

``start_slurm(nodes)`` writes a throwaway cluster under a fresh folder: a munge key and
``munged`` on its own socket, a ``slurm.conf`` (``SlurmctldHost=localhost(127.0.0.1)``,
free loopback ports, state and spool in the folder, ``proctrack/linuxproc``,
``task/none``, ``select/cons_tres``, ``GresTypes=gpu`` with eight fake GPUs per node in
``gres.conf``) and starts ``slurmctld -D`` and one ``slurmd -D -N NAME`` per node, all as
root, in the foreground, each by its PID. Several slurmd on one host work with Debian's
build: each node has its own ``Port=`` (slurm.conf(5), NodeName ``Port``: "If multiple
slurmd daemons execute on a node this parameter must be set") and ``%n`` in
``SlurmdSpoolDir``/``SlurmdPidFile``/``SlurmdLogFile``; checked by hand with 22.05.8,
where each ``slurmd -N`` registered on its own port.

The reboot is simulated, as close to a real one as one host allows. ``RebootProgram`` is
a script that only records which node was asked (slurmd runs it with ``system()``, so it
inherits the environment each slurmd was started with, where the fixture put the node's
name). A supervisor thread sees the request, stops that node's slurmd (the node is gone:
slurmctld marks it ``NOT_RESPONDING``), waits ``reboot_pause_s`` and starts it again with
``slurmd -b`` ("Report node reboot now", slurmd(8)), so it registers with a new
``BootTime`` exactly as a rebooted node does and slurmctld clears ``REBOOT_ISSUED``. A node
marked with :meth:`SlurmCluster.never_returns` stays stopped: slurmctld keeps it
``DOWN+DRAIN+REBOOT_ISSUED+NOT_RESPONDING`` and after ``ResumeTimeout`` appends "reboot
timed out" to its reason (scontrol(1), ``reboot``).

GPUs: gres.conf names ``File=`` devices (22.05 drops a file-less GPU: slurmd logs
"Removing file-less GPU ... from final GRES list"), here character devices made with
``mknod`` in the folder with /dev/null's numbers; nothing opens them (``task/none``
constrains no devices).

Stop it with :meth:`SlurmCluster.stop`: the slurmds, slurmctld and munged it started, by
PID, nothing else. ``slurm_available()`` says what is missing, so a test can skip (or,
with ``CI=true``, fail) with that reason, and the demo say in one line what to install.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.sim import ports

BINARIES = ("munged", "slurmctld", "slurmd", "scontrol", "sinfo", "squeue", "sbatch")
SBIN = ("/usr/sbin", "/usr/local/sbin")
GPUS_PER_NODE = 8
#: the variable the fixture gives each slurmd, which RebootProgram reads to say who was asked
NODE_ENV = "COCKPIT_SLURM_NODE"
#: slurm.conf(5) ResumeTimeout: a node asked to reboot that has not registered by then is
#: marked DOWN, "reboot timed out". Slurm's default (60 s): at 6 s a loaded 2-core machine,
#: restarting slurmd, now and then took longer and a node that did come back was marked DOWN
#: (the never-returns tests give up on their own, shorter, timeouts)
RESUME_TIMEOUT_S = 60


def find(binary: str) -> str | None:
    found = shutil.which(binary)
    if found:
        return found
    return next((f"{d}/{binary}" for d in SBIN if os.access(f"{d}/{binary}", os.X_OK)), None)


def slurm_available() -> str | None:
    """Why a real Slurm cannot be started here, or None when it can."""
    missing = [b for b in BINARIES if find(b) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install slurmctld slurmd slurm-client munge)"
    if os.geteuid() != 0:
        return "slurmctld, slurmd and munged are started as root (SlurmUser=root), and this is not root"
    return None


@dataclass
class SlurmCluster:
    """A running slurmctld, one slurmd per node and their munged; the client environment to reach them."""

    workdir: Path
    conf: Path
    nodes: tuple[str, ...]
    reboot_pause_s: float
    #: called (from the supervisor thread) when Slurm runs RebootProgram for a node: a test
    #: reboots its simulated node there, as a real RebootProgram reboots the machine it runs on
    on_reboot: Callable[[str], None] | None = None
    #: whether a rebooting node is up again; its slurmd starts only then (a real slurmd starts
    #: with the machine); None: after reboot_pause_s
    is_back: Callable[[str], bool] | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    lost: set[str] = field(default_factory=set)  # nodes that never come back from a reboot
    reboots: list[str] = field(default_factory=list)  # nodes the RebootProgram was run for, in order
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _supervisor: threading.Thread | None = None

    @property
    def env(self) -> dict[str, str]:
        """The environment the Slurm clients need to find this cluster (``SLURM_CONF``)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def client(self, *argv: str, timeout: float = 10.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client (``sbatch``, ``scontrol``) against this cluster, for a test's own setup."""
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=check)

    def never_returns(self, node: str) -> None:
        """From now on a reboot of ``node`` leaves its slurmd stopped: the node never comes back."""
        self.lost.add(node)

    def submit_sleep(self, node: str, seconds: float) -> str:
        """A batch job that sleeps on ``node``; its job id once it runs."""
        done = self.client(
            "sbatch", "--parsable", "-w", node, "-J", "cockpit-test", f"--chdir={self.workdir}",
            f"--output={self.workdir}/jobs/%j.out", "--wrap", f"sleep {seconds:g}",
        )  # fmt: skip
        job = done.stdout.strip().split(";")[0]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            state = self.client("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()
            if state == "RUNNING":
                return job
            time.sleep(0.05)
        raise RuntimeError(f"job {job} on {node} did not start: {state or 'gone'}")

    # -- daemons -----------------------------------------------------------------------------

    def _spawn(self, key: str, argv: list[str], extra_env: dict[str, str] | None = None) -> None:
        log = open(self.workdir / "log" / f"{key}.out", "ab")  # noqa: SIM115 - the child holds it
        env = {**self.env, **(extra_env or {})}
        self.procs[key] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL
        )
        log.close()

    def _start_slurmd(self, node: str, *, rebooted: bool) -> None:
        argv = [str(find("slurmd")), "-D", "-N", node, "-f", str(self.conf)]
        if rebooted:
            argv.insert(2, "-b")  # slurmd(8): "Report node reboot now": the boot time a reboot gives
        self._spawn(node, argv, {NODE_ENV: node})

    def _stop_proc(self, key: str, grace_s: float = 5.0) -> None:
        proc = self.procs.get(key)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def _supervise(self) -> None:
        """Carry out the reboots RebootProgram asked for (see the module's docstring)."""
        requests = self.workdir / "reboot-requests"
        while not self._stop.wait(0.05):
            for request in sorted(requests.iterdir()):
                node = request.name
                request.unlink()
                with self._lock:
                    self.reboots.append(node)
                    self._stop_proc(node)
                if self.on_reboot is not None:
                    self.on_reboot(node)
                if node not in self.lost:
                    threading.Thread(target=self._come_back, args=(node,), daemon=True).start()

    def _come_back(self, node: str) -> None:
        if self._stop.wait(self.reboot_pause_s):
            return
        while self.is_back is not None and not self.is_back(node):
            if self._stop.wait(0.05):
                return
        with self._lock:
            if not self._stop.is_set():
                self._start_slurmd(node, rebooted=True)

    def stop(self) -> None:
        """Stop the daemons this fixture started (by PID) and what they started, then remove the folder."""
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=5)
        # a job still running has a slurmstepd that outlives its slurmd, retrying to report
        # the job's end for ever: end the jobs first, while slurmd can still hear of it
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self.client("scancel", "--user=root", timeout=5, check=False)
            deadline = time.monotonic() + 3
            while self.client("squeue", "-h", timeout=5, check=False).stdout.strip():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        with self._lock:
            for key in [*self.nodes, "slurmctld", "munged"]:
                # a throwaway cluster: slurmctld saving state for a node that never came back
                # is not worth seconds of every test run
                self._stop_proc(key, grace_s=1.0)
        for pid in self._descendants():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _descendants(self) -> list[int]:
        """Processes our slurmds left (a slurmstepd, a job's sleep): they hold files in our folder."""
        mine = str(self.workdir) + "/"
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
            except OSError:
                continue
            if any(link.startswith(mine) for link in links):
                found.append(int(entry.name))
        return found


def _write_conf(workdir: Path, nodes: tuple[str, ...], resume_timeout_s: int, free_port: Callable[[], int]) -> Path:
    conf = workdir / "slurm.conf"
    munge_socket = workdir / "munge" / "munge.socket"
    lines = [
        "ClusterName=cockpit",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={workdir}/state",
        f"SlurmdSpoolDir={workdir}/spool/%n",
        f"SlurmctldPidFile={workdir}/run/slurmctld.pid",
        f"SlurmdPidFile={workdir}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={workdir}/log/slurmctld.log",
        f"SlurmdLogFile={workdir}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SwitchType=switch/none",
        # the configured CPUs and memory, not the machine's: CI's 2 cores and a laptop alike
        "SlurmdParameters=config_overrides",
        f"RebootProgram={workdir}/reboot-program",
        f"ResumeTimeout={resume_timeout_s}",
        # a resumed node must register again within SlurmdTimeout or ping_nodes.c marks it DOWN
        # "Not responding" (update_node -> _require_node_reg, src/slurmctld/node_mgr.c): at 5 s a
        # loaded 2-core machine now and then missed it, which round 2 took for Slurm's behaviour.
        # A rebooting node (REBOOT_ISSUED) is not pinged at all, so this delays no test
        "SlurmdTimeout=60",
        "ReturnToService=1",
        "KillWait=1",
        # Slurm's default. At 3 s a loaded machine now and then lost the reboot RPC, which the
        # agent sends once (retry = 0, controller.c): the node stayed REBOOT_ISSUED, RebootProgram
        # never ran, and only ResumeTimeout ended it ("reboot timed out"), as on a real cluster
        "MessageTimeout=10",
        "MinJobAge=2",
    ]
    for node in nodes:
        lines.append(
            f"NodeName={node} NodeAddr=127.0.0.1 Port={free_port()} CPUs=2 Sockets=1 CoresPerSocket=2 "
            f"ThreadsPerCore=1 RealMemory=1000 Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
        )
    lines.append("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    conf.write_text("\n".join(lines) + "\n")
    devices = workdir / "dev"
    devices.mkdir()
    for index in range(GPUS_PER_NODE):
        node_path = devices / f"nvidia{index}"
        try:
            os.mknod(node_path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        except OSError:
            node_path.touch()  # slurmd logs "not a valid character or block device" and still counts it
    (workdir / "gres.conf").write_text(f"Name=gpu File={devices}/nvidia[0-{GPUS_PER_NODE - 1}]\n")
    program = workdir / "reboot-program"
    program.write_text(f'#!/bin/sh\n: > "{workdir}/reboot-requests/${NODE_ENV}"\n')
    program.chmod(0o755)
    return conf


def _wait(what: str, cluster: SlurmCluster, ready: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for key, proc in cluster.procs.items():
            if proc.poll() is not None:
                log = (cluster.workdir / "log" / f"{key}.out").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{key} exited with {proc.returncode} while waiting for {what}:\n{log}")
        assert callable(ready)
        if ready():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")


def start_slurm(
    nodes: tuple[str, ...] = ("gpu01", "gpu02"),
    *,
    reboot_pause_s: float = 1.0,
    resume_timeout_s: int = RESUME_TIMEOUT_S,
    free_port: Callable[[], int] = ports.free_port,
) -> SlurmCluster:
    """Start munged, slurmctld and one slurmd per node; return once every node is idle.
    ``free_port`` hands out the daemons' loopback ports (the tests give each worker its own)."""
    # munged wants every folder above its socket searchable by all ("Socket is inaccessible:
    # execute permissions for all required"): pytest's own tmp folders are 0700.
    workdir = Path(tempfile.mkdtemp(prefix="cockpit-slurm-"))
    workdir.chmod(0o755)
    for sub in ("munge", "state", "spool", "run", "log", "jobs", "reboot-requests"):
        (workdir / sub).mkdir()
    for node in nodes:
        (workdir / "spool" / node).mkdir()
    (workdir / "munge").chmod(0o755)
    key = workdir / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = _write_conf(workdir, nodes, resume_timeout_s, free_port)
    cluster = SlurmCluster(workdir=workdir, conf=conf, nodes=nodes, reboot_pause_s=reboot_pause_s)
    try:
        munge = workdir / "munge"
        cluster._spawn("munged", [
            str(find("munged")), "-F", f"--key-file={key}", f"--socket={munge}/munge.socket",
            f"--pid-file={munge}/munged.pid", f"--seed-file={munge}/munged.seed", f"--log-file={munge}/munged.log",
        ])  # fmt: skip
        _wait("munged", cluster, lambda: (munge / "munge.socket").exists(), 10)
        cluster._spawn("slurmctld", [str(find("slurmctld")), "-D", "-i", "-f", str(conf)])

        def controller_up() -> bool:
            return cluster.client("scontrol", "ping", check=False).stdout.find("UP") >= 0

        _wait("slurmctld", cluster, controller_up, 15)
        for node in nodes:
            cluster._start_slurmd(node, rebooted=False)

        def all_idle() -> bool:
            out = cluster.client("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split()
            states = dict(zip(out[::2], out[1::2], strict=False))
            return all(states.get(node) == "idle" for node in nodes)

        _wait("every node idle", cluster, all_idle, 20)
    except BaseException:
        cluster.stop()
        raise
    cluster._supervisor = threading.Thread(target=cluster._supervise, daemon=True)
    cluster._supervisor.start()
    return cluster
