"""The next safe action: what a careful operator would do next, from the folded state.

:func:`plan` is pure. It finishes the current window stage, arms the triggers, starts
the next wave, walks each node of the wave through its stages, and when a trigger
fires, rolls the node back and stops the rollout. The cockpit shows it as "Next:"; the
demo's autopilot (:mod:`cockpit.session.autopilot`) performs it.

What it proposes is a :class:`Plan`: an action the rules accept
(:func:`cockpit.engine.rules.check_action` is asked for every one), or, when there is
none, what it waits for (a step in flight) or what a person must do, and with which key.
It never proposes a check while a step of its stage runs, nor the step after one that
failed, was cancelled or was interrupted: a person looks, re-runs or rolls back.

What is under way but not in the change log yet (:class:`InFlight`: a check being
verified, a step's closing probe, a probe reading a node) is the session's to say: no
action of a node with work in flight is proposed until it ends, and a check that reads
a probe waits for the probe running for its node. A node whose latest probe did not
answer is offered no step or command that needs it, and only a node that changed (a
destructive step started on it) is offered a rollback.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cockpit.changelog.events import wave_number
from cockpit.changelog.facts import ProbeFacts
from cockpit.changelog.identity import DEMO_OPERATOR as DEMO_OPERATOR  # re-exported
from cockpit.changelog.identity import DEMO_REVIEWER as DEMO_REVIEWER  # re-exported
from cockpit.changelog.identity import same_person
from cockpit.engine import actions
from cockpit.engine.actions import Action, describe
from cockpit.engine.gates import gate_blockers, gate_open, wave_blockers, wave_through
from cockpit.engine.rules import check_action, reasons_against
from cockpit.engine.state import (
    FINISHED,
    HELD,
    PENDING,
    PRIVILEGE_REFUSED,
    ROLLBACK_STAGE,
    ROLLING_BACK,
    CockpitState,
    ItemState,
    StageState,
    StepState,
    recorded,
)
from cockpit.fleet.results import ErrorKind
from cockpit.runbook.model import ROLLBACK_OUTCOME, Runbook, StepKind, Verify

DEMO_NOTE = "demo autopilot: simulated fleet, ticked without a person"

#: Decision outcomes as recorded in the change log (roll-back: every runbook's generic end).
OUTCOME_KEEP_UPGRADE = "keep-upgraded-path"
OUTCOME_ROLLBACK = ROLLBACK_OUTCOME
#: How the gating engine marks a step that was running when the writer died.
INTERRUPTED = ErrorKind.INTERRUPTED
#: What Next says once every closing stage has passed.
#: the instruction after the last "; " is what a narrow Next line keeps whole (view.model.next_line)
WINDOW_THROUGH = "every stage is through; E ends the window, q pauses it"
#: Runs of one step the autopilot makes before it leaves a step cut short to a person.
AUTOPILOT_ATTEMPTS = 10

#: How a person does what the planner cannot (the keys of the live screen and the reviewer's).
KEY_DETAIL = "d shows the node"
KEY_RERUN = "Enter on its row runs it again"
KEY_REVERIFY = "Enter on its row verifies it again"
KEY_OVERRIDE = "o overrides the gate with a reason"
KEY_CLEAR = "c clears the trigger with a reason"
KEY_CANCEL = "k cancels it"
KEY_FINISH = "ctrl+p, finish-rollback, records the rollback as failed"
KEY_SIGNOFF = "s in `cockpit review`"
KEY_PALETTE = "ctrl+p lists what the gate allows now"
#: Every key phrase above, for a reader of the planner's words (a narrow Next line names fewer).
KEY_PHRASES = (
    KEY_DETAIL,
    KEY_RERUN,
    KEY_REVERIFY,
    KEY_OVERRIDE,
    KEY_CLEAR,
    KEY_CANCEL,
    KEY_FINISH,
    KEY_SIGNOFF,
    KEY_PALETTE,
)

_CUT_SHORT: dict[ErrorKind, str] = {
    ErrorKind.CANCELLED: "was cancelled",
    ErrorKind.INTERRUPTED: "was interrupted",
    ErrorKind.CONNECTION_LOST: "lost its connection",
    ErrorKind.TIMEOUT: "timed out",
}


def demo_reviewer(operator: str | None) -> str | None:
    """The simulated second person who signs when the demo's operator is at the controls."""
    return DEMO_REVIEWER if same_person(operator, DEMO_OPERATOR) else None


@dataclass(frozen=True, slots=True)
class Plan:
    """What Next is: an ``action`` the rules accept, or none and why, in words.

    ``waiting_for`` names what is in flight (Next comes back by itself when it ends);
    ``person_must`` says who must act and with which key (the planner cannot).
    """

    action: Action | None = None
    waiting_for: str | None = None
    person_must: str | None = None

    @property
    def text(self) -> str:
        if self.action is not None:
            return describe(self.action)
        if self.waiting_for is not None:
            return f"waiting for {self.waiting_for}"
        return self.person_must or "nothing left to do"


@dataclass(frozen=True, slots=True)
class InFlight:
    """What a session has under way that its change log does not show yet.

    ``actions``: the actions it is performing now (a check's command, a step and the
    probe that closes it); ``probing``: the nodes a probe is reading now.
    """

    actions: tuple[Action, ...] = ()
    probing: frozenset[str] = field(default_factory=frozenset)
    #: the first step or check under way per node, in ``actions`` order: a wave's plan asks
    #: for each of its nodes, and a wave of 200 has ~200 actions in flight
    _on: dict[str | None, Action] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        on: dict[str | None, Action] = {}
        for action in self.actions:
            if isinstance(action, actions.RunStep | actions.VerifyItem):
                on.setdefault(action.node, action)
        object.__setattr__(self, "_on", on)

    def on(self, node: str | None) -> Action | None:
        """The work under way on ``node`` (None: on a window stage), if any."""
        return self._on.get(node)


NOTHING_IN_FLIGHT = InFlight()


@dataclass(frozen=True, slots=True)
class _Ctx:
    state: CockpitState
    runbook: Runbook
    operator: str
    reviewer: str | None
    autopilot: bool
    flight: InFlight = NOTHING_IN_FLIGHT

    def refusal(self, action: Action, actor: str | None = None) -> list[str]:
        """What the rules say against ``action`` by ``actor`` (the operator by default)."""
        return check_action(self.state, self.runbook, action, actor or self.operator, operator=self.operator).reasons

    def offer(self, action: Action, actor: str | None = None) -> Plan:
        """``action`` when the rules accept it; else why not."""
        reasons = self.refusal(action, actor)
        if reasons:
            return Plan(person_must=f"{describe(action)} is refused: {reasons[0]}; {KEY_PALETTE}")
        return Plan(action)

    def could(self, action: Action) -> bool:
        """Whether the operator could take ``action`` once its words are written (for naming a key)."""
        return not reasons_against(self.state, self.runbook, action, self.operator, self.operator, need_text=False)


def _where(node: str | None) -> str:
    return f" on {node}" if node else ""


def _sid(stage: StageState) -> str:
    return ROLLBACK_STAGE if stage.scope == "rollback" else stage.id


def _changed(state: CockpitState, node: str) -> bool:
    """Whether ``node`` was changed in this window (a destructive step started on it): only
    then is there anything for a rollback to put back."""
    progress = state.nodes.get(node)
    return progress is not None and progress.destructive_started


def _recovery_keys(ctx: _Ctx, stage: StageState, node: str | None) -> list[str]:
    """What the operator may do about a stage that cannot go on: roll the node back, or override."""
    keys = []
    if (
        node is not None
        and stage.scope != "rollback"
        and _changed(ctx.state, node)
        and ctx.could(actions.StartRollback(node=node, reason=""))
    ):
        keys.append(f"b rolls {node} back")
    if stage.scope == "rollback":
        keys.append(KEY_FINISH)
    elif ctx.could(actions.Override(stage=stage.id, node=node, reason="")):
        keys.append(KEY_OVERRIDE)
    return keys


def _after_failed_step(ctx: _Ctx, stage: StageState, step: StepState, node: str | None) -> Plan:
    """A step failed or was cut short: never the step after it. A step cut short is run
    again when that is safe (not destructive and not cancelled by a person); otherwise a
    person decides. The demo's autopilot runs a read-only step or one cut short again, a
    few times (its simulated steps are idempotent)."""
    rerun = actions.RunStep(stage=_sid(stage), node=node, step=step.id)
    what = f"{_sid(stage)}/{step.id}{_where(node)}"
    # a read-only step, or one cut short: the simulated node may answer now (a step cut
    # short by the cockpit's own death says nothing about the node: no limit on those)
    tries_left = step.attempts < AUTOPILOT_ATTEMPTS or step.error_kind == INTERRUPTED
    # sudo wanting a password says the same the next time: the login needs its rights first
    refused = step.error_kind == PRIVILEGE_REFUSED
    if ctx.autopilot and (step.outcome_unknown or not step.destructive) and tries_left and not refused:
        return ctx.offer(rerun)
    if step.outcome_unknown:
        if not ctx.autopilot and not step.destructive and step.error_kind != ErrorKind.CANCELLED:
            return ctx.offer(rerun)
        cut = _CUT_SHORT.get(step.error_kind, "stopped") if step.error_kind is not None else "stopped"
        how = f"{what} {cut}: outcome unknown"
    else:
        how = f"{what} failed ({step.failure()})"
    if ctx.autopilot and stage.scope == "rollback" and node is not None:
        return ctx.offer(actions.FinishRollback(node=node))  # the rollback ends, failed: a person takes the node
    keys = [KEY_DETAIL] if node else []
    keys += [KEY_RERUN, *_recovery_keys(ctx, stage, node)]
    return Plan(person_must=f"{how}; the operator decides: {', '.join(keys)}")


def _after_failed_check(ctx: _Ctx, stage: StageState, item: ItemState, node: str | None) -> Plan:
    """A check that failed is not retried blindly (a trigger or a person decides). The
    autopilot verifies it again (it probes the node first): a read-only command or the
    latest probe may have been cut by the link; it stops after a few tries."""
    if ctx.autopilot:
        return ctx.offer(actions.VerifyItem(stage=_sid(stage), node=node, item=item.id))
    evidence = f": {item.evidence}" if item.evidence else ""
    keys = [KEY_REVERIFY, *([KEY_DETAIL] if node else []), *_recovery_keys(ctx, stage, node)]
    return Plan(
        person_must=f"check {item.id!r}{_where(node)} failed{evidence}; the operator decides: {', '.join(keys)}"
    )


def _stage_plan(ctx: _Ctx, stage: StageState, node: str | None) -> Plan | None:
    """The next thing to do inside one stage, or None when only its gate (or, for a
    rollback, its end) is left."""
    sid = _sid(stage)
    running = [s for s in stage.steps.values() if s.status == "running"]
    if running:
        return Plan(waiting_for=f"{sid}/{running[0].id}{_where(node)} to finish ({KEY_CANCEL})")
    busy = ctx.flight.on(node)
    if busy is not None:  # a check being verified, a step's closing probe: nothing else on the node meanwhile
        return Plan(waiting_for=f"{describe(busy)} to finish")
    for step in stage.steps.values():
        if step.status == "open":
            return ctx.offer(actions.RunStep(stage=sid, node=node, step=step.id))
        if step.status == "failed":
            return _after_failed_step(ctx, stage, step, node)
    for item in stage.items.values():
        if item.verify not in (Verify.CHECK, Verify.COMMAND):
            continue
        reads_probe = item.verify == Verify.CHECK and node is not None and node in ctx.flight.probing
        if reads_probe and item.status in ("open", "failed"):  # judged on the probe being read now
            return Plan(waiting_for=f"the probe of {node} that check {item.id!r} reads")
        if item.status == "open":
            return ctx.offer(actions.VerifyItem(stage=sid, node=node, item=item.id))
        if item.status == "failed" and stage.scope != "rollback":  # a rollback's end judges its checks
            return _after_failed_check(ctx, stage, item, node)
    for item in stage.items.values():
        if item.status == "open" and item.verify == Verify.MANUAL:
            note = DEMO_NOTE if node is None else f"{DEMO_NOTE} (sampled {node})"  # a per-wave item names it
            return ctx.offer(actions.TickItem(stage=sid, node=node, item=item.id, note=note))
        if item.status == "needs-signoff":
            return _signoff_plan(ctx, stage, item, node)
    return None


def _signoff_plan(ctx: _Ctx, stage: StageState, item: ItemState, node: str | None) -> Plan:
    sid = _sid(stage)
    if ctx.reviewer is not None:
        note = f"signed off by {ctx.reviewer} (demo)"
        return ctx.offer(actions.SignOff(stage=sid, node=node, item=item.id, note=note), ctx.reviewer)
    return Plan(
        # the key last, after "; ": a narrow Next line shortens what comes before it
        person_must=f"a second person signs off {item.text!r} ({sid}{_where(node)}), "
        f"not the operator ({ctx.operator}); {KEY_SIGNOFF}"
    )


def _gate_plan(ctx: _Ctx, stage: StageState, node: str | None) -> Plan:
    if gate_open(stage):
        return ctx.offer(actions.PassGate(stage=stage.id, node=node))
    blockers = gate_blockers(stage)
    return Plan(person_must=f"the gate of {stage.id!r}{_where(node)} is shut ({blockers[0]}); {KEY_OVERRIDE}")


def _trigger_plan(ctx: _Ctx) -> Plan | None:
    """A fired trigger: roll back the nodes it names (once their step in flight ends)."""
    state = ctx.state
    for trig in state.fired():
        for node, evidence in trig.fired_nodes.items():
            progress = state.nodes.get(node)
            if progress is None or progress.current in FINISHED or progress.current == ROLLING_BACK:
                continue
            stage = progress.stage
            running = [] if stage is None else [s.id for s in stage.steps.values() if s.status == "running"]
            if stage is not None and running:
                return Plan(
                    waiting_for=f"{stage.id}/{running[0]}{_where(node)} to end before rolling {node} back "
                    f"(trigger {trig.id} fired; {KEY_CANCEL})"
                )
            busy = ctx.flight.on(node)
            if busy is not None:
                return Plan(waiting_for=f"{describe(busy)} to end before rolling {node} back (trigger {trig.id} fired)")
            rollback = actions.StartRollback(node=node, reason=f"trigger {trig.id}: {evidence}")
            refused = ctx.refusal(rollback)
            if not refused and _changed(state, node):
                return Plan(rollback)
            if progress.current in (PENDING, HELD) or not recorded(progress.baseline):
                why = "was not changed (no baseline to restore)"
            elif not _changed(state, node):  # nothing destructive ran on it: nothing to put back
                why = "was not changed (nothing to roll back)"
            else:
                why = f"cannot be rolled back ({refused[0]})"
            # the keys first: on a narrow screen the line is cut at its end
            return Plan(person_must=f"c clears trigger {trig.id} with a reason, d shows {node}: {node} {why}")
    for progress in state.nodes.values():
        if progress.current == ROLLING_BACK and progress.rollback is not None and progress.rollback_ok is None:
            move = _stage_plan(ctx, progress.rollback, progress.node)
            # nothing left to do: the rollback ends with its result (the session judges it)
            return move or ctx.offer(actions.FinishRollback(node=progress.node))
    if state.fired() and state.decision is None:
        return ctx.offer(actions.RecordDecision(outcome=OUTCOME_ROLLBACK, halt_rollout=True))
    return None


def _unreachable(probe: ProbeFacts) -> bool:
    """Whether a node's latest probe could not reach it at all. A link that dropped
    mid-command (it connected) says nothing against the node: the next command may pass."""
    return probe.reachable is False and "connection lost" not in str(probe.error or "")


def _needs_node(stage: StageState, action: Action) -> bool:
    """Whether ``action`` needs its node to answer: a step (on the node, or about it from the
    control host: a drain of a node that does not answer waits out its timeout), a command
    check. A probe or record step does not: it is how a node is read again."""
    if isinstance(action, actions.RunStep):
        step = stage.steps.get(action.step)
        return step is None or step.kind not in (StepKind.PROBE, StepKind.RECORD)
    if isinstance(action, actions.VerifyItem):
        item = stage.items.get(action.item)
        return item is not None and item.verify == Verify.COMMAND
    return False


def _window_plan(ctx: _Ctx, current: str) -> Plan:
    state = ctx.state
    stage = state.window[current]
    if current == "path" and state.path is None:
        return ctx.offer(
            actions.ChoosePath(
                path="upgrade-driver",
                rationale="cu130 image on an r575 host: the driver is the blocker",
                owner=ctx.operator,
            )
        )
    move = _stage_plan(ctx, stage, None)
    if move is not None:
        return move
    if stage.arms_triggers and not state.armed:
        return ctx.offer(actions.ArmTriggers())
    if current == "decision" and state.decision is None:
        outcomes = ctx.runbook.decision_outcomes  # suggest one of this runbook's own, never another's
        keep = OUTCOME_KEEP_UPGRADE if OUTCOME_KEEP_UPGRADE in outcomes else outcomes[0]
        return ctx.offer(actions.RecordDecision(outcome=keep))
    return _gate_plan(ctx, stage, None)


def _wave_plan(ctx: _Ctx) -> Plan:
    state = ctx.state
    wave = state.current_wave
    if wave is None or (wave_through(state, wave) and wave + 1 < len(state.waves)):
        if state.halted:
            return Plan(person_must=f"a recorded decision halted the rollout; {KEY_PALETTE}")
        return ctx.offer(actions.StartWave(wave=0 if wave is None else wave + 1))
    waiting: Plan | None = None
    blocked: Plan | None = None
    for node in state.waves[wave]:
        progress = state.nodes[node]
        stage = progress.stage
        if progress.current in (PENDING, HELD) or progress.current in FINISHED or stage is None:
            continue
        move = _stage_plan(ctx, stage, node) or _gate_plan(ctx, stage, node)
        if move.action is not None and _needs_node(stage, move.action) and _unreachable(progress.probe):
            # the key last, after "; ": a narrow Next line shortens what comes before it
            error = progress.probe.error or "no answer"
            move = Plan(
                person_must=f"{node} did not answer its latest probe ({error}): not {describe(move.action)}; "
                f"{KEY_DETAIL}"
            )
        if move.action is not None:
            return move
        if move.waiting_for is not None:
            waiting = waiting or move
        else:
            blocked = blocked or move
    if waiting is not None:
        return waiting
    if blocked is not None:
        return blocked
    left = wave_blockers(state, wave)
    return Plan(
        person_must=f"wave {wave_number(wave)} cannot go on ({'; '.join(left) or 'nothing left to run'}); {KEY_PALETTE}"
    )


def plan(
    state: CockpitState,
    runbook: Runbook,
    operator: str | None,
    *,
    reviewer: str | None = None,
    autopilot: bool = False,
    flight: InFlight = NOTHING_IN_FLIGHT,
) -> Plan:
    """The next safe action, or what Next waits for, or what a person must do.

    ``reviewer`` is a second person at hand who signs when a sign-off is next (the
    demo's simulated one); without one, Next says who must sign and how. ``autopilot``
    (the demo's) runs steps cut short again, verifies a failed command item again, and
    ends a rollback that cannot go on as failed, where an operator would be asked.
    ``flight``: what the session has under way that the change log does not show yet
    (never proposed again; the node's other work waits for it).
    """
    if state.ended_at is not None:
        return Plan(person_must="the session has ended")
    ctx = _Ctx(state, runbook, operator or "", reviewer, autopilot, flight)
    triggered = _trigger_plan(ctx)
    if triggered is not None:
        return triggered
    current = state.window_current
    if current is not None:
        return _window_plan(ctx, current)
    if state.closing and all(state.window[s].closed for s in state.closing):
        return Plan(person_must=WINDOW_THROUGH)
    if not state.opening_done:
        pending = next(s for s in state.opening if not state.window[s].closed)
        return Plan(person_must=f"window stage {pending!r} is {state.window[pending].status}; {KEY_PALETTE}")
    last = len(state.waves) - 1
    if not state.closing and state.current_wave == last and wave_through(state, last):
        return Plan(person_must=WINDOW_THROUGH)  # a runbook with no closing stages ends with its last wave
    return _wave_plan(ctx)


def node_plan(
    state: CockpitState,
    runbook: Runbook,
    operator: str | None,
    node: str,
    *,
    reviewer: str | None = None,
) -> Plan:
    """Next for one node of the running wave alone, as :func:`plan` walks each node of it
    (a wave runner, :mod:`cockpit.session.waves`, asks it per node, several nodes at once).

    A node outside the running wave, pending, held or finished has nothing to do: a plan
    with neither action nor words. A fired trigger is the person's (the rollback and the
    decision are never a runner's to take): the node holds, naming the trigger.
    """
    progress = state.nodes.get(node)
    if state.ended_at is not None or progress is None:
        return Plan()
    stage = progress.stage
    if progress.current in (PENDING, HELD) or progress.current in FINISHED or stage is None:
        return Plan()
    for trig in state.fired():
        if not trig.fired_nodes or node in trig.fired_nodes:
            evidence = trig.fired_nodes.get(node) if trig.fired_nodes else None
            why = f": {evidence}" if evidence else ""
            return Plan(person_must=f"trigger {trig.id} fired{why}; the operator decides: {KEY_CLEAR}, b rolls back")
    ctx = _Ctx(state, runbook, operator or "", reviewer, False)
    return _stage_plan(ctx, stage, node) or _gate_plan(ctx, stage, node)
