"""What the cockpit knows about one node at one moment.

Shared by the output parsers, the SSH and NVML probes, the trigger evaluators and
the change log. A field the tool could not report (``[N/A]``, ``Not Supported``, a
missing column, a truncated table) is ``None``: "not available" is explicit, never
a zero and never a crash. Renderers show ``None`` as ``N/A`` via :func:`show`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from cockpit.gpu.platform import PlatformFacts

NOT_AVAILABLE = "N/A"


def show(value: object) -> str:
    """Render a fact for humans: ``None`` becomes ``N/A``."""
    return NOT_AVAILABLE if value is None else str(value)


class Health(StrEnum):
    """Verdict on a node, worst first in :data:`HEALTH_SEVERITY`."""

    OK = "ok"
    DRIVER_LIBRARY_MISMATCH = "driver-library-mismatch"  # reboot pending after a package change
    DRIVER_NOT_LOADED = "driver-not-loaded"
    GPU_MISSING = "gpu-missing"  # fewer GPUs than the recorded baseline
    FABRIC_MANAGER_DOWN = "fabric-manager-down"
    REBOOTING = "rebooting"
    UNREACHABLE = "unreachable"
    UNKNOWN = "unknown"  # not probed yet


HEALTH_SEVERITY: dict[Health, int] = {
    Health.OK: 0,
    Health.UNKNOWN: 1,
    Health.REBOOTING: 2,
    Health.DRIVER_LIBRARY_MISMATCH: 3,
    Health.FABRIC_MANAGER_DOWN: 4,
    Health.GPU_MISSING: 5,
    Health.DRIVER_NOT_LOADED: 6,
    Health.UNREACHABLE: 7,
}


class GpuState(BaseModel):
    """One GPU as a probe or a parser saw it. ``None`` means not available."""

    model_config = ConfigDict(extra="forbid")

    index: int
    name: str | None = None
    uuid: str | None = None
    bus_id: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    utilization_pct: int | None = None
    temperature_c: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    persistence_mode: bool | None = None
    ecc_uncorrected: int | None = None  # volatile (since boot) uncorrected ECC errors
    mig_mode: bool | None = None
    ecc_mode: bool | None = None  # ECC enabled (current mode)
    app_clock_graphics_mhz: int | None = None  # application clocks (nvidia-smi -ac)
    app_clock_memory_mhz: int | None = None
    remapped_rows_pending: bool | None = None  # a row remap waits for a GPU reset
    remapped_rows_failure: bool | None = None  # a row remap failed: the GPU needs service
    # the GPU's place in the NVLink fabric (``fabric.state``, ``fabric.status``): "Completed" and
    # "Success" once fabric manager registered it; N/A (None) on a GPU with no fabric
    fabric_state: str | None = None
    fabric_status: str | None = None
    pcie_gen: int | None = None  # the PCIe link generation and width the GPU trained at
    pcie_width: int | None = None


#: The per-GPU settings a driver change must not move, compared with the baseline after the reboot.
GPU_SETTINGS: tuple[str, ...] = (
    "persistence_mode",
    "power_limit_w",
    "app_clock_graphics_mhz",
    "app_clock_memory_mhz",
    "mig_mode",
    "ecc_mode",
    "remapped_rows_pending",
    "remapped_rows_failure",
)


#: The PCIe link a GPU trained at, compared with the baseline after the reboot.
LINK_SETTINGS: tuple[str, ...] = ("pcie_gen", "pcie_width")


def fabric_incomplete(gpus: list[GpuState]) -> list[str] | None:
    """The GPUs whose fabric registration is not Completed/Success, in words; None when no GPU
    reports a fabric state (no NVSwitch fabric, or an nvidia-smi without the fields)."""
    if all(g.fabric_state is None for g in gpus):
        return None
    return [
        f"GPU {g.index} {g.fabric_state or 'N/A'}/{g.fabric_status or 'N/A'}"
        for g in gpus
        if g.fabric_state != "Completed" or g.fabric_status != "Success"
    ]


class SxidEvent(BaseModel):
    """One NVSwitch ``SXid`` code seen since boot, fatal when the driver said so on any of its lines
    (or never said: an SXid whose severity no line states is treated as fatal)."""

    model_config = ConfigDict(extra="forbid")

    code: int
    device: str | None = None
    fatal: bool
    text: str


class NvlinkGpu(BaseModel):
    """One GPU's NVLinks from ``nvidia-smi nvlink -s``: the active links and the inactive ones."""

    model_config = ConfigDict(extra="forbid")

    index: int
    active: int
    inactive: list[int] = Field(default_factory=list)


class XidEvent(BaseModel):
    """One ``NVRM: Xid`` line from the kernel log since boot."""

    model_config = ConfigDict(extra="forbid")

    code: int
    bus_id: str | None = None
    text: str


class NodeState(BaseModel):
    """Everything one probe round learned about one node."""

    model_config = ConfigDict(extra="forbid")

    host: str
    reachable: bool = False
    health: Health = Health.UNKNOWN
    health_evidence: str = ""  # the line that decided the verdict
    probed_at: datetime | None = None
    boot_id: str | None = None
    uptime_s: float | None = None
    kernel: str | None = None
    driver_version: str | None = None  # userspace, from nvidia-smi / NVML
    kernel_module_version: str | None = None  # from /proc/driver/nvidia/version
    kernel_module_flavour: str | None = None  # open or proprietary, from the same line
    cuda_version: str | None = None  # the driver's CUDA ceiling ("CUDA Version")
    driver_package: str | None = None  # installed package and version (dpkg/rpm)
    container_toolkit_version: str | None = None
    fabric_manager: str | None = None  # "active", "inactive", "failed"; None = not installed
    imex: str | None = None  # nvidia-imex's unit, as fabric_manager; None = not installed
    imex_version: str | None = None  # the installed nvidia-imex package's version
    dcgm_version: str | None = None  # ``dcgmi --version``; None: no DCGM
    dcgm_cuda_majors: list[int] = Field(default_factory=list)  # CUDA majors of the DCGM 4 packages installed
    xid_errors: list[XidEvent] = Field(default_factory=list)
    kernel_log: str | None = None  # the log XIDs were read from ("journal", "dmesg"), or "unreadable: ..."
    sxid_errors: list[SxidEvent] = Field(default_factory=list)  # NVSwitch SXids, from the same log
    #: per GPU, from ``nvidia-smi nvlink -s``; None when the probe could not ask
    nvlink: list[NvlinkGpu] | None = None
    peermem_loaded: bool | None = None  # nvidia_peermem (GPUDirect RDMA) in lsmod; None: not known
    gpus: list[GpuState] = Field(default_factory=list)
    error: str | None = None  # transport or tool error, one line
    #: the platform, from a probe with the platform sections (a record or probe step); None otherwise
    platform: PlatformFacts | None = None
    #: a runbook's own facts (``[facts.NAME]``): name -> value, None when its command failed
    custom_facts: dict[str, str | None] = Field(default_factory=dict)
    #: query fields this node's nvidia-smi refused (asked again without them)
    unknown_query_fields: list[str] = Field(default_factory=list)

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    def summary(self) -> dict[str, object]:
        """The facts worth recording in the change log when they change."""
        return {
            "reachable": self.reachable,
            "health": str(self.health),
            "boot_id": self.boot_id,
            "driver_version": self.driver_version,
            "kernel_module_version": self.kernel_module_version,
            "kernel_module_flavour": self.kernel_module_flavour,
            "cuda_version": self.cuda_version,
            "driver_package": self.driver_package,
            "fabric_manager": self.fabric_manager,
            "gpu_count": self.gpu_count,
            "xid_codes": sorted({x.code for x in self.xid_errors}),
            "kernel_log": self.kernel_log,
            "sxid_codes": sorted({x.code for x in self.sxid_errors}),
            "sxid_fatal": sorted({x.code for x in self.sxid_errors if x.fatal}),
            "fabric_incomplete": fabric_incomplete(self.gpus),
            "nvlink_active": None if self.nvlink is None else [g.active for g in self.nvlink],
            "nvlink_inactive": None
            if self.nvlink is None
            else [f"GPU {g.index} link {n}" for g in self.nvlink for n in g.inactive],
            "peermem_loaded": self.peermem_loaded,
            "imex": self.imex,
            "imex_version": self.imex_version,
            "dcgm_version": self.dcgm_version,
            "dcgm_cuda_majors": self.dcgm_cuda_majors or None,
        }
