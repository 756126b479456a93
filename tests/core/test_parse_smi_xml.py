"""nvidia-smi -q -x parser over the real captures, plus cut-short and hostile XML."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.gpu.parsers import ParseError
from cockpit.gpu.parsers.smi_xml import parse_smi_xml

A100 = "xml/a100-sxm4-80gb_MIG_535.54.03_cuda12.2_telegraf-a100-sxm4-v12.xml"
A10G = "xml/a10g_515.105.01_cuda11.7_telegraf-a10g.xml"


def test_a100_mig_v12(fixtures_dir: Path) -> None:
    facts = parse_smi_xml((fixtures_dir / A100).read_text())
    assert facts.driver_version == "535.54.03"
    assert facts.cuda_version == "12.2"
    [gpu] = facts.gpus
    assert gpu.index == 0
    assert gpu.name == "NVIDIA A100-SXM4-80GB"
    assert gpu.uuid == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpu.bus_id == "00000000:01:00.0"
    assert gpu.mig_mode is True
    # the whole GPU's framebuffer, not a MIG slice's (19968 MiB / 12 MiB)
    assert gpu.memory_total_mib == 81920 and gpu.memory_used_mib == 50
    assert gpu.utilization_pct is None  # N/A while MIG is on
    assert gpu.temperature_c == 27
    assert gpu.power_draw_w == pytest.approx(67.03)
    assert gpu.power_limit_w == pytest.approx(500.0)  # gpu_power_readings, not module_power_readings (N/A)
    assert gpu.persistence_mode is False
    assert gpu.ecc_uncorrected == 0
    # the telegraf capture kept one of the four GPUs: said, not hidden
    assert facts.warnings == ["attached_gpus says 4 but 1 <gpu> blocks are present"]


def test_a10g_v11(fixtures_dir: Path) -> None:
    facts = parse_smi_xml((fixtures_dir / A10G).read_text())
    assert (facts.driver_version, facts.cuda_version) == ("515.105.01", "11.7")
    [gpu] = facts.gpus
    assert gpu.name == "NVIDIA A10G"
    assert gpu.bus_id == "00000000:00:1E.0"
    assert gpu.memory_total_mib == 23028 and gpu.memory_used_mib == 22
    assert gpu.utilization_pct == 0 and gpu.temperature_c == 17
    assert gpu.power_draw_w == pytest.approx(25.58)
    assert gpu.power_limit_w == pytest.approx(300.0)  # v11 <power_readings><power_limit>
    assert gpu.mig_mode is None  # N/A on an A10G
    assert gpu.ecc_uncorrected == 0
    assert facts.warnings == []


def test_cut_short_keeps_what_was_read(fixtures_dir: Path) -> None:
    text = (fixtures_dir / A10G).read_text()
    cut = text[: text.index("<temperature>")]
    facts = parse_smi_xml(cut)
    assert facts.driver_version == "515.105.01"
    [gpu] = facts.gpus
    assert gpu.memory_total_mib == 23028  # read before the cut
    assert gpu.temperature_c is None and gpu.power_draw_w is None  # after it
    assert facts.warnings[0].startswith("XML cut short or malformed (")
    assert facts.warnings[1] == "GPU 0: its block is incomplete"


def test_old_dtd_ecc_double_bit_and_two_gpus() -> None:
    text = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v10.dtd">
<nvidia_smi_log>
  <driver_version>450.80.02</driver_version><cuda_version>11.0</cuda_version><attached_gpus>2</attached_gpus>
  <gpu id="00000000:3B:00.0"><product_name>Tesla V100</product_name>
    <ecc_errors><volatile><single_bit><total>7</total></single_bit><double_bit><total>3</total></double_bit></volatile></ecc_errors>
    <power_readings><power_draw>N/A</power_draw><power_limit>[Not Supported]</power_limit><enforced_power_limit>250.00 W</enforced_power_limit></power_readings>
  </gpu>
  <gpu id="00000000:AF:00.0"><product_name>Tesla V100</product_name><fb_memory_usage><total>16160 MiB</total></fb_memory_usage></gpu>
</nvidia_smi_log>"""
    facts = parse_smi_xml(text)
    assert [g.index for g in facts.gpus] == [0, 1]
    first, second = facts.gpus
    assert first.ecc_uncorrected == 3
    assert first.power_draw_w is None and first.power_limit_w == pytest.approx(250.0)
    assert first.bus_id == "00000000:3B:00.0"  # from the id attribute when <pci> is absent
    assert second.memory_total_mib == 16160 and second.ecc_uncorrected is None
    assert facts.warnings == []


def test_entities_are_refused() -> None:
    bomb = '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><nvidia_smi_log><driver_version>&b;</driver_version></nvidia_smi_log>'
    with pytest.raises(ParseError, match="entities"):
        parse_smi_xml(bomb)
    external = '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY ext SYSTEM "file:///etc/passwd">]><nvidia_smi_log>&ext;</nvidia_smi_log>'
    with pytest.raises(ParseError, match="entities"):
        parse_smi_xml(external)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("Failed to initialize NVML: Driver/library version mismatch\n", "not nvidia-smi -q -x"),
        ("<html><body>502</body></html>", "root element <html>"),
        ("<<<>>>", "not nvidia-smi -q -x"),
    ],
)
def test_not_smi_xml(text: str, match: str) -> None:
    with pytest.raises(ParseError, match=match):
        parse_smi_xml(text)


def test_empty() -> None:
    facts = parse_smi_xml("  \n")
    assert facts.gpus == [] and facts.warnings == ["empty output: no GPU rows"]


def test_root_only_has_no_gpus() -> None:
    facts = parse_smi_xml(
        "<nvidia_smi_log><driver_version>580.65.06</driver_version><attached_gpus>0</attached_gpus></nvidia_smi_log>"
    )
    assert facts.driver_version == "580.65.06" and facts.gpus == [] and facts.warnings == []
