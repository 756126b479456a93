"""Default nvidia-smi table parser: wide and 79-column layouts, 8 GPUs, tables cut short."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.gpu.parsers import ParseError
from cockpit.gpu.parsers.smi_table import parse_smi_table

H200 = "table/nvidia-smi_H200_580.173.02_utkuozdemir-capture.txt"
H100X8 = "table/nvidia-smi_8xH100-SXM_565.57.01_thamada-nvsim.txt"
OLD = "table/nvidia-smi_old-format_A100_525.105.17_vllm-4066.txt"


def test_h200_580(fixtures_dir: Path) -> None:
    facts = parse_smi_table((fixtures_dir / H200).read_text())
    assert (facts.driver_version, facts.cuda_version) == ("580.173.02", "13.0")
    [gpu] = facts.gpus
    assert gpu.index == 0 and gpu.name == "NVIDIA H200"
    assert gpu.bus_id == "00000000:83:00.0"
    assert gpu.persistence_mode is True
    assert gpu.memory_total_mib == 143771 and gpu.memory_used_mib == 0
    assert gpu.temperature_c == 37 and gpu.utilization_pct == 0
    assert gpu.power_draw_w == 85.0 and gpu.power_limit_w == 700.0
    assert gpu.ecc_uncorrected == 0 and gpu.mig_mode is False
    assert gpu.uuid is None  # the table does not show it
    assert facts.warnings == []


def test_eight_h100(fixtures_dir: Path) -> None:
    facts = parse_smi_table((fixtures_dir / H100X8).read_text())
    assert (facts.driver_version, facts.cuda_version) == ("565.57.01", "12.7")
    assert facts.gpu_count == 8
    assert [g.index for g in facts.gpus] == list(range(8))
    assert {g.name for g in facts.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [g.bus_id for g in facts.gpus][-1] == "00000000:DB:00.0"
    assert [g.power_draw_w for g in facts.gpus] == [100.0, 82.0, 85.0, 85.0, 84.0, 85.0, 86.0, 75.0]
    assert [g.temperature_c for g in facts.gpus] == [30, 30, 31, 30, 28, 30, 29, 29]
    assert all(g.memory_total_mib == 81559 and g.memory_used_mib == 1 for g in facts.gpus)
    assert facts.warnings == []


def test_old_79_column_layout(fixtures_dir: Path) -> None:
    facts = parse_smi_table((fixtures_dir / OLD).read_text())
    assert (facts.driver_version, facts.cuda_version) == ("525.105.17", "12.0")
    [gpu] = facts.gpus
    assert gpu.name == "NVIDIA A100-SXM..."
    assert gpu.persistence_mode is False
    assert gpu.bus_id == "00000000:AF:00.0"
    assert gpu.memory_used_mib == 48770 and gpu.memory_total_mib == 81920
    assert gpu.power_draw_w == 42.0 and gpu.power_limit_w == 400.0
    assert gpu.temperature_c == 32 and gpu.mig_mode is False
    # the capture stops after the Processes header: no GPU fact lost, only the name is cut
    assert facts.warnings == ["GPU 0: the table cut its name to 'NVIDIA A100-SXM...'"]


def test_cut_inside_a_gpu_block(fixtures_dir: Path) -> None:
    lines = (fixtures_dir / H100X8).read_text().splitlines()
    # header (7 lines) + GPUs 0..2 (4 lines each) + the first row of GPU 3
    cut = "\n".join(lines[: 7 + 12 + 1]) + "\n"
    facts = parse_smi_table(cut)
    assert facts.gpu_count == 4
    last = facts.gpus[3]
    assert last.index == 3 and last.bus_id == "00000000:5D:00.0" and last.persistence_mode is True
    assert last.temperature_c is None and last.memory_total_mib is None and last.mig_mode is None
    assert facts.warnings == [
        "table cut short inside the GPU rows; missing values are N/A",
        "GPU 3: only its first row is present",
    ]


def test_cut_mid_line(fixtures_dir: Path) -> None:
    text = (fixtures_dir / H200).read_text()
    cut = text[: text.index("0MiB / 143771MiB")]  # ends inside the memory cell
    facts = parse_smi_table(cut)
    [gpu] = facts.gpus
    assert gpu.temperature_c == 37 and gpu.power_limit_w == 700.0
    assert gpu.memory_used_mib is None and gpu.memory_total_mib is None and gpu.utilization_pct is None
    assert facts.warnings == ["table cut short inside the GPU rows; missing values are N/A"]


def test_cut_after_the_banner(fixtures_dir: Path) -> None:
    text = "\n".join((fixtures_dir / H200).read_text().splitlines()[:4])
    facts = parse_smi_table(text)
    assert (facts.driver_version, facts.cuda_version, facts.gpus) == ("580.173.02", "13.0", [])
    assert facts.warnings == ["table cut short before the GPU rows"]


def test_two_row_blocks_err_values_and_no_right_border() -> None:
    # pre-450 drivers print no MIG row; a lost GPU shows ERR!; some pastes lose the right border
    text = """\
| NVIDIA-SMI 418.67       Driver Version: 418.67       CUDA Version: 10.1
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla V100-SXM2...  On   | 00000000:1A:00.0 Off |                    2 |
| N/A   41C    P0    ERR! / 300W |  16130MiB / 16130MiB |    100%      Default |
+-------------------------------+----------------------+----------------------+
|   1  Tesla V100-SXM2...  On   | 00000000:1B:00.0 Off |                  N/A |
| N/A   ERR!   P0    57W / 300W |      0MiB / 16130MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""
    facts = parse_smi_table(text)
    assert (facts.driver_version, facts.cuda_version) == ("418.67", "10.1")
    first, second = facts.gpus
    assert first.ecc_uncorrected == 2 and first.power_draw_w is None and first.power_limit_w == 300.0
    assert first.utilization_pct == 100 and first.mig_mode is None
    assert second.ecc_uncorrected is None and second.temperature_c is None and second.power_draw_w == 57.0
    assert "GPU 1: the table cut its name to 'Tesla V100-SXM2...'" in facts.warnings


@pytest.mark.parametrize(
    "text",
    [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
        "Failed to initialize NVML: Driver/library version mismatch\n",
        "index, name\n0, NVIDIA H200\n",
        "\x1b[31mrandom\x1b[0m bytes",
    ],
)
def test_not_a_table(text: str) -> None:
    with pytest.raises(ParseError, match="not an nvidia-smi table"):
        parse_smi_table(text)


def test_empty_and_no_devices() -> None:
    assert parse_smi_table("").warnings == ["empty output: no GPU rows"]
    assert parse_smi_table("No devices were found\n").warnings == ["nvidia-smi found no devices"]
