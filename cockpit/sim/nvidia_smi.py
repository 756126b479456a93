"""The simulated ``nvidia-smi`` command: its options, and when it fails as the real one does.

What it prints comes from :mod:`cockpit.sim.smi`; this module decides what to print
and the exit status (NVML errors: 9 not loaded, 18 mismatch, 6 no such device).
The node's clock is UTC (``date`` and the journal say so), so its timestamps are UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime

from cockpit.sim import smi
from cockpit.sim.driver import DriverStack
from cockpit.sim.shell import Io
from cockpit.sim.smi import SimGpu

INVALID_ARGUMENTS = 'Invalid combination of input arguments. Please run "nvidia-smi -h" for help.\n'


class NvidiaSmi:
    def __init__(
        self, driver: DriverStack, gpus: list[SimGpu], *, unknown_fields: frozenset[str] = frozenset()
    ) -> None:
        self.driver = driver
        self.unknown_fields = unknown_fields  # query fields this (older) nvidia-smi does not know
        self.gpus = gpus  # the node's list, trimmed in place when a GPU is lost

    async def run(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        userspace = self.driver.userspace
        assert userspace is not None  # the node has no nvidia-smi without the driver package
        if "--version" in args:
            failure = self.driver.nvml_error()
            if failure and failure[1] == 18:
                # the userspace tool still knows its own version; NVML does not start
                io.out(failure[0])
                return failure[1]
            if failure:
                io.out(failure[0])
                return failure[1]
            io.out(smi.version_text(userspace))
            return 0
        if "-h" in args or "--help" in args:
            io.out(
                f"NVIDIA System Management Interface -- v{userspace.version}\n\n"
                "NVSMI provides monitoring information for Tesla and select Quadro devices.\n"
            )
            return 0
        failure = self.driver.nvml_error()
        if failure is not None:
            io.out(failure[0])
            return failure[1]
        module = self.driver.module
        assert module is not None
        if args[:1] == ["nvlink"]:
            if args[1:] not in (["-s"], ["--status"]):
                io.out(INVALID_ARGUMENTS)
                return 2
            io.out(smi.nvlink_status(self.gpus))
            return 0
        opts = smi_options(args)
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
            text, status = smi.query_gpu(gpus, module, fields, formats, self.unknown_fields)
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
                io.out(smi.query_xml(gpus, module, datetime.now(UTC)))
                return 0
            io.out(smi.query_text(gpus, module, datetime.now(UTC)))
            return 0
        if "persistence-mode" in opts or "reset" in opts:
            io.out("".join(f"Persistence mode is already Enabled for GPU {g.bus_id}.\n" for g in gpus))
            return 0
        io.out(smi.table(gpus, module, datetime.now(UTC)))
        return 0


def smi_options(args: list[str]) -> dict[str, str]:
    """nvidia-smi's options as a dict: long name -> value ('' for flags; 'error' for an unknown argument)."""
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
            opts["error"] = INVALID_ARGUMENTS
        i += 1
    return opts
