"""One simulated GPU node: its driver state and the commands it answers.

The driver model follows a real package upgrade: installing a branch replaces the
userspace (``nvidia-smi``, NVML) at once and builds the new kernel module on disk,
but the loaded module only changes at the next boot. In between every NVML call
fails with the driver/library version mismatch, as on a real node.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cockpit.sim import smi
from cockpit.sim.containers import ContainerCommands
from cockpit.sim.packages import (
    KERNEL,
    TOOLKIT_VERSION,
    PackageCommands,
    driver_packages,
)
from cockpit.sim.scenarios import Scenario
from cockpit.sim.shell import Handler, Io, Shell
from cockpit.sim.smi import RELEASES, DriverRelease, SimGpu

INITIAL_BRANCH = "575"
GPU_NAME = "NVIDIA H100 80GB HBM3"
GPU_MEMORY_MIB = 81559
BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
GCC = "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)"
BUILD_STAMP = {
    "575": "(dvs-builder@U22-I3-AE18-23-3)  Wed May 21 22:43:45 UTC 2025",
    "580": "(dvs-builder@U22-I3-AF03-09-1)  Sun Sep 28 02:59:23 UTC 2025",
}

XID_TEXT = {
    79: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    48: "pid=41872, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
    94: "pid=41872, name=python3, Contained: SM (0x1). RST: No, D-RST: No",
    13: "pid=41872, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address",
}


@dataclass
class NodeHooks:
    """What a node asks of its fleet (the network side)."""

    reboot: Callable[[SimNode], None]
    sleep: Callable[[float], Awaitable[None]]


@dataclass
class SimNode(PackageCommands, ContainerCommands):
    name: str
    index: int
    scenario: Scenario
    rng: random.Random
    gpu_count: int = 8
    packages: dict[str, str] = field(default_factory=dict)
    userspace: DriverRelease | None = None  # installed driver package (nvidia-smi, NVML)
    module_on_disk: DriverRelease | None = None  # what the next boot loads
    module: DriverRelease | None = None  # loaded kernel module; None = driver not loaded
    boot_id: str = ""
    booted_at: float = 0.0
    boot_wallclock: datetime = field(default_factory=lambda: datetime.now(UTC))
    uptime_base_s: float = 0.0
    reboots: int = 0
    fabric_manager: str | None = "active"
    held: set[str] = field(default_factory=set)
    kernel_log: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    gpus: list[SimGpu] = field(default_factory=list)
    hooks: NodeHooks | None = None
    installing: bool = False
    _commands: dict[str, Handler] | None = field(default=None, repr=False)

    @classmethod
    def create(cls, name: str, index: int, scenario: Scenario, seed: int) -> SimNode:
        rng = random.Random(f"{seed}:{name}")
        node = cls(name=name, index=index, scenario=scenario, rng=rng)
        release = RELEASES[INITIAL_BRANCH]
        node.userspace = node.module_on_disk = node.module = release
        for pkg in driver_packages(INITIAL_BRANCH):
            node.packages[pkg] = release.package_version
        node.packages[f"nvidia-fabricmanager-{INITIAL_BRANCH}"] = release.package_version
        for pkg in (
            "nvidia-container-toolkit",
            "nvidia-container-toolkit-base",
            "libnvidia-container1",
            "libnvidia-container-tools",
        ):
            node.packages[pkg] = TOOLKIT_VERSION
        node.packages[f"linux-image-{KERNEL}"] = "6.8.0-60.63"
        node.gpus = [node._make_gpu(i) for i in range(node.gpu_count)]
        node.uptime_base_s = rng.uniform(9, 40) * 86400
        node._boot(first=True)
        return node

    @property
    def is_target(self) -> bool:
        return self.index == self.scenario.target

    def _make_gpu(self, i: int) -> SimGpu:
        u = uuid.UUID(int=self.rng.getrandbits(128), version=4)
        return SimGpu(
            index=i,
            name=GPU_NAME,
            uuid=f"GPU-{u}",
            serial=f"1654223{self.rng.randrange(10**6):06d}",
            bus_id=f"00000000:{BUS_IDS[i % len(BUS_IDS)]}:00.0",
            memory_total_mib=GPU_MEMORY_MIB,
            memory_used_mib=1,
            utilization_pct=0,
            temperature_c=self.rng.randint(28, 36),
            power_draw_w=round(self.rng.uniform(68, 110), 2),
        )

    # -- lifecycle ------------------------------------------------------------------

    def _boot(self, first: bool = False) -> None:
        self.boot_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        self.booted_at = time.monotonic()
        self.boot_wallclock = datetime.now(UTC)
        if not first:
            self.uptime_base_s = 0.0
            self.reboots += 1
        self.module = self.module_on_disk if self.userspace is not None else None
        self.kernel_log = []
        if self.module is not None:
            self.kernel_log += [
                "nvidia: loading out-of-tree module taints kernel.",
                "nvidia: module verification failed: signature and/or required key missing - tainting kernel",
                "nvidia-nvlink: Nvlink Core is being initialized, major device number 508",
                f"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {self.module.version}  Release Build  "
                + BUILD_STAMP.get(self.module.branch, BUILD_STAMP["580"]),
                "nvidia-modeset: Loading NVIDIA UNIX Open Kernel Mode Setting Driver for x86_64  "
                f"{self.module.version}  Release Build",
            ]
        if not first and self.reboots == 1 and self.is_target:
            lost = self.scenario.gpus_lost_on_reboot
            gone = self.gpus[len(self.gpus) - lost :] if lost else []
            if lost:
                self.gpus = self.gpus[: len(self.gpus) - lost]
            for code in self.scenario.xids_after_reboot:
                victim = gone[0] if gone else self.gpus[-1]
                bus = victim.bus_id[4:].rsplit(".", 1)[0]  # "0000:18:00"
                self.kernel_log.append(
                    f"NVRM: Xid (PCI:{bus}): {code}, {XID_TEXT.get(code, 'pid=0, name=<unknown>, Channel exception')}"
                )
        fm_pkg = next((p for p in self.packages if p.startswith("nvidia-fabricmanager-")), None)
        if fm_pkg is None:
            self.fabric_manager = None
        elif self.module is None or (
            self.scenario.fabric_manager_fails and self.is_target and self.module.branch != INITIAL_BRANCH
        ):
            self.fabric_manager = "failed"
        else:
            self.fabric_manager = "active"

    def reboot_now(self) -> None:
        """Called by the fleet when the node comes back up."""
        self._boot()

    def uptime(self) -> float:
        return self.uptime_base_s + (time.monotonic() - self.booted_at)

    def nvml_error(self) -> tuple[str, int] | None:
        """Why NVML cannot initialise right now, as nvidia-smi says it, or None."""
        if self.userspace is None:
            return "", 127
        if self.module is None:
            return smi.NOT_LOADED + "\n", 9
        if self.module.version != self.userspace.version:
            return f"{smi.MISMATCH}\nNVML library version: {self.userspace.nvml}\n", 18
        return None

    # -- shell ----------------------------------------------------------------------

    def shell(self) -> Shell:
        return Shell(self._resolve, self._read_file, self._write_file)

    def _resolve(self, name: str) -> Handler | None:
        name = name.rsplit("/", 1)[-1] if name.startswith("/") else name
        if name == "nvidia-smi" and self.userspace is None:
            return None
        return self.commands().get(name)

    def commands(self) -> dict[str, Handler]:
        if self._commands is None:
            self._commands = self._command_table()
        return self._commands

    def _command_table(self) -> dict[str, Handler]:
        from cockpit.sim import coreutils

        table = dict(coreutils.COMMANDS)
        table.update(
            {
                "sh": self._sh,
                "bash": self._sh,
                "sudo": self._prefix,
                "env": self._prefix,
                "nohup": self._prefix,
                "timeout": self._timeout,
                "command": self._command,
                "which": self._which,
                "cat": self._cat,
                "hostname": self._hostname,
                "uname": self._uname,
                "nvidia-smi": self._nvidia_smi,
                "dpkg-query": self._dpkg_query,
                "dpkg": self._dpkg,
                "apt-get": self._apt_get,
                "apt": self._apt_get,
                "apt-mark": self._apt_mark,
                "apt-cache": self._apt_cache,
                "systemctl": self._systemctl,
                "reboot": self._reboot,
                "shutdown": self._shutdown,
                "journalctl": self._journalctl,
                "dmesg": self._dmesg,
                "modinfo": self._modinfo,
                "lsmod": self._lsmod,
                "docker": self._docker,
                "nvidia-ctk": self._nvidia_ctk,
                "nvidia-container-cli": self._nvidia_container_cli,
                "lsof": self._lsof,
                "pgrep": self._pgrep,
                "fuser": self._lsof,
            }
        )
        return table

    def _read_file(self, path: str) -> str | None:
        if path == "/proc/driver/nvidia/version":
            if self.module is None:
                return None
            return (
                f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {self.module.version}  Release Build  "
                f"{BUILD_STAMP.get(self.module.branch, BUILD_STAMP['580'])}\nGCC version:  {GCC}\n"
            )
        if path == "/proc/sys/kernel/random/boot_id":
            return self.boot_id + "\n"
        if path == "/proc/uptime":
            up = self.uptime()
            return f"{up:.2f} {up * 15.7:.2f}\n"
        if path == "/etc/hostname":
            return self.name + "\n"
        if path == "/etc/os-release":
            return 'PRETTY_NAME="Ubuntu 24.04.2 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=noble\n'
        if path == "/sys/module/nvidia/version":
            return None if self.module is None else self.module.version + "\n"
        return self.files.get(path)

    def _write_file(self, path: str, data: str, append: bool) -> None:
        self.files[path] = (self.files.get(path, "") + data) if append else data

    async def _sleep(self, seconds: float) -> None:
        if self.hooks is not None:
            await self.hooks.sleep(seconds)
        else:
            await asyncio.sleep(seconds)

    async def _sub(self, argv: list[str], io: Io) -> int:
        """Run ``argv`` as a command of this node (for sudo, timeout, env...)."""
        while argv and "=" in argv[0] and argv[0].split("=", 1)[0].isidentifier():
            argv = argv[1:]
        if not argv:
            return 0
        handler = self._resolve(argv[0])
        if handler is None:
            io.err(f"sh: 1: {argv[0]}: not found\n")
            return 127
        return await handler(argv, io)

    async def _sh(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        while args and args[0].startswith("-") and args[0] != "-c":
            args = args[1:]
        if args[:1] == ["-c"] and len(args) >= 2:
            return await self.shell().run(args[1], io.out, io.err, io.stdin)
        if not args:
            return await self.shell().run(io.stdin, io.out, io.err, "")
        content = self._read_file(args[0])
        if content is None:
            io.err(f"{argv[0]}: 0: cannot open {args[0]}: No such file\n")
            return 2
        return await self.shell().run(content, io.out, io.err, "")

    async def _prefix(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        while args and args[0].startswith("-"):
            opt = args.pop(0)
            if argv[0] == "sudo" and opt in ("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"):
                args = args[1:]
        return await self._sub(args, io)

    async def _timeout(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        while args and args[0].startswith("-"):
            opt = args.pop(0)
            if opt in ("-s", "-k", "--signal", "--kill-after"):
                args = args[1:]
        if not args:
            io.err("timeout: missing operand\n")
            return 125
        limit = _seconds(args[0])
        try:
            return await asyncio.wait_for(self._sub(args[1:], io), timeout=limit)
        except TimeoutError:
            return 124

    async def _command(self, argv: list[str], io: Io) -> int:
        if len(argv) >= 3 and argv[1] in ("-v", "-V"):
            return await self._which(["which", *argv[2:]], io)
        return await self._sub(argv[1:], io)

    async def _which(self, argv: list[str], io: Io) -> int:
        status = 0
        for name in argv[1:]:
            if self._resolve(name) is None:
                status = 1
            else:
                prefix = "/usr/sbin/" if name in ("reboot", "shutdown", "modinfo", "lsmod") else "/usr/bin/"
                io.out(prefix + name + "\n")
        return status

    async def _cat(self, argv: list[str], io: Io) -> int:
        paths = [a for a in argv[1:] if a != "-"]
        if not paths:
            io.out(io.stdin)
            return 0
        status = 0
        for path in paths:
            content = self._read_file(path)
            if content is None:
                io.err(f"cat: {path}: No such file or directory\n")
                status = 1
            else:
                io.out(content)
        return status

    async def _hostname(self, argv: list[str], io: Io) -> int:
        io.out(self.name + "\n")
        return 0

    async def _uname(self, argv: list[str], io: Io) -> int:
        flags = "".join(a.lstrip("-") for a in argv[1:]) or "s"
        if "a" in flags:
            io.out(
                f"Linux {self.name} {KERNEL} #63-Ubuntu SMP PREEMPT_DYNAMIC Tue Apr 15 19:04:15 UTC 2025 x86_64 x86_64 x86_64 GNU/Linux\n"
            )
            return 0
        parts = {"s": "Linux", "n": self.name, "r": KERNEL, "m": "x86_64", "v": "#63-Ubuntu SMP PREEMPT_DYNAMIC"}
        io.out(" ".join(parts[c] for c in flags if c in parts) + "\n")
        return 0

    # -- nvidia-smi -----------------------------------------------------------------

    async def _nvidia_smi(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        assert self.userspace is not None
        if "--version" in args:
            failure = self.nvml_error()
            if failure and failure[1] == 18:
                # the userspace tool still knows its own version; NVML does not start
                io.out(failure[0])
                return failure[1]
            if failure:
                io.out(failure[0])
                return failure[1]
            io.out(smi.version_text(self.userspace))
            return 0
        if "-h" in args or "--help" in args:
            io.out(
                f"NVIDIA System Management Interface -- v{self.userspace.version}\n\nNVSMI provides monitoring information for Tesla and select Quadro devices.\n"
            )
            return 0
        failure = self.nvml_error()
        if failure is not None:
            io.out(failure[0])
            return failure[1]
        assert self.module is not None
        opts = _smi_options(args)
        if opts.get("error"):
            io.out(opts["error"])
            return 2
        gpus = self.gpus
        if "id" in opts:
            wanted = {x.strip() for x in opts["id"].split(",")}
            gpus = [g for g in gpus if str(g.index) in wanted or g.uuid in wanted or g.bus_id in wanted]
            if not gpus:
                io.out("No devices were found\n")
                return 6
        if "query-gpu" in opts:
            fields = [f.strip() for f in opts["query-gpu"].split(",") if f.strip()]
            formats = {f.strip() for f in opts.get("format", "").split(",")}
            if "csv" not in formats:
                io.out("The format option is required with --query-gpu (--format=csv).\n")
                return 2
            text, status = smi.query_gpu(gpus, self.module, fields, formats)
            io.out(text)
            return status
        if "query-compute-apps" in opts:
            formats = {f.strip() for f in opts.get("format", "").split(",")}
            if "noheader" not in formats:
                io.out(", ".join(f.strip() for f in opts["query-compute-apps"].split(",")) + "\n")
            return 0
        if "list-gpus" in opts:
            io.out(smi.list_gpus(gpus))
            return 0
        if "query" in opts:
            if "xml" in opts:
                io.out(smi.query_xml(gpus, self.module, datetime.now()))
                return 0
            io.out(_query_text(gpus, self.module))
            return 0
        if "persistence-mode" in opts or "reset" in opts:
            io.out("".join(f"Persistence mode is already Enabled for GPU {g.bus_id}.\n" for g in gpus))
            return 0
        io.out(smi.table(gpus, self.module, datetime.now()))
        return 0

    async def _stream(self, io: Io, lines: list[str], total_s: float) -> None:
        """Print lines over ``total_s`` simulated seconds (scaled by the fleet's speed)."""
        step = total_s / max(1, len(lines))
        for line in lines:
            io.out(line + "\n")
            await self._sleep(step)

    # -- services, reboot, logs -----------------------------------------------------

    async def _systemctl(self, argv: list[str], io: Io) -> int:
        args = [a for a in argv[1:] if not a.startswith("--") or a.startswith("--value") or a.startswith("--property")]
        value_only = "--value" in argv
        props: list[str] = []
        words: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-p", "--property"):
                props += args[i + 1].split(",")
                i += 2
                continue
            if a.startswith("--property="):
                props += a.split("=", 1)[1].split(",")
            elif a.startswith("-") or a == "--value":
                pass
            else:
                words.append(a)
            i += 1
        if not words:
            io.out("UNIT LOAD ACTIVE SUB DESCRIPTION\n")
            return 0
        action, units = words[0], [u.removesuffix(".service") for u in words[1:]]
        if action in ("reboot",):
            return await self._reboot(["reboot"], io)
        states = [self._unit_state(u) for u in units]
        if action == "is-active":
            for s in states:
                io.out((s or "inactive") + "\n")
            return 0 if states and all(s == "active" for s in states) else 3
        if action == "is-failed":
            for s in states:
                io.out((s or "inactive") + "\n")
            return 0 if any(s == "failed" for s in states) else 1
        if action == "show":
            for unit, s in zip(units, states, strict=True):
                values = {
                    "LoadState": "loaded" if s is not None else "not-found",
                    "ActiveState": s or "inactive",
                    "SubState": {"active": "running", "failed": "failed"}.get(s or "", "dead"),
                    "Id": unit + ".service",
                }
                for p in props or list(values):
                    io.out((values.get(p, "") if value_only else f"{p}={values.get(p, '')}") + "\n")
            return 0
        if action == "status":
            status = 0
            for unit, s in zip(units, states, strict=True):
                if s is None:
                    io.err(f"Unit {unit}.service could not be found.\n")
                    status = 4
                    continue
                sub = "running" if s == "active" else "failed"
                io.out(
                    f"● {unit}.service - NVIDIA fabric manager service\n     Loaded: loaded (/usr/lib/systemd/system/{unit}.service; enabled; preset: enabled)\n     Active: {s} ({sub})\n"
                )
                if s != "active":
                    status = 3
            return status
        if action in ("start", "restart", "stop", "enable", "disable", "try-restart"):
            for unit in units:
                if self._unit_state(unit) is None:
                    io.err(f"Failed to {action} {unit}.service: Unit {unit}.service not found.\n")
                    return 5
                if unit == "nvidia-fabricmanager" and action in ("start", "restart", "try-restart"):
                    if self.module is None or (
                        self.scenario.fabric_manager_fails and self.is_target and self.module.branch != INITIAL_BRANCH
                    ):
                        self.fabric_manager = "failed"
                        io.err(
                            f"Job for {unit}.service failed because the control process exited with error code.\n"
                            f'See "systemctl status {unit}.service" and "journalctl -xeu {unit}.service" for details.\n'
                        )
                        return 1
                    self.fabric_manager = "active"
                elif unit == "nvidia-fabricmanager" and action == "stop":
                    self.fabric_manager = "inactive"
            return 0
        io.err(f"Unknown command verb {action}.\n")
        return 1

    def _unit_state(self, unit: str) -> str | None:
        if unit in ("nvidia-fabricmanager", "nvidia-fabricmanager.service"):
            return self.fabric_manager
        if unit in ("docker", "containerd", "ssh", "kubelet", "slurmd", "nvidia-persistenced"):
            return "active"
        return None

    async def _reboot(self, argv: list[str], io: Io) -> int:
        if self.hooks is not None:
            self.hooks.reboot(self)
        return 0

    async def _shutdown(self, argv: list[str], io: Io) -> int:
        if "-r" in argv or "--reboot" in argv:
            return await self._reboot(argv, io)
        io.err("shutdown: only reboots are simulated\n")
        return 1

    def _kernel_lines(self, style: str) -> list[str]:
        start = self.boot_wallclock
        out = []
        for n, line in enumerate(self.kernel_log):
            offset = 3.2 + n * 0.41 + (30 if line.startswith("NVRM: Xid") else 0)
            if style == "dmesg":
                out.append(f"[{offset:>12.6f}] {line}")
            else:
                stamp = datetime.fromtimestamp(start.timestamp() + offset, UTC).strftime("%b %d %H:%M:%S")
                out.append(f"{stamp} {self.name} kernel: {line}")
        return out

    async def _journalctl(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        pattern: str | None = None
        for i, a in enumerate(args):
            if a in ("-g", "--grep") and i + 1 < len(args):
                pattern = args[i + 1]
            elif a.startswith("--grep="):
                pattern = a.split("=", 1)[1]
        lines = self._kernel_lines("journal") if ("-k" in args or "--dmesg" in args) else ["-- No entries --"]
        if pattern is not None:
            rx = re.compile(pattern, re.IGNORECASE if pattern.islower() else 0)
            lines = [ln for ln in lines if rx.search(ln)]
            if not lines:
                return 1
        io.out("".join(ln + "\n" for ln in lines))
        return 0

    async def _dmesg(self, argv: list[str], io: Io) -> int:
        io.out("".join(ln + "\n" for ln in self._kernel_lines("dmesg")))
        return 0

    async def _modinfo(self, argv: list[str], io: Io) -> int:
        mods = [a for a in argv[1:] if not a.startswith("-") and a != "version"]
        if not mods or mods[0] != "nvidia" or self.module_on_disk is None:
            io.err(f"modinfo: ERROR: Module {mods[0] if mods else ''} not found.\n")
            return 1
        if "-F" in argv or "--field" in argv:
            io.out(self.module_on_disk.version + "\n")
        else:
            io.out(
                f"filename:       /lib/modules/{KERNEL}/updates/dkms/nvidia.ko.zst\nversion:        {self.module_on_disk.version}\nlicense:        Dual MIT/GPL\n"
            )
        return 0

    async def _lsmod(self, argv: list[str], io: Io) -> int:
        io.out("Module                  Size  Used by\n")
        if self.module is not None:
            io.out(
                "nvidia_uvm           2076672  0\nnvidia_drm            135168  0\nnvidia_modeset       1638400  1 nvidia_drm\nnvidia              104878080  2 nvidia_uvm,nvidia_modeset\n"
            )
        return 0

    def serving(self) -> bool:
        """A cu130 vLLM server runs once the node's driver can start it."""
        return self.nvml_error() is None and self.module is not None and self.module.cuda >= "13.0" and bool(self.gpus)

    async def _pgrep(self, argv: list[str], io: Io) -> int:
        pattern = next((a for a in argv[1:] if not a.startswith("-")), "")
        full = "-f" in argv or any(a.startswith("-") and "f" in a for a in argv[1:] if not a.startswith("--"))
        procs = []
        if self.serving():
            procs.append(
                (
                    48213,
                    f"vllm serve moonshotai/Kimi-K3 --tensor-parallel-size {len(self.gpus)} --enable-prefix-caching --max-model-len 131072",
                )
            )
        hits = [(pid, cmd) for pid, cmd in procs if re.search(pattern, cmd if full else cmd.split()[0])]
        show_cmd = any(a.startswith("-") and ("a" in a or "l" in a) for a in argv[1:] if not a.startswith("--"))
        for pid, cmd in hits:
            io.out(f"{pid} {cmd}\n" if show_cmd else f"{pid}\n")
        return 0 if hits else 1

    async def _lsof(self, argv: list[str], io: Io) -> int:
        return 1  # nothing holds the GPUs once the node is drained


def _seconds(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text)
    if not m:
        return 0.0
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _smi_options(args: list[str]) -> dict[str, str]:
    """nvidia-smi's options as a dict: long name -> value ('' for flags)."""
    short = {
        "-q": "query",
        "-x": "xml",
        "-L": "list-gpus",
        "-i": "id",
        "-pm": "persistence-mode",
        "-r": "reset",
        "-f": "filename",
        "-l": "loop",
        "-d": "display",
    }
    takes_value = {"id", "query-gpu", "format", "query-compute-apps", "persistence-mode", "filename", "loop", "display"}
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if name == "xml-format":
                name = "xml"
            if name in takes_value and not eq:
                i += 1
                value = args[i] if i < len(args) else ""
            opts[name] = value
        elif a in short:
            name = short[a]
            if name in takes_value:
                i += 1
                opts[name] = args[i] if i < len(args) else ""
            else:
                opts[name] = ""
        else:
            opts["error"] = 'Invalid combination of input arguments. Please run "nvidia-smi -h" for help.\n'
        i += 1
    return opts


def _query_text(gpus: list[SimGpu], driver: DriverRelease) -> str:
    lines = [
        "",
        "==============NVSMI LOG==============",
        "",
        f"Timestamp                                 : {datetime.now().strftime('%a %b %e %H:%M:%S %Y')}",
        f"Driver Version                            : {driver.version}",
        f"CUDA Version                              : {driver.cuda}",
        "",
        f"Attached GPUs                             : {len(gpus)}",
    ]
    for g in gpus:
        lines += [
            f"GPU {g.bus_id}",
            f"    Product Name                          : {g.name}",
            f"    Serial Number                         : {g.serial}",
            f"    GPU UUID                              : {g.uuid}",
            "    FB Memory Usage",
            f"        Total                             : {g.memory_total_mib} MiB",
        ]
    return "\n".join(lines) + "\n"
