"""/proc/driver/nvidia/version and nvidia-smi --version parsers."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.gpu.parsers import ParseError
from cockpit.gpu.parsers.proc_version import parse_proc_version
from cockpit.gpu.parsers.smi_version import parse_smi_version


def test_open_kernel_module(fixtures_dir: Path) -> None:
    facts = parse_proc_version((fixtures_dir / "proc_version/open-565.57.01_ubuntu24.04_nixGL-186.txt").read_text())
    assert facts.version == "565.57.01"
    assert facts.flavour == "open"
    assert facts.build_info == "Release Build  (dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024"
    assert facts.gcc == "13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)"
    assert facts.warnings == []


def test_proprietary_kernel_module(fixtures_dir: Path) -> None:
    facts = parse_proc_version(
        (fixtures_dir / "proc_version/proprietary-515.76_ubuntu18.04_blog-md_repo-unknown.txt").read_text()
    )
    assert facts.version == "515.76"
    assert facts.flavour == "proprietary"
    assert facts.build_info == "Mon Sep 12 19:21:56 UTC 2022"
    assert facts.gcc == "7.5.0 (Ubuntu 7.5.0-3ubuntu1~18.04)"


def test_aarch64_open_module_without_gcc_line() -> None:
    facts = parse_proc_version(
        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build  (dvs-builder@U22)  Wed Jul 23 2025\n"
    )
    assert (facts.version, facts.flavour, facts.gcc) == ("580.65.06", "open", None)
    assert facts.warnings == ["no GCC version line"]


def test_unrecognised_nvrm_line() -> None:
    facts = parse_proc_version("NVRM version: something else entirely\nGCC version:  gcc version 12.2.0\n")
    assert facts.version is None and facts.flavour is None and facts.gcc == "12.2.0"
    assert facts.warnings == [
        "kernel module flavour not recognised (neither open nor proprietary wording)",
        "no driver version on the NVRM line",
    ]


def test_empty_proc_version_means_no_module() -> None:
    facts = parse_proc_version("")
    assert facts.version is None and facts.warnings


@pytest.mark.parametrize(
    "text", ["cat: /proc/driver/nvidia/version: No such file or directory\n", "Linux 6.8.0-45-generic"]
)
def test_not_proc_version(text: str) -> None:
    with pytest.raises(ParseError, match="not /proc/driver/nvidia/version"):
        parse_proc_version(text)


def test_smi_version(fixtures_dir: Path) -> None:
    facts = parse_smi_version(
        (fixtures_dir / "misc/nvidia-smi--version_H200_580.173.02_utkuozdemir-capture.txt").read_text()
    )
    assert (facts.driver_version, facts.cuda_version, facts.gpus, facts.warnings) == ("580.173.02", "13.0", [], [])


def test_smi_version_partial() -> None:
    facts = parse_smi_version("NVIDIA-SMI version  : 580.65.06\nNVML version        : 580.65\n")
    assert facts.driver_version is None and facts.cuda_version is None
    assert facts.warnings == ["no DRIVER version line", "no CUDA Version line"]


def test_smi_version_not_that_output() -> None:
    with pytest.raises(ParseError):
        parse_smi_version("Failed to initialize NVML: Driver/library version mismatch\n")
