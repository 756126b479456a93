"""``nvidia-smi --version`` (drivers 525 and later) -> :class:`SmiFacts` without GPUs::

    NVIDIA-SMI version  : 580.173.02
    NVML version        : 580.173
    DRIVER version      : 580.173.02
    CUDA Version        : 13.0

The cheapest way to learn the userspace driver and its CUDA ceiling.
"""

from __future__ import annotations

import re

from cockpit.gpu.parsers.models import ParseError, SmiFacts
from cockpit.gpu.parsers.values import clean, first_line

_LINE = re.compile(
    r"^\s*(?P<key>NVIDIA-SMI|NVML|DRIVER|CUDA)\s+version\s*:\s*(?P<value>\S+)\s*$", re.IGNORECASE | re.MULTILINE
)


def parse_smi_version(text: str) -> SmiFacts:
    """Driver and CUDA version from ``nvidia-smi --version``; :class:`ParseError` if absent."""
    values = {m["key"].upper(): clean(m["value"]) for m in _LINE.finditer(text)}
    if not values:
        raise ParseError(f"not nvidia-smi --version output: {first_line(text)!r}", first_line(text))
    warnings: list[str] = []
    driver = values.get("DRIVER")
    if driver is None:
        warnings.append("no DRIVER version line")
    if values.get("CUDA") is None:
        warnings.append("no CUDA Version line")
    smi = values.get("NVIDIA-SMI")
    if driver and smi and smi != driver:
        warnings.append(f"nvidia-smi {smi} differs from driver {driver}")
    return SmiFacts(driver_version=driver, cuda_version=values.get("CUDA"), warnings=warnings)
