"""The gating engine, rule by rule, on a small runbook built here (not the shipped one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from gating_scenarios import HOSTS, OP, REV, TRIGGER_IDS, CleanWindow, Log, probe, small_runbook

from cockpit.changelog.events import EventKind
from cockpit.engine import actions
from cockpit.engine.actions import Action, ActionKind
from cockpit.engine.fold import (
    Folder,
    fold,
)
from cockpit.engine.gates import (
    gate_blockers,
    wave_through,
)
from cockpit.engine.offers import allowed_actions, offered_kinds
from cockpit.engine.rules import check_action
from cockpit.engine.state import StageRoles
from cockpit.runbook.model import DecisionSpec, Runbook


def state_of(log: Log, hosts: list[str] = HOSTS, rb: Runbook | None = None, **params: Any):
    return fold(rb or small_runbook(), params, hosts, log.events)


def check(log: Log, action: Action, actor: str = OP, hosts: list[str] = HOSTS, rb: Runbook | None = None):
    rb = rb or small_runbook()
    return check_action(state_of(log, hosts, rb), rb, action, actor, operator=OP)


def run(stage: str, step: str, node: str | None = None) -> Action:
    return actions.RunStep(stage=stage, step=step, node=node)


def _started() -> Log:
    """A log whose session has started, with OP as the operator."""
    log = Log()
    log.add(EventKind.SESSION_STARTED, facts={"operator": OP})
    return log


# ---------------------------------------------------------------- folding


def test_initial_state_first_window_stage_active_nodes_pending() -> None:
    state = fold(small_runbook(), {}, HOSTS, [])
    assert state.waves == [["gpu01"], ["gpu02"], ["gpu03", "gpu04"]]
    assert state.window["plan"].status == "active"
    assert state.window["arm"].status == "locked"
    assert state.window["close"].status == "locked"
    assert state.window_current == "plan"
    assert {p.current for p in state.nodes.values()} == {"pending"}
    assert state.nodes["gpu03"].wave == 2
    assert all(t.status == "disarmed" for t in state.triggers.values())
    # the slurm step and the item that follows it do not apply with scheduler=kubernetes
    drain = state.nodes["gpu01"].stages["drain"]
    assert drain.steps["scontrol"].status == "skipped"
    assert drain.items["slurm-drained"].status == "skipped"
    assert state.window["plan"].items["review"].status == "needs-signoff"


def test_when_condition_true_makes_the_step_apply() -> None:
    state = fold(small_runbook(), {"scheduler": "slurm"}, HOSTS, [])
    drain = state.nodes["gpu01"].stages["drain"]
    assert drain.steps["scontrol"].status == "open"
    assert "step 'scontrol' not run" in gate_blockers(drain)


def test_gate_blockers_say_exactly_what_blocks() -> None:
    state = fold(small_runbook(), {}, HOSTS, [])
    assert gate_blockers(state.window["plan"]) == [
        "item 'path-owner' not ticked (a note is required)",
        "item 'review' needs sign-off by a second person",
    ]
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0, facts={"nodes": ["gpu01"]})
    log.step("drain", "cordon", "gpu01", exit_status=1)
    drain = state_of(log).nodes["gpu01"].stages["drain"]
    assert drain.items["cordoned"].status == "failed"
    assert gate_blockers(drain) == ["step 'cordon' failed (exit 1)"]


def test_operator_signoff_does_not_count_and_is_refused() -> None:
    log = _started()
    verdict = check(log, actions.SignOff(stage="plan", item="review"), actor=OP)
    assert not verdict.allowed
    assert any("second person" in r for r in verdict.reasons)
    log.add(EventKind.SIGNOFF, actor=OP, stage="plan", item="review")  # written anyway: must not count
    state = state_of(log)
    assert state.window["plan"].items["review"].status == "needs-signoff"
    assert state.anomalies and "does not count" in state.anomalies[0]
    assert check(log, actions.SignOff(stage="plan", item="review"), actor=REV).allowed
    log.add(EventKind.SIGNOFF, actor=REV, stage="plan", item="review")
    state = state_of(log)
    assert state.window["plan"].items["review"].status == "done"
    assert state.reviewers == [REV]


def test_gate_level_signoff_signs_every_signoff_item() -> None:
    log = _started()
    log.add(EventKind.SIGNOFF, actor=REV, stage="plan")
    assert state_of(log).window["plan"].items["review"].status == "done"


def test_pass_gate_refused_with_blockers_then_moves_to_next_stage() -> None:
    log = _started()
    passing = actions.PassGate(stage="plan")
    assert not check(log, passing).allowed
    log.add(EventKind.ITEM_TICKED, stage="plan", item="path-owner", note="A, alice")
    log.add(EventKind.SIGNOFF, actor=REV, stage="plan", item="review")
    assert check(log, passing).allowed
    log.add(EventKind.GATE_PASSED, stage="plan")
    state = state_of(log)
    assert state.window["plan"].status == "passed"
    assert state.window_current == "arm"
    assert not check(log, passing).allowed  # not the current stage any more


def test_arming_needs_the_arm_stage_and_only_it() -> None:
    log = _started()
    arm = actions.ArmTriggers()
    assert "the arming stage 'arm' is locked" in check(log, arm).reasons
    log.add(EventKind.ITEM_TICKED, stage="plan", item="path-owner", note="A, alice")
    log.add(EventKind.SIGNOFF, actor=REV, stage="plan", item="review")
    log.add(EventKind.GATE_PASSED, stage="plan")
    # the review sign-off is missing; the triggers_armed check item does not block arming
    assert check(log, arm).reasons == ["stage 'arm': item 'triggers-reviewed' needs sign-off by a second person"]
    log.add(EventKind.SIGNOFF, actor=REV, stage="arm", item="triggers-reviewed")
    assert check(log, arm).allowed
    assert not check(log, arm, actor=REV).allowed
    log.add(EventKind.ITEM_VERIFIED, stage="arm", item="armed", facts={"ok": True})  # (a forged verdict)
    assert check(log, actions.PassGate(stage="arm")).reasons == [
        "the rollback triggers are not armed: arm them before passing this gate"
    ]
    log.add(EventKind.TRIGGERS_ARMED, facts={"triggers": [*TRIGGER_IDS, "protected"]})
    state = state_of(log)
    assert state.armed and all(t.status == "armed" for t in state.triggers.values())
    assert check(log, arm).reasons == ["the triggers are already armed"]


def test_no_destructive_step_before_triggers_are_armed() -> None:
    log = _started()
    # a log where the window stages were overridden and a wave started without arming
    log.add(EventKind.OVERRIDE, stage="plan", reason="test", facts={"blocked_by": ["x"]})
    log.add(EventKind.OVERRIDE, stage="arm", reason="test", facts={"blocked_by": ["x"]})
    start = actions.StartWave(wave=0)
    assert "the rollback triggers are not armed yet" in check(log, start).reasons
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="record")
    # the fold refuses the wave written anyway: the node never starts
    refused = state_of(log).refused
    assert refused[0].kind == "wave-started" and "the rollback triggers are not armed yet" in refused[0].why
    # and were the log folded as written, each destructive step is still refused on its own
    rb = small_runbook()
    unjudged = fold(rb, {}, HOSTS, log.events, judge=False)
    verdict = check_action(unjudged, rb, run("upgrade", "install", "gpu01"), OP, operator=OP)
    assert verdict.reasons == ["the rollback triggers are not armed yet"]
    # the reboot after it is destructive too
    log.add(EventKind.GATE_PASSED, stage="upgrade", node="gpu01")
    unjudged = fold(rb, {}, HOSTS, log.events, judge=False)
    reboot = check_action(unjudged, rb, run("reboot", "reboot", "gpu01"), OP, operator=OP)
    assert "the rollback triggers are not armed yet" in reboot.reasons


def test_steps_only_in_the_current_stage() -> None:
    log = Log()
    log.open_window()
    assert "gpu01 has not started: its wave 1 is not running" in check(log, run("drain", "cordon", "gpu01")).reasons
    log.add(EventKind.WAVE_STARTED, wave=0)
    assert check(log, run("drain", "cordon", "gpu01")).allowed
    verdict = check(log, run("upgrade", "install", "gpu01"))
    assert verdict.reasons == ["stage 'upgrade' is not gpu01's current stage (it is at 'drain')"]
    log.node_through("gpu01", until="record")
    assert check(log, run("upgrade", "install", "gpu01")).allowed


def test_waves_start_in_order_only_after_the_previous_is_through() -> None:
    log = Log()
    log.open_window()
    assert check(log, actions.StartWave(wave=0)).allowed
    assert not check(log, actions.StartWave(wave=1)).allowed
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="smoke")
    verdict = check(log, actions.StartWave(wave=1))
    assert verdict.reasons == ["wave 1 is not through smoke and expand: gpu01 at 'expand'"]
    log.step("expand", "uncordon", "gpu01")
    log.add(EventKind.GATE_PASSED, stage="expand", node="gpu01")
    state = state_of(log)
    assert state.nodes["gpu01"].current == "done" and wave_through(state, 0)
    assert check(log, actions.StartWave(wave=1)).allowed


def test_max_parallel_bounds_nodes_in_destructive_stages() -> None:
    log = Log()
    log.open_window()
    for wave, node in ((0, "gpu01"), (1, "gpu02")):
        log.add(EventKind.WAVE_STARTED, wave=wave)
        log.node_through(node)
    log.add(EventKind.WAVE_STARTED, wave=2)
    log.node_through("gpu03", until="record")
    log.node_through("gpu04", until="record")
    log.add(EventKind.STEP_STARTED, stage="upgrade", step="install", node="gpu03")
    verdict = check(log, run("upgrade", "install", "gpu04"))
    assert verdict.reasons == ["1 node(s) of wave 3 already in destructive stages (gpu03; max_parallel 1)"]
    # gpu03 keeps its slot through the reboot, and frees it in smoke
    log.add(
        EventKind.STEP_FINISHED, stage="upgrade", step="install", node="gpu03", facts={"ok": True, "exit_status": 0}
    )
    log.add(EventKind.GATE_PASSED, stage="upgrade", node="gpu03")
    assert not check(log, run("upgrade", "install", "gpu04")).allowed
    log.add(EventKind.STEP_STARTED, stage="reboot", step="reboot", node="gpu03")
    log.add(EventKind.STEP_FINISHED, stage="reboot", step="reboot", node="gpu03", facts={"ok": True, "exit_status": 0})
    log.add(EventKind.ITEM_VERIFIED, stage="reboot", item="rebooted", node="gpu03", facts={"ok": True})
    log.add(EventKind.GATE_PASSED, stage="reboot", node="gpu03")
    assert state_of(log).nodes["gpu03"].current == "smoke"
    assert check(log, run("upgrade", "install", "gpu04")).allowed
    wider = small_runbook(max_parallel=2)
    log2 = Log()
    log2.events = log.events[:-5]
    assert check(log2, run("upgrade", "install", "gpu04"), rb=wider).allowed


def _fired_on_gpu01() -> Log:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="record")
    log.add(
        EventKind.TRIGGER_FIRED,
        actor="cockpit",
        trigger="gpu-missing",
        node="gpu01",
        facts={"evidence": "gpu01: 7 GPUs, baseline 8"},
    )
    return log


@pytest.mark.parametrize(
    ("make_log", "action", "refusal", "words"),
    [
        (_started, actions.TickItem(stage="plan", item="path-owner"), "item 'path-owner' needs a note",
         {"note": "path A, owner alice"}),
        (_started, actions.Override(stage="plan", reason=""), "an override needs a reason",
         {"reason": "path agreed on the bridge call"}),
        (_fired_on_gpu01, actions.ClearTrigger(trigger="gpu-missing", reason=""), "clearing a trigger needs a reason",
         {"reason": "GPU reseated, 8 visible"}),
        (_fired_on_gpu01, actions.StartRollback(node="gpu01", reason=""), "a rollback needs a reason",
         {"reason": "GPU missing"}),
    ],
)  # fmt: skip
def test_words_a_person_types_are_required(
    make_log: Callable[[], Log], action: Action, refusal: str, words: dict[str, str]
) -> None:
    log = make_log()
    assert check(log, action).reasons == [refusal]
    assert check(log, action.model_copy(update=words)).allowed


def test_fired_trigger_blocks_destructive_steps_and_waves_until_cleared() -> None:
    log = _fired_on_gpu01()
    verdict = check(log, run("upgrade", "install", "gpu01"))
    assert not verdict.allowed
    assert verdict.reasons == [
        "trigger 'gpu-missing' fired on gpu01: gpu01: 7 GPUs, baseline 8; clear it with a reason or roll the node back"
    ]
    override = actions.Override(stage="upgrade", node="gpu01", reason="looks fine")
    assert any("does not bypass a fired trigger" in r for r in check(log, override).reasons)
    clear = actions.ClearTrigger(trigger="gpu-missing", reason="GPU reseated, 8 visible")
    assert not check(log, clear, actor=REV).allowed  # the operator's call
    assert check(log, clear).allowed
    log.add(EventKind.TRIGGER_CLEARED, trigger="gpu-missing", reason="GPU reseated, 8 visible")
    state = state_of(log)
    assert state.triggers["gpu-missing"].status == "cleared"
    assert state.triggers["gpu-missing"].clear_reason == "GPU reseated, 8 visible"
    assert check(log, run("upgrade", "install", "gpu01")).allowed


def test_rollback_steps_stay_allowed_while_a_trigger_is_fired() -> None:
    log = _fired_on_gpu01()
    assert check(log, actions.StartRollback(node="gpu01", reason="GPU missing")).allowed
    log.add(EventKind.ROLLBACK_STARTED, node="gpu01", reason="GPU missing")
    state = state_of(log)
    assert state.nodes["gpu01"].current == "rolling-back"
    assert check(log, run("rollback", "reinstall", "gpu01")).allowed
    assert not check(log, run("rollback", "reinstall", "gpu02")).allowed  # not rolling back
    assert not check(log, actions.StartWave(wave=1)).allowed
    finish = actions.FinishRollback(node="gpu01")
    assert not check(log, finish.model_copy(update={"node": "gpu02"})).allowed  # gpu02 is not rolling back
    assert not check(log, actions.PassGate(stage="rollback", node="gpu01")).allowed
    log.add(EventKind.STEP_STARTED, stage="rollback", step="reinstall", node="gpu01")
    assert check(log, finish).reasons == ["step 'reinstall' of 'rollback' is still running"]
    log.step("rollback", "reinstall", "gpu01")
    assert check(log, finish).allowed
    log.add(EventKind.ROLLBACK_FINISHED, node="gpu01", facts={"ok": True})
    assert state_of(log).nodes["gpu01"].current == "rolled-back"
    assert check(log, finish).reasons == ["gpu01 is not rolling back"]


def test_override_is_the_operators_and_records_what_it_bypassed() -> None:
    log = _started()
    assert not check(log, actions.Override(stage="plan", reason="x"), actor=REV).allowed
    log.add(
        EventKind.OVERRIDE,
        stage="plan",
        reason="path agreed on the bridge call",
        facts={"blocked_by": ["item 'review' needs sign-off by a second person"]},
    )
    state = state_of(log)
    assert state.window["plan"].status == "overridden"
    assert state.window_current == "arm"
    assert state.overrides[0].reason == "path agreed on the bridge call"
    assert state.overrides[0].blocked_by == ("item 'review' needs sign-off by a second person",)


def test_override_of_an_open_gate_is_refused() -> None:
    log = _started()
    log.add(EventKind.ITEM_TICKED, stage="plan", item="path-owner", note="A")
    log.add(EventKind.SIGNOFF, actor=REV, stage="plan", item="review")
    assert check(log, actions.Override(stage="plan", reason="the path was agreed on the call")).reasons == [
        "the gate of 'plan' is open: pass it instead"
    ]


def test_reviewer_may_sign_raise_manual_and_note_only() -> None:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    assert not check(log, run("drain", "cordon", "gpu01"), actor=REV).allowed
    assert check(log, actions.Note(text="watching"), actor=REV).allowed
    raise_manual = actions.RaiseTrigger(trigger="protected", node="gpu01", note="job died")
    assert check(log, raise_manual, actor=REV).allowed
    raise_auto = actions.RaiseTrigger(trigger="gpu-missing", note="x")
    assert "trigger 'gpu-missing' is automatic: its evaluator raises it" in check(log, raise_auto, actor=REV).reasons
    kinds = {a.kind for a in allowed_actions(state_of(log), small_runbook(), REV, OP)}
    assert kinds == {ActionKind.NOTE, ActionKind.RAISE_TRIGGER}
    log.add(EventKind.TRIGGER_FIRED, actor=REV, trigger="protected", node="gpu01", reason="job died")
    state = state_of(log)
    assert state.triggers["protected"].status == "fired" and state.triggers["protected"].fired_by == REV
    assert not check(log, raise_manual, actor=REV).allowed  # already fired on gpu01


def test_allowed_actions_for_operator_at_the_start() -> None:
    log = _started()
    acts = allowed_actions(state_of(log), small_runbook(), OP, OP)
    assert actions.TickItem(stage="plan", item="path-owner") in acts
    assert actions.Override(stage="plan", reason="") in acts
    assert actions.ChoosePath(path="", rationale="", owner="") in acts
    assert not any(a.kind in (ActionKind.START_WAVE, ActionKind.SIGN_OFF, ActionKind.ARM_TRIGGERS) for a in acts)
    rev = allowed_actions(state_of(log), small_runbook(), REV, OP)
    assert actions.SignOff(stage="plan", item="review") in rev


def test_closing_stages_open_when_every_node_is_through() -> None:
    log = Log()
    log.open_window()
    hosts = ["gpu01", "gpu02"]
    for wave, node in enumerate(hosts):
        log.add(EventKind.WAVE_STARTED, wave=wave)
        log.node_through(node)
        assert state_of(log, hosts).window["close"].status == ("active" if node == "gpu02" else "locked")
    state = state_of(log, hosts)
    assert state.window_current == "close"
    assert [p.current for p in state.nodes.values()] == ["done", "done"]
    assert not check(log, actions.StartWave(wave=2), hosts=hosts).allowed


def test_interrupted_step_counts_as_failed_after_resume() -> None:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.add(EventKind.STEP_STARTED, stage="drain", step="cordon", node="gpu01")
    assert state_of(log).nodes["gpu01"].stages["drain"].items["cordoned"].status == "running"
    assert "step 'cordon' still running" in gate_blockers(state_of(log).nodes["gpu01"].stages["drain"])
    log.add(EventKind.SESSION_RESUMED, facts={"interrupted": ["gpu01/drain/cordon"]})
    step = state_of(log).nodes["gpu01"].stages["drain"].steps["cordon"]
    assert step.status == "failed" and "interrupted" in (step.error or "")
    assert check(log, run("drain", "cordon", "gpu01")).allowed  # it may be run again


def test_unknown_references_are_anomalies_not_crashes() -> None:
    log = Log()
    log.add(EventKind.STEP_STARTED, stage="drain", step="cordon", node="nope")
    log.add(EventKind.GATE_PASSED, stage="nostage")
    log.add(EventKind.TRIGGER_FIRED, trigger="nope")
    assert len(state_of(log).anomalies) == 3


def test_copy_is_independent_and_incremental_matches_batch() -> None:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01")
    rb = small_runbook()
    folder = Folder(rb, {}, HOSTS)
    half = len(log.events) // 2
    for event in log.events[:half]:
        folder.apply(event)
    snap = folder.copy()
    frozen = snap.state.copy()
    for event in log.events[half:]:
        folder.apply(event)
    assert snap.state == frozen  # the original moved on, the copy did not
    for event in log.events[half:]:
        snap.apply(event)
    assert snap.state == folder.state == fold(rb, {}, HOSTS, log.events)


@pytest.mark.parametrize("bad", ["", "   "])
def test_choose_path_needs_a_name(bad: str) -> None:
    log = _started()
    assert check(log, actions.ChoosePath(path=bad, rationale="cu130 on r575", owner="")).reasons == ["name the path"]
    assert check(log, actions.ChoosePath(path="upgrade", rationale="", owner="")).reasons == [
        "give the rationale for the path"
    ]
    assert check(log, actions.RecordDecision(outcome="")).reasons == ["a decision needs its outcome"]
    log.add(EventKind.PATH_CHOSEN, facts={"path": "upgrade", "rationale": "cu130 on r575", "owner": OP})
    assert state_of(log).path is not None and state_of(log).path.facts.path == "upgrade"


def test_a_decision_that_halts_the_rollout_holds_the_rest_and_opens_closing() -> None:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01")
    log.add(EventKind.DECISION, facts={"outcome": "roll-back", "answers": {}, "halt_rollout": True})
    state = state_of(log)
    assert state.halted
    assert [p.current for p in state.nodes.values()] == ["done", "held", "held", "held"]
    assert state.window_current == "close"
    assert check(log, actions.StartWave(wave=1)).reasons == ["a recorded decision halted the rollout"]
    assert check(log, run("drain", "cordon", "gpu02")).reasons == [
        "gpu02 is held: a recorded decision halted the rollout"
    ]
    assert (
        "gpu02 has not started: nothing to roll back"
        in check(log, actions.StartRollback(node="gpu02", reason="x")).reasons
    )


def test_a_decision_outcome_must_be_one_of_the_runbooks() -> None:
    log = _started()
    rb = small_runbook()
    # no [decision] and no decision stage: only the generic end, never the r580 runbook's calls
    assert rb.decision is None and rb.decision_outcomes == ("roll-back",)
    assert check(log, actions.RecordDecision(outcome="roll-back", halt_rollout=True)).allowed
    assert check(log, actions.RecordDecision(outcome="keep-upgraded-path")).reasons == [
        "outcome 'keep-upgraded-path' is not one of the runbook's: roll-back"
    ]
    assert check(log, actions.RecordDecision(outcome="ship it")).reasons == [
        "outcome 'ship it' is not one of the runbook's: roll-back"
    ]
    # a runbook that lists its own outcomes is held to them
    own = rb.model_copy(update={"decision": DecisionSpec(outcomes=["go", "no-go"])})
    assert check(log, actions.RecordDecision(outcome="go"), rb=own).allowed
    assert check(log, actions.RecordDecision(outcome="keep-upgraded-path"), rb=own).reasons == [
        "outcome 'keep-upgraded-path' is not one of the runbook's: go, no-go"
    ]


def test_offered_kinds_follow_the_rules_on_the_focus() -> None:
    """A kind is offered only when the rules accept some action of it: a held node has
    nothing to roll back, a started one has; a blocked gate offers an override, not a pass."""
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01")
    log.add(EventKind.DECISION, facts={"outcome": "roll-back", "answers": {}, "halt_rollout": True})
    rb = small_runbook()
    state = state_of(log)
    assert state.nodes["gpu02"].current == "held"
    held = offered_kinds(state, rb, OP, operator=OP, node="gpu02")
    assert ActionKind.START_ROLLBACK not in held
    assert not check(log, actions.StartRollback(node="gpu02", reason="x")).allowed
    assert ActionKind.START_ROLLBACK in offered_kinds(state, rb, OP, operator=OP, node="gpu01")
    assert check(log, actions.StartRollback(node="gpu01", reason="x")).allowed

    fresh = Log()
    fresh.add(EventKind.SESSION_STARTED, facts={"operator": OP})
    state = state_of(fresh)
    plan = state.window["plan"]
    kinds = offered_kinds(state, rb, OP, operator=OP, stage=plan)
    assert ActionKind.OVERRIDE in kinds and ActionKind.PASS_GATE not in kinds
    assert ActionKind.START_WAVE not in kinds and ActionKind.CLEAR_TRIGGER not in kinds
    assert ActionKind.SIGN_OFF not in kinds  # the operator never signs off
    assert ActionKind.SIGN_OFF in offered_kinds(state, rb, REV, operator=OP, stage=plan)
    # every kind offered is the kind of an action the rules allow
    allowed = {a.kind for a in allowed_actions(state, rb, OP, OP)}
    assert kinds <= allowed


def test_shipped_runbook_clean_window_runs_to_the_end_under_the_rules() -> None:
    """The shipped r580 runbook, played only through actions the engine allows, with
    every step and check succeeding, ends with every node done and every gate passed."""
    from cockpit.engine.triggers import evaluate
    from cockpit.runbook.loader import load

    rb = load("driver-upgrade-r580").runbook
    hosts = ["gpu01", "gpu02", "gpu03"]

    def live(node: str, boot: int) -> dict[str, Any]:
        driver = "575.57.08" if boot == 0 else "580.65.06"
        facts = probe(f"{node}-b{boot}", driver=driver, cuda_version="12.9" if boot == 0 else "13.0")
        # the per-GPU settings a record and a step-boundary probe carry, the same before and after
        facts["gpus"] = [
            {"index": i, "uuid": f"GPU-{node}-{i}", "persistence_mode": True, "power_limit_w": 700.0,
             "pcie_gen": 5, "pcie_width": 16}
            for i in range(8)
        ]  # fmt: skip
        facts["nvlink_active"] = [18] * 8  # `nvidia-smi nvlink -s`: every HGX link up, before and after
        return facts

    window = CleanWindow(rb, hosts, live)
    window.add(EventKind.SESSION_STARTED, facts={"operator": OP})
    for _ in window.play():
        assert evaluate(rb, window.folder.state, {}, window.events[-1].ts) == []  # a clean window fires nothing
    folder, events = window.folder, window.events
    state = folder.state
    assert {p.current for p in state.nodes.values()} == {"done"}
    assert all(s.status == "passed" for s in state.window.values()), {k: s.status for k, s in state.window.items()}
    assert state.armed and not state.fired() and not state.anomalies
    assert state.roles == StageRoles(upgrade="upgrade", reboot="reboot", smoke="smoke", expand="expand")
    assert state == fold(rb, {}, hosts, events)


def test_a_rollback_that_fails_leaves_the_node_to_a_person() -> None:
    log = _fired_on_gpu01()
    log.add(EventKind.ROLLBACK_STARTED, node="gpu01", reason="GPU missing")
    log.step("rollback", "reinstall", "gpu01", exit_status=100)
    log.add(EventKind.ROLLBACK_FINISHED, node="gpu01", facts={"ok": False})
    state = state_of(log)
    assert state.nodes["gpu01"].current == "rollback-failed"
    assert state.nodes["gpu01"].rollback_ok is False
    assert check(log, actions.StartRollback(node="gpu01", reason="again")).reasons == [
        "gpu01 is already rollback-failed"
    ]


def test_no_override_or_rollback_while_a_step_is_running() -> None:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="record")
    state = state_of(log)
    stage = state.nodes["gpu01"].current
    step = next(iter(state.nodes["gpu01"].stages[stage].steps))
    log.add(EventKind.STEP_STARTED, stage=stage, step=step, node="gpu01")  # started before the trigger fired
    log.add(EventKind.TRIGGER_FIRED, actor="cockpit", trigger="gpu-missing", node="gpu01",
            facts={"evidence": "gpu01: 7 GPUs, baseline 8"})  # fmt: skip
    assert not state_of(log).refused
    rollback = actions.StartRollback(node="gpu01", reason="GPU missing")
    assert f"step {step!r} of {stage!r} is still running" in check(log, rollback).reasons
    override = actions.Override(stage=stage, node="gpu01", reason="bridge call")
    assert f"step {step!r} of {stage!r} is still running" in check(log, override).reasons


def test_a_note_of_one_key_pressed_on_says_nothing() -> None:
    from cockpit.engine.rules import note_problem

    for nothing in ("nnnnnnnnnnnnn", "ok ok ok ok", "............", "n n n n n n"):
        assert note_problem(nothing) is not None, nothing
    for something in ("checked dmesg: clean", "image is cu129; r575 hosts stay out", "1111 2222 3333"):
        assert note_problem(something) is None, something
