"""``node-observed``: what an engine said of a node, in the change log. Its facts model, the
fold keeping each node's last word, the ``engine_reported_failure`` trigger judging it
whatever the engine, its words in the log and the cast, and the journal round trip that
``cockpit verify`` holds to."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from gating_scenarios import HOSTS, OP, T0, Log, small_runbook

from cockpit.changelog.events import EventKind, NodeObservedEvent, SessionStartedEvent, parse_event
from cockpit.changelog.facts import NodeObservedFacts
from cockpit.changelog.header import SessionHeader
from cockpit.changelog.journal import Journal, read_session
from cockpit.cli import main
from cockpit.engine.fold import fold
from cockpit.engine.triggers import evaluate
from cockpit.runbook.backends import BackendAction
from cockpit.runbook.model import Runbook, StepKind, Trigger, TriggerMode
from cockpit.view.detail import node_facts
from cockpit.view.words import Form, event_text, event_tone

ENGINE_TRIGGER = "engine-failure"


def runbook() -> Runbook:
    rb = small_runbook()
    trigger = Trigger(id=ENGINE_TRIGGER, title="the engine says failed", mode=TriggerMode.AUTO,
                      evaluator="engine_reported_failure")  # fmt: skip
    return rb.model_copy(update={"triggers": [*rb.triggers, trigger]})


def observed(log: Log, node: str, native: str, stage: str, **facts: Any) -> None:
    log.add(
        EventKind.NODE_OBSERVED, actor="cockpit", node=node, stage="drain", step="engine-drain",
        facts={"backend": "slurm", "native_state": native, "stage": stage, **facts},
    )  # fmt: skip


def armed_log() -> Log:
    log = Log()
    log.open_window(ENGINE_TRIGGER)
    log.add(EventKind.WAVE_STARTED, wave=0)
    return log


def test_the_fold_keeps_each_nodes_last_observation() -> None:
    log = armed_log()
    observed(log, "gpu01", "MIXED+DRAIN", "draining", evidence={"jobs": "48100"})
    observed(log, "gpu01", "IDLE+DRAIN", "drained", reason="cockpit CHG-1: engine-drain")
    state = fold(runbook(), {}, HOSTS, log.events)
    progress = state.nodes["gpu01"]
    assert progress.observation.to_toml() == {
        "backend": "slurm", "native_state": "IDLE+DRAIN", "stage": "drained", "reason": "cockpit CHG-1: engine-drain"
    }  # fmt: skip
    assert progress.observation_seq == log.events[-1].seq
    assert state.nodes["gpu02"].observation.to_toml() == {}
    assert not state.anomalies


def test_an_observation_of_a_node_the_window_lacks_is_an_anomaly() -> None:
    log = armed_log()
    observed(log, "gpu99", "IDLE", "in-service")
    state = fold(runbook(), {}, HOSTS, log.events)
    assert [a for a in state.anomalies if "gpu99" in str(a)]


def test_engine_reported_failure_fires_on_a_failed_observation_with_its_evidence() -> None:
    log = armed_log()
    rb = runbook()
    observed(log, "gpu01", "upgrade-required", "upgrading")
    state = fold(rb, {}, HOSTS, log.events)
    assert [f for f in evaluate(rb, state, {}, T0 + timedelta(hours=1)) if f.trigger_id == ENGINE_TRIGGER] == []
    observed(log, "gpu01", "upgrade-failed", "failed", reason="driver pod CrashLoopBackOff")
    state = fold(rb, {}, HOSTS, log.events)
    found = [f for f in evaluate(rb, state, {}, T0 + timedelta(hours=1)) if f.trigger_id == ENGINE_TRIGGER]
    assert [(f.node, f.evidence, f.seq) for f in found] == [
        ("gpu01", "gpu01: slurm reports upgrade-failed (driver pod CrashLoopBackOff)", log.events[-1].seq)
    ]
    # a later word that is not a failure: the condition no longer holds
    observed(log, "gpu01", "upgrade-done", "done")
    state = fold(rb, {}, HOSTS, log.events)
    assert [f for f in evaluate(rb, state, {}, T0 + timedelta(hours=1)) if f.trigger_id == ENGINE_TRIGGER] == []


def test_a_reboot_through_the_engine_is_watched_as_a_reboot() -> None:
    """A backend step that reboots counts for node-not-back exactly as a reboot step does."""
    rb = small_runbook()
    stages = []
    for stage in rb.stages:
        if stage.id == "reboot":
            steps = [
                s.model_copy(update={"kind": StepKind.BACKEND, "action": BackendAction.REBOOT, "run": None})
                for s in stage.steps
            ]
            stage = stage.model_copy(update={"steps": steps})
        stages.append(stage)
    rb = rb.model_copy(update={"stages": stages})
    assert rb.stage("reboot").steps[0].reboots
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="upgrade")
    log.add(EventKind.STEP_STARTED, stage="reboot", step="reboot", node="gpu01")
    state = fold(rb, {}, HOSTS, log.events)
    assert state.nodes["gpu01"].reboot_started_seq == log.events[-1].seq
    late = evaluate(rb, state, {}, log.events[-1].ts + timedelta(seconds=601))
    assert [f.node for f in late if f.trigger_id == "reboot-timeout"] == ["gpu01"]
    log.add(
        EventKind.STEP_FINISHED, stage="reboot", step="reboot", node="gpu01", facts={"ok": True, "backend": "slurm"}
    )
    state = fold(rb, {}, HOSTS, log.events)
    assert state.nodes["gpu01"].back_seq == log.events[-1].seq


def test_the_words_of_an_observation() -> None:
    event = parse_event(
        {"seq": 3, "ts": T0, "actor": "cockpit", "kind": "node-observed", "node": "gpu01",
         "facts": {"backend": "kubernetes", "native_state": "upgrade-failed", "stage": "failed",
                   "driver_version": "580.95.05", "reason": "validator not ready",
                   "evidence": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"}}}
    )  # fmt: skip
    assert isinstance(event, NodeObservedEvent)
    assert event_text(event) == (
        "kubernetes reports gpu01: upgrade-failed (failed), driver 580.95.05: validator not ready; "
        "nvidia.com/gpu-driver-upgrade-state upgrade-failed"
    )
    assert event_text(event, Form.SHORT) == "kubernetes: upgrade-failed on gpu01"
    assert event_tone(event) == "alarm"
    calm = parse_event(
        {"seq": 4, "ts": T0, "actor": "cockpit", "kind": "node-observed", "node": "gpu01",
         "facts": {"backend": "slurm", "native_state": "IDLE+DRAIN", "stage": "drained"}}
    )  # fmt: skip
    assert event_text(calm) == "slurm reports gpu01: IDLE+DRAIN (drained)" and event_tone(calm) == ""


def test_the_node_detail_shows_the_last_observation() -> None:
    log = armed_log()
    observed(log, "gpu01", "upgrade-failed", "failed", reason="validator not ready")
    progress = fold(runbook(), {}, HOSTS, log.events).nodes["gpu01"]
    lines = node_facts("gpu01", progress, None)
    assert lines[-1].text == "slurm: upgrade-failed (failed)  validator not ready"
    assert ("upgrade-failed", "alarm") in lines[-1].runs


def test_unknown_facts_are_refused_and_the_cockpit_may_write_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        NodeObservedFacts.model_validate({"native": "x"})
    header = SessionHeader(change_id="CHG-OBS", runbook_id="test-upgrade", runbook_sha256="ab" * 32, operator=OP,
                           hosts=list(HOSTS), backend="slurm", backend_options={"control_host": "control"})  # fmt: skip
    with Journal.create(tmp_path, header) as journal:
        journal.append(EventKind.SESSION_STARTED)
        journal.append(
            EventKind.NODE_OBSERVED, actor="cockpit", node="gpu01", stage="drain", step="engine-drain",
            facts=NodeObservedFacts(backend="slurm", native_state="MIXED+DRAIN", stage="draining",
                                    evidence={"jobs": "48100", "scontrol_state": "MIXED+DRAIN"}),
        )  # fmt: skip
        path = journal.path
    log = read_session(path)
    assert isinstance(log.events[0], SessionStartedEvent)
    seen = log.events[1]
    assert isinstance(seen, NodeObservedEvent) and seen.actor == "cockpit"
    assert seen.facts.evidence == {"jobs": "48100", "scontrol_state": "MIXED+DRAIN"}
    assert log.header.backend_name == "slurm" and log.header.backend_options == {"control_host": "control"}
    assert log.header.window_parameters()["backend"] == "slurm"
    assert main(["verify", str(path)]) == 0


def test_a_header_without_a_backend_reads_as_ssh() -> None:
    header = SessionHeader(change_id="CHG-OLD", runbook_id="x", runbook_sha256="ab" * 32, operator=OP)
    assert header.backend is None and header.backend_name == "ssh"
    assert header.window_parameters() == {"backend": "ssh"}
