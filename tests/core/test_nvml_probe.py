"""The local NVML probe on a machine without a usable NVIDIA driver: a verdict, never a crash."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from cockpit.fleet.nvml_probe import init_failure, probe_local
from cockpit.gpu.nodestate import Health


def nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(nvml_works(), reason="this machine has a working NVIDIA driver")
def test_probe_local_without_a_driver_says_why() -> None:
    state = probe_local("here")
    assert state.host == "here" and state.reachable
    assert state.health is Health.DRIVER_NOT_LOADED
    assert state.error is not None and state.error.startswith("NVML: ")
    # the NVML text itself is kept (library missing here; driver not loaded elsewhere)
    assert "NVML Shared Library Not Found" in state.error or "Driver Not Loaded" in state.error
    assert state.gpus == [] and state.driver_version is None
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert state.boot_id == boot_id  # host facts are read even without a driver


@pytest.mark.parametrize(
    ("code", "health", "words"),
    [
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, Health.DRIVER_LIBRARY_MISMATCH, "reboot pending"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, Health.DRIVER_NOT_LOADED, "not loaded"),
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, Health.DRIVER_NOT_LOADED, "libnvidia-ml.so not found"),
        (pynvml.NVML_ERROR_UNKNOWN, Health.UNKNOWN, "NVML: "),
    ],
)
def test_init_failures_map_to_verdicts_with_nvml_text(code: int, health: Health, words: str) -> None:
    exc = pynvml.NVMLError(code)  # pynvml picks the concrete subclass for the code
    verdict, reason = init_failure(exc)
    assert verdict is health
    assert words in reason and str(exc) in reason
