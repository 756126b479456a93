"""Probe the local machine through NVML (nvidia-ml-py), for ``--local`` runs on a node.

When NVML cannot start (no libnvidia-ml, driver not loaded, driver/library
mismatch after a package upgrade) the state says which, with NVML's own error
text; nothing raises. A field a GPU does not support is ``None``, never a zero.
"""

from __future__ import annotations

import platform
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pynvml

from cockpit.gpu.nodestate import GpuState, Health, NodeState
from cockpit.gpu.parsers.models import ParseError
from cockpit.gpu.parsers.proc_version import parse_proc_version

T = TypeVar("T")

PROC_VERSION = Path("/proc/driver/nvidia/version")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
UPTIME = Path("/proc/uptime")


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _maybe(call: Callable[[], T]) -> T | None:
    """One NVML query; unsupported or failing fields are None (not available)."""
    try:
        return call()
    except pynvml.NVMLError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def init_failure(exc: pynvml.NVMLError) -> tuple[Health, str]:
    """Map an nvmlInit failure to a verdict and a one-line reason with NVML's text."""
    text = f"NVML: {exc}"
    if isinstance(exc, pynvml.NVMLError_LibRmVersionMismatch):
        return Health.DRIVER_LIBRARY_MISMATCH, f"{text} (kernel module and userspace differ; reboot pending?)"
    if isinstance(exc, pynvml.NVMLError_DriverNotLoaded):
        return Health.DRIVER_NOT_LOADED, f"{text} (the nvidia kernel module is not loaded)"
    if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
        return Health.DRIVER_NOT_LOADED, f"{text} (libnvidia-ml.so not found: no NVIDIA driver installed here)"
    return Health.UNKNOWN, text


def _gpu(index: int) -> GpuState:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    memory = _maybe(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle))
    util = _maybe(lambda: pynvml.nvmlDeviceGetUtilizationRates(handle))
    power = _maybe(lambda: pynvml.nvmlDeviceGetPowerUsage(handle))
    limit = _maybe(lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    persistence = _maybe(lambda: pynvml.nvmlDeviceGetPersistenceMode(handle))
    ecc = _maybe(
        lambda: pynvml.nvmlDeviceGetTotalEccErrors(
            handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
        )
    )
    mig = _maybe(lambda: pynvml.nvmlDeviceGetMigMode(handle))
    pci = _maybe(lambda: pynvml.nvmlDeviceGetPciInfo(handle))
    return GpuState(
        index=index,
        name=_maybe(lambda: _text(pynvml.nvmlDeviceGetName(handle))),
        uuid=_maybe(lambda: _text(pynvml.nvmlDeviceGetUUID(handle))),
        bus_id=_text(pci.busId) if pci is not None else None,
        memory_total_mib=memory.total // (1024 * 1024) if memory is not None else None,
        memory_used_mib=memory.used // (1024 * 1024) if memory is not None else None,
        utilization_pct=util.gpu if util is not None else None,
        temperature_c=_maybe(lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        power_draw_w=power / 1000.0 if power is not None else None,
        power_limit_w=limit / 1000.0 if limit is not None else None,
        persistence_mode=bool(persistence) if persistence is not None else None,
        ecc_uncorrected=ecc,
        mig_mode=bool(mig[0]) if mig is not None else None,
    )


def _host_facts(state: NodeState) -> None:
    boot = _read(BOOT_ID)
    state.boot_id = boot.strip() if boot else None
    uptime = _read(UPTIME)
    try:
        state.uptime_s = float(uptime.split()[0]) if uptime else None
    except (IndexError, ValueError):
        state.uptime_s = None
    state.kernel = platform.release() or None
    proc = _read(PROC_VERSION)
    if proc:
        try:
            state.kernel_module_version = parse_proc_version(proc).version
        except ParseError:
            state.kernel_module_version = None


def probe_local(host: str | None = None) -> NodeState:
    """Probe this machine's GPUs through NVML; never raises for a missing or broken driver."""
    state = NodeState(host=host or socket.gethostname(), reachable=True, probed_at=datetime.now(UTC))
    _host_facts(state)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        state.health, state.health_evidence = init_failure(exc)
        state.error = state.health_evidence
        return state
    try:
        state.driver_version = _maybe(lambda: _text(pynvml.nvmlSystemGetDriverVersion()))
        cuda = _maybe(pynvml.nvmlSystemGetCudaDriverVersion_v2)
        state.cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None
        count = _maybe(pynvml.nvmlDeviceGetCount) or 0
        state.gpus = [_gpu(i) for i in range(count)]
    except pynvml.NVMLError as exc:
        state.error = f"NVML: {exc}"
    finally:
        _maybe(pynvml.nvmlShutdown)
    from cockpit.fleet.probes import decide_health

    state.health, state.health_evidence = decide_health(state)
    return state
