"""What the simulated ``nvidia-smi`` prints, in the formats real drivers use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from xml.sax.saxutils import escape

#: how nvidia-smi stamps its table and reports (ctime's layout, without the newline)
SMI_TIME = "%a %b %e %H:%M:%S %Y"
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"
NOT_LOADED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)


@dataclass(frozen=True)
class DriverRelease:
    version: str  # "580.95.05"
    cuda: str  # the driver's CUDA ceiling, "13.0"

    @property
    def branch(self) -> str:
        return self.version.split(".", 1)[0]

    @property
    def nvml(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def package_version(self) -> str:
        return f"{self.version}-0ubuntu0.24.04.1"


#: Branches the simulated package repository offers (the source and target of the demo first).
RELEASES: dict[str, DriverRelease] = {
    "575": DriverRelease("575.57.08", "12.9"),
    "580": DriverRelease("580.95.05", "13.0"),
    "570": DriverRelease("570.172.08", "12.8"),
    "550": DriverRelease("550.163.01", "12.4"),
    "535": DriverRelease("535.261.03", "12.2"),
}


@dataclass(frozen=True)
class SimGpu:
    index: int
    name: str
    uuid: str
    serial: str
    bus_id: str  # "00000000:18:00.0"
    memory_total_mib: int
    memory_used_mib: int
    utilization_pct: int
    temperature_c: int
    power_draw_w: float
    power_limit_w: float = 700.0
    ecc_uncorrected: int = 0
    # set by the node at each boot: the fabric registration (fabric manager's), the PCIe link
    # the GPU trained at, and its NVLinks (count, speed, which are down)
    fabric_state: str = "[N/A]"
    fabric_status: str = "[N/A]"
    pcie_gen: int = 5
    pcie_width: int = 16
    nvlinks: int = 0
    nvlink_gbps: str = "26.562"
    nvlinks_inactive: tuple[int, ...] = ()
    mig_mode: bool = False  # MIG enabled on the GPU
    mig: tuple[str, ...] = ()  # the profiles of its MIG devices ("3g.40gb"), recreated at each boot


_FIELDS: dict[str, Callable[[SimGpu, DriverRelease], tuple[str, str]]] = {
    # field -> (value, unit suffix shown without "nounits")
    "index": lambda g, d: (str(g.index), ""),
    "name": lambda g, d: (g.name, ""),
    "gpu_name": lambda g, d: (g.name, ""),
    "uuid": lambda g, d: (g.uuid, ""),
    "gpu_uuid": lambda g, d: (g.uuid, ""),
    "serial": lambda g, d: (g.serial, ""),
    "pci.bus_id": lambda g, d: (g.bus_id, ""),
    "gpu_bus_id": lambda g, d: (g.bus_id, ""),
    "driver_version": lambda g, d: (d.version, ""),
    "count": lambda g, d: ("", ""),  # filled by the caller (needs the GPU count)
    "memory.total": lambda g, d: (str(g.memory_total_mib), " MiB"),
    "memory.used": lambda g, d: (str(g.memory_used_mib), " MiB"),
    "memory.free": lambda g, d: (str(g.memory_total_mib - g.memory_used_mib - 616), " MiB"),
    "memory.reserved": lambda g, d: ("616", " MiB"),
    "utilization.gpu": lambda g, d: (str(g.utilization_pct), " %"),
    "utilization.memory": lambda g, d: ("0", " %"),
    "temperature.gpu": lambda g, d: (str(g.temperature_c), ""),
    "temperature.memory": lambda g, d: (str(g.temperature_c + 2), ""),
    "power.draw": lambda g, d: (f"{g.power_draw_w:.2f}", " W"),
    "power.draw.instant": lambda g, d: (f"{g.power_draw_w:.2f}", " W"),
    "power.limit": lambda g, d: (f"{g.power_limit_w:.2f}", " W"),
    "enforced.power.limit": lambda g, d: (f"{g.power_limit_w:.2f}", " W"),
    "persistence_mode": lambda g, d: ("Enabled", ""),
    "pstate": lambda g, d: ("P0", ""),
    "compute_mode": lambda g, d: ("Default", ""),
    "compute_cap": lambda g, d: ("9.0", ""),
    "ecc.mode.current": lambda g, d: ("Enabled", ""),
    "ecc.errors.uncorrected.volatile.total": lambda g, d: (str(g.ecc_uncorrected), ""),
    "ecc.errors.uncorrected.aggregate.total": lambda g, d: (str(g.ecc_uncorrected), ""),
    "ecc.errors.corrected.volatile.total": lambda g, d: ("0", ""),
    "mig.mode.current": lambda g, d: ("Enabled" if g.mig_mode else "Disabled", ""),
    "mig.mode.pending": lambda g, d: ("Enabled" if g.mig_mode else "Disabled", ""),
    "vbios_version": lambda g, d: ("96.00.A5.00.03", ""),
    "clocks.current.sm": lambda g, d: ("1980", " MHz"),
    "clocks.max.sm": lambda g, d: ("1980", " MHz"),
    # application clocks as an H100 SXM reports them by default (max SM clock, HBM3 2619 MHz)
    "clocks.applications.graphics": lambda g, d: ("1980", " MHz"),
    "clocks.applications.memory": lambda g, d: ("2619", " MHz"),
    "fan.speed": lambda g, d: ("[N/A]", ""),
    "display_mode": lambda g, d: ("Disabled", ""),
    "retired_pages.pending": lambda g, d: ("No", ""),
    "remapped_rows.pending": lambda g, d: ("No", ""),
    "remapped_rows.failure": lambda g, d: ("No", ""),
    "fabric.state": lambda g, d: (g.fabric_state, ""),
    "fabric.status": lambda g, d: (g.fabric_status, ""),
    "pcie.link.gen.current": lambda g, d: (str(g.pcie_gen), ""),
    "pcie.link.width.current": lambda g, d: (str(g.pcie_width), ""),
    "gsp.mode.current": lambda g, d: ("Enabled", ""),
}

_HEADER_UNITS = {" MiB": " [MiB]", " %": " [%]", " W": " [W]", " MHz": " [MHz]"}


def query_gpu(
    gpus: list[SimGpu],
    driver: DriverRelease,
    fields: list[str],
    formats: set[str],
    unknown: frozenset[str] = frozenset(),
) -> tuple[str, int]:
    """``--query-gpu=FIELDS --format=csv[,noheader][,nounits]``: (output, exit status).
    ``unknown`` are fields this node's (older) nvidia-smi does not know."""
    for f in fields:
        if f not in _FIELDS or f in unknown:
            return f'Field "{f}" is not a valid field to query.\n\n', 2
    nounits = "nounits" in formats
    lines: list[str] = []
    if "noheader" not in formats:
        header = []
        for f in fields:
            unit = _FIELDS[f](gpus[0], driver)[1] if gpus else ""
            header.append(f + ("" if nounits or not unit else _HEADER_UNITS[unit]))
        lines.append(", ".join(header))
    for g in gpus:
        cells = []
        for f in fields:
            value, unit = _FIELDS[f](g, driver)
            if f == "count":
                value = str(len(gpus))
            cells.append(value if nounits or value.startswith("[") else value + unit)
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n", 0


def version_text(driver: DriverRelease) -> str:
    return (
        f"NVIDIA-SMI version  : {driver.version}\n"
        f"NVML version        : {driver.nvml}\n"
        f"DRIVER version      : {driver.version}\n"
        f"CUDA Version        : {driver.cuda}\n"
    )


def nvlink_status(gpus: list[SimGpu]) -> str:
    """``nvidia-smi nvlink -s`` as real drivers print it (tests/fixtures/fabric/): each GPU, then
    each link's speed or ``<inactive>``; a GPU with no NVLink prints its line alone."""
    out = []
    for g in gpus:
        out.append(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n")
        for n in range(g.nvlinks):
            speed = "<inactive>" if n in g.nvlinks_inactive else f"{g.nvlink_gbps} GB/s"
            out.append(f"\t Link {n}: {speed}\n")
    return "".join(out)


def list_gpus(gpus: list[SimGpu]) -> str:
    """``nvidia-smi -L``: each GPU, then its MIG devices (NVIDIA MIG user guide, "Listing MIG devices")."""
    out = []
    for g in gpus:
        out.append(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n")
        for n, profile in enumerate(g.mig):
            out.append(f"  MIG {profile:<11} Device {n:>2}: (UUID: MIG-{g.uuid[4:12]}-{n:04x}{g.uuid[17:]})\n")
    return "".join(out)


def table(gpus: list[SimGpu], driver: DriverRelease, now: datetime) -> str:
    """The default ``nvidia-smi`` table, as drivers r565+ draw it."""
    rule = "+-----------------------------------------+------------------------+----------------------+"
    lines = [
        now.strftime(SMI_TIME) + "       ",
        "+-----------------------------------------------------------------------------------------+",
        f"| NVIDIA-SMI {driver.version:<22} Driver Version: {driver.version:<14} CUDA Version: {driver.cuda:<8} |",
        rule,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    for g in gpus:
        name = g.name[:28]
        power = f"{g.power_draw_w:.0f}W / {g.power_limit_w:.0f}W"
        mem = f"{g.memory_used_mib}MiB / {g.memory_total_mib}MiB"
        lines += [
            f"| {g.index:>3}  {name:<28}  On  |   {g.bus_id} Off | {g.ecc_uncorrected:>20} |",
            f"| N/A   {g.temperature_c:>2}C    P0 {power:>24} | {mem:>22} | {g.utilization_pct:>6}%      Default |",
            "|                                         |                        |             Disabled |",
            rule,
        ]
    lines += [
        "",
        "+-----------------------------------------------------------------------------------------+",
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|=========================================================================================|",
        "|  No running processes found                                                             |",
        "+-----------------------------------------------------------------------------------------+",
    ]
    return "\n".join(lines) + "\n"


def query_text(gpus: list[SimGpu], driver: DriverRelease, now: datetime) -> str:
    """``nvidia-smi -q``: the head of the report and each GPU's identity and memory."""
    lines = [
        "",
        "==============NVSMI LOG==============",
        "",
        "Timestamp                                 : " + now.strftime(SMI_TIME),
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


def query_xml(gpus: list[SimGpu], driver: DriverRelease, now: datetime) -> str:
    """A trimmed ``nvidia-smi -q -x`` (DTD v12 shape, the fields the parsers read)."""
    parts = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
        "<nvidia_smi_log>",
        f"\t<timestamp>{now.strftime(SMI_TIME)}</timestamp>",
        f"\t<driver_version>{driver.version}</driver_version>",
        f"\t<cuda_version>{driver.cuda}</cuda_version>",
        f"\t<attached_gpus>{len(gpus)}</attached_gpus>",
    ]
    for g in gpus:
        parts += [
            f'\t<gpu id="{g.bus_id}">',
            f"\t\t<product_name>{escape(g.name)}</product_name>",
            "\t\t<persistence_mode>Enabled</persistence_mode>",
            "\t\t<mig_mode>\n\t\t\t<current_mig>Disabled</current_mig>\n\t\t\t<pending_mig>Disabled</pending_mig>\n\t\t</mig_mode>",
            f"\t\t<serial>{g.serial}</serial>",
            f"\t\t<uuid>{g.uuid}</uuid>",
            f"\t\t<minor_number>{g.index}</minor_number>",
            f"\t\t<pci>\n\t\t\t<pci_bus_id>{g.bus_id}</pci_bus_id>\n\t\t</pci>",
            "\t\t<fb_memory_usage>",
            f"\t\t\t<total>{g.memory_total_mib} MiB</total>",
            "\t\t\t<reserved>616 MiB</reserved>",
            f"\t\t\t<used>{g.memory_used_mib} MiB</used>",
            f"\t\t\t<free>{g.memory_total_mib - g.memory_used_mib - 616} MiB</free>",
            "\t\t</fb_memory_usage>",
            f"\t\t<utilization>\n\t\t\t<gpu_util>{g.utilization_pct} %</gpu_util>\n"
            "\t\t\t<memory_util>0 %</memory_util>\n\t\t</utilization>",
            "\t\t<ecc_errors>\n\t\t\t<volatile>",
            f"\t\t\t\t<dram_uncorrectable>{g.ecc_uncorrected}</dram_uncorrectable>",
            "\t\t\t</volatile>\n\t\t</ecc_errors>",
            f"\t\t<temperature>\n\t\t\t<gpu_temp>{g.temperature_c} C</gpu_temp>\n\t\t</temperature>",
            "\t\t<gpu_power_readings>",
            f"\t\t\t<power_draw>{g.power_draw_w:.2f} W</power_draw>",
            f"\t\t\t<current_power_limit>{g.power_limit_w:.2f} W</current_power_limit>",
            "\t\t</gpu_power_readings>",
            "\t\t<processes>\n\t\t</processes>",
            "\t</gpu>",
        ]
    parts.append("</nvidia_smi_log>")
    return "\n".join(parts) + "\n"
