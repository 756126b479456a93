"""``/proc/driver/nvidia/version`` -> :class:`KernelModuleFacts`.

This file names the kernel module actually loaded, which after a package upgrade
without a reboot differs from the userspace version nvidia-smi reports. Two lines::

    NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (dvs-builder@host)  <date>
    NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  <date>
    GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)
"""

from __future__ import annotations

import re

from cockpit.gpu.parsers.models import KernelModuleFacts, ParseError
from cockpit.gpu.parsers.values import first_line

_NVRM = re.compile(r"^\s*NVRM version:\s*(?P<rest>.*)$", re.MULTILINE)
_GCC = re.compile(r"^\s*GCC version:\s*(?:gcc version\s+)?(?P<gcc>.+?)\s*$", re.MULTILINE)
_VERSION = re.compile(r"(?<![\w.])(?P<version>\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)(?![\w.])")


def parse_proc_version(text: str) -> KernelModuleFacts:
    """Parse the kernel module's version file; :class:`ParseError` if it is not one."""
    nvrm = _NVRM.search(text)
    if nvrm is None:
        if not text.strip():
            return KernelModuleFacts(warnings=["empty: no kernel module loaded (or the file was not read)"])
        raise ParseError(f"not /proc/driver/nvidia/version: {first_line(text)!r}", first_line(text))
    rest = nvrm["rest"].strip()
    warnings: list[str] = []
    lowered = rest.lower()
    flavour = "open" if "open kernel module" in lowered else "proprietary" if "kernel module" in lowered else None
    if flavour is None:
        warnings.append("kernel module flavour not recognised (neither open nor proprietary wording)")
    version = _VERSION.search(rest)
    build_info = rest[version.end() :].strip() if version else None
    if version is None:
        warnings.append("no driver version on the NVRM line")
    gcc = _GCC.search(text)
    if gcc is None:
        warnings.append("no GCC version line")
    return KernelModuleFacts(
        version=version["version"] if version else None,
        flavour=flavour,
        build_info=build_info or None,
        gcc=gcc["gcc"] if gcc else None,
        warnings=warnings,
    )
