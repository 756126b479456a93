"""Scenario builders shared by the gating, trigger and check tests (no tests here).

Loaded by those files with :func:`importlib.util.spec_from_file_location` because
pytest runs in importlib mode, where test folders are not packages.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cockpit.changelog.events import Event, EventKind, parse_event
from cockpit.changelog.facts import BaselineFacts
from cockpit.runbook.model import Runbook

OP = "alice"
REV = "bob"
T0 = datetime(2026, 8, 5, 22, 0, tzinfo=UTC)


#: One automatic trigger per built-in evaluator: trigger id -> evaluator.
TRIGGER_IDS: dict[str, str] = {
    "gpu-missing": "gpu_count_below_baseline",
    "versions": "driver_versions_inconsistent",
    "reboot-timeout": "reboot_timeout",
    "mismatch": "mismatch_after_reboot",
    "smoke": "smoke_failed",
    "fabric-manager": "fabric_manager_down",
    "xid": "fatal_xid",
    "budget": "wave_failure_budget",
}
AUTO_TRIGGERS = [{"id": t, "title": t, "mode": "auto", "evaluator": e} for t, e in TRIGGER_IDS.items()]


def small_runbook(**waves: Any) -> Runbook:
    def item(iid: str, verify: str = "manual", **kw: Any) -> dict[str, Any]:
        return {"id": iid, "text": f"{iid} holds", "verify": verify, **kw}

    def step(sid: str, **kw: Any) -> dict[str, Any]:
        return {"id": sid, "title": sid, "run": f"echo {sid}", **kw}

    return Runbook.model_validate(
        {
            "runbook": {"id": "test-upgrade", "title": "test"},
            "parameters": {
                "scheduler": {"type": "choice", "choices": ["kubernetes", "slurm"], "default": "kubernetes"},
                "wave_size": {"type": "int", "default": 2},
                "target_branch": {"default": "580"},
                "reboot_timeout_s": {"type": "int", "default": 600},
            },
            "waves": {"sizes": [1, 1], "rest": "wave_size", "max_parallel": 1, "failure_budget": 0, **waves},
            "triggers": [*AUTO_TRIGGERS, {"id": "protected", "title": "protected workload failed", "mode": "manual"}],
            "stages": [
                {
                    "id": "plan",
                    "title": "plan",
                    "scope": "window",
                    "items": [item("path-owner", note_required=True), item("review", "signoff")],
                },
                {
                    "id": "arm",
                    "title": "arm",
                    "scope": "window",
                    "arms_triggers": True,
                    "items": [item("triggers-reviewed", "signoff"), item("armed", "check", check="triggers_armed")],
                },
                {
                    "id": "drain",
                    "title": "drain",
                    "scope": "node",
                    "steps": [step("cordon", where="control"), step("scontrol", when={"scheduler": "slurm"})],
                    "items": [item("cordoned", "step", step="cordon"), item("slurm-drained", "step", step="scontrol")],
                },
                {
                    "id": "record",
                    "title": "record",
                    "scope": "node",
                    "steps": [{"id": "baseline", "title": "baseline", "kind": "record"}],
                    "items": [item("baseline-recorded", "check", check="baseline_recorded")],
                },
                {
                    "id": "upgrade",
                    "title": "upgrade",
                    "scope": "node",
                    "steps": [step("install", destructive=True)],
                    "items": [item("installed", "step", step="install")],
                },
                {
                    "id": "reboot",
                    "title": "reboot",
                    "scope": "node",
                    "steps": [{"id": "reboot", "title": "reboot", "kind": "reboot", "destructive": True}],
                    "items": [item("rebooted", "check", check="boot_id_changed")],
                },
                {
                    "id": "smoke",
                    "title": "smoke",
                    "scope": "node",
                    "steps": [step("container")],
                    "items": [
                        item("container-ok", "step", step="container"),
                        item("gpus", "check", check="gpus_match_baseline"),
                    ],
                },
                {
                    "id": "expand",
                    "title": "expand",
                    "scope": "node",
                    "steps": [step("uncordon", where="control")],
                    "items": [item("uncordoned", "step", step="uncordon")],
                },
                {
                    "id": "close",
                    "title": "close",
                    "scope": "window",
                    "items": [item("all-done", "check", check="all_waves_done"), item("decision")],
                },
            ],
            "rollback": {
                "steps": [
                    step("reinstall", destructive=True),
                    {"id": "reboot", "title": "reboot", "kind": "reboot", "destructive": True},
                ]
            },
        }
    )


class Log:
    """Appends well-formed events, one minute apart."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, kind: EventKind, actor: str = OP, **kw: Any) -> Event:
        seq = len(self.events) + 1
        event = parse_event(dict(seq=seq, ts=T0 + timedelta(minutes=seq), actor=actor, kind=kind, **kw))
        self.events.append(event)
        return event

    def step(self, stage: str, step: str, node: str | None = None, exit_status: int = 0) -> None:
        self.add(EventKind.STEP_STARTED, stage=stage, step=step, node=node)
        self.add(
            EventKind.STEP_FINISHED,
            stage=stage,
            step=step,
            node=node,
            facts={"exit_status": exit_status, "ok": exit_status == 0},
        )

    def open_window(self) -> None:
        """Plan and arm stages passed, triggers armed."""
        self.add(EventKind.SESSION_STARTED, facts={"operator": OP})
        self.add(EventKind.ITEM_TICKED, stage="plan", item="path-owner", note="upgrade path, owner alice")
        self.add(EventKind.SIGNOFF, actor=REV, stage="plan", item="review")
        self.add(EventKind.GATE_PASSED, stage="plan")
        self.add(EventKind.SIGNOFF, actor=REV, stage="arm", item="triggers-reviewed")
        self.add(EventKind.TRIGGERS_ARMED, facts={"triggers": [*TRIGGER_IDS, "protected"]})
        self.add(EventKind.ITEM_VERIFIED, stage="arm", item="armed", facts={"ok": True, "evidence": "armed"})
        self.add(EventKind.GATE_PASSED, stage="arm")

    def node_through(
        self,
        node: str,
        gpus: int = 8,
        until: str = "expand",
        driver: str = "580.65.06",
        fabric_manager: str | None = None,
    ) -> None:
        """Take a started node through its stages, passing each gate, up to ``until``."""
        self.step("drain", "cordon", node)
        self.add(EventKind.GATE_PASSED, stage="drain", node=node)
        if until == "drain":
            return
        self.add(EventKind.STEP_STARTED, stage="record", step="baseline", node=node)
        self.add(
            EventKind.PROBE,
            actor="cockpit",
            node=node,
            facts=probe(boot=f"{node}-old", gpus=gpus, driver="575.57.08", fabric_manager=fabric_manager),
        )
        self.add(
            EventKind.BASELINE_RECORDED,
            node=node,
            facts={
                "driver_package": "nvidia-driver-575=575.57.08-1",
                "driver_version": "575.57.08",
                "kernel_module_version": "575.57.08",
                "boot_id": f"{node}-old",
                "gpu_count": gpus,
                "labels": {},
                "fabric_manager": fabric_manager,
            },
        )
        self.add(
            EventKind.STEP_FINISHED, stage="record", step="baseline", node=node, facts={"ok": True, "exit_status": 0}
        )
        self.add(EventKind.ITEM_VERIFIED, stage="record", item="baseline-recorded", node=node, facts={"ok": True})
        self.add(EventKind.GATE_PASSED, stage="record", node=node)
        if until == "record":
            return
        self.step("upgrade", "install", node)
        self.add(EventKind.GATE_PASSED, stage="upgrade", node=node)
        if until == "upgrade":
            return
        self.add(EventKind.STEP_STARTED, stage="reboot", step="reboot", node=node)
        self.add(
            EventKind.PROBE,
            actor="cockpit",
            node=node,
            facts=probe(boot=f"{node}-new", gpus=gpus, driver=driver, fabric_manager=fabric_manager),
        )
        self.add(
            EventKind.STEP_FINISHED, stage="reboot", step="reboot", node=node, facts={"ok": True, "exit_status": 0}
        )
        self.add(EventKind.ITEM_VERIFIED, stage="reboot", item="rebooted", node=node, facts={"ok": True})
        self.add(EventKind.GATE_PASSED, stage="reboot", node=node)
        if until == "reboot":
            return
        self.step("smoke", "container", node)
        self.add(EventKind.ITEM_VERIFIED, stage="smoke", item="gpus", node=node, facts={"ok": True})
        self.add(EventKind.GATE_PASSED, stage="smoke", node=node)
        if until == "smoke":
            return
        self.step("expand", "uncordon", node)
        self.add(EventKind.GATE_PASSED, stage="expand", node=node)


def probe(boot: str, gpus: int = 8, driver: str = "580.65.06", health: str = "ok", **kw: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "reachable": True,
        "health": health,
        "boot_id": boot,
        "driver_version": driver,
        "kernel_module_version": driver,
        "cuda_version": "13.0",
        "driver_package": None,
        "fabric_manager": None,
        "gpu_count": gpus,
        "xid_codes": [],
    }
    facts.update(kw)
    return facts


HOSTS = ["gpu01", "gpu02", "gpu03", "gpu04"]


def baseline_of(probe_facts: dict[str, Any]) -> dict[str, Any]:
    """The part of a probe's facts a baseline records (a baseline has no health or XIDs)."""
    return {k: v for k, v in probe_facts.items() if k in BaselineFacts.model_fields}
