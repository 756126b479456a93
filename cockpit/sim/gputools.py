"""GPU validation tools on a simulated host: DCGM's ``dcgmi diag`` and nccl-tests' ``all_reduce_perf``.

Both run on the host, so they see the host's CUDA path (not a container's): the loaded
module, the userspace library and, on NVSwitch systems, fabric manager (error 802 while it
is down). Their output follows real captures:

- ``dcgmi diag -r N``: "Successfully ran diagnostic for group." and the result table
  (DCGM 4.4.2 on driver 580.105.08, NVIDIA/DCGM#124; DCGM 3.3.8 with CUDA failing as
  "Unable to initialize CUDA library: 'system not yet initialized'" on 8x H100,
  NVIDIA/nccl-tests#264; copies in tests/fixtures/misc/). A failed test makes dcgmi exit
  with DCGM_ST_NVVS_ERROR (-30, so status 226). Level 1 runs the software deployment
  checks only, so it passes on a host whose CUDA cannot initialise; level 2 adds the
  memory and PCIe tests that need CUDA; 3 and 4 add the stress tests.
- ``all_reduce_perf -b 8 -e 128M -f 2 -g N``: the nccl-tests header, one row per size,
  "# Out of bounds values : 0 OK" and "# Avg bus bandwidth    : X" with, when
  ``NCCL_TESTS_MIN_BW`` is set, OK or FAILED and exit status 1 below 0.9 of it
  (nccl-tests src/common.cu, writeResultFooter); a CUDA failure prints
  "HOST: Test CUDA failure common.cu:941 'system not yet initialized'" (nccl-tests#264).
- ``mpirun -H a:8,b:8 ... all_reduce_perf -b 8 -e 8G -f 2 -g 1``: the multi-node form (nccl-tests
  built with MPI=1, one rank per GPU; README and NVIDIA/nccl-tests#27): rank 0, on the first
  host, prints the same header and table, one "#  Rank" line per rank on each host
  (nebius/soperator#428, 2x8 H100: "Rank  8 Group  0 Pid ... on worker-0 device  0"). Bus
  bandwidth across two nodes is bound by the network, not NVLink; GPUDirect RDMA broken on
  either end (PCIe ACS left on after a reboot, NCCL's troubleshooting guide) stages every
  transfer through host memory. A host mpirun cannot reach fails as OpenMPI's ssh launcher
  does ("ssh: Could not resolve hostname ...", "ORTE was unable to reliably start one or more
  daemons.", nccl-tests never starts); a rank whose CUDA fails prints the single-node failure
  under its own host name.

Simulated time is compressed like the rest of the simulator: a level-3 diag that takes
tens of minutes on real hardware takes seconds here; step timeouts stay real.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cockpit.sim.driver import DriverStack
from cockpit.sim.pytorch import CUDA_ERRORS
from cockpit.sim.shell import Handler, Io, Sleep
from cockpit.sim.smi import SimGpu

DCGM_VERSION = "4.4.2"
NVVS_ERROR_STATUS = 226  # DCGM_ST_NVVS_ERROR = -30 as an exit byte
DIAG_SECONDS = {1: 3.0, 2: 12.0, 3: 40.0, 4: 90.0}  # compressed; real: seconds, minutes, ~30 min, hours
LEVELS = {"short": 1, "quick": 1, "medium": 2, "long": 3, "xlong": 4}
STRESS_DEFAULT_S = 120.0  # targeted_stress.test_duration when not given
ROW = "| {:<25} | {:<46} |\n"
RULE = "+---------------------------+------------------------------------------------+\n"
H100_DEVICE_ID = "2330"
#: nccl-tests' all_reduce on 8x H100 over NVSwitch: bus bandwidth approaches this for large messages
PEAK_BUSBW_GBPS = 360.0
#: ... across two such nodes, bound by eight 400 Gb/s NICs (GPUDirect RDMA): a modelled figure, the
#: gate compares each pair with its own record-stage run, never with this constant
INTERNODE_PEAK_BUSBW_GBPS = 190.0
HALF_BW_BYTES = 4 * 1024 * 1024
_PLACES = "     time   algbw   busbw #wrong"
TABLE_HEADER = (
    "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place\n"
    "#       size         count      type   redop    root" + _PLACES + _PLACES + "\n"
    "#        (B)    (elements)                          " + "     (us)  (GB/s)  (GB/s)       " * 2 + "\n"
)


@dataclass(frozen=True)
class Peer:
    """One host of a multi-node run, as the ranks on it see it."""

    hostname: str
    gpus: list[SimGpu]
    cuda_error: Callable[[], int | None]  # what a CUDA call there returns now (None: works)
    internode_factor: Callable[[], float]


@dataclass(eq=False)
class GpuTools:
    hostname: str
    driver: DriverStack
    gpus: list[SimGpu]  # the node's: trimmed in place when a GPU falls off the bus
    host_cuda_error: Callable[[], int | None]  # what CUDA calls on the host return now (802: fabric manager down)
    sleep: Sleep
    #: the DCGM installed ("dcgmi  version: X", as real dcgmi prints it: NVIDIA/DCGM issues' captures)
    dcgm_version: str = DCGM_VERSION
    #: the GPU that fails under sustained load (its index; None: none), asked when a stress test runs:
    #: the node logs what the fault is (an Xid) when asked
    fails_under_load: Callable[[], int | None] = lambda: None
    #: how fast this node's GPUs reach the network now (1.0: GPUDirect RDMA as recorded; less: a path broken)
    internode_factor: Callable[[], float] = lambda: 1.0
    #: another host as mpirun reaches it (None: the name does not resolve), set by the fleet
    peer: Callable[[str], Peer | None] = lambda name: None

    def handlers(self) -> dict[str, Handler]:
        return {"dcgmi": self.dcgmi, "all_reduce_perf": self.all_reduce_perf, "mpirun": self.mpirun}

    def as_peer(self) -> Peer:
        return Peer(
            self.hostname,
            self.gpus,
            lambda: self.host_cuda_error() if self._nvml_ok() else 999,
            lambda: self.internode_factor(),
        )

    def _diag_metadata(self) -> list[str]:
        """The head of ``dcgmi diag``'s table: the title, then its Metadata rows, as every run prints them."""
        assert self.driver.userspace is not None
        out = ["Successfully ran diagnostic for group.\n", RULE, ROW.format("Diagnostic", "Result")]
        out.append("+===========================+================================================+\n")
        out.append("|-----  Metadata  ----------+------------------------------------------------|\n")
        out.append(ROW.format("DCGM Version", self.dcgm_version))
        out.append(ROW.format("Driver Version Detected", self.driver.userspace.version))
        return out

    def _nvml_ok(self) -> bool:
        module, user = self.driver.module, self.driver.userspace
        return module is not None and user is not None and module.version == user.version

    # -- dcgmi ------------------------------------------------------------------------------

    async def dcgmi(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        if args[:1] == ["--version"] or args[:1] == ["-v"]:
            io.out(f"\ndcgmi  version: {self.dcgm_version}\n\n")
            return 0
        if args[:1] != ["diag"]:
            io.err("dcgmi: only 'dcgmi diag' is modelled by the simulator\n")
            return 1
        level: int | None = None
        stress_s: float | None = None
        for i, a in enumerate(args):
            if a in ("-r", "--run") and i + 1 < len(args):
                word = args[i + 1]
                level = int(word) if word.isdigit() else LEVELS.get(word)
                if word == "targeted_stress":  # one named test (DCGM's canonical test names)
                    stress_s = STRESS_DEFAULT_S
            if a in ("-p", "--parameters") and i + 1 < len(args):
                for part in args[i + 1].split(";"):
                    name, _, value = part.partition("=")
                    if name == "targeted_stress.test_duration" and value.replace(".", "", 1).isdigit():
                        stress_s = float(value) if stress_s is not None else None
        if stress_s is not None:
            return await self._targeted_stress(stress_s, io)
        if level not in DIAG_SECONDS:
            io.err("Error: Invalid test name or level provided for -r/--run.\n")
            return 1
        assert level is not None
        if not self._nvml_ok():
            # nv-hostengine cannot initialise NVML without a loaded, matching driver
            io.err(
                "Error: unable to establish a connection to the specified host: localhost\n"
                "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n"
            )
            return 255
        await self.sleep(DIAG_SECONDS[level])
        error = self.host_cuda_error()
        failed = error is not None and level >= 2
        out = self._diag_metadata()
        out.append(ROW.format("GPU Device IDs Detected", ",".join([H100_DEVICE_ID] * len(self.gpus))[:46]))
        out.append("|-----  Deployment  --------+------------------------------------------------|\n")
        out.append(ROW.format("software", "Pass"))
        out += [ROW.format("", f"GPU{g.index}: Pass") for g in self.gpus]
        tests = ["memory", "pcie"] if level >= 2 else []
        tests += ["targeted_stress", "targeted_power", "memory_bandwidth", "diagnostic"] if level >= 3 else []
        tests += ["memtest", "pulse_test"] if level >= 4 else []
        for name in tests:
            category = (
                "Integration"
                if name == "pcie"
                else ("Hardware" if name in ("memory", "diagnostic", "memtest") else "Stress")
            )
            out.append(
                f"+-----  {category}  "
                + "-" * (18 - len(category))
                + "+------------------------------------------------+\n"
            )
            if failed and name == tests[0]:
                assert error is not None
                out.append(ROW.format(name, "Fail"))
                for g in self.gpus:
                    out.append(ROW.format("", f"GPU{g.index}: Fail"))
                    text = f"Unable to initialize CUDA library: '{CUDA_ERRORS.get(error, 'unknown error')}'"
                    out.append(ROW.format("Warning", f"GPU{g.index} Error using CUDA API cuInit"))
                    out.append(ROW.format("", text[:46]))
            elif failed:
                out.append(ROW.format(name, "Skip"))
            else:
                out.append(ROW.format(name, "Pass"))
                out += [ROW.format("", f"GPU{g.index}: Pass") for g in self.gpus]
        out.append(RULE)
        io.out("".join(out))
        return NVVS_ERROR_STATUS if failed else 0

    async def _targeted_stress(self, seconds: float, io: Io) -> int:
        """``dcgmi diag -r targeted_stress -p targeted_stress.test_duration=N``: sustained GEMM on every
        GPU at a performance target, with DCGM's health watches (its Targeted Stress plugin)."""
        if not self._nvml_ok():
            io.err("Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")
            return 255
        await self.sleep(max(1.0, seconds / 60))  # compressed, as the levels are
        error = self.host_cuda_error()
        bad = self.fails_under_load() if error is None else None
        out = self._diag_metadata()
        out.append("+-----  Stress  ------------+------------------------------------------------+\n")
        failed = error is not None or bad is not None
        out.append(ROW.format("targeted_stress", "Fail" if failed else "Pass"))
        for g in self.gpus:
            hit = error is not None or g.index == bad
            out.append(ROW.format("", f"GPU{g.index}: {'Fail' if hit else 'Pass'}"))
        if bad is not None:
            # dcgm_errors.h, DCGM_FR_VOLATILE_DBE_DETECTED
            out.append(ROW.format("Warning", f"GPU{bad} Detected 1 volatile double-bit"))
            out.append(ROW.format("", f"ECC error(s) in GPU {bad}."))
        elif error is not None:
            out.append(ROW.format("Warning", f"Unable to initialize CUDA library: {error}"[:46]))
        out.append(RULE)
        io.out("".join(out))
        return NVVS_ERROR_STATUS if failed else 0

    # -- nccl-tests -------------------------------------------------------------------------

    async def all_reduce_perf(self, argv: list[str], io: Io) -> int:
        opts = {"-b": "8", "-e": "32M", "-f": "2", "-g": "1"}
        args = argv[1:]
        for i, a in enumerate(args):
            if a in opts and i + 1 < len(args):
                opts[a] = args[i + 1]
        try:
            lo, hi, factor, ngpus = (_size(opts["-b"]), _size(opts["-e"]), int(opts["-f"]), int(opts["-g"]))
        except ValueError:
            io.err(f"invalid size or count in {' '.join(args)}\n")
            return 1
        io.out(
            f"# nThread 1 nGpus {ngpus} minBytes {lo} maxBytes {hi} step: {factor}(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
        )
        pid = 54340
        error = self.host_cuda_error() if self._nvml_ok() else 999
        if error is not None or ngpus > len(self.gpus):
            text = "invalid device ordinal" if error is None else CUDA_ERRORS.get(error, "unknown error")
            io.out(
                f"{self.hostname}: Test CUDA failure common.cu:941 '{text}'\n"
                f" .. {self.hostname} pid {pid}: Test failure common.cu:891\n"
            )
            return 2  # testCudaError
        for g in self.gpus[:ngpus]:
            bus = "0x" + g.bus_id.split(":")[1].lower()  # nccl-tests prints the PCI bus number: [0x18]
            io.out(
                f"#  Rank {g.index:2d} Group  0 Pid {pid:6d} on {self.hostname:>8} "
                f"device {g.index:2d} [{bus}] {g.name}\n"
            )
        io.out("#\n" + TABLE_HEADER)
        return await self._sweep(io, lo, hi, factor, PEAK_BUSBW_GBPS, ngpus, io.env.get("NCCL_TESTS_MIN_BW"))

    async def _sweep(self, io: Io, lo: int, hi: int, factor: int, peak: float, ranks: int, minimum: str | None) -> int:
        """all_reduce_perf's table over the sizes, its footer and exit status: below 90% of
        ``NCCL_TESTS_MIN_BW`` (when set) it prints FAILED and exits 1, as nccl-tests does."""
        busbws: list[float] = []
        size = lo
        while size <= hi:
            await self.sleep(0.05)
            busbw = peak * size / (size + HALF_BW_BYTES) if ranks > 1 else 0.0
            algbw = busbw * ranks / (2 * (ranks - 1)) if ranks > 1 else 0.0
            time_us = size / (algbw * 1e3) if algbw else 0.0
            busbws += [busbw, busbw]
            row = f"{size:12d}  {max(size // 4, 0):12d}     float     sum      -1"
            cell = f"  {time_us:7.2f}  {algbw:6.2f}  {busbw:6.2f}  {0:6d}"
            io.out(row + cell + cell + "\n")
            size *= factor
        avg = sum(busbws) / len(busbws) if busbws else 0.0
        verdict, below = "", False
        if minimum is not None:
            try:
                below = avg < float(minimum) * 0.9
            except ValueError:
                below = True  # nccl-tests reads it with strtod: not a number is 0 there; stricter here
            verdict = "FAILED" if below else "OK"
        io.out(f"# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {avg:g} {verdict}\n#\n")
        io.out("# Collective test concluded: all_reduce_perf\n#\n")
        return 1 if below else 0

    # -- mpirun (Open MPI) launching nccl-tests across nodes ---------------------------------

    async def mpirun(self, argv: list[str], io: Io) -> int:
        hosts: list[tuple[str, int]] = []
        exported: list[str] = []
        args = argv[1:]
        i = 0
        while i < len(args) and args[i].startswith("-"):
            a = args[i]
            if a in ("-H", "--host", "-host") and i + 1 < len(args):
                for part in args[i + 1].split(","):
                    name, _, slots = part.partition(":")
                    if not slots.isdigit() and slots:
                        io.err(f"mpirun: invalid slot count in {part}\n")
                        return 1
                    hosts.append((name, int(slots) if slots else 1))
                i += 2
            elif a == "-x" and i + 1 < len(args):
                exported.append(args[i + 1])
                i += 2
            elif a in ("-np", "-n", "-N", "--map-by", "--bind-to", "-bind-to", "-map-by", "--mca", "-mca"):
                i += 3 if a in ("--mca", "-mca") else 2
            else:
                i += 1  # a flag without a value (--allow-run-as-root, --oversubscribe)
        program = args[i:]
        if not program or not hosts:
            io.err("mpirun: no hosts or no program given (the simulator models mpirun -H HOSTS PROGRAM)\n")
            return 1
        if program[0].rsplit("/", 1)[-1] != "all_reduce_perf":
            io.err(f"mpirun: only nccl-tests' all_reduce_perf is modelled by the simulator, not {program[0]}\n")
            return 1
        peers: list[Peer] = []
        for name, _slots in hosts:
            peer = self.as_peer() if name in (self.hostname, "localhost") else self.peer(name)
            if peer is None:
                io.err(
                    f"ssh: Could not resolve hostname {name}: Name or service not known\n"
                    "--------------------------------------------------------------------------\n"
                    "ORTE was unable to reliably start one or more daemons.\n"
                    "This usually is caused by:\n\n"
                    "* not finding the required libraries and/or binaries on\n"
                    "  one or more nodes.\n"
                    "--------------------------------------------------------------------------\n"
                )
                return 1
            peers.append(peer)
        env = dict(io.env)  # rank 0 runs here, in mpirun's environment; -x NAME=VALUE sets one for every rank
        for x in exported:
            name, eq, value = x.partition("=")
            if eq:
                env[name] = value
        return await self._multinode_all_reduce(program, list(zip(peers, [s for _, s in hosts], strict=True)), env, io)

    async def _multinode_all_reduce(
        self, program: list[str], ranks: list[tuple[Peer, int]], env: dict[str, str], io: Io
    ) -> int:
        opts = {"-b": "8", "-e": "32M", "-f": "2", "-g": "1"}
        for i, a in enumerate(program[1:], start=1):
            if a in opts and i + 1 < len(program):
                opts[a] = program[i + 1]
        try:
            lo, hi, factor, per_rank = (_size(opts["-b"]), _size(opts["-e"]), int(opts["-f"]), int(opts["-g"]))
        except ValueError:
            io.err(f"invalid size or count in {' '.join(program[1:])}\n")
            return 1
        io.out(
            f"# nThread 1 nGpus {per_rank} minBytes {lo} maxBytes {hi} step: {factor}(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
        )
        rank, pid = 0, 1885
        for peer, slots in ranks:
            error = peer.cuda_error()
            if error is not None or slots * per_rank > len(peer.gpus):
                text = "invalid device ordinal" if error is None else CUDA_ERRORS.get(error, "unknown error")
                io.out(
                    f"{peer.hostname}: Test CUDA failure common.cu:941 '{text}'\n"
                    f" .. {peer.hostname} pid {pid}: Test failure common.cu:891\n"
                )
                # the other ranks abort with it: Open MPI reports the job's first non-zero exit
                io.err(
                    "--------------------------------------------------------------------------\n"
                    "Primary job  terminated normally, but 1 process returned\n"
                    "a non-zero exit code. Per user-direction, the job has been aborted.\n"
                    "--------------------------------------------------------------------------\n"
                )
                return 2
            for g in peer.gpus[: slots * per_rank]:
                bus = "0x" + g.bus_id.split(":")[1].lower()  # nccl-tests prints the PCI bus number: [0x18]
                io.out(
                    f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {peer.hostname:>8} "
                    f"device {g.index:2d} [{bus}] {g.name}\n"
                )
                rank, pid = rank + 1, pid + 1
        io.out("#\n" + TABLE_HEADER)
        nodes = len(ranks)
        # the slowest host's path to the network bounds the ring; one host alone runs over NVLink
        slowest = min(peer.internode_factor() for peer, _ in ranks)
        peak = INTERNODE_PEAK_BUSBW_GBPS * slowest if nodes > 1 else PEAK_BUSBW_GBPS
        return await self._sweep(io, lo, hi, factor, peak, rank, env.get("NCCL_TESTS_MIN_BW"))


def _size(text: str) -> int:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)
