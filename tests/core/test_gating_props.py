"""Property tests of the gating engine over random event sequences.

Two generators:

- a *session driver* that plays a window the way the session engine would: at each
  turn it picks one of the actions :func:`allowed_actions` offers the operator or the
  reviewer (or a probe, or a trigger evaluation), turns it into the events the session
  would write, with random outcomes (steps fail, checks fail, GPUs go missing);
- *arbitrary* well-formed events, with references to real and unknown stages, steps,
  nodes and triggers, in any order (a corrupt or hand-edited log).

The planner's Next is held to its promises over the same histories (with steps that
stay in flight, are cancelled or lose their link): an action the gate accepts, never
inside a stage whose step runs, never past a failed step, never a dead end.

The invariants: no gate open while an applicable item is open; no destructive action
allowed while a trigger is fired (bar a node's rollback); no wave starts before the
previous one is through smoke and expand (checked on the log itself); max_parallel
holds; folding is deterministic and incremental folding equals batch folding.
"""

from __future__ import annotations

import copy
import re
from datetime import timedelta
from typing import Any

import pytest
from gating_scenarios import OP, REV, T0, TRIGGER_IDS, probe, small_runbook
from hypothesis import HealthCheck, given, settings
from hypothesis import event as label_example
from hypothesis import strategies as st

from cockpit.changelog.events import Event, EventKind, parse_event
from cockpit.engine import actions
from cockpit.engine.actions import Action, ActionKind, is_destructive
from cockpit.engine.checks import run_check
from cockpit.engine.fold import (
    Folder,
    fold,
)
from cockpit.engine.gates import (
    gate_blockers,
    holds_destructive_slot,
)
from cockpit.engine.offers import allowed_actions
from cockpit.engine.planner import plan
from cockpit.engine.rules import check_action
from cockpit.engine.state import (
    ROLLBACK_STAGE,
    ROLLING_BACK,
    CockpitState,
    StageState,
)
from cockpit.engine.triggers import evaluate
from cockpit.runbook.model import Runbook

HOST_POOL = ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
OPEN_ITEM = frozenset({"open", "failed", "running", "needs-signoff"})
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def destructive_candidates(state: CockpitState, rb: Runbook) -> list[actions.RunStep | actions.StartWave]:
    out: list[actions.RunStep | actions.StartWave] = [actions.StartWave(wave=w) for w in range(len(state.waves) + 1)]
    for node in state.nodes:
        for stage in rb.node_stages:
            out.extend(actions.RunStep(stage=stage.id, node=node, step=s.id) for s in stage.steps if s.destructive)
        if rb.rollback is not None:
            out.extend(
                actions.RunStep(stage=ROLLBACK_STAGE, node=node, step=s.id) for s in rb.rollback.steps if s.destructive
            )
    return out


#: Words a person would write, for the fields an action leaves empty until they are written.
WORDS = {
    "reason": "checked by hand on the node",  # a required note has substance (rules.note_problem)
    "note": "seen on the node console",
    "text": "seen",
    "path": "upgrade",
    "rationale": "cu130 on r575",
    "owner": OP,
    "outcome": "keep-upgraded-path",
}


def with_words(action: Action) -> Action:
    """``action`` with its empty words written (the rules refuse empty ones)."""
    return action.model_copy(
        update={k: v for k, v in WORDS.items() if k in type(action).model_fields and not getattr(action, k)}
    )


def assert_invariants(state: CockpitState, rb: Runbook) -> None:
    # 1. no gate is open while an applicable item is open; a passed gate had every item hold
    for stage in state.all_stages():
        open_items = [i.id for i in stage.items.values() if i.status in OPEN_ITEM]
        if not gate_blockers(stage):
            assert not open_items, (stage.id, stage.node, open_items)
        if stage.status == "passed" and stage.scope != "rollback":
            assert not open_items, (stage.id, stage.node, open_items)
    # 2. a fired trigger blocks every destructive action but a rolling-back node's rollback steps
    if state.fired():
        for action in destructive_candidates(state, rb):
            assert is_destructive(rb, action)
            verdict = check_action(state, rb, action, OP, operator=OP)
            if verdict.allowed:
                assert isinstance(action, actions.RunStep)
                assert action.stage == ROLLBACK_STAGE and state.nodes[action.node or ""].current == ROLLING_BACK
    # 3. max_parallel: nodes of one wave inside their destructive stages (rollbacks aside)
    for members in state.waves:
        busy = [n for n in members if state.nodes[n].current != ROLLING_BACK and holds_destructive_slot(state, rb, n)]
        assert len(busy) <= state.max_parallel, busy


def assert_waves_in_order(events: list[Event], waves: list[list[str]], budget: int) -> None:
    """Recomputed from the log alone: wave k+1 starts only once every node of wave k
    passed smoke and expand, or was rolled back within the failure budget."""
    passed: set[tuple[str, str]] = set()
    rolled: set[str] = set()
    for event in events:
        if event.kind in (EventKind.GATE_PASSED, EventKind.OVERRIDE) and event.node:
            passed.add((event.node, event.stage or ""))
        elif event.kind is EventKind.ROLLBACK_FINISHED:  # rolled back, or failed to: either counts
            rolled.add(event.node or "")
        elif event.kind is EventKind.WAVE_STARTED and event.wave:
            prev = waves[event.wave - 1]
            through = {n for n in prev if {(n, "smoke"), (n, "expand")} <= passed}
            back = {n for n in prev if n in rolled}
            assert through | back == set(prev), (event.wave, prev, through, back)
            assert len(back - through) <= budget


FORWARD = frozenset(
    {
        ActionKind.RUN_STEP,
        ActionKind.TICK_ITEM,
        ActionKind.VERIFY_ITEM,
        ActionKind.SIGN_OFF,
        ActionKind.PASS_GATE,
        ActionKind.ARM_TRIGGERS,
        ActionKind.START_WAVE,
    }
)
CHATTER = frozenset({ActionKind.NOTE, ActionKind.RECORD_DECISION, ActionKind.CHOOSE_PATH})


class Driver:
    """Plays a change window through the actions the engine allows."""

    def __init__(self, data: st.DataObject, rb: Runbook, hosts: list[str]) -> None:
        self.data = data
        self.rb = rb
        self.folder = Folder(rb, {}, hosts)
        self.events: list[Event] = []
        self.boots = {h: 0 for h in hosts}

    @property
    def state(self) -> CockpitState:
        return self.folder.state

    def add(self, kind: EventKind, actor: str = OP, **kw: Any) -> None:
        seq = len(self.events) + 1
        event = parse_event(dict(seq=seq, ts=T0 + timedelta(seconds=30 * seq), actor=actor, kind=kind, **kw))
        self.events.append(event)
        self.folder.apply(event)

    def fails(self) -> bool:
        # index 0 (what hypothesis shrinks to) is success; about one in sixteen fails
        return self.data.draw(st.integers(0, 15)) == 15

    def probe_facts(self, node: str) -> dict[str, Any]:
        gpus = 8 - (1 if self.fails() else 0)
        xids = [79] if self.fails() else []
        return probe(f"{node}-boot{self.boots[node]}", gpus=gpus, xid_codes=xids)

    def do(self, action: Action, actor: str) -> None:
        kw: dict[str, Any] = {"stage": getattr(action, "stage", None), "node": getattr(action, "node", None)}
        if isinstance(action, actions.RunStep):
            step = (
                self.rb.rollback.steps
                if action.stage == ROLLBACK_STAGE and self.rb.rollback
                else self.rb.stage(action.stage or "").steps
            )
            kind = next(s.kind for s in step if s.id == action.step)
            self.add(EventKind.STEP_STARTED, step=action.step, **kw)
            if kind == "reboot" and action.node:
                self.boots[action.node] += 1
                self.add(EventKind.PROBE, actor="cockpit", node=action.node, facts=self.probe_facts(action.node))
            if kind == "record" and action.node:
                self.add(
                    EventKind.BASELINE_RECORDED,
                    node=action.node,
                    facts={
                        "driver_package": "nvidia-driver-575",
                        "driver_version": "575.57.08",
                        "boot_id": f"{action.node}-boot{self.boots[action.node]}",
                        "gpu_count": 8,
                    },
                )
            bad = self.fails()
            self.add(
                EventKind.STEP_FINISHED, step=action.step, **kw, facts={"exit_status": 1 if bad else 0, "ok": not bad}
            )
        elif isinstance(action, actions.TickItem):
            self.add(EventKind.ITEM_TICKED, item=action.item, note="seen", **kw)
        elif isinstance(action, actions.VerifyItem):
            stage = self.rb.stage(action.stage or "")
            item = next(i for i in stage.items if i.id == action.item)
            if item.check:
                res = run_check(item.check, self.state, action.node, self.state.params)
                ok, evidence = res.ok, res.evidence
            else:
                ok, evidence = not self.fails(), "command"
            self.add(EventKind.ITEM_VERIFIED, item=action.item, facts={"ok": ok, "evidence": evidence}, **kw)
        elif isinstance(action, actions.SignOff):
            self.add(EventKind.SIGNOFF, actor=actor, item=action.item, **kw)
        elif isinstance(action, actions.PassGate):
            self.add(EventKind.GATE_PASSED, **kw)
        elif isinstance(action, actions.Override):
            stage_state = (
                self.state.window.get(action.stage or "")
                or self.state.nodes[action.node or ""].stages[action.stage or ""]
            )
            self.add(EventKind.OVERRIDE, reason="accepted", facts={"blocked_by": gate_blockers(stage_state)}, **kw)
        elif isinstance(action, actions.RaiseTrigger):
            # the node the event names is part of what the rules judge (a trigger fires once a node)
            nodes = [n for n in [None, *self.state.nodes] if check_action(
                self.state, self.rb, with_words(action.model_copy(update={"node": n})), actor, operator=OP
            ).allowed]  # fmt: skip
            node = self.data.draw(st.sampled_from(nodes))
            self.add(EventKind.TRIGGER_FIRED, actor=actor, trigger=action.trigger, node=node, reason="seen")
        elif isinstance(action, actions.ClearTrigger):
            self.add(EventKind.TRIGGER_CLEARED, trigger=action.trigger, reason="understood")
        elif isinstance(action, actions.ArmTriggers):
            self.add(EventKind.TRIGGERS_ARMED, facts={"triggers": [t.id for t in self.rb.triggers]})
        elif isinstance(action, actions.StartWave):
            self.add(EventKind.WAVE_STARTED, wave=action.wave)
        elif isinstance(action, actions.StartRollback):
            self.add(EventKind.ROLLBACK_STARTED, node=action.node, reason="trigger")
        elif isinstance(action, actions.ChoosePath):
            self.add(EventKind.PATH_CHOSEN, facts={"path": "upgrade", "rationale": "r", "owner": OP})
        elif isinstance(action, actions.RecordDecision):
            self.add(EventKind.DECISION, facts={"outcome": "keep", "answers": {}})
        else:
            self.add(EventKind.NOTE, actor=actor, note="noted")

    def turn(self) -> None:
        who = self.data.draw(st.integers(0, 9))
        if who == 9:  # the cockpit itself: a probe of a started node, then the evaluators
            started = [n for n, p in self.state.nodes.items() if p.current != "pending"]
            if started:
                node = self.data.draw(st.sampled_from(started))
                self.add(EventKind.PROBE, actor="cockpit", node=node, facts=self.probe_facts(node))
            for f in evaluate(self.rb, self.state, {}, self.events[-1].ts if self.events else T0):
                self.add(
                    EventKind.TRIGGER_FIRED,
                    actor="cockpit",
                    trigger=f.trigger_id,
                    node=f.node,
                    facts={"evidence": f.evidence},
                )
            return
        actor = REV if who == 8 else OP
        acts = allowed_actions(self.state, self.rb, actor, OP)
        # mostly move the window forward; now and then disrupt it (override, rollback, raise, clear)
        forward = [a for a in acts if a.kind in FORWARD]
        disrupt = [a for a in acts if a.kind not in FORWARD and a.kind not in CHATTER]
        clears: list[Action] = [a for a in acts if isinstance(a, actions.ClearTrigger)]
        choice = self.data.draw(st.integers(0, 31))
        if actor == REV and not forward and choice < 28:
            forward = [actions.Note(text="")]  # a reviewer mostly watches
        fired = bool(self.state.fired())
        if fired and clears and choice < 12:
            useful = clears  # a fired trigger is mostly looked at and cleared...
        elif choice == 31 or (fired and choice < 16):
            useful = disrupt  # ...sometimes answered with a rollback
        else:
            useful = forward
        useful = useful or forward or disrupt or acts
        # a node whose rollback steps are done finishes its rollback
        for name, p in self.state.nodes.items():
            if p.current == ROLLING_BACK and p.rollback and all(s.status == "done" for s in p.rollback.steps.values()):
                self.add(EventKind.ROLLBACK_FINISHED, node=name, facts={"ok": True})
                return
        action = self.data.draw(st.sampled_from(useful))
        assert check_action(
            self.state,
            self.rb,
            with_words(action),
            actor,
            operator=OP,
        ).allowed
        self.do(action, actor)


@pytest.mark.slow
@SETTINGS
@given(
    data=st.data(),
    n_hosts=st.integers(3, 5),
    parallel=st.integers(1, 2),
    budget=st.integers(0, 1),
    rest=st.integers(2, 3),
    turns=st.integers(20, 160),
)
def test_driven_windows_keep_every_invariant(
    data: st.DataObject, n_hosts: int, parallel: int, budget: int, rest: int, turns: int
) -> None:
    # a canary, then waves of 2-3 nodes, so that max_parallel has something to bound
    rb = small_runbook(sizes=[1], rest=rest, max_parallel=parallel, failure_budget=budget)
    driver = Driver(data, rb, HOST_POOL[:n_hosts])
    driver.add(EventKind.SESSION_STARTED, facts={"operator": OP})
    for _ in range(turns):
        driver.turn()
        assert_invariants(driver.state, rb)
    assert_waves_in_order(driver.events, driver.state.waves, budget)
    # what the run reached, for --hypothesis-show-statistics
    st_ = driver.state
    label_example(f"waves started: {0 if st_.current_wave is None else st_.current_wave + 1}")
    label_example(f"nodes done: {sum(p.current == 'done' for p in st_.nodes.values())}")
    for kind in (EventKind.TRIGGER_FIRED, EventKind.ROLLBACK_STARTED, EventKind.OVERRIDE, EventKind.TRIGGER_CLEARED):
        if any(e.kind is kind for e in driver.events):
            label_example(f"has {kind}")
    # deterministic, and the incremental fold the driver kept equals the batch fold
    batch = fold(rb, {}, HOST_POOL[:n_hosts], driver.events)
    assert batch == fold(rb, {}, HOST_POOL[:n_hosts], driver.events)
    assert driver.state == batch
    assert not batch.anomalies, batch.anomalies


# ---------------------------------------------------------------- arbitrary events

NAMES = {
    "stage": [
        None,
        "plan",
        "arm",
        "drain",
        "record",
        "upgrade",
        "reboot",
        "smoke",
        "expand",
        "close",
        ROLLBACK_STAGE,
        "nostage",
    ],
    "node": [None, *HOST_POOL[:4], "ghost"],
    "step": [None, "cordon", "scontrol", "baseline", "install", "reboot", "container", "uncordon", "reinstall", "x"],
    "item": [
        None,
        "path-owner",
        "review",
        "triggers-reviewed",
        "armed",
        "cordoned",
        "baseline-recorded",
        "installed",
        "rebooted",
        "container-ok",
        "gpus",
        "uncordoned",
        "all-done",
        "decision",
        "y",
    ],
    "trigger": [None, *TRIGGER_IDS, "protected", "nope"],
}


@st.composite
def arbitrary_event_args(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(list(EventKind)))
    args: dict[str, Any] = {"kind": kind, "actor": draw(st.sampled_from([OP, REV, "cockpit"]))}
    for key, pool in NAMES.items():
        args[key] = draw(st.sampled_from(pool))
    args["wave"] = draw(st.one_of(st.none(), st.integers(-1, 4)))
    args["reason"] = draw(st.sampled_from([None, "", "why"]))
    if kind is EventKind.PROBE:
        args["facts"] = probe(
            draw(st.sampled_from(["b0", "b1", "b2"])),
            gpus=draw(st.integers(0, 8)),
            xid_codes=draw(st.lists(st.sampled_from([13, 48, 79]), max_size=2)),
            health=draw(st.sampled_from(["ok", "unreachable", "driver-library-mismatch"])),
        )
    elif kind is EventKind.BASELINE_RECORDED:
        args["facts"] = {
            "driver_package": "p",
            "driver_version": "575.57.08",
            "boot_id": "b0",
            "gpu_count": 8,
            "fabric_manager": draw(st.sampled_from([None, "active"])),
        }
    elif kind in (EventKind.STEP_FINISHED, EventKind.ITEM_VERIFIED, EventKind.ROLLBACK_FINISHED):
        ok = draw(st.booleans())
        # an exit status is a step's fact only: an item's verdict and a rollback's result have none
        args["facts"] = {"ok": ok, "exit_status": 0 if ok else 2} if kind is EventKind.STEP_FINISHED else {"ok": ok}
    elif kind is EventKind.TRIGGERS_ARMED:
        args["facts"] = {"triggers": [*TRIGGER_IDS, "protected"]}
    elif kind is EventKind.TRIGGER_FIRED:
        args["facts"] = {"evidence": "seen"}
    return args


@SETTINGS
@given(
    args=st.lists(arbitrary_event_args(), max_size=120),
    cuts=st.lists(st.integers(0, 120), max_size=4),
    n_hosts=st.integers(3, 4),
)
def test_arbitrary_logs_fold_deterministically_and_incrementally(
    args: list[dict[str, Any]], cuts: list[int], n_hosts: int
) -> None:
    rb = small_runbook()
    hosts = HOST_POOL[:n_hosts]
    events = [parse_event(dict(seq=i + 1, ts=T0 + timedelta(minutes=i + 1), **a)) for i, a in enumerate(args)]
    batch = fold(rb, {}, hosts, events)
    assert batch == fold(rb, {}, hosts, events)
    # fold in pieces, continuing each time from a copy: same state as the batch fold
    # (the state left behind at each cut must not change as the copy moves on)
    folder = Folder(rb, {}, hosts)
    left: list[tuple[CockpitState, CockpitState]] = []
    for i, event in enumerate(events):
        if i in cuts:
            left.append((folder.state, copy.deepcopy(folder.state)))
            folder = folder.copy()
        folder.apply(event)
    assert folder.state == batch
    assert all(kept == pristine for kept, pristine in left)
    # the rules hold whatever the log says, and the engine answers without raising
    assert_invariants_on_any_state(batch, rb)
    evaluate(rb, batch, {}, batch.last_at or T0)
    allowed_actions(batch, rb, OP, OP)
    allowed_actions(batch, rb, REV, OP)


def assert_invariants_on_any_state(state: CockpitState, rb: Runbook) -> None:
    for stage in state.all_stages():
        if not gate_blockers(stage):
            assert not [i for i in stage.items.values() if i.status in OPEN_ITEM]
    if state.fired():
        for action in destructive_candidates(state, rb):
            if check_action(state, rb, action, OP, operator=OP).allowed:
                assert isinstance(action, actions.RunStep)
                assert action.stage == ROLLBACK_STAGE and state.nodes[action.node or ""].current == ROLLING_BACK
    for allowed in allowed_actions(state, rb, REV, OP):
        assert allowed.kind in (ActionKind.SIGN_OFF, ActionKind.RAISE_TRIGGER, ActionKind.NOTE)
    assert not any(isinstance(a, actions.SignOff) for a in allowed_actions(state, rb, OP, OP))


# ---------------------------------------------------------------- the planner's Next

#: How a person is told what to do: every ``person_must`` names one of these keys.
KEY_NAMED = re.compile(
    r"\bEnter\b|ctrl\+p|`cockpit review`|\bq leaves|\bE ends the window"
    r"|(?:^|[ (,])[bcdko] (?:shows|clears|rolls|overrides|cancels)"
)


class InFlightDriver(Driver):
    """The :class:`Driver`, with steps that end as real ones do: done, failed with an exit
    status, cancelled, cut by a lost link, or still running for a few turns."""

    def __init__(self, data: st.DataObject, rb: Runbook, hosts: list[str]) -> None:
        super().__init__(data, rb, hosts)
        self.in_flight: list[dict[str, Any]] = []

    def do(self, action: Action, actor: str) -> None:
        if not isinstance(action, actions.RunStep) or self.data.draw(st.integers(0, 3)) != 3:
            super().do(action, actor)
            return
        kw: dict[str, Any] = {"stage": action.stage, "node": action.node, "step": action.step}
        self.add(EventKind.STEP_STARTED, **kw)
        self.in_flight.append(kw)

    def turn(self) -> None:
        if self.in_flight and self.data.draw(st.integers(0, 2)) == 0:
            kw = self.in_flight.pop(0)
            ending = self.data.draw(st.sampled_from(["ok", "exit", "cancelled", "connection-lost"]))
            facts: dict[str, Any] = {"ok": ending == "ok"}
            if ending in ("ok", "exit"):
                facts["exit_status"] = 0 if ending == "ok" else 1
            else:
                facts.update(error_kind=ending, error=f"{ending} (property test)")
            self.add(EventKind.STEP_FINISHED, **kw, facts=facts)
            return
        super().turn()


def _addressed(state: CockpitState, action: Action) -> StageState | None:
    stage_id, node = getattr(action, "stage", None), getattr(action, "node", None)
    if isinstance(action, actions.FinishRollback):
        return state.nodes[action.node].rollback
    if stage_id is None:
        return None
    if stage_id in state.window:
        return state.window[stage_id]
    progress = state.nodes[node or ""]
    return progress.rollback if stage_id == ROLLBACK_STAGE else progress.stages[stage_id]


def assert_next_is_safe(state: CockpitState, rb: Runbook, reviewer: str | None, autopilot: bool) -> None:
    planned = plan(state, rb, OP, reviewer=reviewer, autopilot=autopilot)
    action = planned.action
    if action is None:  # never a dead end: Next waits for something named, or names who acts and how
        assert planned.waiting_for or planned.person_must, planned
        if planned.person_must and state.ended_at is None:
            assert KEY_NAMED.search(planned.person_must), planned.person_must
        return
    actor = reviewer if isinstance(action, actions.SignOff) else OP
    assert actor is not None, f"a sign-off proposed with no second person at hand: {action}"
    verdict = check_action(state, rb, action, actor, operator=OP)
    assert verdict.allowed, (action, verdict.reasons)  # never an action the gate refuses
    stage = _addressed(state, action)
    if stage is None:
        return
    steps = list(stage.steps.values())
    running = [s.id for s in steps if s.status == "running"]
    failed = [s for s in steps if s.status == "failed"]
    assert not running, f"{action} while {running} of {stage.id} runs"  # never while a step of the stage runs
    if isinstance(action, actions.RunStep):
        before = steps[: [s.id for s in steps].index(action.step)]
        assert all(s.status in ("done", "skipped") for s in before), (action, [(s.id, s.status) for s in before])
        target = stage.steps[action.step]
        if target.status == "failed" and not autopilot:  # re-run by Next: only a read-only step cut short
            assert target.outcome_unknown and not target.destructive and target.error_kind != "cancelled"
    elif not (autopilot and isinstance(action, actions.FinishRollback)):
        assert not failed, f"{action} after {[s.id for s in failed]} failed"  # never past a failed step


@pytest.mark.slow  # 60 walks of a whole window: seconds of CPU
@SETTINGS
@given(
    data=st.data(),
    n_hosts=st.integers(2, 4),
    parallel=st.integers(1, 2),
    turns=st.integers(20, 140),
)
def test_next_is_always_one_the_gate_accepts_and_never_past_a_failure(
    data: st.DataObject, n_hosts: int, parallel: int, turns: int
) -> None:
    rb = small_runbook(sizes=[1], rest=2, max_parallel=parallel, failure_budget=0)
    driver = InFlightDriver(data, rb, HOST_POOL[:n_hosts])
    driver.add(EventKind.SESSION_STARTED, facts={"operator": OP})
    for _ in range(turns):
        driver.turn()
        for reviewer, autopilot in ((REV, False), (None, False), (REV, True)):
            assert_next_is_safe(driver.state, rb, reviewer, autopilot)
    label_example(f"in flight at the end: {len(driver.in_flight)}")


@SETTINGS
@given(args=st.lists(arbitrary_event_args(), max_size=80), n_hosts=st.integers(3, 4))
def test_next_is_safe_whatever_the_log_says(args: list[dict[str, Any]], n_hosts: int) -> None:
    rb = small_runbook()
    events = [parse_event(dict(seq=i + 1, ts=T0 + timedelta(minutes=i + 1), **a)) for i, a in enumerate(args)]
    state = fold(rb, {}, HOST_POOL[:n_hosts], events)
    for reviewer, autopilot in ((REV, False), (None, False), (REV, True)):
        assert_next_is_safe(state, rb, reviewer, autopilot)
