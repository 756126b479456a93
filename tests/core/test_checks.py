"""Built-in checklist checks over the folded state: each passes and fails on its own evidence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gating_scenarios import HOSTS, Log, baseline_of, probe, small_runbook

from cockpit.changelog.events import EventKind
from cockpit.engine.checks import CHECK_FUNCTIONS, CheckResult, run_check, version_tuple
from cockpit.engine.fold import fold
from cockpit.engine.state import CockpitState
from cockpit.errors import BadInput
from cockpit.runbook.builtins import CHECKS


def state_after(until: str = "reboot", last_probe: dict[str, Any] | None = None, **through: Any) -> CockpitState:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until=until, **through)
    if last_probe is not None:
        log.add(EventKind.PROBE, actor="cockpit", node="gpu01", facts=last_probe)
    return fold(small_runbook(), {}, HOSTS, log.events)


def check(name: str, state: CockpitState, node: str | None = "gpu01", **params: Any) -> CheckResult:
    return run_check(name, state, node, {**state.params, **params})


def test_one_function_per_builtin_check() -> None:
    assert set(CHECK_FUNCTIONS) == set(CHECKS)


def test_unknown_check_is_bad_input() -> None:
    with pytest.raises(BadInput, match="unknown check 'nope'"):
        run_check("nope", state_after(), "gpu01", {})


def test_node_checks_need_a_known_node() -> None:
    state = state_after()
    assert check("node_reachable", state, None) == CheckResult(False, "this check needs a node")
    assert check("node_reachable", state, "gpu99") == CheckResult(False, "gpu99: not in this window's fleet")
    assert not check("node_reachable", state, "gpu02").ok  # never probed


def test_node_reachable() -> None:
    assert check("node_reachable", state_after()).evidence == "gpu01: answered (boot id gpu01-new)"
    down = state_after(last_probe=probe("gpu01-new", reachable=False, health="unreachable"))
    assert check("node_reachable", down) == CheckResult(False, "gpu01: unreachable at the latest probe")


def test_baseline_recorded() -> None:
    assert check("baseline_recorded", state_after(until="drain")) == CheckResult(False, "gpu01: no baseline recorded")
    res = check("baseline_recorded", state_after(until="record"))
    assert res.ok and res.evidence == (
        "gpu01: nvidia-driver-575=575.57.08-1 (driver 575.57.08), 8 GPUs, boot id gpu01-old"
    )


def test_boot_id_changed() -> None:
    assert check("boot_id_changed", state_after(until="upgrade")) == CheckResult(
        False, "gpu01: boot id still gpu01-old (no reboot yet)"
    )
    assert check("boot_id_changed", state_after()) == CheckResult(True, "gpu01: boot id gpu01-old -> gpu01-new")


def test_driver_library_match() -> None:
    assert check("driver_library_match", state_after()).ok
    pending = probe(
        "gpu01-old", driver="580.65.06", kernel_module_version="575.57.08", health="driver-library-mismatch"
    )
    res = check("driver_library_match", state_after(last_probe=pending))
    assert not res.ok and "kernel module 575.57.08, userspace 580.65.06" in res.evidence


def test_driver_matches_target() -> None:
    assert check("driver_matches_target", state_after()) == CheckResult(True, "gpu01: driver 580.65.06 on branch 580")
    assert check("driver_matches_target", state_after(until="record")) == CheckResult(
        False, "gpu01: driver 575.57.08, target branch 580"
    )
    # the loaded kernel module decides, not the freshly installed userspace
    pending = probe("gpu01-old", driver="580.65.06", kernel_module_version="575.57.08")
    assert not check("driver_matches_target", state_after(last_probe=pending)).ok


def test_gpus_match_baseline() -> None:
    assert check("gpus_match_baseline", state_after()) == CheckResult(True, "gpu01: 8 GPUs, baseline 8")
    assert check("gpus_match_baseline", state_after(last_probe=probe("gpu01-new", gpus=7))) == CheckResult(
        False, "gpu01: 7 GPUs, baseline 8"
    )


def test_fabric_manager_ok() -> None:
    assert check("fabric_manager_ok", state_after()).ok  # none installed
    assert check("fabric_manager_ok", state_after(fabric_manager="active")).ok
    res = check(
        "fabric_manager_ok",
        state_after(fabric_manager="active", last_probe=probe("gpu01-new", fabric_manager="failed")),
    )
    assert res == CheckResult(False, "gpu01: fabric manager failed, was active before the change")


def test_no_fatal_xid() -> None:
    assert check("no_fatal_xid", state_after()) == CheckResult(True, "gpu01: no fatal XID since boot")
    state = state_after(last_probe=probe("gpu01-new", xid_codes=[13, 79]))
    assert check("no_fatal_xid", state) == CheckResult(False, "gpu01: fatal XID 79 since boot")
    assert (
        check("no_fatal_xid", state, fatal_xid_codes="48").evidence
        == "gpu01: no fatal XID since boot (non-fatal XID 13, 79)"
    )


def test_cuda_ceiling_meets_image() -> None:
    state = state_after()
    assert check("cuda_ceiling_meets_image", state) == CheckResult(False, "no image_cuda parameter to compare with")
    assert check("cuda_ceiling_meets_image", state, image_cuda="13.0").ok
    old = state_after(last_probe=probe("gpu01-new", cuda_version="12.9"))
    assert check("cuda_ceiling_meets_image", old, image_cuda="13.0") == CheckResult(
        False, "gpu01: driver CUDA ceiling 12.9 < image CUDA 13.0"
    )
    # same major, newer minor: NVIDIA's minor-version compatibility runs it, and says its limits
    minor = check("cuda_ceiling_meets_image", old, image_cuda="12.10")
    assert minor.ok and "minor-version compatibility" in minor.evidence
    assert "cudaErrorCallRequiresNewerDriver" in minor.evidence and "PTX" in minor.evidence
    assert version_tuple("12.10") > version_tuple("12.9")
    eleven = state_after(last_probe=probe("gpu01-new", cuda_version="11.8"))
    assert not check("cuda_ceiling_meets_image", eleven, image_cuda="12.0").ok  # never across a major


def test_triggers_armed_and_all_waves_done_are_window_checks() -> None:
    state = fold(small_runbook(), {}, HOSTS, [])
    assert check("triggers_armed", state, None) == CheckResult(False, "the rollback triggers are not armed")
    state = state_after(until="expand")
    assert check("triggers_armed", state, None).ok
    res = check("all_waves_done", state, None)
    assert res == CheckResult(False, "3 of 4 node(s) not through: gpu02 at pending, gpu03 at pending, gpu04 at pending")
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01")
    done = fold(small_runbook(), {}, ["gpu01"], log.events)
    assert check("all_waves_done", done, None) == CheckResult(
        True, "all 1 node(s) passed smoke and expand in 1 wave(s)"
    )


# ---------------------------------------------------------------- real captured outputs

H100_565 = "table/nvidia-smi_8xH100-SXM_565.57.01_thamada-nvsim.txt"
H200_580 = "table/nvidia-smi_H200_580.173.02_utkuozdemir-capture.txt"
OPEN_565 = "proc_version/open-565.57.01_ubuntu24.04_nixGL-186.txt"


def summary_from(fixtures: Path, table: str, boot: str, proc_version: str | None = None) -> dict[str, Any]:
    """A probe summary as the probes record it, built from a real nvidia-smi capture."""
    from cockpit.gpu.nodestate import Health, NodeState
    from cockpit.gpu.parsers.proc_version import parse_proc_version
    from cockpit.gpu.parsers.smi_table import parse_smi_table

    smi = parse_smi_table((fixtures / table).read_text())
    kmod = parse_proc_version((fixtures / proc_version).read_text()).version if proc_version else smi.driver_version
    node = NodeState(
        host="gpu01",
        reachable=True,
        health=Health.OK,
        boot_id=boot,
        driver_version=smi.driver_version,
        kernel_module_version=kmod,
        cuda_version=smi.cuda_version,
        gpus=smi.gpus,
    )
    return node.summary()


def real_state(fixtures: Path, baseline_table: str, now: dict[str, Any]) -> CockpitState:
    base = summary_from(fixtures, baseline_table, "boot-before")
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.add(EventKind.PROBE, actor="cockpit", node="gpu01", facts=base)
    log.add(
        EventKind.BASELINE_RECORDED, node="gpu01", facts={**baseline_of(base), "driver_package": "nvidia-driver-565"}
    )
    log.add(EventKind.PROBE, actor="cockpit", node="gpu01", facts=now)
    return fold(small_runbook(), {}, HOSTS, log.events)


def test_checks_on_a_real_8x_h100_capture_on_the_old_branch(fixtures_dir: Path) -> None:
    state = real_state(fixtures_dir, H100_565, summary_from(fixtures_dir, H100_565, "boot-before"))
    assert check("gpus_match_baseline", state) == CheckResult(True, "gpu01: 8 GPUs, baseline 8")
    assert check("driver_matches_target", state) == CheckResult(False, "gpu01: driver 565.57.01, target branch 580")
    assert check("cuda_ceiling_meets_image", state, image_cuda="13.0") == CheckResult(
        False, "gpu01: driver CUDA ceiling 12.7 < image CUDA 13.0"
    )
    assert check("driver_library_match", state).ok
    assert not check("boot_id_changed", state).ok


def test_checks_on_a_real_h200_capture_on_r580_against_an_8_gpu_baseline(fixtures_dir: Path) -> None:
    state = real_state(fixtures_dir, H100_565, summary_from(fixtures_dir, H200_580, "boot-after"))
    assert check("driver_matches_target", state) == CheckResult(True, "gpu01: driver 580.173.02 on branch 580")
    assert check("cuda_ceiling_meets_image", state, image_cuda="13.0").ok
    assert check("gpus_match_baseline", state) == CheckResult(False, "gpu01: 1 GPUs, baseline 8")
    assert check("boot_id_changed", state).ok


def test_real_capture_with_the_old_kernel_module_still_loaded_is_a_mismatch(fixtures_dir: Path) -> None:
    pending = summary_from(fixtures_dir, H200_580, "boot-before", proc_version=OPEN_565)
    state = real_state(fixtures_dir, H100_565, pending)
    assert check("driver_library_match", state) == CheckResult(
        False, "gpu01: kernel module 565.57.01 != userspace 580.173.02"
    )
    # the loaded module decides the branch, not the userspace already on disk
    assert check("driver_matches_target", state) == CheckResult(False, "gpu01: driver 565.57.01, target branch 580")
