"""`cockpit parse` as users run it: a real process, stdin or a file, text or JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def cockpit(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cockpit", *args], input=stdin, capture_output=True, text=True, timeout=60
    )


@pytest.mark.binary
def test_table_json_eight_gpus(fixtures_dir: Path) -> None:
    result = cockpit(
        "parse", "smi-table", str(fixtures_dir / "table/nvidia-smi_8xH100-SXM_565.57.01_thamada-nvsim.txt"), "--json"
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["kind"] == "smi-table" and doc["gpu_count"] == 8
    assert (doc["driver_version"], doc["cuda_version"]) == ("565.57.01", "12.7")
    assert doc["gpus"][7]["bus_id"] == "00000000:DB:00.0" and doc["warnings"] == []


@pytest.mark.binary
def test_query_gpu_from_stdin_readable(fixtures_dir: Path) -> None:
    text = (fixtures_dir / "csv/query-gpu_H200_580.173.02_full-fields_utkuozdemir-capture.csv").read_text()
    result = cockpit("parse", "query-gpu", "-", stdin=text)
    assert result.returncode == 0, result.stderr
    head, columns, row = result.stdout.splitlines()
    assert head == "driver 580.173.02  CUDA N/A (the driver's ceiling)  GPUs 1"
    assert columns.split()[:3] == ["GPU", "name", "bus"]
    assert row.split() == [
        "0",
        "NVIDIA",
        "H200",
        "00000000:83:00.0",
        "0",
        "/",
        "143771",
        "0",
        "37",
        "85.12",
        "/",
        "700.0",
        "on",
        "0",
        "off",
    ]


@pytest.mark.binary
def test_query_gpu_noheader_with_fields(fixtures_dir: Path) -> None:
    fields = (
        "power.limit,power.min_limit,power.max_limit,memory.total,vbios_version,driver_version,name,gpu_uuid,power.draw,"
        "temperature.gpu,temperature.memory,clocks.current.graphics,clocks.sm,clocks.mem,utilization.gpu,utilization.memory,"
        "fan.speed,pcie.link.width.current,pstate"
    )
    path = fixtures_dir / "csv/query-gpu_noheader-nounits_RTX2080_440.64_Ricks-Lab-gpu-utils-83.csv"
    ok = cockpit("parse", "query-gpu", str(path), "--fields", fields, "--json")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["driver_version"] == "440.64" and doc["gpus"][0]["memory_total_mib"] == 7979
    refused = cockpit("parse", "query-gpu", str(path))
    assert refused.returncode == 2 and refused.stdout == ""
    assert "pass the field list" in refused.stderr and len(refused.stderr.splitlines()) == 1


@pytest.mark.binary
def test_xml_and_proc_version_and_smi_version(fixtures_dir: Path) -> None:
    xml = cockpit(
        "parse", "smi-xml", str(fixtures_dir / "xml/a100-sxm4-80gb_MIG_535.54.03_cuda12.2_telegraf-a100-sxm4-v12.xml")
    )
    assert xml.returncode == 0
    assert xml.stdout.startswith("driver 535.54.03  CUDA 12.2 (the driver's ceiling)  GPUs 1\n")
    assert xml.stderr == "warning: attached_gpus says 4 but 1 <gpu> blocks are present\n"
    proc = cockpit(
        "parse",
        "proc-version",
        str(fixtures_dir / "proc_version/proprietary-515.76_ubuntu18.04_blog-md_repo-unknown.txt"),
        "--json",
    )
    doc = json.loads(proc.stdout)
    assert (doc["version"], doc["flavour"], doc["gcc"]) == (
        "515.76",
        "proprietary",
        "7.5.0 (Ubuntu 7.5.0-3ubuntu1~18.04)",
    )
    version = cockpit(
        "parse",
        "smi-version",
        str(fixtures_dir / "misc/nvidia-smi--version_H200_580.173.02_utkuozdemir-capture.txt"),
        "--json",
    )
    assert json.loads(version.stdout)["cuda_version"] == "13.0"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("parse", "smi-xml", "/nonexistent/smi.xml"), "cockpit: /nonexistent/smi.xml: no such file\n"),
        (("parse", "smi-banana", "-"), None),
        (("parse", "smi-table", "-", "--fields", "index"), "cockpit: --fields applies to query-gpu only\n"),
    ],
)
@pytest.mark.binary
def test_bad_input_is_one_line_exit_2(args: tuple[str, ...], message: str | None) -> None:
    result = cockpit(*args, stdin="")
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    if message is not None:
        assert result.stderr == message


@pytest.mark.binary
def test_wrong_format_is_exit_2_with_the_tools_own_line(fixtures_dir: Path) -> None:
    path = fixtures_dir / "errors/nvml-mismatch_460-unattended-upgrade_lyulyul-shine-cluster-30.txt"
    result = cockpit("parse", "smi-table", str(path))
    assert result.returncode == 2
    assert result.stderr == f"cockpit: {path}: not an nvidia-smi table: '$ nvidia-smi'\n"
