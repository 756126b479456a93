"""One simulated GPU node: what it is made of, and the commands it answers.

A node owns its parts, each a separate object over the state it needs: the driver
(:mod:`~cockpit.sim.driver`: userspace, module on disk, loaded module), the running
kernel (:mod:`~cockpit.sim.kernel`: boot id, uptime, kernel log), the services
(:mod:`~cockpit.sim.services`), the package manager (:mod:`~cockpit.sim.packages`),
the container runtime (:mod:`~cockpit.sim.containers`) and ``nvidia-smi``
(:mod:`~cockpit.sim.nvidia_smi`). The node boots them, answers the shell's file reads
and dispatches each command name to the part that implements it.
"""

from __future__ import annotations

import asyncio
import random
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from cockpit.gpu.kernel_modules import OPEN, flavour_need
from cockpit.sim import coreutils, rpms
from cockpit.sim.containers import ContainerRuntime, PublishedPort
from cockpit.sim.curl import Curl
from cockpit.sim.debs import release_of
from cockpit.sim.dnf import DnfPackageManager
from cockpit.sim.driver import INITIAL_BRANCH, DriverStack
from cockpit.sim.fs import FileSystem
from cockpit.sim.gputools import GpuTools
from cockpit.sim.kernel import KERNEL, Kernel
from cockpit.sim.launchers import Launchers
from cockpit.sim.nvidia_smi import NvidiaSmi
from cockpit.sim.package_base import PackageFaults, PackageSite
from cockpit.sim.packages import PackageManager
from cockpit.sim.platform import DEFAULT_PROFILE, NodeProfile, Platform
from cockpit.sim.privilege import ABSENT, Login, guarded, refusals, sudo, user_may_write
from cockpit.sim.scenarios import Scenario
from cockpit.sim.services import ServiceManager
from cockpit.sim.shell import BASH_NOT_FOUND, DASH_NOT_FOUND, Handler, Io, Shell, sleeper
from cockpit.sim.smi import RELEASES, DriverRelease, SimGpu
from cockpit.sim.vllm_api import ServedModel, answer

GPU_NAME = "NVIDIA H100 80GB HBM3"
GPU_MEMORY_MIB = 81559
BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
UNAME_VERSION = "#63-Ubuntu SMP PREEMPT_DYNAMIC"
VLLM_PID = 48213
#: where ``vllm serve`` listens when no --port is given (vLLM's CLI default)
VLLM_PORT = 8000
#: the node's own serving engine, as pgrep shows it (no --served-model-name: the model's id)
VLLM_MODEL = "moonshotai/Kimi-K3"
VLLM_MAX_MODEL_LEN = 131072


@dataclass
class HostServer:
    """The node's own ``vllm serve`` on VLLM_PORT: it answers vLLM's OpenAI API while it runs
    (the node hands out its endpoint only then: a stopped server refuses the connection)."""

    served: ServedModel

    def phase(self) -> str:
        return "serving"

    def request(self, method: str, path: str, body: str, content_type: str) -> tuple[int, str]:
        return answer(self.served, method, path, body, content_type)


@dataclass
class NodeHooks:
    """What a node asks of its fleet (the network side)."""

    reboot: Callable[[SimNode], None]
    sleep: Callable[[float], Awaitable[None]]


class SimNode:
    def __init__(
        self,
        name: str,
        index: int,
        scenario: Scenario,
        rng: random.Random,
        gpu_count: int = 8,
        profile: NodeProfile = DEFAULT_PROFILE,
    ) -> None:
        self.name = name
        self.profile = profile
        self.index = index
        #: the node's own serving engine (started before the window; it serves once the driver lets it)
        self._host_server = HostServer(
            ServedModel(VLLM_MODEL, VLLM_MODEL, VLLM_MAX_MODEL_LEN, created=1764900000, rng=random.Random(index))
        )
        self.scenario = scenario
        self.rng = rng  # one generator per node, shared by its parts, so a seed replays the same fleet
        self.gpu_count = gpu_count
        self.hooks: NodeHooks | None = None
        self.files: dict[str, str] = {}  # what commands wrote (`echo > FILE`), read back by `cat` and `sh FILE`
        self.dirs: set[str] = set()  # directories `mkdir` made (where apt may save packages)
        self._gpus: list[SimGpu] = []  # shared with nvidia-smi and the container runtime: trimmed in place
        self.driver = DriverStack()
        self.kernel = Kernel(name, self.driver)
        site = PackageSite(self.driver, rng, self.sleep, self.files, self.dirs)
        faults = PackageFaults.of(scenario) if self.is_target else PackageFaults()
        self.packages = PackageManager(site, faults, profile.apt_repository)
        #: a RHEL node's rpm and dnf; None on an apt node (and then `packages` answers)
        self.dnf = DnfPackageManager(site, faults) if profile.package_manager == "dnf" else None
        self.services = ServiceManager(
            self.driver,
            self._reboot,
            self.dnf.fabric_manager_version if self.dnf else self.packages.fabric_manager_version,
            fabric_manager_fails_after_upgrade=scenario.fabric_manager_fails and self.is_target,
        )
        if self.dnf is None:
            self.services.imex_version = self.packages.imex_version
        self.fs = FileSystem(self.files, self.dirs)
        self.nvidia_smi = NvidiaSmi(self.driver, self._gpus, unknown_fields=profile.smi_unknown_fields)
        self.platform = Platform(profile, self.driver, lambda: self.files, lambda p: self._read_file(p) is not None)
        self.services.main_pids = self.platform.unit_pids
        self.services.unit_files["unattended-upgrades"] = profile.unattended_upgrades
        # apt's timer runs unattended-upgrade (apt.systemd.daily install); installed with it
        self.services.unit_files["apt-daily-upgrade"] = "enabled" if profile.unattended_upgrades else None
        self.services.extra_units |= {h.unit.removesuffix(".service") for h in profile.holders if h.unit}
        self.platform.running = lambda unit: self.services.unit_state(unit) == "active"
        self.kernel.signer = profile.module_signer
        self.kernel.rejects_new_module = profile.module_rejected
        self.containers = ContainerRuntime(self.driver, self.services, self._gpus, rng, self.sleep, self.nvidia_smi.run)
        self.containers.engines = profile.container_engines
        self.containers.files = self.files  # CDI specs are files (ls -d /etc/cdi/* finds them)
        self.gputools = GpuTools(name, self.driver, self._gpus, self.containers.host_cuda_error, self.sleep)
        if scenario.dcgm_version and self.is_target:
            self.gputools.dcgm_version = scenario.dcgm_version
        if scenario.ecc_under_load and self.is_target:
            self.gputools.fails_under_load = self._ecc_under_load
        if scenario.gdr_degraded and self.is_target:
            self.gputools.internode_factor = lambda: 0.2 if self.kernel.reboots == 1 else 1.0
        self.launchers = Launchers(self._resolve, lambda root: self.shell(root=root), self._read_file, self.not_found)
        self._commands: dict[str, Handler] | None = None

    @classmethod
    def create(
        cls, name: str, index: int, scenario: Scenario, seed: int, profile: NodeProfile = DEFAULT_PROFILE
    ) -> SimNode:
        rng = random.Random(f"{seed}:{name}")
        if scenario.ssh_user != "root" and profile.login.root:
            profile = replace(profile, login=Login(scenario.ssh_user, uid=1001, sudo=scenario.sudo))
        node = cls(name=name, index=index, scenario=scenario, rng=rng, profile=profile)
        release = RELEASES[INITIAL_BRANCH]
        node.driver.userspace = node.driver.module_on_disk = node.driver.module = release
        if node.dnf is not None:
            held = scenario.held and node.is_target
            node.dnf.install_initial(
                rpms.preinstalled_rpms(release, kind=rpms.stream_kind(profile.dnf_stream), nvswitch=profile.nvswitch),
                profile.dnf_stream,
                "fm" if profile.nvswitch else "default",
            )
            node.dnf.locks = [
                f"{p.name}-{p.evr}.*" for p in node.dnf.installed.values() if held and "container" not in p.name
            ]
        else:
            node.packages.install_initial(
                [*profile.driver_install, *(profile.fabric_install if profile.nvswitch else ())]
            )
            node._driver_from_packages()
            node.packages.held.update(
                p
                for p in node.packages.installed
                if scenario.held and node.is_target and "nvidia" in p and "container" not in p
            )
        node._gpus.extend(node._make_gpu(i) for i in range(node.gpu_count))
        if profile.cdi_spec is not None:  # generated at install for the driver then installed
            node.containers.write_cdi_spec(profile.cdi_spec)
        node.kernel.uptime_base_s = rng.uniform(9, 40) * 86400
        node._boot(first=True)
        return node

    @property
    def is_target(self) -> bool:
        return self.index == self.scenario.target

    @property
    def gpus(self) -> list[SimGpu]:
        """The GPUs this boot found."""
        return self._gpus

    @property
    def module(self) -> DriverRelease | None:
        """The loaded kernel module; None = driver not loaded."""
        return self.driver.module

    @module.setter
    def module(self, release: DriverRelease | None) -> None:
        self.driver.module = release

    @property
    def boot_id(self) -> str:
        return self.kernel.boot_id

    @property
    def reboots(self) -> int:
        return self.kernel.reboots

    def _make_gpu(self, i: int) -> SimGpu:
        u = uuid.UUID(int=self.rng.getrandbits(128), version=4)
        return SimGpu(
            index=i,
            name=self.profile.gpu_model,
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

    def _driver_from_packages(self) -> None:
        """The driver the node runs before the change, as its installed packages say."""
        pm = self.packages
        utils = next((v for p, v in sorted(pm.installed.items()) if p.startswith("nvidia-utils")), None)
        common = pm.kernel_common_version()
        module = pm.module_package()
        self.driver.userspace = release_of(utils) if utils else None
        self.driver.module_on_disk = self.driver.module = release_of(common) if common and module else None
        self.driver.open_on_disk = self.driver.open_loaded = module is not None and "-open" in module.name
        self.driver.precompiled_on_disk = module is not None and module.name.startswith("linux-modules-")

    def _boot(self, first: bool = False) -> None:
        if not first and self.kernel.reboots == 0 and self.is_target and self.scenario.flavour_flipped:
            # the other flavour's DKMS module is what the first boot after the install loads
            # (both nvidia-dkms-B and nvidia-dkms-B-open installed, the wrong one built last)
            self.driver.open_on_disk = not self.driver.open_on_disk
        self.containers.stop_all()  # a reboot ends every container
        self.kernel.boot(str(uuid.UUID(int=self.rng.getrandbits(128), version=4)), first=first)
        # Blackwell and Grace Hopper run only the open modules (cockpit.gpu.kernel_modules):
        # the proprietary module loads but initialises no GPU
        proprietary = self.driver.module is not None and not self.driver.open_loaded
        if not first and proprietary and flavour_need([self.profile.gpu_model]).required == OPEN:
            self.kernel.log.append("NVRM: GPU 0000:18:00.0: RmInitAdapter failed! (0x22:0x56:884)")
            del self._gpus[:]
        if not first and self.kernel.reboots == 1 and self.is_target:
            lost = self.scenario.gpus_lost_on_reboot
            gone = self._gpus[len(self._gpus) - lost :] if lost else []
            if lost:  # gone for good, through later (the rollback's) warm reboots too: a GPU that fell
                # off the bus (Xid 79) often needs a power cycle or service (NVIDIA's Xid catalog,
                # docs.nvidia.com/deploy/xid-errors); the stricter reading, never a kinder one
                del self._gpus[len(self._gpus) - lost :]
            for code in self.scenario.xids_after_reboot:
                victim = gone[0] if gone else self._gpus[-1]
                self.kernel.log_xid(victim.bus_id[4:].rsplit(".", 1)[0], code)  # "0000:18:00"
        if not first and self.is_target:
            # an image-side CUDA fault shows only with the driver the first reboot brought
            self.containers.compat_fault = self.scenario.container_cuda_error if self.kernel.reboots == 1 else None
        self.services.after_boot()
        self._links_after_boot(fault=not first and self.kernel.reboots == 1 and self.is_target)

    def _links_after_boot(self, *, fault: bool) -> None:
        """What each GPU reports of its fabric and links once the boot is through: on an HGX board
        (NVSwitch) its NVLinks and, when fabric manager runs, "Completed"/"Success"; while it does
        not, "In Progress" (NVIDIA/NVSentinel#883: Not Started, In Progress, Completed); a GPU
        with no fabric says N/A. ``fault``: the scenario's faults of this boot."""
        sc = self.scenario
        fm_up = self.services.fabric_manager == "active"
        nvswitch = self.profile.nvswitch
        speed = "53.125" if "B200" in self.profile.gpu_model else "26.562"  # NVLink 5 / NVLink 4 per link
        last = len(self._gpus) - 1
        mig = sc.mig_layout if self.is_target else ()  # recreated at boot (nvidia-mig-manager)
        for i, g in enumerate(self._gpus):
            state, status = ("[N/A]", "[N/A]")
            if nvswitch:
                done = fm_up and not (fault and sc.fabric_incomplete)
                state, status = ("Completed", "Success") if done else ("In Progress", "[N/A]")
            down = tuple(range(3, 3 + sc.nvlink_down)) if fault and i == 0 else ()
            slow = fault and sc.pcie_downtrained and i == last
            self._gpus[i] = replace(
                g,
                fabric_state=state,
                fabric_status=status,
                nvlinks=18 if nvswitch else 0,
                nvlink_gbps=speed,
                nvlinks_inactive=down,
                pcie_gen=4 if slow else 5,
                pcie_width=8 if slow else 16,
                mig_mode=bool(mig) and i == 0,
                mig=mig if i == 0 and not (fault and sc.mig_lost) else (),
            )
        if fault:
            for n, code in enumerate(sc.sxids_after_reboot):
                self.kernel.log_sxid(n, code)
        # GPUDirect RDMA's module, loaded at boot (modules-load.d) on an HGX node with its NICs
        self.kernel.peermem = nvswitch and self.driver.module is not None and not (fault and sc.peermem_missing)

    def _ecc_under_load(self) -> int | None:
        """The first boot after the install: the last GPU's double-bit ECC error under load, logged as NVRM does."""
        if self.kernel.reboots != 1 or not self._gpus:
            return None
        victim = self._gpus[-1]
        self.kernel.log_xid(victim.bus_id[4:].rsplit(".", 1)[0], 48)
        return victim.index

    def reboot_now(self) -> None:
        """Called by the fleet when the node comes back up."""
        self._boot()

    # -- shell ----------------------------------------------------------------------

    @property
    def not_found(self) -> str:
        """How this node's shell says a command does not exist: dash on Ubuntu, bash on RHEL."""
        return BASH_NOT_FOUND if self.profile.package_manager == "dnf" else DASH_NOT_FOUND

    @property
    def login(self) -> Login:
        """Who the SSH login is (its profile's; root unless a scenario says otherwise)."""
        return self.profile.login

    def shell(self, root: bool | None = None) -> Shell:
        """A shell as the SSH login (``root`` None), or as root or not (a ``sh -c`` under sudo)."""
        as_root = self.login.root if root is None else root
        return Shell(
            self._resolve, self._read_file, self._write_file, self.not_found, root=as_root, may_write=user_may_write
        )

    def _resolve(self, name: str) -> Handler | None:
        name = name.rsplit("/", 1)[-1] if name.startswith("/") else name
        if name == "nvidia-smi" and self.driver.userspace is None:
            return None
        if name == "sudo" and self.login.sudo == ABSENT:
            return None  # not installed: the shell says "sudo: not found"
        return self.commands().get(name)

    def commands(self) -> dict[str, Handler]:
        if self._commands is None:
            self._commands = self._command_table()
        return self._commands

    def _command_table(self) -> dict[str, Handler]:
        table = dict(coreutils.COMMANDS)
        table["sleep"] = sleeper(self.sleep)
        table.update(
            {
                "cat": self._cat,
                "hostname": self._hostname,
                "uname": self._uname,
                "nvidia-smi": self.nvidia_smi.run,
                "systemctl": self.services.systemctl,
                "reboot": self._reboot,
                "shutdown": self._shutdown,
                "journalctl": self.kernel.journalctl,
                "dmesg": self.kernel.dmesg,
                "modinfo": self.kernel.modinfo,
                "lsmod": self.kernel.lsmod,
                "modprobe": self.kernel.modprobe,
                "lsof": self._lsof,
                "mkdir": self.fs.mkdir,
                "ls": self._ls,
                "find": self.fs.find,
                "pgrep": self._pgrep,
                "ip": self._ip,
                "grep": self._grep,
                "egrep": self._grep,
                "fuser": self.platform.fuser,
                "mokutil": self.platform.mokutil,
                "dkms": self.platform.dkms,
            }
        )
        if self.dnf is not None:  # RHEL: rpm and dnf (yum is dnf there); no dpkg, no apt
            table.update({"rpm": self.dnf.rpm, "dnf": self.dnf.dnf, "yum": self.dnf.dnf})
        else:
            table.update(
                {
                    "dpkg-query": self.packages.dpkg_query,
                    "dpkg": self.packages.dpkg,
                    "apt-get": self.packages.apt_get,
                    "apt": self.packages.apt_get,
                    "apt-mark": self.packages.apt_mark,
                    "apt-cache": self.packages.apt_cache,
                    "apt-config": self.platform.apt_config,
                }
            )
        table.update(self.launchers.handlers())
        table.update(self.containers.handlers())
        table["curl"] = Curl(self._loopback, self.sleep).run
        table.update(self.gputools.handlers())
        table["sudo"] = sudo(self.login, self.launchers.as_root)
        table["id"] = self._id
        table["whoami"] = self._id
        # what a login that is not root is refused, as the real commands refuse it
        for name, refuse in refusals(self.login, self.fs.is_dir).items():
            if name in table:
                table[name] = guarded(table[name], refuse)
        return table

    def _read_file(self, path: str) -> str | None:
        if path in Kernel.FILES:
            return self.kernel.read_file(path)
        if path == "/etc/hostname":
            return self.name + "\n"
        if path == "/etc/os-release":
            return self.profile.os_release
        if path in self.profile.extra_files:
            return self.profile.extra_files[path]
        return self.files.get(path)

    def _write_file(self, path: str, data: str, append: bool) -> None:
        self.files[path] = (self.files.get(path, "") + data) if append else data

    async def sleep(self, seconds: float) -> None:
        """Wait simulated seconds: the fleet scales them by its speed."""
        if self.hooks is not None:
            await self.hooks.sleep(seconds)
        else:
            await asyncio.sleep(seconds)

    # -- shell builtins that run no other command: id, cat, hostname, uname --------

    async def _id(self, argv: list[str], io: Io) -> int:
        # coreutils id / whoami, for whoever runs them (root under sudo)
        login = self.login
        name, uid = ("root", 0) if io.root else (login.user, login.uid)
        if argv[0] == "whoami" or "-un" in argv or ("-u" in argv and "-n" in argv):
            io.out(name + "\n")
        elif "-u" in argv:
            io.out(f"{uid}\n")
        else:
            io.out(login.id_line(io.root) + "\n")
        return 0

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
                f"Linux {self.name} {KERNEL} {UNAME_VERSION} Tue Apr 15 19:04:15 UTC 2025 "
                "x86_64 x86_64 x86_64 GNU/Linux\n"
            )
            return 0
        parts = {"s": "Linux", "n": self.name, "r": KERNEL, "m": "x86_64", "v": UNAME_VERSION}
        io.out(" ".join(parts[c] for c in flags if c in parts) + "\n")
        return 0

    # -- reboot, processes ----------------------------------------------------------

    async def _reboot(self, argv: list[str], io: Io) -> int:
        if self.hooks is not None:
            self.hooks.reboot(self)
        return 0

    async def _shutdown(self, argv: list[str], io: Io) -> int:
        if "-r" in argv or "--reboot" in argv:
            return await self._reboot(argv, io)
        io.err("shutdown: only reboots are simulated\n")
        return 1

    def _loopback(self, port: int) -> PublishedPort | HostServer | None:
        """What a connection to ``port`` on the node's loopback reaches: a container's published
        port, or the node's own ``vllm serve`` (the process pgrep shows) on vLLM's default port
        while it runs; else nothing (connection refused)."""
        published = self.containers.published(port)
        if published is not None:
            return published
        return self._host_server if port == VLLM_PORT and self.serving() else None

    def serving(self) -> bool:
        """A cu130 vLLM server runs once the node's driver can start it."""
        module = self.driver.module
        return self.driver.nvml_error() is None and module is not None and module.cuda >= "13.0" and bool(self._gpus)

    async def _ls(self, argv: list[str], io: Io) -> int:
        # `ls -d PATHS` (the platform probe: what exists, among the system's own files) or a
        # listing of what commands wrote (apt's saved packages)
        if any(a.startswith("-") and "d" in a for a in argv[1:]):
            return await self.platform.ls(argv, io)
        return await self.fs.ls(argv, io)

    async def _grep(self, argv: list[str], io: Io) -> int:
        """grep over the node's files where FILE operands are given (``-r`` takes a directory's
        files, ``-l`` names the files that match, ``-s`` is silent about missing ones); over
        stdin (coreutils' grep) otherwise."""
        options, operands = coreutils.grep_operands(argv[1:])
        if not operands:
            return await coreutils.COMMANDS["grep"](argv, io)
        flags = "".join(o[1:] for o in options if o.startswith("-") and not o.startswith("--"))
        known = {**self.profile.extra_files, **self.files}
        found = False
        for operand in operands:
            if "r" in flags or "R" in flags:
                paths = sorted(p for p in known if p == operand or p.startswith(operand.rstrip("/") + "/"))
            else:
                paths = [operand] if self._read_file(operand) is not None else []
            if not paths and "s" not in flags:
                io.err(f"grep: {operand}: No such file or directory\n")
            for path in paths:
                hits: list[str] = []
                probe = Io(stdin=self._read_file(path) or "", out=hits.append, err=io.err, env=io.env, root=io.root)
                matched = (
                    await coreutils.COMMANDS["grep"](["grep", *[o for o in options if o not in ("-l",)]], probe) == 0
                )
                found |= matched
                if matched and "l" in flags:
                    io.out(path + "\n")
                elif matched and "q" not in flags:
                    io.out("".join(hits))
        return 0 if found else 1

    async def _pgrep(self, argv: list[str], io: Io) -> int:
        pattern = next((a for a in argv[1:] if not a.startswith("-")), "")
        full = "-f" in argv or any(a.startswith("-") and "f" in a for a in argv[1:] if not a.startswith("--"))
        procs = []
        if self.serving():
            procs.append(
                (
                    VLLM_PID,
                    f"vllm serve {VLLM_MODEL} --tensor-parallel-size {len(self._gpus)} "
                    f"--enable-prefix-caching --max-model-len {VLLM_MAX_MODEL_LEN}",
                )
            )
        hits = [(pid, cmd) for pid, cmd in procs if re.search(pattern, cmd if full else cmd.split()[0])]
        show_cmd = any(a.startswith("-") and ("a" in a or "l" in a) for a in argv[1:] if not a.startswith("--"))
        for pid, cmd in hits:
            io.out(f"{pid} {cmd}\n" if show_cmd else f"{pid}\n")
        return 0 if hits else 1

    async def _ip(self, argv: list[str], io: Io) -> int:
        """``ip -brief address`` (``-br a``, ``address show``): each interface as iproute2's brief
        mode prints it (ip/ipaddress.c: the name ``%-16s ``, the operstate ``%-14s ``, then each
        address and its prefix followed by a space). Only that form is simulated: any other is
        refused, so a runbook that relies on another learns it here, not on a real node."""
        args = argv[1:]
        brief = [a for a in args if a in ("-br", "-brief")]
        rest = [a for a in args if a not in brief]
        objects = ("a", "addr", "address")
        if not brief or not rest or rest[0] not in objects or rest[1:] not in ([], ["show"]):
            io.err("ip: only `ip -brief address` is simulated\n")
            return 1
        interfaces = [
            ("lo", "UNKNOWN", "127.0.0.1/8 ::1/128"),
            ("eno1", "UP", f"10.0.{self.index // 200}.{self.index % 200 + 11}/16 fe80::{self.index + 1:x}/64"),
        ]
        for name, state, addresses in interfaces:
            io.out(f"{name:<16} {state:<14} {addresses} \n")
        return 0

    async def _lsof(self, argv: list[str], io: Io) -> int:
        return 1  # nothing holds the GPUs once the node is drained
