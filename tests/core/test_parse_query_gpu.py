"""query-gpu CSV parser over the real captures, plus hostile input."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.errors import BadInput
from cockpit.gpu.parsers import ParseError
from cockpit.gpu.parsers.query_gpu import (
    PROBE_FIELDS,
    canonical_field,
    parse_query_gpu,
    probe_query_command,
)

# the field list Ricks-Lab/gpu-utils asked for in the captured noheader row (issue #83)
RICKS_FIELDS = [
    "power.limit",
    "power.min_limit",
    "power.max_limit",
    "memory.total",
    "vbios_version",
    "driver_version",
    "name",
    "gpu_uuid",
    "power.draw",
    "temperature.gpu",
    "temperature.memory",
    "clocks.current.graphics",
    "clocks.sm",
    "clocks.mem",
    "utilization.gpu",
    "utilization.memory",
    "fan.speed",
    "pcie.link.width.current",
    "pstate",
]


def test_h200_full_fields_with_header(fixtures_dir: Path) -> None:
    text = (fixtures_dir / "csv/query-gpu_H200_580.173.02_full-fields_utkuozdemir-capture.csv").read_text()
    facts = parse_query_gpu(text)
    assert facts.driver_version == "580.173.02"
    assert facts.cuda_version is None  # query-gpu has no CUDA field
    assert facts.warnings == []
    [gpu] = facts.gpus
    assert gpu.index == 0
    assert gpu.name == "NVIDIA H200"
    assert gpu.bus_id == "00000000:83:00.0"
    assert gpu.memory_total_mib == 143771
    assert gpu.memory_used_mib == 0
    assert gpu.utilization_pct == 0
    assert gpu.temperature_c == 37
    assert gpu.power_draw_w == pytest.approx(85.12)
    assert gpu.power_limit_w == pytest.approx(700.0)
    assert gpu.persistence_mode is True
    assert gpu.ecc_uncorrected == 0
    assert gpu.mig_mode is False


def test_windows_sample_placeholders_become_none(fixtures_dir: Path) -> None:
    text = (
        fixtures_dir / "csv/sample-output_RTX2080S_471.11-windows-WDDM_utkuozdemir-nvidia_gpu_exporter.csv"
    ).read_text()
    facts = parse_query_gpu(text)
    assert facts.driver_version == "471.11"
    [gpu] = facts.gpus
    assert gpu.name == "NVIDIA GeForce RTX 2080 SUPER"
    assert gpu.uuid == "GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa"
    assert gpu.memory_total_mib == 8192 and gpu.memory_used_mib == 876
    assert gpu.utilization_pct == 2
    assert gpu.power_draw_w == pytest.approx(32.7)
    assert gpu.power_limit_w == pytest.approx(250.0)
    # "[N/A]" on WDDM: persistence mode, volatile ECC, MIG mode
    assert gpu.persistence_mode is None
    assert gpu.ecc_uncorrected is None
    assert gpu.mig_mode is None
    assert facts.warnings == []


def test_windows_sample_with_not_supported_spellings(fixtures_dir: Path) -> None:
    # older drivers write "Not Supported" / "[Not Supported]" / "Unknown Error" where 471 writes [N/A]
    text = (
        fixtures_dir / "csv/sample-output_RTX2080S_471.11-windows-WDDM_utkuozdemir-nvidia_gpu_exporter.csv"
    ).read_text()
    header, row = text.strip().splitlines()
    cells = row.split(", ")
    columns = [canonical_field(c) for c in header.split(", ")]
    cells[columns.index("persistence_mode")] = "Not Supported"
    cells[columns.index("ecc.errors.uncorrected.volatile.total")] = "[Not Supported]"
    cells[columns.index("power.draw")] = "Unknown Error"
    cells[columns.index("temperature.gpu")] = ""
    facts = parse_query_gpu(header + "\n" + ", ".join(cells) + "\n")
    [gpu] = facts.gpus
    assert (gpu.persistence_mode, gpu.ecc_uncorrected, gpu.power_draw_w, gpu.temperature_c) == (None, None, None, None)
    assert gpu.memory_total_mib == 8192


def test_noheader_nounits_with_caller_fields(fixtures_dir: Path) -> None:
    text = (fixtures_dir / "csv/query-gpu_noheader-nounits_RTX2080_440.64_Ricks-Lab-gpu-utils-83.csv").read_text()
    facts = parse_query_gpu(text, RICKS_FIELDS)
    assert facts.driver_version == "440.64"
    [gpu] = facts.gpus
    assert gpu.index == 0  # no index column: its position
    assert gpu.name == "GeForce RTX 2080"
    assert gpu.uuid == "GPU-22b2c6ac-2d49-4863-197c-9c469071178a"  # asked as gpu_uuid
    assert gpu.memory_total_mib == 7979
    assert gpu.power_draw_w == pytest.approx(176.98)
    assert gpu.power_limit_w == pytest.approx(200.0)
    assert gpu.temperature_c == 45
    assert gpu.utilization_pct == 86
    assert gpu.bus_id is None and gpu.memory_used_mib is None and gpu.mig_mode is None  # not asked


def test_noheader_without_fields_is_a_parse_error(fixtures_dir: Path) -> None:
    text = (fixtures_dir / "csv/query-gpu_noheader-nounits_RTX2080_440.64_Ricks-Lab-gpu-utils-83.csv").read_text()
    with pytest.raises(ParseError, match="field list"):
        parse_query_gpu(text)


def test_probe_command_and_fields() -> None:
    argv = probe_query_command()
    assert argv[0] == "nvidia-smi"
    assert argv[1] == "--query-gpu=" + ",".join(PROBE_FIELDS)
    assert argv[2] == "--format=csv,noheader,nounits"
    assert (
        PROBE_FIELDS[0] == "index"
        and "mig.mode.current" in PROBE_FIELDS
        and "remapped_rows.pending" in PROBE_FIELDS
        and len(PROBE_FIELDS) == 23
    )


PROBE_ROWS = (
    "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 00000000:18:00.0, 580.65.06, 81559, 1, 0, 30, 100.12, 700.00, Enabled, 0, Disabled, Enabled, 1980, 2619, No, No, Completed, Success, 5, 16\n"
    "1, NVIDIA H100 80GB HBM3, GPU-bbbb, 00000000:2A:00.0, 580.65.06, 81559, 40000, 97, 61, 690.50, 700.00, Enabled, 2, Enabled, Enabled, 1980, 2619, Yes, No, In Progress, N/A, 4, 8\n"
)


def test_probe_output_two_gpus() -> None:
    facts = parse_query_gpu(PROBE_ROWS, PROBE_FIELDS)
    assert facts.driver_version == "580.65.06"
    assert [g.index for g in facts.gpus] == [0, 1]
    second = facts.gpus[1]
    assert (second.memory_used_mib, second.utilization_pct, second.temperature_c) == (40000, 97, 61)
    assert second.ecc_uncorrected == 2 and second.mig_mode is True
    assert (second.ecc_mode, second.app_clock_graphics_mhz, second.app_clock_memory_mhz) == (True, 1980, 2619)
    assert (second.remapped_rows_pending, second.remapped_rows_failure) == (True, False)
    assert facts.warnings == []


def test_probe_output_with_units_is_the_same() -> None:
    with_units = PROBE_ROWS.replace(", 81559,", ", 81559 MiB,").replace(", 700.00,", ", 700.00 W,")
    assert parse_query_gpu(with_units, PROBE_FIELDS) == parse_query_gpu(PROBE_ROWS, PROBE_FIELDS)


def test_truncated_row_keeps_what_is_there() -> None:
    text = PROBE_ROWS + "2, NVIDIA H100 80GB HBM3, GPU-cccc, 00000000:3A:00.0, 580.65.06, 8155"
    facts = parse_query_gpu(text, PROBE_FIELDS)
    third = facts.gpus[2]
    assert third.index == 2 and third.uuid == "GPU-cccc" and third.memory_total_mib == 8155
    assert third.memory_used_mib is None and third.mig_mode is None
    assert facts.warnings == ["row 3: 6 of 23 columns (truncated); the rest are N/A"]


def test_bad_values_are_none_with_a_warning() -> None:
    text = "index, memory.total [MiB], temperature.gpu\nzero, lots MiB, 31\n"
    facts = parse_query_gpu(text)
    [gpu] = facts.gpus
    assert gpu.index == 0 and gpu.memory_total_mib is None and gpu.temperature_c == 31
    assert "row 1: memory.total 'lots MiB' is not a valid value" in facts.warnings
    assert "row 1: no GPU index, using its position 0" in facts.warnings


def test_rows_disagreeing_on_driver_are_warned() -> None:
    facts = parse_query_gpu(PROBE_ROWS.replace("580.65.06", "575.57.08", 1), PROBE_FIELDS)
    assert facts.driver_version == "575.57.08"
    assert facts.warnings == ["rows disagree on the driver version: 575.57.08, 580.65.06"]


@pytest.mark.parametrize("text", ["", "\n\n  \n", "\ufeff"])
def test_empty_output(text: str) -> None:
    facts = parse_query_gpu(text, PROBE_FIELDS)
    assert facts.gpus == [] and facts.driver_version is None
    assert facts.warnings == ["empty output: no GPU rows"]


def test_no_devices() -> None:
    facts = parse_query_gpu("No devices were found\n", PROBE_FIELDS)
    assert facts.gpus == [] and facts.warnings == ["nvidia-smi found no devices"]


def test_header_only() -> None:
    facts = parse_query_gpu("index, name, memory.total [MiB]\n")
    assert facts.gpus == [] and facts.warnings == ["header only: no GPU rows"]


@pytest.mark.parametrize(
    "text",
    [
        "Failed to initialize NVML: Driver/library version mismatch\n",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
        "\x00\x01\x02 garbage",
    ],
)
def test_error_text_is_a_parse_error_with_its_first_line(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_query_gpu(text, PROBE_FIELDS)
    assert isinstance(info.value, BadInput)
    assert info.value.first_line == text.strip()[:117] + ("..." if len(text.strip()) > 120 else "")


def test_table_is_not_csv(fixtures_dir: Path) -> None:
    text = (fixtures_dir / "table/nvidia-smi_H200_580.173.02_utkuozdemir-capture.txt").read_text()
    with pytest.raises(ParseError):
        parse_query_gpu(text)


def test_stray_line_among_rows_is_skipped() -> None:
    facts = parse_query_gpu("WARNING: infoROM is corrupted at gpu 0000:18:00.0\n" + PROBE_ROWS, PROBE_FIELDS)
    assert [g.uuid for g in facts.gpus] == ["GPU-aaaa", "GPU-bbbb"]
    assert facts.warnings == ["row 1: not a CSV row, skipped: 'WARNING: infoROM is corrupted at gpu 0000:18:00.0'"]
