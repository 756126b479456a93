"""Rollback-trigger evaluators: each fires on its evidence, and only on new evidence."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from gating_scenarios import HOSTS, OP, T0, Log, probe, small_runbook

from cockpit.changelog.events import EventKind
from cockpit.engine.fold import fold
from cockpit.engine.state import CockpitState
from cockpit.engine.triggers import EVALUATORS, TriggerFinding, evaluate
from cockpit.runbook.builtins import TRIGGER_EVALUATORS
from cockpit.runbook.model import Runbook, Trigger


def with_trigger_params(rb: Runbook, trigger_id: str, **params: Any) -> Runbook:
    triggers = [t.model_copy(update={"params": params}) if t.id == trigger_id else t for t in rb.triggers]
    return rb.model_copy(update={"triggers": triggers})


def findings(
    log: Log, rb: Runbook | None = None, now: datetime | None = None, hosts: list[str] = HOSTS, **params: Any
) -> list[TriggerFinding]:
    rb = rb or small_runbook()
    state = fold(rb, params, hosts, log.events)
    assert not state.refused, state.refused  # the log follows the rules, as a live session writes it
    return evaluate(rb, state, params, now or state.last_at or datetime.now().astimezone())


def fired(log: Log, found: list[TriggerFinding]) -> None:
    """Record the findings as the session would."""
    for f in found:
        log.add(
            EventKind.TRIGGER_FIRED, actor="cockpit", trigger=f.trigger_id, node=f.node, facts={"evidence": f.evidence}
        )


def started(*nodes_waves: tuple[int, str], **through: Any) -> Log:
    """Each node started in its wave; the last goes ``through`` as asked, those before it
    through every stage (the rules start a wave only once the one before is through)."""
    log = Log()
    log.open_window()
    for k, (wave, node) in enumerate(nodes_waves):
        log.add(EventKind.WAVE_STARTED, wave=wave)
        last = k == len(nodes_waves) - 1
        log.node_through(node, **(through if last else {**through, "until": "expand"}))
    return log


def test_one_evaluator_per_builtin_name() -> None:
    assert set(EVALUATORS) == set(TRIGGER_EVALUATORS)


def test_gpu_count_below_baseline_fires_once_with_numbers() -> None:
    log = started((0, "gpu01"), until="reboot")
    assert findings(log) == []
    log.probed("gpu01", "gpu01-new", gpus=7)
    found = findings(log)
    assert [(f.trigger_id, f.node, f.evidence) for f in found] == [
        ("gpu-missing", "gpu01", "gpu01: 7 GPUs, baseline 8")
    ]
    fired(log, found)
    assert findings(log) == []  # already fired for gpu01


def test_an_unreachable_or_rebooting_node_is_not_missing_gpus() -> None:
    log = started((0, "gpu01"), until="upgrade")
    log.probed("gpu01", "gpu01-old", gpus=0, health="unreachable", reachable=False)
    log.probed("gpu01", "gpu01-old", gpus=0, health="rebooting")
    assert findings(log) == []
    log.probed("gpu01", "gpu01-old", gpus=0, health="driver-library-mismatch")
    assert findings(log) == []


def test_driver_not_loaded_after_the_reboot_counts_as_gpus_missing() -> None:
    log = started((0, "gpu01"), until="reboot")
    log.probed("gpu01", "gpu01-new", gpus=0, health="driver-not-loaded")
    assert [f.evidence for f in findings(log)] == [
        "gpu01: driver not loaded after the reboot, 0 GPUs usable, baseline 8"
    ]


def test_disarmed_triggers_do_not_fire() -> None:
    log = Log()
    log.add(EventKind.SESSION_STARTED, facts={"operator": OP})
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="reboot")
    log.probed("gpu01", "gpu01-new", gpus=7)
    # the rules refuse a wave before the triggers are armed: the node never starts
    judged = fold(small_runbook(), {}, HOSTS, log.events)
    assert judged.refused[0].kind == "wave-started" and "not armed" in judged.refused[0].why
    # and an evaluator fires nothing unarmed, even over the log folded as written
    rb = small_runbook()
    state = fold(rb, {}, HOSTS, log.events, judge=False)
    assert state.nodes["gpu01"].current == "smoke"
    assert evaluate(rb, state, {}, state.last_at or T0) == []


def test_cleared_trigger_fires_again_only_on_evidence_after_the_clear() -> None:
    log = started((0, "gpu01"), until="reboot")
    log.probed("gpu01", "gpu01-new", gpus=7)
    fired(log, findings(log))
    log.add(EventKind.TRIGGER_CLEARED, trigger="gpu-missing", reason="known dead GPU, accepted by owner")
    assert findings(log) == []  # the same probe, already judged by a person
    log.probed("gpu01", "gpu01-new", gpus=6)
    assert [f.evidence for f in findings(log)] == ["gpu01: 6 GPUs, baseline 8"]


def test_driver_versions_inconsistent_names_the_odd_node() -> None:
    log = started((0, "gpu01"), (1, "gpu02"), until="reboot")
    assert findings(log) == []
    log = started((0, "gpu01"))
    log.add(EventKind.WAVE_STARTED, wave=1)
    log.node_through("gpu02", until="reboot", driver="580.82.07")
    found = [f for f in findings(log) if f.trigger_id == "versions"]
    assert [(f.node, f.evidence) for f in found] == [("gpu02", "gpu02: driver 580.82.07, while gpu01 runs 580.65.06")]


def test_driver_versions_inconsistent_names_its_peers_as_a_node_set() -> None:
    # one line per odd node whatever the fleet's size: its peers fold into a node set
    # the waves are [gpu01], [gpu02], [gpu03, gpu04]: each through before the next starts
    log = started((0, "gpu01"))
    log.add(EventKind.WAVE_STARTED, wave=1)
    log.node_through("gpu02", driver="580.82.07")
    log.add(EventKind.WAVE_STARTED, wave=2)
    log.node_through("gpu03")
    log.node_through("gpu04", until="reboot")
    assert not fold(small_runbook(), {}, HOSTS, log.events).refused
    found = [f for f in findings(log) if f.trigger_id == "versions"]
    assert [(f.node, f.evidence) for f in found] == [
        ("gpu02", "gpu02: driver 580.82.07, while gpu[01,03-04] (3 nodes) run 580.65.06")
    ]


def test_reboot_timeout_counts_from_the_reboot_and_restarts_at_a_clear() -> None:
    log = started((0, "gpu01"), until="upgrade")
    start = log.add(EventKind.STEP_STARTED, stage="reboot", step="reboot", node="gpu01").ts
    assert findings(log, now=start + timedelta(seconds=500)) == []
    found = findings(log, now=start + timedelta(seconds=601))
    assert [f.evidence for f in found] == ["gpu01: no new boot id 601 s after the reboot began (timeout 600 s)"]
    assert found[0].seq is None
    assert findings(log, now=start + timedelta(seconds=601), reboot_timeout_s=1200) == []
    fired(log, found)
    cleared = log.add(EventKind.TRIGGER_CLEARED, trigger="reboot-timeout", reason="BMC shows POST, slow boot").ts
    assert findings(log, now=cleared + timedelta(seconds=300)) == []
    assert findings(log, now=cleared + timedelta(seconds=700))[0].node == "gpu01"
    log.probed("gpu01", "gpu01-new")
    assert findings(log, now=cleared + timedelta(seconds=700)) == []


def test_reboot_timeout_from_trigger_params() -> None:
    rb = with_trigger_params(small_runbook(), "reboot-timeout", reboot_timeout_s=60)
    log = started((0, "gpu01"), until="upgrade")
    start = log.add(EventKind.STEP_STARTED, stage="reboot", step="reboot", node="gpu01").ts
    assert "timeout 60 s" in findings(log, rb=rb, now=start + timedelta(seconds=61))[0].evidence


def test_mismatch_after_reboot_only_once_the_reboot_passed() -> None:
    log = started((0, "gpu01"), until="upgrade")
    mismatch = probe(
        "gpu01-old", driver="580.65.06", kernel_module_version="575.57.08", health="driver-library-mismatch"
    )
    log.add(EventKind.PROBE, actor="cockpit", node="gpu01", facts=mismatch)
    assert findings(log) == []  # expected before the reboot
    log.add(EventKind.STEP_STARTED, stage="reboot", step="reboot", node="gpu01")
    log.add(EventKind.STEP_FINISHED, stage="reboot", step="reboot", node="gpu01", facts={"ok": True, "exit_status": 0})
    log.add(
        EventKind.OVERRIDE,
        stage="reboot",
        node="gpu01",
        reason="boot id check flaky",
        facts={"blocked_by": ["item 'rebooted' not verified"]},
    )
    log.add(EventKind.PROBE, actor="cockpit", node="gpu01", facts={**mismatch, "boot_id": "gpu01-new"})
    found = [f for f in findings(log) if f.trigger_id == "mismatch"]
    assert [f.evidence for f in found] == [
        "gpu01: driver/library mismatch after the reboot (kernel module 575.57.08, userspace 580.65.06)"
    ]


def test_smoke_failed_names_the_step_and_exit_status() -> None:
    log = started((0, "gpu01"), until="reboot")
    log.step("smoke", "container", "gpu01", exit_status=125)
    found = {f.trigger_id: f for f in findings(log)}
    assert found["smoke"].evidence == "gpu01: smoke step 'container' failed (exit 125)"
    assert found["budget"].evidence == "wave 1: 1 node(s) failed (gpu01), budget 0"


def test_failed_smoke_check_item_fires_with_its_evidence() -> None:
    log = started((0, "gpu01"), until="reboot")
    log.add(
        EventKind.ITEM_VERIFIED,
        stage="smoke",
        item="gpus",
        node="gpu01",
        facts={"ok": False, "evidence": "gpu01: 7 GPUs, baseline 8"},
    )
    found = {f.trigger_id: f for f in findings(log)}
    assert found["smoke"].evidence == "gpu01: smoke item 'gpus' failed: gpu01: 7 GPUs, baseline 8"


def test_wave_failure_budget_tolerates_failures_within_budget() -> None:
    rb = small_runbook(failure_budget=1)
    log = started((0, "gpu01"), until="reboot")
    log.step("smoke", "container", "gpu01", exit_status=1)
    assert [f.trigger_id for f in findings(log, rb=rb)] == ["smoke"]
    rb0 = with_trigger_params(rb, "budget", budget=0)
    assert "budget" in [f.trigger_id for f in findings(log, rb=rb0)]


def test_fabric_manager_down_after_the_upgrade_only() -> None:
    log = started((0, "gpu01"), until="upgrade", fabric_manager="active")
    log.probed("gpu01", "gpu01-old", fabric_manager="failed")
    assert findings(log) == []  # between package change and reboot the FM cannot match the module
    log.add(EventKind.STEP_STARTED, stage="reboot", step="reboot", node="gpu01")
    log.probed("gpu01", "gpu01-new", fabric_manager="inactive")
    assert [f.evidence for f in findings(log)] == ["gpu01: fabric manager inactive, active before the change"]


def test_a_module_not_rebuilt_is_named_as_the_cause_not_the_fabric_manager_it_stops() -> None:
    """The new kernel module was not built: after the reboot the old module loads, the fabric
    manager refuses it, and the reboot stage's own checks never pass. The mismatch is the
    cause and is named as soon as the new boot is probed; the fabric manager is not blamed."""
    log = started((0, "gpu01"), until="upgrade", fabric_manager="active")
    log.add(EventKind.STEP_STARTED, stage="reboot", step="reboot", node="gpu01")
    log.add(EventKind.STEP_FINISHED, stage="reboot", step="reboot", node="gpu01", facts={"ok": True, "exit_status": 0})
    log.probed(
        "gpu01", "gpu01-new", gpus=0, driver=None, kernel_module_version="575.57.08",
        health="driver-library-mismatch", fabric_manager="failed",
    )  # fmt: skip
    found = {f.trigger_id: f.evidence for f in findings(log)}
    assert (
        found.get("mismatch")
        == "gpu01: driver/library mismatch after the reboot (kernel module 575.57.08, userspace N/A)"
    )
    assert "fabric" not in found, found


def test_fabric_manager_not_in_the_baseline_is_never_down() -> None:
    log = started((0, "gpu01"), until="reboot")
    log.probed("gpu01", "gpu01-new", fabric_manager="inactive")
    assert findings(log) == []


def test_fatal_xid_after_the_reboot_with_default_and_runbook_codes() -> None:
    log = started((0, "gpu01"), until="upgrade")
    log.probed("gpu01", "gpu01-old", xid_codes=[79])
    assert findings(log) == []  # from the old boot
    log.add(EventKind.STEP_STARTED, stage="reboot", step="reboot", node="gpu01")
    log.probed("gpu01", "gpu01-new", xid_codes=[13, 79])
    assert [f.evidence for f in findings(log)] == ["gpu01: fatal XID 79 since the reboot"]
    log.probed("gpu01", "gpu01-new", xid_codes=[13])
    assert findings(log) == []
    rb = with_trigger_params(small_runbook(), "xid", codes=[13])
    assert [f.evidence for f in findings(log, rb=rb)] == ["gpu01: fatal XID 13 since the reboot"]


def test_manual_triggers_never_fire_by_evaluation() -> None:
    log = started((0, "gpu01"), until="reboot")
    log.step("smoke", "container", "gpu01", exit_status=1)
    log.probed("gpu01", "gpu01-new", gpus=1, xid_codes=[79])
    ids = {f.trigger_id for f in findings(log)}
    assert "protected" not in ids
    assert {"gpu-missing", "smoke", "xid", "budget"} <= ids


def test_each_evaluator_is_pure_over_the_state() -> None:
    log = started((0, "gpu01"), until="reboot")
    log.probed("gpu01", "gpu01-new", gpus=7)
    rb = small_runbook()
    state: CockpitState = fold(rb, {}, HOSTS, log.events)
    before = state.copy()
    trig: Trigger = rb.trigger("gpu-missing")
    assert state.last_at is not None
    evaluate = EVALUATORS["gpu_count_below_baseline"]
    assert evaluate(trig, state, state.params, state.last_at) == evaluate(trig, state, state.params, state.last_at)
    assert state == before


def test_real_captures_gpu_missing_and_versions_inconsistent(fixtures_dir: Path) -> None:
    """Probe summaries built from real nvidia-smi captures: an 8x H100 baseline, then
    one node back with a 1-GPU r580 capture, another with an 8-GPU r565 one."""
    from cockpit.gpu.nodestate import Health, NodeState
    from cockpit.gpu.parsers.smi_table import parse_smi_table

    def summary(table: str, boot: str) -> dict[str, Any]:
        smi = parse_smi_table((fixtures_dir / "table" / table).read_text())
        return NodeState(
            host="n",
            reachable=True,
            health=Health.OK,
            boot_id=boot,
            driver_version=smi.driver_version,
            kernel_module_version=smi.driver_version,
            cuda_version=smi.cuda_version,
            gpus=smi.gpus,
        ).summary()

    h100 = "nvidia-smi_8xH100-SXM_565.57.01_thamada-nvsim.txt"
    h200 = "nvidia-smi_H200_580.173.02_utkuozdemir-capture.txt"
    log = started((0, "gpu01"), (1, "gpu02"), until="reboot")  # both back on the sim's r580 probe
    log.add(EventKind.PROBE, actor="cockpit", node="gpu01", facts=summary(h200, "gpu01-new"))
    log.add(EventKind.PROBE, actor="cockpit", node="gpu02", facts=summary(h100, "gpu02-new"))
    found = {(f.trigger_id, f.node): f.evidence for f in findings(log)}
    assert found[("gpu-missing", "gpu01")] == "gpu01: 1 GPUs, baseline 8"
    # 580.173.02 vs 565.57.01, one node each: the first node through is the reference
    assert found[("versions", "gpu02")] == "gpu02: driver 565.57.01, while gpu01 runs 580.173.02"
