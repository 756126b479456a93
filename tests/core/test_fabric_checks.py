"""The fabric, link and module checks (issue 27): real captures through the parsers, and the
checks and the SXid trigger over the folded state, each passing and failing on its evidence."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gating_scenarios import HOSTS, Log, probe, small_runbook

from cockpit.changelog.events import EventKind
from cockpit.changelog.facts import BaselineFacts
from cockpit.engine.checks import CheckResult, run_check
from cockpit.engine.fold import fold
from cockpit.engine.state import CockpitState
from cockpit.engine.triggers import fatal_sxid
from cockpit.fleet.probes import parse_probe_output, probe_command
from cockpit.gpu.nodestate import GpuState, fabric_incomplete
from cockpit.gpu.parsers.fabric import parse_nvlink_status, parse_sxids, peermem_loaded
from cockpit.gpu.parsers.query_gpu import parse_query_gpu
from cockpit.runbook.builtins import FATAL_XID_CODES
from cockpit.runbook.model import Trigger

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_nvlink_status_from_real_captures() -> None:
    v100 = parse_nvlink_status(read("fabric/nvlink-s_V100-inactive_azhpc-diagnostics-73.txt"))
    assert [(g.index, g.active, g.inactive) for g in v100] == [(3, 4, [3, 5])]
    gb200 = parse_nvlink_status(read("fabric/nvlink-s_GB200-18-links_k8s-test-infra-371.txt"))
    assert [(g.index, g.active, g.inactive) for g in gb200] == [(0, 18, [])]


def test_sxid_severity_as_the_driver_writes_it() -> None:
    quiet = parse_sxids(read("fabric/sxid_nonfatal_H100-570.195.03_nvtrust-124.txt"))
    assert [(e.code, e.device, e.fatal) for e in quiet] == [(22013, "0000:04:00.0", False)]
    loud = parse_sxids(read("fabric/sxid_fatal_gpud-sxid-go.txt"))
    assert [(e.code, e.fatal) for e in loud] == [(24007, True), (20034, True), (12028, False)]
    assert "LTSSM Fault Up" in loud[1].text
    # a code none of whose lines says Fatal or Non-fatal: the stricter reading
    only_data = "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a}"
    assert [e.fatal for e in parse_sxids(only_data)] == [True]


def test_fabric_state_from_the_real_full_field_capture() -> None:
    facts = parse_query_gpu(read("csv/query-gpu_H200_580.173.02_full-fields_utkuozdemir-capture.csv"))
    gpu = facts.gpus[0]
    assert (gpu.fabric_state, gpu.fabric_status, gpu.pcie_gen, gpu.pcie_width) == ("Completed", "Success", 5, 16)
    assert fabric_incomplete(list(facts.gpus)) == []
    stuck = [
        GpuState(index=0, fabric_state="In Progress"),
        GpuState(index=1, fabric_state="Completed", fabric_status="Success"),
    ]
    assert fabric_incomplete(stuck) == ["GPU 0 In Progress/N/A"]
    assert fabric_incomplete([GpuState(index=0)]) is None  # no fabric: N/A on every GPU


def test_peermem_from_lsmod() -> None:
    assert peermem_loaded("nvidia_peermem         16384  0\nnvidia              104878080  2 nvidia_uvm\n") is True
    assert peermem_loaded("nvidia              104878080  2 nvidia_uvm\n") is False
    assert peermem_loaded("") is None


def test_probe_reads_sxids_nvlink_and_modules_in_one_batch() -> None:
    cmd = probe_command()
    assert "nvidia-smi nvlink -s" in cmd and "'NVRM: Xid|SXid'" in cmd and "nvidia(_peermem)?" in cmd
    out = "\n".join(
        [
            "@@cockpit-probe xid",
            "kernel-log: journal",
            read("fabric/sxid_fatal_gpud-sxid-go.txt").strip(),
            "@@cockpit-probe rc 0",
            "@@cockpit-probe query-gpu",
            "0, NVIDIA H100, GPU-a, 00000000:18:00.0, 580.95.05",
            "@@cockpit-probe rc 0",
            "@@cockpit-probe nvlink",
            read("fabric/nvlink-s_V100-inactive_azhpc-diagnostics-73.txt").strip(),
            "@@cockpit-probe rc 0",
            "@@cockpit-probe modules",
            "nvidia              104878080  2 nvidia_uvm",
            "@@cockpit-probe rc 0",
            "@@cockpit-probe end",
        ]
    )
    state = parse_probe_output("gpu01", out, fields=("index", "name", "uuid", "pci.bus_id", "driver_version"))
    summary = state.summary()
    assert summary["sxid_fatal"] == [20034, 24007] and summary["sxid_codes"] == [12028, 20034, 24007]
    assert summary["nvlink_active"] == [4] and summary["nvlink_inactive"] == ["GPU 3 link 3", "GPU 3 link 5"]
    assert summary["peermem_loaded"] is False


def test_xids_143_to_150_are_fatal() -> None:
    assert set(range(143, 151)) <= set(FATAL_XID_CODES)
    assert {48, 79, 94, 95} <= set(FATAL_XID_CODES) and 63 not in FATAL_XID_CODES


def state_with(
    probe_facts: dict[str, Any], baseline: dict[str, Any] | None = None, gpus: list[dict[str, Any]] | None = None
) -> CockpitState:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="reboot")
    facts = probe("gpu01-new", **probe_facts)
    if gpus is not None:
        facts["gpus"] = gpus
    log.add(EventKind.PROBE, actor="cockpit", node="gpu01", facts=facts)
    state = fold(small_runbook(), {}, HOSTS, log.events)
    progress = state.nodes["gpu01"]
    progress.baseline = BaselineFacts.model_validate({**progress.baseline.to_toml(), **(baseline or {})})
    return state


def check(name: str, state: CockpitState) -> CheckResult:
    return run_check(name, state, "gpu01", state.params)


def test_fabric_state_completed() -> None:
    assert check("fabric_state_completed", state_with({"fabric_incomplete": []})).ok
    bad = check("fabric_state_completed", state_with({"fabric_incomplete": ["GPU 0 In Progress/N/A"]}))
    assert bad == CheckResult(False, "gpu01: fabric not Completed/Success: GPU 0 In Progress/N/A")
    assert check("fabric_state_completed", state_with({})).ok  # no fabric before or now
    gone = check("fabric_state_completed", state_with({}, {"fabric_completed": True}))
    assert not gone.ok and "all were Completed before" in gone.evidence


def test_nvlink_links_match_baseline() -> None:
    base = {"nvlink_active": [18, 18]}
    assert check("nvlink_links_match_baseline", state_with({"nvlink_active": [18, 18]}, base)).ok
    down = check(
        "nvlink_links_match_baseline",
        state_with({"nvlink_active": [16, 18], "nvlink_inactive": ["GPU 0 link 3", "GPU 0 link 4"]}, base),
    )
    assert down == CheckResult(
        False, "gpu01: NVLinks down: GPU 0 16 of 18 links (inactive: GPU 0 link 3, GPU 0 link 4)"
    )
    assert not check("nvlink_links_match_baseline", state_with({"nvlink_active": [18, 18]})).ok  # no baseline
    assert not check("nvlink_links_match_baseline", state_with({}, base)).ok  # not probed


def test_pcie_link_matches_baseline() -> None:
    base = {"gpus": [{"index": 0, "uuid": "GPU-a", "pcie_gen": 5, "pcie_width": 16}]}
    same = [{"index": 0, "uuid": "GPU-a", "pcie_gen": 5, "pcie_width": 16}]
    slow = [{"index": 0, "uuid": "GPU-a", "pcie_gen": 4, "pcie_width": 8}]
    assert check("pcie_link_matches_baseline", state_with({}, base, same)).ok
    res = check("pcie_link_matches_baseline", state_with({}, base, slow))
    assert res == CheckResult(False, "gpu01: PCIe link downtrained: GPU 0 Gen4 x8, was Gen5 x16")
    assert not check("pcie_link_matches_baseline", state_with({}, {"gpus": [{"index": 0}]}, same)).ok


def test_no_fatal_sxid_and_its_trigger() -> None:
    assert check("no_fatal_sxid", state_with({"sxid_codes": [12028], "sxid_fatal": []})).ok
    state = state_with({"sxid_codes": [20034], "sxid_fatal": [20034]})
    assert check("no_fatal_sxid", state) == CheckResult(False, "gpu01: fatal NVSwitch SXid 20034 since boot")
    assert not check("no_fatal_sxid", state_with({"kernel_log": "unreadable"})).ok
    trigger = Trigger(id="fatal-sxid", title="t", mode="auto", evaluator="fatal_sxid")
    found = fatal_sxid(trigger, state, {}, datetime.now(UTC))
    assert [(f.node, f.evidence) for f in found] == [("gpu01", "gpu01: fatal NVSwitch SXid 20034 since the reboot")]
    assert fatal_sxid(trigger, state_with({"sxid_fatal": []}), {}, datetime.now(UTC)) == []


def test_peermem_loaded_as_before() -> None:
    was = {"peermem_loaded": True}
    assert check("peermem_loaded_as_before", state_with({"peermem_loaded": True}, was)).ok
    res = check("peermem_loaded_as_before", state_with({"peermem_loaded": False}, was))
    assert not res.ok and "nvidia_peermem not loaded" in res.evidence
    assert check("peermem_loaded_as_before", state_with({"peermem_loaded": False}, {"peermem_loaded": False})).ok


def test_imex_in_lockstep() -> None:
    was = {"imex_version": "580.95.05-1", "imex": "active"}
    up = {"driver": "590.48.01", "imex_version": "590.48.01-1", "imex": "active"}
    assert check("imex_in_lockstep", state_with(up, was)).ok
    behind = check("imex_in_lockstep", state_with({**up, "imex_version": "580.95.05-1", "imex": "failed"}, was))
    assert behind == CheckResult(
        False, "gpu01: nvidia-imex 580.95.05-1 beside driver 590.48.01: IMEX must match the driver"
    )
    down = check("imex_in_lockstep", state_with({**up, "imex": "failed"}, was))
    assert down == CheckResult(False, "gpu01: nvidia-imex failed, it ran before the change")
    assert not check("imex_in_lockstep", state_with({"driver": "590.48.01"}, was)).ok  # removed
    assert check("imex_in_lockstep", state_with({"driver": "590.48.01"})).ok  # never had it


def test_probe_reads_imex_beside_the_driver_packages() -> None:
    out = "\n".join(
        [
            "@@cockpit-probe nvidia-packages",
            "ii nvidia-driver-open=590.48.01-1",
            "hi nvidia-imex=590.48.01-1",
            "ii nvidia-container-toolkit=1.17.8-1",
            "@@cockpit-probe rc 0",
            "@@cockpit-probe imex",
            "LoadState=loaded",
            "ActiveState=failed",
            "@@cockpit-probe rc 0",
            "@@cockpit-probe end",
        ]
    )
    state = parse_probe_output("gpu01", out)
    assert (state.imex_version, state.imex) == ("590.48.01-1", "failed")
    assert (state.driver_package, state.container_toolkit_version) == ("nvidia-driver-open=590.48.01-1", "1.17.8-1")


def test_dcgm_matches_driver() -> None:
    assert check("dcgm_matches_driver", state_with({"dcgm_version": "4.4.2"})).ok  # CUDA 13.0 driver
    old = check("dcgm_matches_driver", state_with({"dcgm_version": "3.3.9"}))
    assert old == CheckResult(
        False, "gpu01: DCGM 3.3.9 with a CUDA 13 driver: install DCGM 4 (datacenter-gpu-manager-4-cuda13)"
    )
    assert check("dcgm_matches_driver", state_with({"dcgm_version": "3.3.9", "cuda_version": "12.9"})).ok
    wrong = check("dcgm_matches_driver", state_with({"dcgm_version": "4.4.2", "dcgm_cuda_majors": [12]}))
    assert not wrong.ok and "install datacenter-gpu-manager-4-cuda13" in wrong.evidence
    gone = check("dcgm_matches_driver", state_with({}, {"dcgm_version": "4.4.2"}))
    assert not gone.ok and "dcgmi not found" in gone.evidence
    assert check("dcgm_matches_driver", state_with({})).ok  # never had DCGM


def test_probe_reads_dcgm_from_dcgmi_and_its_packages() -> None:
    out = "\n".join(
        [
            "@@cockpit-probe nvidia-packages",
            "ii datacenter-gpu-manager-4-core=1:4.4.2-1",
            "ii datacenter-gpu-manager-4-cuda12=1:4.4.2-1",
            "ii nvidia-driver-580-open=580.95.05-0ubuntu1",
            "@@cockpit-probe rc 0",
            "@@cockpit-probe dcgm",
            read("misc/dcgmi--version_3.3.9_public-issue.txt"),
            "@@cockpit-probe rc 0",
            "@@cockpit-probe end",
        ]
    )
    state = parse_probe_output("gpu01", out)
    assert (state.dcgm_version, state.dcgm_cuda_majors) == ("3.3.9", [12])
    assert state.driver_package == "nvidia-driver-580-open=580.95.05-0ubuntu1"
