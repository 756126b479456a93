"""The rules of the window: whether an actor may take an action now, and what they may take.

:func:`check_action` judges an :data:`~cockpit.engine.actions.Action` by an actor
(triggers armed before anything destructive, one stage at a time, waves in order,
``max_parallel``, fired triggers stop the rollout, two-person sign-offs, a decision
one of the runbook's outcomes). What an actor may do now is built on it in
:mod:`cockpit.engine.offers`.
"""

from __future__ import annotations

import re

from cockpit.changelog.events import wave_number
from cockpit.changelog.identity import is_system, same_person
from cockpit.engine import actions
from cockpit.engine.actions import REVIEWER_ACTIONS, Action, Verdict
from cockpit.engine.gates import (
    gate_blockers,
    holds_destructive_slot,
    wave_blockers,
    wave_through,
)
from cockpit.engine.state import (
    HELD,
    PENDING,
    ROLLBACK_FAILED,
    ROLLBACK_STAGE,
    ROLLED_BACK,
    ROLLING_BACK,
    CockpitState,
    ItemState,
    StageState,
    TriggerState,
    recorded,
)
from cockpit.runbook.model import ItemScope, Runbook, TriggerMode, Verify

#: A note or reason a rule requires must say something: at least this many words, or
#: this many characters (one letter, "ok" or a stray key is not evidence).
NOTE_MIN_WORDS = 3
NOTE_MIN_CHARS = 12
#: ... and more than this few different letters or digits: `n` pressed on into a note dialog
#: as it opened typed "nnnnnnnnnnnnn", thirteen characters the length rule let through.
NOTE_MIN_DISTINCT = 3


def note_problem(text: str | None, *, echo: str = "") -> str | None:
    """What is wrong with a required note or reason that is not empty, or None when it
    will do: too short, or only ``echo`` (the item's own text) written back. The gate's
    rules for ticks, overrides and clears use it, and so do the dialogs that ask."""
    said = " ".join((text or "").split())
    if not said:
        return None  # emptiness has its own words in each rule
    if len(said.split()) < NOTE_MIN_WORDS and len(said) < NOTE_MIN_CHARS:
        return f"{said!r} says too little: write at least {NOTE_MIN_WORDS} words or {NOTE_MIN_CHARS} characters"
    if len({c.casefold() for c in said if c.isalnum()}) < NOTE_MIN_DISTINCT:
        return f"{said[:24]!r} says nothing (a key held or pressed on?): say what you checked and saw"
    if echo and said.casefold().rstrip(".") == " ".join(echo.split()).casefold().rstrip("."):
        return "it repeats the item's text: say what you checked and saw"
    return None


def _fired_text(trig: TriggerState) -> str:
    where = f" on {trig.node}" if trig.node else ""
    return f"trigger {trig.id!r} fired{where}: {trig.evidence}"


def _locate(state: CockpitState, sid: str, node: str | None) -> tuple[StageState | None, list[str]]:
    """The stage an action addresses (``sid``, of ``node`` for a node stage), and why it
    may not be acted on now."""
    if sid in state.window:
        stage = state.window[sid]
        if stage.status != "active":
            cur = state.window_current
            return stage, [f"stage {sid!r} is {stage.status}" + (f"; the current stage is {cur!r}" if cur else "")]
        return stage, []
    if node is None:
        return None, [f"stage {sid!r} is a node stage: name the node"]
    progress = state.nodes.get(node)
    if progress is None:
        return None, [f"unknown node {node!r}"]
    if sid == ROLLBACK_STAGE:
        if progress.current != ROLLING_BACK or progress.rollback is None:
            return progress.rollback, [f"{node} is not rolling back"]
        return progress.rollback, []
    node_stage = progress.stages.get(sid)
    if node_stage is None:
        return None, [f"unknown stage {sid!r}"]
    if progress.current != sid:
        if progress.current == PENDING:
            return node_stage, [f"{node} has not started: its wave {progress.wave + 1} is not running"]
        if progress.current == HELD:
            return node_stage, [f"{node} is held: a recorded decision halted the rollout"]
        return node_stage, [f"stage {sid!r} is not {node}'s current stage (it is at {progress.current!r})"]
    return node_stage, []


def _trigger_block(state: CockpitState, action: Action) -> list[str]:
    """A fired trigger stops every destructive action but the rollback of a node."""
    fired = state.fired()
    if not fired:
        return []
    if isinstance(action, actions.RunStep) and action.stage == ROLLBACK_STAGE:
        return []
    return [f"{_fired_text(t)}; clear it with a reason or roll the node back" for t in fired]


def _parallel_block(state: CockpitState, runbook: Runbook, node: str) -> list[str]:
    if holds_destructive_slot(state, runbook, node):
        return []
    wave = state.nodes[node].wave
    busy = [n for n in state.waves[wave] if n != node and holds_destructive_slot(state, runbook, n)]
    if len(busy) >= state.max_parallel:
        return [
            f"{len(busy)} node(s) of wave {wave_number(wave)} already in destructive stages "
            f"({', '.join(busy)}; max_parallel {state.max_parallel})"
        ]
    return []


def _arm_blockers(state: CockpitState) -> list[str]:
    arming = [s for s in state.window.values() if s.arms_triggers]
    if not arming:
        return []
    stage = arming[0]
    if stage.closed:
        return []
    if stage.status != "active":
        return [f"the arming stage {stage.id!r} is {stage.status}"]
    # Items that check the arming itself cannot hold before it; they do not block it.
    rest = StageState(
        id=stage.id,
        title=stage.title,
        scope=stage.scope,
        steps=stage.steps,
        items={k: i for k, i in stage.items.items() if i.check != "triggers_armed"},
    )
    return [f"stage {stage.id!r}: {b}" for b in gate_blockers(rest)]


def check_action(state: CockpitState, runbook: Runbook, action: Action, actor: str, *, operator: str) -> Verdict:
    """Whether ``actor`` may take ``action`` now, and if not, every reason why."""
    reasons = reasons_against(state, runbook, action, actor, operator, need_text=True)
    return Verdict(allowed=not reasons, reasons=reasons)


def reasons_against(
    state: CockpitState, runbook: Runbook, action: Action, actor: str, operator: str, *, need_text: bool
) -> list[str]:
    """Every reason against ``action``; without ``need_text``, missing words (an empty
    reason, note, path or outcome) are not one: the action would be allowed once given."""
    kind = action.kind
    if isinstance(action, actions.Note):
        return ["a note needs text"] if need_text and not action.text.strip() else []
    if state.ended_at is not None:
        return ["the session has ended"]
    reasons: list[str] = []
    if not same_person(actor, operator) and kind not in REVIEWER_ACTIONS:
        reasons.append(f"only the operator ({operator}) may {kind.value}; {actor} is a reviewer")
    if isinstance(action, actions.SignOff) and (same_person(actor, operator) or is_system(actor)):
        reasons.append(f"{actor} is the operator ({operator}): a sign-off needs a second person")
    reasons.extend(_kind_reasons(state, runbook, action, actor, need_text))
    return reasons


def _kind_reasons(state: CockpitState, runbook: Runbook, a: Action, actor: str, nt: bool) -> list[str]:
    """What the rules of ``a``'s kind say against it."""
    match a:
        case actions.RunStep():
            return _c_run_step(state, runbook, a)
        case actions.RunStage():
            return _c_run_stage(state, a)
        case actions.TickItem():
            return _c_tick(state, a, nt)
        case actions.VerifyItem():
            return _c_verify(state, a)
        case actions.SignOff():
            return _c_signoff(state, a, actor)
        case actions.PassGate():
            return _c_pass(state, a)
        case actions.Override():
            return _c_override(state, a, nt) + _two_person_gate(runbook, a)
        case actions.RaiseTrigger():
            return _c_raise(state, a, nt)
        case actions.ClearTrigger():
            return _c_clear(state, a, nt)
        case actions.ArmTriggers():
            return ["the triggers are already armed"] if state.armed else _arm_blockers(state)
        case actions.StartWave():
            return _c_wave(state, a)
        case actions.ChoosePath():
            return _c_path(state, a, nt)
        case actions.StartRollback():
            return _c_rollback(state, runbook, a, nt)
        case actions.FinishRollback():
            return _c_finish_rollback(state, a)
        case actions.RecordDecision():
            return _c_decision(runbook, a, nt)
        case actions.Note():
            return []


def _c_run_step(state: CockpitState, runbook: Runbook, a: actions.RunStep) -> list[str]:
    stage, reasons = _locate(state, a.stage, a.node)
    if stage is None:
        return reasons
    step = stage.steps.get(a.step)
    if step is None:
        return [*reasons, f"no step {a.step!r} in stage {stage.id!r}"]
    if step.status == "skipped":
        reasons.append(f"step {step.id!r} does not apply with these parameters")
    elif step.status == "running":
        reasons.append(f"step {step.id!r} is already running")
    elif step.status == "done" and step.destructive:
        reasons.append(f"step {step.id!r} already done (destructive steps do not run twice)")
    if state.paused:
        reasons.append("the session is paused")
    if step.destructive:
        if not state.armed:
            reasons.append("the rollback triggers are not armed yet")
        reasons.extend(_trigger_block(state, a))
        if stage.scope == "node" and a.node is not None:
            reasons.extend(_parallel_block(state, runbook, a.node))
    return reasons


def _c_run_stage(state: CockpitState, a: actions.RunStage) -> list[str]:
    """A stage run needs its stage current, something in it that runs by itself (an open
    step or check), no step of it failed (the operator decides first) and no trigger fired;
    each step and check it takes is then judged again as if taken by hand."""
    stage, reasons = _locate(state, a.stage, a.node)
    if stage is None:
        return reasons
    if stage.scope == "rollback":
        return [*reasons, "a rollback is taken step by step"]
    failed = [s.id for s in stage.steps.values() if s.status == "failed"]
    failed += [i.id for i in stage.items.values() if i.status == "failed" and i.verify in ("check", "command")]
    if failed:
        reasons.append(f"{failed[0]!r} failed in stage {a.stage!r}: the operator decides first")
    elif not _runs_by_itself(stage):
        reasons.append(f"nothing in stage {a.stage!r} runs by itself now")
    reasons.extend(_trigger_block(state, a))
    return reasons


def _runs_by_itself(stage: StageState) -> bool:
    """Whether a stage has a step or a check or command item still open."""
    return any(s.status in ("open", "running") for s in stage.steps.values()) or any(
        i.status == "open" and i.verify in ("check", "command") for i in stage.items.values()
    )


def _locate_item(
    state: CockpitState,
    a: actions.TickItem | actions.VerifyItem | actions.SignOff,
    item_id: str,
    verify: set[Verify],
    how: str,
) -> tuple[ItemState | None, list[str]]:
    """The item ``item_id`` of ``a``'s stage, with what already stands against acting on it:
    not found, not verified the way ``verify`` allows (``how`` says it in words), or not applicable."""
    stage, reasons = _locate(state, a.stage, a.node)
    if stage is None:
        return None, reasons
    item = stage.items.get(item_id)
    if item is None:
        return None, [*reasons, f"no item {item_id!r} in stage {stage.id!r}"]
    if item.verify not in verify:
        reasons.append(f"item {item.id!r} is verified by {item.verify}, not {how}")
    elif item.status == "skipped":
        reasons.append(f"item {item.id!r} does not apply with these parameters")
    return item, reasons


def _c_tick(state: CockpitState, a: actions.TickItem, nt: bool) -> list[str]:
    item, reasons = _locate_item(state, a, a.item, {Verify.MANUAL}, "ticked by hand")
    if item is None:
        return reasons
    if item.verify == Verify.MANUAL and item.status == "done":
        reasons.append(f"item {item.id!r} is already ticked")
    if nt and item.note_required:
        if not (a.note or "").strip():
            reasons.append(f"item {item.id!r} needs a note")
        elif problem := note_problem(a.note, echo=item.text):
            reasons.append(f"the note for item {item.id!r}: {problem}")
    if nt and item.scope == ItemScope.WAVE and a.node is not None:
        reasons.extend(_sampled_problem(state, a.node, item.id, a.note or ""))
    return reasons


def _sampled_problem(state: CockpitState, node: str, item: str, note: str) -> list[str]:
    """A per-wave item's tick holds for its whole wave: its note names the nodes sampled."""
    progress = state.nodes.get(node)
    if progress is None or not 0 <= progress.wave < len(state.waves):
        return []
    members = state.waves[progress.wave]
    if len(members) < 2 or any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", note) for n in members):
        return []
    return [
        f"item {item!r} is ticked once for wave {wave_number(progress.wave)}: name the nodes you sampled in the note"
    ]


def _c_verify(state: CockpitState, a: actions.VerifyItem) -> list[str]:
    item, reasons = _locate_item(state, a, a.item, {Verify.CHECK, Verify.COMMAND}, "by a check or command")
    if item is None:
        return reasons
    if state.paused:
        reasons.append("the session is paused")
    return reasons


def _c_signoff(state: CockpitState, a: actions.SignOff, actor: str) -> list[str]:
    if a.item is None:
        stage, reasons = _locate(state, a.stage, a.node)
        if stage is None:
            return reasons
        if not any(i.verify == Verify.SIGNOFF for i in stage.items.values()):
            reasons.append(f"stage {stage.id!r} has nothing to sign off")
        elif actor in stage.signoffs:
            reasons.append(f"{actor} already signed off stage {stage.id!r}")
        return reasons
    item, reasons = _locate_item(state, a, a.item, {Verify.SIGNOFF}, "signed off")
    if item is None:
        return reasons
    if item.verify == Verify.SIGNOFF and item.status != "skipped" and actor in item.signers:
        reasons.append(f"{actor} already signed off item {item.id!r}")
    return reasons


def _node_trigger_block(state: CockpitState, a: actions.PassGate) -> list[str]:
    if a.stage in state.window:
        return []
    return [
        f"{_fired_text(t)}; clear it with a reason or roll the node back"
        for t in state.fired()
        if t.node is None or a.node in t.fired_nodes
    ]


def _c_pass(state: CockpitState, a: actions.PassGate) -> list[str]:
    stage, reasons = _locate(state, a.stage, a.node)
    if stage is None:
        return reasons
    if stage.scope == "rollback":
        return [*reasons, "the rollback ends with its result (finish-rollback), not a gate"]
    reasons.extend(gate_blockers(stage))
    if stage.arms_triggers and not state.armed:
        reasons.append("the rollback triggers are not armed: arm them before passing this gate")
    reasons.extend(_node_trigger_block(state, a))
    return reasons


def _c_override(state: CockpitState, a: actions.Override, nt: bool) -> list[str]:
    stage, reasons = _locate(state, a.stage, a.node)
    if stage is None:
        return reasons
    if stage.scope == "rollback":
        reasons.append("the rollback ends with its result, not a gate")
    if nt and not a.reason.strip():
        reasons.append("an override needs a reason")
    elif nt and (problem := note_problem(a.reason)):
        reasons.append(f"the override's reason: {problem}")
    if not gate_blockers(stage):
        reasons.append(f"the gate of {stage.id!r} is open: pass it instead")
    reasons.extend(_running_block(stage))
    reasons.extend(f"{_fired_text(t)}; an override does not bypass a fired trigger" for t in state.fired())
    return reasons


def _two_person_gate(runbook: Runbook, a: actions.Override) -> list[str]:
    """The runbook's ``[trust] two_person_gates``: only a second person's sign-off opens them."""
    if runbook.trust is None or a.stage not in runbook.trust.two_person_gates:
        return []
    return [f"the runbook's [trust] makes {a.stage!r} a two-person gate: only a second person's sign-off opens it"]


def _running_block(stage: StageState | None) -> list[str]:
    """A stage whose step is still running cannot be left (its outcome is not known yet)."""
    running = [] if stage is None else [s.id for s in stage.steps.values() if s.status == "running"]
    return [f"step {running[0]!r} of {stage.id!r} is still running"] if running and stage else []


def _c_raise(state: CockpitState, a: actions.RaiseTrigger, nt: bool) -> list[str]:
    trig = state.triggers.get(a.trigger)
    if trig is None:
        return [f"unknown trigger {a.trigger!r}"]
    reasons = []
    if trig.mode != TriggerMode.MANUAL:
        reasons.append(f"trigger {trig.id!r} is automatic: its evaluator raises it")
    if a.node is not None and a.node not in state.nodes:
        reasons.append(f"unknown node {a.node!r}")
    if trig.status == "fired" and (a.node or "") in trig.fired_nodes:
        reasons.append(f"trigger {trig.id!r} is already fired" + (f" on {a.node}" if a.node else ""))
    if nt and not a.note.strip():
        reasons.append("say what was seen (a reason)")
    return reasons


def _c_clear(state: CockpitState, a: actions.ClearTrigger, nt: bool) -> list[str]:
    trig = state.triggers.get(a.trigger)
    if trig is None:
        return [f"unknown trigger {a.trigger!r}"]
    reasons = []
    if trig.status != "fired":
        reasons.append(f"trigger {trig.id!r} is {trig.status}, not fired")
    if nt and not a.reason.strip():
        reasons.append("clearing a trigger needs a reason")
    elif nt and (problem := note_problem(a.reason)):
        reasons.append(f"the reason for clearing: {problem}")
    return reasons


def _c_wave(state: CockpitState, a: actions.StartWave) -> list[str]:
    nxt = 0 if state.current_wave is None else state.current_wave + 1
    reasons: list[str] = []
    if state.halted:
        return ["a recorded decision halted the rollout"]
    if a.wave != nxt:
        if nxt >= len(state.waves):
            return ["every wave has started"]
        reasons.append(f"the next wave is {wave_number(nxt)}, not {wave_number(a.wave)}")
    if nxt >= len(state.waves):
        return [*reasons, "every wave has started"]
    pending = [s for s in state.opening if not state.window[s].closed]
    if pending:
        reasons.append(f"window stage {pending[0]!r} has not passed")
    if not state.armed:
        reasons.append("the rollback triggers are not armed yet")
    if nxt > 0 and not wave_through(state, nxt - 1):
        reasons.append(
            f"wave {wave_number(nxt - 1)} is not through smoke and expand: {'; '.join(wave_blockers(state, nxt - 1))}"
        )
    if state.paused:
        reasons.append("the session is paused")
    reasons.extend(_trigger_block(state, a))
    return reasons


def _c_path(state: CockpitState, a: actions.ChoosePath, nt: bool) -> list[str]:
    reasons = []
    if nt and not a.path.strip():
        reasons.append("name the path")
    if nt and not a.rationale.strip():
        reasons.append("give the rationale for the path")
    if state.current_wave is not None:
        reasons.append("the waves have started: the path is chosen")
    return reasons


def _c_rollback(state: CockpitState, runbook: Runbook, a: actions.StartRollback, nt: bool) -> list[str]:
    progress = state.nodes.get(a.node)
    if progress is None:
        return [f"unknown node {a.node!r}"]
    reasons = []
    if runbook.rollback is None:
        reasons.append("the runbook has no rollback procedure")
    if progress.current in (ROLLING_BACK, ROLLED_BACK, ROLLBACK_FAILED):
        reasons.append(f"{progress.node} is already {progress.current}")
    elif progress.current in (PENDING, HELD):
        reasons.append(f"{progress.node} has not started: nothing to roll back")
    if not recorded(progress.baseline):
        reasons.append(f"{progress.node} has no recorded baseline to restore")
    reasons.extend(_running_block(progress.stage))
    if nt and not a.reason.strip():
        reasons.append("a rollback needs a reason")
    return reasons


def _c_finish_rollback(state: CockpitState, a: actions.FinishRollback) -> list[str]:
    progress = state.nodes.get(a.node)
    if progress is None:
        return [f"unknown node {a.node!r}"]
    if progress.current != ROLLING_BACK or progress.rollback is None:
        return [f"{progress.node} is not rolling back"]
    return _running_block(progress.rollback)


def _c_decision(runbook: Runbook, a: actions.RecordDecision, nt: bool) -> list[str]:
    if not a.outcome.strip():
        return ["a decision needs its outcome"] if nt else []
    choices = runbook.decision_outcomes
    if a.outcome not in choices:
        return [f"outcome {a.outcome!r} is not one of the runbook's: {', '.join(choices)}"]
    return []
