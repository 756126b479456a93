"""The gating engine: folds the change log into the cockpit's state and judges actions.

Pure: values in, values out. No I/O and no clock reads; everything the gate decides
is recomputed from the events alone, so the live session, the reviewer's view and
replay agree by construction.

- :class:`Folder` applies :class:`~cockpit.events.Event` one at a time (cheap per event)
  to a :class:`CockpitState`; :func:`fold` does a whole sequence.
- :func:`gate_blockers` says in words which items keep a stage's exit gate shut.
- :func:`check_action` judges an :class:`Action` by an actor against the rules of the
  window (triggers armed before anything destructive, one stage at a time, waves in
  order, ``max_parallel``, fired triggers stop the rollout, two-person sign-offs);
  :func:`allowed_actions` lists what an actor may do now.

Conventions the session engine follows when it writes events:

- Node stages are addressed by ``(stage, node)``; the rollback procedure of a node by
  ``stage = "rollback"`` (:data:`ROLLBACK_STAGE`). Window stages by ``stage`` alone
  (their ``node`` may name the host a window step ran on; it is ignored for lookup).
- ``OVERRIDE`` passes the gate by itself (no ``GATE_PASSED`` follows).
- ``TRIGGERS_ARMED`` is written when the operator arms the triggers, which
  :func:`check_action` allows only once the ``arms_triggers`` stage's gate holds.
- A ``SIGNOFF`` with no item signs the whole gate: every sign-off item of that stage.
- Events that name an unknown stage, step, item, node or trigger are not applied;
  each is noted in :attr:`CockpitState.anomalies` so replay can show it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from cockpit.errors import BadInput, CockpitError
from cockpit.events import Event, EventKind
from cockpit.runbook import Item, Runbook, Step, StepKind, TriggerMode, Verify
from cockpit.waves import plan_waves, resolve_int

#: The actor of events the cockpit writes itself (probes, automatic trigger firings).
SYSTEM_ACTOR = "cockpit"
#: The stage id under which a node's rollback procedure is recorded.
ROLLBACK_STAGE = "rollback"

ItemStatus = Literal["open", "done", "failed", "running", "needs-signoff", "skipped"]
StepStatus = Literal["open", "running", "done", "failed", "skipped"]
StageStatus = Literal["locked", "active", "passed", "overridden"]
TriggerStatus = Literal["disarmed", "armed", "fired", "cleared"]

#: One glyph per stage, step and item status, shared by every view (live, review, replay, cast).
STATUS_GLYPH: dict[str, str] = {
    "done": "✓", "passed": "✓", "overridden": "✓!", "failed": "✗", "running": "…", "open": "○",
    "active": "●", "locked": "○", "needs-signoff": "⚑", "skipped": "–",
}

#: A node's progress besides a stage id: not started, finished, rolled back, or held
#: back by a decision that halted the rollout.
PENDING = "pending"
DONE = "done"
ROLLING_BACK = "rolling-back"
ROLLED_BACK = "rolled-back"
#: The rollback ran to its end but its checks do not hold: a person must take the node.
ROLLBACK_FAILED = "rollback-failed"
#: A node the rollout never reached because a decision halted it.
HELD = "held"
FINISHED = frozenset({DONE, ROLLED_BACK, ROLLBACK_FAILED})

PASSED_STATUSES: frozenset[str] = frozenset({"passed", "overridden"})


def param_text(value: object) -> str:
    """A parameter as ``when`` conditions compare it: booleans as ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def applicable(when: Mapping[str, str], params: Mapping[str, object]) -> bool:
    """Whether a step or item with this ``when`` applies under these parameters."""
    return all(k in params and param_text(params[k]) == v for k, v in when.items())


# --------------------------------------------------------------------------- state


def _non_negative(value: int, what: str) -> int:
    if value < 0:
        raise BadInput(f"{what}: must be 0 or more, got {value}")
    return value


def _slot_copier(cls: type) -> Any:
    """A shallow copy for a slotted dataclass, as straight-line code (5x faster than copy.copy).

    Replay checkpoints copy thousands of these objects; generated once per class.
    """
    names = [n for c in reversed(cls.__mro__) for n in getattr(c, "__slots__", ()) if not n.startswith("__")]
    body = "\n".join(f"    new.{n} = old.{n}" for n in names) or "    pass"
    code = f"def copy(old):\n    new = _new(_cls)\n{body}\n    return new\n"
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    exec(code, scope)  # noqa: S102 - the code is built from the class's own slot names
    return scope["copy"]




@dataclass(slots=True)
class StepState:
    id: str
    title: str
    kind: str
    destructive: bool
    status: StepStatus = "open"
    exit_status: int | None = None
    error: str | None = None
    attempts: int = 0
    started_seq: int | None = None
    started_at: datetime | None = None
    finished_seq: int | None = None
    finished_at: datetime | None = None
    duration_s: float | None = None

    def clone(self) -> StepState:
        return _copy_step(self)

    def failure(self) -> str:
        """Why the last run failed, briefly: ``exit 1``, the error, or ``failed``."""
        if self.exit_status is not None:
            return f"exit {self.exit_status}"
        return self.error or "failed"


@dataclass(slots=True)
class ItemState:
    id: str
    text: str
    verify: str
    status: ItemStatus = "open"
    step: str | None = None
    check: str | None = None
    note_required: bool = False
    note: str | None = None
    evidence: str | None = None
    by: str | None = None
    seq: int | None = None
    at: datetime | None = None
    signers: list[str] = field(default_factory=list)

    def clone(self) -> ItemState:
        new = _copy_ItemState(self)
        new.signers = list(self.signers)
        return new


@dataclass(slots=True)
class StageState:
    id: str
    title: str
    scope: str  # "window", "node" or "rollback"
    node: str | None = None
    status: StageStatus = "locked"
    arms_triggers: bool = False
    steps: dict[str, StepState] = field(default_factory=dict)
    items: dict[str, ItemState] = field(default_factory=dict)
    entered_seq: int | None = None
    entered_at: datetime | None = None
    passed_seq: int | None = None
    passed_at: datetime | None = None
    passed_by: str | None = None
    override_reason: str | None = None
    overridden_blockers: list[str] = field(default_factory=list)
    signoffs: list[str] = field(default_factory=list)  # reviewers who signed the whole gate

    def clone(self) -> StageState:
        new = _copy_StageState(self)
        new.steps = {k: v.clone() for k, v in self.steps.items()}
        new.items = {k: v.clone() for k, v in self.items.items()}
        new.overridden_blockers = list(self.overridden_blockers)
        new.signoffs = list(self.signoffs)
        return new

    @property
    def closed(self) -> bool:
        """Passed or overridden: the stage is behind us."""
        return self.status in PASSED_STATUSES


@dataclass(slots=True)
class NodeProgress:
    node: str
    wave: int
    current: str = PENDING  # a node stage id, or pending / done / rolling-back / rolled-back
    stages: dict[str, StageState] = field(default_factory=dict)
    rollback: StageState | None = None
    baseline: dict[str, Any] = field(default_factory=dict)
    baseline_seq: int | None = None
    probe: dict[str, Any] = field(default_factory=dict)
    probe_seq: int | None = None
    probe_at: datetime | None = None
    entered_at: datetime | None = None  # when the node entered its current stage
    destructive_started: bool = False
    # The latest reboot (any step of kind "reboot"): when it began, the boot id before
    # it, and the seq of the first sign of life with a new boot id (None: not back yet).
    reboot_started_seq: int | None = None
    reboot_started_at: datetime | None = None
    boot_id_before_reboot: str | None = None
    back_seq: int | None = None
    rollback_reason: str | None = None
    rollback_from: str | None = None
    rollback_ok: bool | None = None

    def clone(self) -> NodeProgress:
        new = _copy_NodeProgress(self)
        new.stages = {k: v.clone() for k, v in self.stages.items()}
        new.rollback = None if self.rollback is None else self.rollback.clone()
        return new

    @property
    def stage(self) -> StageState | None:
        """The stage the node is in now (its rollback while rolling back)."""
        if self.current == ROLLING_BACK:
            return self.rollback
        return self.stages.get(self.current)


@dataclass(slots=True)
class TriggerState:
    id: str
    title: str
    mode: str
    evaluator: str | None = None
    status: TriggerStatus = "disarmed"
    node: str | None = None  # the node of the latest firing (None: window-wide)
    evidence: str | None = None
    seq: int | None = None  # of the latest change
    at: datetime | None = None
    fired_by: str | None = None
    #: firings since the last clear: node ("" for window-wide) -> evidence
    fired_nodes: dict[str, str] = field(default_factory=dict)
    fire_count: int = 0
    cleared_by: str | None = None
    clear_reason: str | None = None
    cleared_seq: int | None = None
    cleared_at: datetime | None = None

    def clone(self) -> TriggerState:
        new = _copy_TriggerState(self)
        new.fired_nodes = dict(self.fired_nodes)
        return new


@dataclass(slots=True, frozen=True)
class OverrideRecord:
    seq: int
    at: datetime
    actor: str
    stage: str
    node: str | None
    reason: str
    blocked_by: tuple[str, ...]


@dataclass(slots=True, frozen=True)
class SignoffRecord:
    seq: int
    at: datetime
    actor: str
    stage: str | None
    item: str | None
    node: str | None
    note: str | None
    counted: bool  # False when the operator signed their own gate


@dataclass(slots=True, frozen=True)
class NoteRecord:
    seq: int
    at: datetime
    actor: str
    node: str | None
    text: str


@dataclass(slots=True)
class CockpitState:
    runbook_id: str
    operator: str | None
    hosts: list[str]
    params: dict[str, Any]
    window: dict[str, StageState]  # opening stages, then closing stages, in order
    opening: list[str]
    closing: list[str]
    node_stage_order: list[str]
    nodes: dict[str, NodeProgress]
    waves: list[list[str]]
    triggers: dict[str, TriggerState]
    #: stage ids by role, for evaluators and checks: upgrade, reboot, smoke, expand
    roles: dict[str, str | None]
    max_parallel: int = 1
    failure_budget: int = 0
    current_wave: int | None = None
    wave_started_seq: dict[int, int] = field(default_factory=dict)
    armed: bool = False
    armed_seq: int | None = None
    path: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    overrides: list[OverrideRecord] = field(default_factory=list)
    signoffs: list[SignoffRecord] = field(default_factory=list)
    notes: list[NoteRecord] = field(default_factory=list)
    last_seq: int = 0
    last_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    paused: bool = False
    reviewers: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    closing_open: bool = False
    halted: bool = False  # a decision stopped the rollout (see EventKind.DECISION halt_rollout)

    @property
    def window_current(self) -> str | None:
        """The active window stage, if any (None while the waves run)."""
        for sid in self.opening:
            st = self.window[sid]
            if st.status == "active":
                return sid
            if not st.closed:
                return None
        for sid in self.closing:
            if self.window[sid].status == "active":
                return sid
        return None

    @property
    def opening_done(self) -> bool:
        return all(self.window[s].closed for s in self.opening)

    def fired(self) -> list[TriggerState]:
        return [t for t in self.triggers.values() if t.status == "fired"]

    def wave_of(self, node: str) -> int | None:
        progress = self.nodes.get(node)
        return None if progress is None else progress.wave

    def copy(self) -> CockpitState:
        """An independent copy, cheap enough for replay checkpoints.

        Fact dicts (probe, baseline, params, path, decision) and the records are never
        mutated in place by the folder (always replaced), so they are shared.
        """
        new = _copy_CockpitState(self)
        new.window = {k: v.clone() for k, v in self.window.items()}
        new.nodes = {k: v.clone() for k, v in self.nodes.items()}
        new.triggers = {k: v.clone() for k, v in self.triggers.items()}
        new.wave_started_seq = dict(self.wave_started_seq)
        for name in ("hosts", "opening", "closing", "node_stage_order", "overrides", "signoffs", "notes",
                     "reviewers", "anomalies"):
            setattr(new, name, list(getattr(self, name)))
        return new


_copy_step = _slot_copier(StepState)
_copy_ItemState = _slot_copier(ItemState)
_copy_StageState = _slot_copier(StageState)
_copy_NodeProgress = _slot_copier(NodeProgress)
_copy_TriggerState = _slot_copier(TriggerState)
_copy_CockpitState = _slot_copier(CockpitState)


def _stage_state(steps: Sequence[Step], items: Sequence[Item], scope: str,
                 node: str | None, params: Mapping[str, object], *, sid: str, title: str,
                 arms: bool = False) -> StageState:
    st = StageState(id=sid, title=title, scope=scope, node=node, arms_triggers=arms)
    skipped_steps: set[str] = set()
    for step in steps:
        status: StepStatus = "open"
        if not applicable(step.when, params):
            status = "skipped"
            skipped_steps.add(step.id)
        st.steps[step.id] = StepState(id=step.id, title=step.title, kind=str(step.kind),
                                      destructive=step.destructive, status=status)
    for item in items:
        istatus: ItemStatus = "needs-signoff" if item.verify is Verify.SIGNOFF else "open"
        if not applicable(item.when, params) or (item.verify is Verify.STEP and item.step in skipped_steps):
            istatus = "skipped"
        st.items[item.id] = ItemState(id=item.id, text=item.text, verify=str(item.verify), status=istatus,
                                      step=item.step, check=item.check, note_required=item.note_required)
    return st


def stage_roles(runbook: Runbook) -> dict[str, str | None]:
    """Which node stage plays which part: by the conventional ids, else by content."""
    ids = [s.id for s in runbook.node_stages]

    def first(pred: Any) -> str | None:
        return next((s.id for s in runbook.node_stages if pred(s)), None)

    reboot = "reboot" if "reboot" in ids else first(lambda s: any(p.kind is StepKind.REBOOT for p in s.steps))
    upgrade = "upgrade" if "upgrade" in ids else first(lambda s: any(p.destructive for p in s.steps))
    smoke = "smoke" if "smoke" in ids else None
    if smoke is None and reboot is not None and ids.index(reboot) + 1 < len(ids):
        smoke = ids[ids.index(reboot) + 1]
    expand = "expand" if "expand" in ids else (ids[-1] if ids else None)
    return {"upgrade": upgrade, "reboot": reboot, "smoke": smoke, "expand": expand}


# --------------------------------------------------------------------------- folding


class Folder:
    """Folds events, one at a time, into a :class:`CockpitState`."""

    def __init__(self, runbook: Runbook, params: Mapping[str, object], hosts: Sequence[str],
                 *, operator: str | None = None, _state: CockpitState | None = None) -> None:
        self.runbook = runbook
        self._steps: dict[tuple[str, str], Step] = {}
        self._step_items: dict[str, dict[str, list[str]]] = {}
        for stage in runbook.stages:
            self._index(stage.id, stage.steps, stage.items)
        if runbook.rollback is not None:
            self._index(ROLLBACK_STAGE, runbook.rollback.steps, runbook.rollback.items)
        if _state is not None:
            self._state = _state
            return
        merged: dict[str, Any] = {**runbook.defaults(), **params}
        waves = plan_waves(hosts, runbook.waves, merged) if hosts else []
        opening = [s.id for s in runbook.opening_stages]
        closing = [s.id for s in runbook.closing_stages]
        window = {}
        for sid in opening + closing:
            s = runbook.stage(sid)
            window[sid] = _stage_state(s.steps, s.items, "window", None, merged, sid=s.id, title=s.title,
                                       arms=s.arms_triggers)
        nodes: dict[str, NodeProgress] = {}
        for w, members in enumerate(waves):
            for host in members:
                progress = NodeProgress(node=host, wave=w)
                for s in runbook.node_stages:
                    progress.stages[s.id] = _stage_state(s.steps, s.items, "node", host, merged, sid=s.id,
                                                         title=s.title, arms=s.arms_triggers)
                nodes[host] = progress
        triggers = {
            t.id: TriggerState(id=t.id, title=t.title, mode=str(t.mode), evaluator=t.evaluator)
            for t in runbook.triggers
        }
        self._state = CockpitState(
            runbook_id=runbook.id,
            operator=operator,
            hosts=list(hosts),
            params=merged,
            window=window,
            opening=opening,
            closing=closing,
            node_stage_order=[s.id for s in runbook.node_stages],
            nodes=nodes,
            waves=waves,
            triggers=triggers,
            roles=stage_roles(runbook),
            max_parallel=max(1, resolve_int(runbook.waves.max_parallel, merged, "waves.max_parallel")),
            failure_budget=_non_negative(resolve_int(runbook.waves.failure_budget, merged, "waves.failure_budget"),
                                         "waves.failure_budget"),
        )
        if opening:
            window[opening[0]].status = "active"
        self._finished = 0
        self._maybe_open_closing()

    def _index(self, sid: str, steps: Sequence[Step], items: Sequence[Item]) -> None:
        by_step: dict[str, list[str]] = {}
        for step in steps:
            self._steps[(sid, step.id)] = step
        for item in items:
            if item.verify is Verify.STEP and item.step:
                by_step.setdefault(item.step, []).append(item.id)
        self._step_items[sid] = by_step

    @property
    def state(self) -> CockpitState:
        return self._state

    def copy(self) -> Folder:
        """An independent folder at the same position (for replay checkpoints)."""
        clone = Folder(self.runbook, {}, [], _state=self._state.copy())
        clone._finished = self._finished
        return clone

    snapshot = copy

    def apply_all(self, events: Iterable[Event]) -> CockpitState:
        for event in events:
            self.apply(event)
        return self._state

    # -- dispatch

    def apply(self, event: Event) -> None:
        st = self._state
        st.last_seq = event.seq
        st.last_at = event.ts
        handler = _HANDLERS.get(event.kind)
        if handler is not None:
            handler(self, event)

    def _anomaly(self, event: Event, what: str) -> None:
        self._state.anomalies.append(f"seq {event.seq} ({event.kind}): {what}")

    def _stage_of(self, event: Event) -> StageState | None:
        st = self._state
        sid = event.stage
        if sid is None:
            self._anomaly(event, "no stage named")
            return None
        if sid in st.window:
            return st.window[sid]
        if event.node is None:
            self._anomaly(event, f"stage {sid!r} is not a window stage and no node is named")
            return None
        progress = st.nodes.get(event.node)
        if progress is None:
            self._anomaly(event, f"unknown node {event.node!r}")
            return None
        if sid == ROLLBACK_STAGE:
            if progress.rollback is None:
                self._anomaly(event, f"{event.node} is not rolling back")
            return progress.rollback
        stage = progress.stages.get(sid)
        if stage is None:
            self._anomaly(event, f"unknown stage {sid!r}")
        return stage

    def _reviewer(self, actor: str) -> None:
        st = self._state
        if actor != st.operator and actor != SYSTEM_ACTOR and actor not in st.reviewers:
            st.reviewers.append(actor)

    def _set_current(self, progress: NodeProgress, value: str, at: datetime) -> None:
        was = progress.current in FINISHED
        progress.current = value
        progress.entered_at = at
        now = value in FINISHED
        if now and not was:
            self._finished += 1
            self._maybe_open_closing()
        elif was and not now:
            self._finished -= 1

    def _maybe_open_closing(self) -> None:
        st = self._state
        if st.closing_open or not st.closing or not st.opening_done:
            return
        if self._finished < len(st.nodes) and not st.halted:
            return
        st.closing_open = True
        first = st.window[st.closing[0]]
        if first.status == "locked":
            first.status = "active"
            first.entered_seq = st.last_seq
            first.entered_at = st.last_at

    def _sync_step_items(self, stage: StageState, step_id: str, status: StepStatus, event: Event) -> None:
        item_status: ItemStatus = {"running": "running", "done": "done", "failed": "failed"}.get(status, "open")  # type: ignore[assignment]
        for iid in self._step_items.get(stage.id, {}).get(step_id, []):
            item = stage.items[iid]
            if item.status == "skipped":
                continue
            item.status = item_status
            item.seq = event.seq
            item.at = event.ts
            item.by = event.actor

    # -- handlers

    def _session_started(self, event: Event) -> None:
        st = self._state
        st.started_at = st.started_at or event.ts
        if st.operator is None:
            st.operator = str(event.facts.get("operator") or event.actor)

    def _session_paused(self, event: Event) -> None:
        self._state.paused = True

    def _session_resumed(self, event: Event) -> None:
        # A step still "running" when the session stopped has an unknown outcome: it
        # counts as failed until it is run again, so nothing passes on a guess.
        st = self._state
        st.paused = False
        stages = list(st.window.values())
        for progress in st.nodes.values():
            stages.extend(progress.stages.values())
            if progress.rollback is not None:
                stages.append(progress.rollback)
        for stage in stages:
            for step in stage.steps.values():
                if step.status == "running":
                    step.status = "failed"
                    step.error = "interrupted: outcome unknown"
                    step.exit_status = None
                    step.finished_seq = event.seq
                    step.finished_at = event.ts
                    self._sync_step_items(stage, step.id, "failed", event)

    def _session_ended(self, event: Event) -> None:
        self._state.ended_at = event.ts

    def _probe(self, event: Event) -> None:
        progress = self._node(event)
        if progress is None:
            return
        progress.probe = dict(event.facts)
        progress.probe_seq = event.seq
        progress.probe_at = event.ts
        boot = event.facts.get("boot_id")
        if (progress.reboot_started_seq is not None and progress.back_seq is None and boot
                and boot != progress.boot_id_before_reboot):
            progress.back_seq = event.seq

    def _baseline(self, event: Event) -> None:
        progress = self._node(event)
        if progress is None:
            return
        progress.baseline = dict(event.facts)
        progress.baseline_seq = event.seq

    def _node(self, event: Event) -> NodeProgress | None:
        progress = self._state.nodes.get(event.node or "")
        if progress is None:
            self._anomaly(event, f"unknown node {event.node!r}")
        return progress

    def _step_started(self, event: Event) -> None:
        stage = self._stage_of(event)
        if stage is None:
            return
        step = stage.steps.get(event.step or "")
        if step is None:
            self._anomaly(event, f"unknown step {event.step!r} in stage {stage.id!r}")
            return
        step.status = "running"
        step.attempts += 1
        step.started_seq = event.seq
        step.started_at = event.ts
        step.exit_status = None
        step.error = None
        self._sync_step_items(stage, step.id, "running", event)
        if stage.node is not None:
            progress = self._state.nodes[stage.node]
            if step.destructive:
                progress.destructive_started = True
            if step.kind == StepKind.REBOOT:
                progress.reboot_started_seq = event.seq
                progress.reboot_started_at = event.ts
                progress.boot_id_before_reboot = progress.probe.get("boot_id") or progress.baseline.get("boot_id")
                progress.back_seq = None

    def _step_finished(self, event: Event) -> None:
        stage = self._stage_of(event)
        if stage is None:
            return
        step = stage.steps.get(event.step or "")
        if step is None:
            self._anomaly(event, f"unknown step {event.step!r} in stage {stage.id!r}")
            return
        facts = event.facts
        exit_status = facts.get("exit_status")
        ok = facts.get("ok")
        if ok is None:
            ok = exit_status == 0
        step.status = "done" if ok else "failed"
        step.exit_status = exit_status if isinstance(exit_status, int) else None
        step.error = None if ok else (str(facts["error"]) if facts.get("error") else None)
        step.finished_seq = event.seq
        step.finished_at = event.ts
        duration = facts.get("duration_s")
        step.duration_s = float(duration) if isinstance(duration, int | float) else None
        self._sync_step_items(stage, step.id, step.status, event)
        if ok and step.kind == StepKind.REBOOT and stage.node is not None:
            progress = self._state.nodes[stage.node]
            if progress.back_seq is None:
                progress.back_seq = event.seq

    def _item(self, event: Event) -> tuple[StageState, ItemState] | None:
        stage = self._stage_of(event)
        if stage is None:
            return None
        item = stage.items.get(event.item or "")
        if item is None:
            self._anomaly(event, f"unknown item {event.item!r} in stage {stage.id!r}")
            return None
        return stage, item

    def _item_ticked(self, event: Event) -> None:
        found = self._item(event)
        if found is None:
            return
        _, item = found
        if item.verify != Verify.MANUAL:
            self._anomaly(event, f"item {item.id!r} is verified by {item.verify}, not ticked")
            return
        item.status = "done"
        item.note = event.note
        item.by = event.actor
        item.seq = event.seq
        item.at = event.ts

    def _item_verified(self, event: Event) -> None:
        found = self._item(event)
        if found is None:
            return
        _, item = found
        item.status = "done" if event.facts.get("ok") else "failed"
        ev = event.facts.get("evidence")
        item.evidence = None if ev is None else str(ev)
        item.by = event.actor
        item.seq = event.seq
        item.at = event.ts

    def _signoff(self, event: Event) -> None:
        st = self._state
        counted = event.actor != st.operator
        st.signoffs.append(SignoffRecord(seq=event.seq, at=event.ts, actor=event.actor, stage=event.stage,
                                         item=event.item, node=event.node, note=event.note, counted=counted))
        self._reviewer(event.actor)
        if not counted:
            self._anomaly(event, f"sign-off by the operator {event.actor!r} does not count")
        stage = self._stage_of(event)
        if stage is None:
            return
        if event.item is None:
            stage.signoffs.append(event.actor)
            targets = [i for i in stage.items.values() if i.verify == Verify.SIGNOFF]
        else:
            item = stage.items.get(event.item)
            if item is None:
                self._anomaly(event, f"unknown item {event.item!r} in stage {stage.id!r}")
                return
            targets = [item]
        for item in targets:
            item.signers.append(event.actor)
            if counted and item.verify == Verify.SIGNOFF and item.status != "skipped":
                item.status = "done"
                item.by = event.actor
                item.note = event.note
                item.seq = event.seq
                item.at = event.ts

    def _pass(self, event: Event, status: StageStatus) -> None:
        stage = self._stage_of(event)
        if stage is None:
            return
        if stage.closed:
            return  # a repeated pass changes nothing
        if stage.status != "active":
            self._anomaly(event, f"stage {stage.id!r} passed while {stage.status}")
        stage.status = status
        stage.passed_seq = event.seq
        stage.passed_at = event.ts
        stage.passed_by = event.actor
        st = self._state
        if stage.scope == "rollback":
            return
        if stage.scope == "window":
            order = st.opening if stage.id in st.opening else st.closing
            pos = order.index(stage.id)
            if pos + 1 < len(order):
                nxt = st.window[order[pos + 1]]
                if nxt.status == "locked":
                    nxt.status = "active"
                    nxt.entered_seq = event.seq
                    nxt.entered_at = event.ts
            self._maybe_open_closing()
            return
        progress = st.nodes[stage.node or ""]
        if progress.current != stage.id:
            return
        pos = st.node_stage_order.index(stage.id)
        if pos + 1 < len(st.node_stage_order):
            nxt = progress.stages[st.node_stage_order[pos + 1]]
            nxt.status = "active"
            nxt.entered_seq = event.seq
            nxt.entered_at = event.ts
            self._set_current(progress, nxt.id, event.ts)
        else:
            self._set_current(progress, DONE, event.ts)

    def _gate_passed(self, event: Event) -> None:
        self._pass(event, "passed")

    def _override(self, event: Event) -> None:
        st = self._state
        blocked = event.facts.get("blocked_by") or []
        if isinstance(blocked, str):
            blocked = [blocked]
        st.overrides.append(OverrideRecord(seq=event.seq, at=event.ts, actor=event.actor, stage=event.stage or "",
                                           node=event.node, reason=event.reason or "",
                                           blocked_by=tuple(str(b) for b in blocked)))
        stage = self._stage_of(event)
        if stage is not None and not stage.closed:
            stage.override_reason = event.reason
            stage.overridden_blockers = [str(b) for b in blocked]
        self._pass(event, "overridden")

    def _triggers_armed(self, event: Event) -> None:
        st = self._state
        st.armed = True
        st.armed_seq = event.seq
        named = event.facts.get("triggers")
        for tid, trig in st.triggers.items():
            if named is not None and tid not in named:
                continue
            if trig.status == "disarmed":
                trig.status = "armed"
                trig.seq = event.seq
                trig.at = event.ts

    def _trigger(self, event: Event) -> TriggerState | None:
        trig = self._state.triggers.get(event.trigger or "")
        if trig is None:
            self._anomaly(event, f"unknown trigger {event.trigger!r}")
        return trig

    def _trigger_fired(self, event: Event) -> None:
        trig = self._trigger(event)
        if trig is None:
            return
        evidence = str(event.facts.get("evidence") or event.note or event.reason or "")
        trig.status = "fired"
        trig.node = event.node
        trig.evidence = evidence
        trig.seq = event.seq
        trig.at = event.ts
        trig.fired_by = event.actor
        trig.fired_nodes[event.node or ""] = evidence
        trig.fire_count += 1
        self._reviewer(event.actor)

    def _trigger_cleared(self, event: Event) -> None:
        trig = self._trigger(event)
        if trig is None:
            return
        trig.status = "cleared"
        trig.fired_nodes = {}
        trig.cleared_by = event.actor
        trig.clear_reason = event.reason
        trig.cleared_seq = event.seq
        trig.cleared_at = event.ts
        trig.seq = event.seq
        trig.at = event.ts

    def _wave_started(self, event: Event) -> None:
        st = self._state
        wave = event.wave
        if wave is None or not 0 <= wave < len(st.waves):
            self._anomaly(event, f"no wave {wave!r} in the plan")
            return
        st.current_wave = wave
        st.wave_started_seq[wave] = event.seq
        members = event.facts.get("nodes") or st.waves[wave]
        first = st.node_stage_order[0] if st.node_stage_order else None
        for host in members:
            progress = st.nodes.get(host)
            if progress is None:
                self._anomaly(event, f"unknown node {host!r}")
                continue
            if progress.current != PENDING:
                continue
            if first is None:
                self._set_current(progress, DONE, event.ts)
                continue
            stage = progress.stages[first]
            stage.status = "active"
            stage.entered_seq = event.seq
            stage.entered_at = event.ts
            self._set_current(progress, first, event.ts)

    def _path_chosen(self, event: Event) -> None:
        self._state.path = {**event.facts, "actor": event.actor, "seq": event.seq}

    def _decision(self, event: Event) -> None:
        st = self._state
        st.decision = {**event.facts, "actor": event.actor, "seq": event.seq}
        if event.facts.get("halt_rollout"):
            # The rollout stops here: nodes not started stay as they are (HELD), no
            # further wave starts, and the closing stages open even though not every
            # node went through (the closing checklist then says which did not).
            st.halted = True
            for progress in st.nodes.values():
                if progress.current == PENDING:
                    progress.current = HELD
                    progress.entered_at = event.ts
            self._maybe_open_closing()

    def _rollback_started(self, event: Event) -> None:
        progress = self._node(event)
        if progress is None:
            return
        rb = self.runbook.rollback
        progress.rollback_from = progress.current
        progress.rollback_reason = event.reason
        progress.rollback_ok = None
        stage = _stage_state(rb.steps if rb else [], rb.items if rb else [], "rollback", progress.node,
                             self._state.params, sid=ROLLBACK_STAGE, title=rb.title if rb else "Roll back")
        stage.status = "active"
        stage.entered_seq = event.seq
        stage.entered_at = event.ts
        progress.rollback = stage
        self._set_current(progress, ROLLING_BACK, event.ts)

    def _rollback_finished(self, event: Event) -> None:
        progress = self._node(event)
        if progress is None:
            return
        ok = bool(event.facts.get("ok"))
        progress.rollback_ok = ok
        if progress.rollback is not None and ok:
            progress.rollback.status = "passed"
            progress.rollback.passed_seq = event.seq
            progress.rollback.passed_at = event.ts
        self._set_current(progress, ROLLED_BACK if ok else ROLLBACK_FAILED, event.ts)

    def _note(self, event: Event) -> None:
        st = self._state
        st.notes.append(NoteRecord(seq=event.seq, at=event.ts, actor=event.actor, node=event.node,
                                   text=event.note or ""))
        self._reviewer(event.actor)


_HANDLERS: dict[EventKind, Any] = {
    EventKind.SESSION_STARTED: Folder._session_started,
    EventKind.SESSION_RESUMED: Folder._session_resumed,
    EventKind.SESSION_PAUSED: Folder._session_paused,
    EventKind.SESSION_ENDED: Folder._session_ended,
    EventKind.PROBE: Folder._probe,
    EventKind.BASELINE_RECORDED: Folder._baseline,
    EventKind.STEP_STARTED: Folder._step_started,
    EventKind.STEP_FINISHED: Folder._step_finished,
    EventKind.ITEM_TICKED: Folder._item_ticked,
    EventKind.ITEM_VERIFIED: Folder._item_verified,
    EventKind.SIGNOFF: Folder._signoff,
    EventKind.GATE_PASSED: Folder._gate_passed,
    EventKind.OVERRIDE: Folder._override,
    EventKind.TRIGGERS_ARMED: Folder._triggers_armed,
    EventKind.TRIGGER_FIRED: Folder._trigger_fired,
    EventKind.TRIGGER_CLEARED: Folder._trigger_cleared,
    EventKind.WAVE_STARTED: Folder._wave_started,
    EventKind.PATH_CHOSEN: Folder._path_chosen,
    EventKind.DECISION: Folder._decision,
    EventKind.ROLLBACK_STARTED: Folder._rollback_started,
    EventKind.ROLLBACK_FINISHED: Folder._rollback_finished,
    EventKind.NOTE: Folder._note,
}


def fold(runbook: Runbook, params: Mapping[str, object], hosts: Sequence[str], events: Iterable[Event],
         *, operator: str | None = None) -> CockpitState:
    """The state after ``events``, folded from scratch."""
    folder = Folder(runbook, params, hosts, operator=operator)
    return folder.apply_all(events)


# --------------------------------------------------------------------------- gates


def gate_blockers(stage: StageState) -> list[str]:
    """Why the stage's exit gate is shut, one phrase per blocker; empty when it is open."""
    out: list[str] = []
    for item in stage.items.values():
        if item.status in ("done", "skipped"):
            continue
        if item.verify == Verify.MANUAL:
            out.append(f"item {item.id!r} not ticked" + (" (a note is required)" if item.note_required else ""))
        elif item.verify == Verify.SIGNOFF:
            who = f" ({', '.join(item.signers)} cannot sign their own gate)" if item.signers else ""
            out.append(f"item {item.id!r} needs sign-off by a second person{who}")
        elif item.verify == Verify.STEP:
            step = stage.steps.get(item.step or "")
            if step is None:
                out.append(f"item {item.id!r}: step {item.step!r} missing")
            elif step.status == "failed":
                out.append(f"step {step.id!r} failed ({step.failure()})")
            elif step.status == "running":
                out.append(f"step {step.id!r} still running")
            else:
                out.append(f"step {step.id!r} not run")
        else:
            what = "check" if item.verify == Verify.CHECK else "command"
            if item.status == "failed":
                out.append(f"item {item.id!r} {what} failed" + (f": {item.evidence}" if item.evidence else ""))
            else:
                out.append(f"item {item.id!r} not verified")
    for step in stage.steps.values():
        if step.status == "running" and not any(i.step == step.id for i in stage.items.values()):
            out.append(f"step {step.id!r} still running")
    return out


def gate_open(stage: StageState) -> bool:
    return not gate_blockers(stage)


def wave_through(state: CockpitState, wave: int) -> bool:
    """Every node of ``wave`` passed smoke and expand, or was rolled back within the budget."""
    members = state.waves[wave]
    rolled = sum(1 for n in members if state.nodes[n].current in (ROLLED_BACK, ROLLBACK_FAILED))
    return all(state.nodes[n].current in FINISHED for n in members) and rolled <= state.failure_budget


def wave_blockers(state: CockpitState, wave: int) -> list[str]:
    members = state.waves[wave]
    out = [f"{n} at {state.nodes[n].current!r}" for n in members if state.nodes[n].current not in FINISHED]
    rolled = [n for n in members if state.nodes[n].current in (ROLLED_BACK, ROLLBACK_FAILED)]
    if len(rolled) > state.failure_budget:
        out.append(f"{len(rolled)} rolled back ({', '.join(rolled)}), failure budget {state.failure_budget}")
    return out


def _destructive_span(runbook: Runbook) -> tuple[int, int] | None:
    """Index of the first and last node stage holding a destructive step."""
    idx = [i for i, s in enumerate(runbook.node_stages) if any(p.destructive for p in s.steps)]
    return (idx[0], idx[-1]) if idx else None


def holds_destructive_slot(state: CockpitState, runbook: Runbook, node: str) -> bool:
    """Whether the node is inside its destructive stages: from its first destructive step
    until it reaches a stage past the last destructive one (a rollback holds it too).

    A node that was changed is not released until the stages after the change (the
    reboot, say) are behind it, so ``max_parallel`` bounds the nodes at risk at once.
    """
    progress = state.nodes[node]
    if progress.current == ROLLING_BACK:
        return True
    if not progress.destructive_started or progress.current not in state.node_stage_order:
        return False
    span = _destructive_span(runbook)
    return span is not None and state.node_stage_order.index(progress.current) <= span[1]


# --------------------------------------------------------------------------- actions


class ActionKind(StrEnum):
    RUN_STEP = "run-step"
    TICK_ITEM = "tick-item"
    VERIFY_ITEM = "verify-item"
    SIGN_OFF = "sign-off"
    PASS_GATE = "pass-gate"
    OVERRIDE = "override"
    RAISE_TRIGGER = "raise-trigger"
    CLEAR_TRIGGER = "clear-trigger"
    ARM_TRIGGERS = "arm-triggers"
    START_WAVE = "start-wave"
    CHOOSE_PATH = "choose-path"
    START_ROLLBACK = "start-rollback"
    FINISH_ROLLBACK = "finish-rollback"  # end a node's rollback with its result (ok when its items hold)
    RECORD_DECISION = "record-decision"
    NOTE = "note"


class Action(BaseModel):
    """Something a person asks the cockpit to do; judged by :func:`check_action`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ActionKind
    stage: str | None = None
    node: str | None = None
    step: str | None = None
    item: str | None = None
    trigger: str | None = None
    wave: int | None = None
    path: str | None = None
    reason: str | None = None
    note: str | None = None


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    allowed: bool
    reasons: list[str]

    def __bool__(self) -> bool:
        return self.allowed


class ActionRefused(CockpitError):
    """The gate refused an intent; ``reasons`` says why, in words."""

    def __init__(self, action: Action, reasons: Sequence[str]) -> None:
        self.action = action
        self.reasons = list(reasons)
        super().__init__(f"{action.kind} refused: " + "; ".join(self.reasons or ["not allowed now"]))


#: Actions a reviewer (anyone but the operator) may take.
REVIEWER_ACTIONS = frozenset({ActionKind.SIGN_OFF, ActionKind.RAISE_TRIGGER, ActionKind.NOTE})


def is_destructive(runbook: Runbook, action: Action) -> bool:
    """Starting a wave, or running a step marked destructive (rollback steps included)."""
    if action.kind is ActionKind.START_WAVE:
        return True
    if action.kind is not ActionKind.RUN_STEP:
        return False
    if action.stage == ROLLBACK_STAGE:
        steps = runbook.rollback.steps if runbook.rollback else []
    else:
        try:
            steps = runbook.stage(action.stage or "").steps
        except KeyError:
            return False
    return any(s.id == action.step and s.destructive for s in steps)


def _fired_text(trig: TriggerState) -> str:
    where = f" on {trig.node}" if trig.node else ""
    return f"trigger {trig.id!r} fired{where}: {trig.evidence}"


def _locate(state: CockpitState, action: Action) -> tuple[StageState | None, list[str]]:
    """The stage an action addresses, and why it may not be acted on now."""
    sid = action.stage
    if sid is None:
        return None, ["no stage named"]
    if sid in state.window:
        stage = state.window[sid]
        if stage.status != "active":
            cur = state.window_current
            return stage, [f"stage {sid!r} is {stage.status}" + (f"; the current stage is {cur!r}" if cur else "")]
        return stage, []
    if action.node is None:
        return None, [f"stage {sid!r} is a node stage: name the node"]
    progress = state.nodes.get(action.node)
    if progress is None:
        return None, [f"unknown node {action.node!r}"]
    if sid == ROLLBACK_STAGE:
        if progress.current != ROLLING_BACK or progress.rollback is None:
            return progress.rollback, [f"{action.node} is not rolling back"]
        return progress.rollback, []
    stage = progress.stages.get(sid)
    if stage is None:
        return None, [f"unknown stage {sid!r}"]
    if progress.current != sid:
        if progress.current == PENDING:
            return stage, [f"{action.node} has not started: its wave {progress.wave} is not running"]
        if progress.current == HELD:
            return stage, [f"{action.node} is held: a recorded decision halted the rollout"]
        return stage, [f"stage {sid!r} is not {action.node}'s current stage (it is at {progress.current!r})"]
    return stage, []


def _trigger_block(state: CockpitState, action: Action) -> list[str]:
    """A fired trigger stops every destructive action but the rollback of a node."""
    fired = state.fired()
    if not fired:
        return []
    if action.kind is ActionKind.RUN_STEP and action.stage == ROLLBACK_STAGE:
        return []
    return [f"{_fired_text(t)}; clear it with a reason or roll the node back" for t in fired]


def _parallel_block(state: CockpitState, runbook: Runbook, node: str) -> list[str]:
    if holds_destructive_slot(state, runbook, node):
        return []
    wave = state.nodes[node].wave
    busy = [n for n in state.waves[wave] if n != node and holds_destructive_slot(state, runbook, n)]
    if len(busy) >= state.max_parallel:
        return [f"{len(busy)} node(s) of wave {wave} already in destructive stages "
                f"({', '.join(busy)}; max_parallel {state.max_parallel})"]
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
    rest = StageState(id=stage.id, title=stage.title, scope=stage.scope, steps=stage.steps,
                      items={k: i for k, i in stage.items.items() if i.check != "triggers_armed"})
    return [f"stage {stage.id!r}: {b}" for b in gate_blockers(rest)]


def check_action(state: CockpitState, runbook: Runbook, action: Action, actor: str, *, operator: str) -> Verdict:
    """Whether ``actor`` may take ``action`` now, and if not, every reason why."""
    reasons = _check(state, runbook, action, actor, operator, need_text=True)
    return Verdict(allowed=not reasons, reasons=reasons)


def _check(state: CockpitState, runbook: Runbook, action: Action, actor: str, operator: str,
           *, need_text: bool) -> list[str]:
    kind = action.kind
    if kind is ActionKind.NOTE:
        return ["a note needs text"] if need_text and not (action.note or "").strip() else []
    if state.ended_at is not None:
        return ["the session has ended"]
    reasons: list[str] = []
    if actor != operator and kind not in REVIEWER_ACTIONS:
        reasons.append(f"only the operator ({operator}) may {kind.value}; {actor} is a reviewer")
    if kind is ActionKind.SIGN_OFF and actor == operator:
        reasons.append(f"{actor} is the operator: a sign-off needs a second person")
    checker = _CHECKERS[kind]
    reasons.extend(checker(state, runbook, action, actor, operator, need_text))
    return reasons


def _c_run_step(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    stage, reasons = _locate(state, a)
    if stage is None:
        return reasons
    step = stage.steps.get(a.step or "")
    if step is None:
        return reasons + [f"no step {a.step!r} in stage {stage.id!r}"]
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


def _c_tick(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    stage, reasons = _locate(state, a)
    if stage is None:
        return reasons
    item = stage.items.get(a.item or "")
    if item is None:
        return reasons + [f"no item {a.item!r} in stage {stage.id!r}"]
    if item.verify != Verify.MANUAL:
        reasons.append(f"item {item.id!r} is verified by {item.verify}, not ticked by hand")
    elif item.status == "skipped":
        reasons.append(f"item {item.id!r} does not apply with these parameters")
    elif item.status == "done":
        reasons.append(f"item {item.id!r} is already ticked")
    if nt and item.note_required and not (a.note or "").strip():
        reasons.append(f"item {item.id!r} needs a note")
    return reasons


def _c_verify(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    stage, reasons = _locate(state, a)
    if stage is None:
        return reasons
    item = stage.items.get(a.item or "")
    if item is None:
        return reasons + [f"no item {a.item!r} in stage {stage.id!r}"]
    if item.verify not in (Verify.CHECK, Verify.COMMAND):
        reasons.append(f"item {item.id!r} is verified by {item.verify}, not by a check or command")
    elif item.status == "skipped":
        reasons.append(f"item {item.id!r} does not apply with these parameters")
    if state.paused:
        reasons.append("the session is paused")
    return reasons


def _c_signoff(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    stage, reasons = _locate(state, a)
    if stage is None:
        return reasons
    if a.item is None:
        if not any(i.verify == Verify.SIGNOFF for i in stage.items.values()):
            reasons.append(f"stage {stage.id!r} has nothing to sign off")
        elif actor in stage.signoffs:
            reasons.append(f"{actor} already signed off stage {stage.id!r}")
        return reasons
    item = stage.items.get(a.item)
    if item is None:
        return reasons + [f"no item {a.item!r} in stage {stage.id!r}"]
    if item.verify != Verify.SIGNOFF:
        reasons.append(f"item {item.id!r} is verified by {item.verify}, not signed off")
    elif item.status == "skipped":
        reasons.append(f"item {item.id!r} does not apply with these parameters")
    elif actor in item.signers:
        reasons.append(f"{actor} already signed off item {item.id!r}")
    return reasons


def _node_trigger_block(state: CockpitState, a: Action) -> list[str]:
    if a.stage in state.window:
        return []
    return [f"{_fired_text(t)}; clear it with a reason or roll the node back"
            for t in state.fired() if t.node is None or a.node in t.fired_nodes]


def _c_pass(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    stage, reasons = _locate(state, a)
    if stage is None:
        return reasons
    if stage.scope == "rollback":
        return reasons + ["the rollback ends with its result (finish-rollback), not a gate"]
    reasons.extend(gate_blockers(stage))
    if stage.arms_triggers and not state.armed:
        reasons.append("the rollback triggers are not armed: arm them before passing this gate")
    reasons.extend(_node_trigger_block(state, a))
    return reasons


def _c_override(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    stage, reasons = _locate(state, a)
    if stage is None:
        return reasons
    if stage.scope == "rollback":
        reasons.append("the rollback ends with its result, not a gate")
    if nt and not (a.reason or "").strip():
        reasons.append("an override needs a reason")
    if not gate_blockers(stage):
        reasons.append(f"the gate of {stage.id!r} is open: pass it instead")
    reasons.extend(_running_block(stage))
    reasons.extend(f"{_fired_text(t)}; an override does not bypass a fired trigger" for t in state.fired())
    return reasons


def _running_block(stage: StageState | None) -> list[str]:
    """A stage whose step is still running cannot be left (its outcome is not known yet)."""
    running = [] if stage is None else [s.id for s in stage.steps.values() if s.status == "running"]
    return [f"step {running[0]!r} of {stage.id!r} is still running"] if running and stage else []


def _c_raise(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    trig = state.triggers.get(a.trigger or "")
    if trig is None:
        return [f"unknown trigger {a.trigger!r}"]
    reasons = []
    if trig.mode != TriggerMode.MANUAL:
        reasons.append(f"trigger {trig.id!r} is automatic: its evaluator raises it")
    if a.node is not None and a.node not in state.nodes:
        reasons.append(f"unknown node {a.node!r}")
    if trig.status == "fired" and (a.node or "") in trig.fired_nodes:
        reasons.append(f"trigger {trig.id!r} is already fired" + (f" on {a.node}" if a.node else ""))
    if nt and not ((a.reason or "").strip() or (a.note or "").strip()):
        reasons.append("say what was seen (a reason)")
    return reasons


def _c_clear(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    trig = state.triggers.get(a.trigger or "")
    if trig is None:
        return [f"unknown trigger {a.trigger!r}"]
    reasons = []
    if trig.status != "fired":
        reasons.append(f"trigger {trig.id!r} is {trig.status}, not fired")
    if nt and not (a.reason or "").strip():
        reasons.append("clearing a trigger needs a reason")
    return reasons


def _c_arm(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    if state.armed:
        return ["the triggers are already armed"]
    return _arm_blockers(state)


def _c_wave(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    nxt = 0 if state.current_wave is None else state.current_wave + 1
    reasons: list[str] = []
    if state.halted:
        return ["a recorded decision halted the rollout"]
    if a.wave != nxt:
        if nxt >= len(state.waves):
            return ["every wave has started"]
        reasons.append(f"the next wave is {nxt}, not {a.wave}")
    if nxt >= len(state.waves):
        return reasons + ["every wave has started"]
    pending = [s for s in state.opening if not state.window[s].closed]
    if pending:
        reasons.append(f"window stage {pending[0]!r} has not passed")
    if not state.armed:
        reasons.append("the rollback triggers are not armed yet")
    if nxt > 0 and not wave_through(state, nxt - 1):
        reasons.append(f"wave {nxt - 1} is not through smoke and expand: {'; '.join(wave_blockers(state, nxt - 1))}")
    if state.paused:
        reasons.append("the session is paused")
    reasons.extend(_trigger_block(state, a))
    return reasons


def _c_path(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    reasons = []
    if nt and not (a.path or "").strip():
        reasons.append("name the path")
    if nt and not (a.reason or "").strip():
        reasons.append("give the rationale for the path (reason)")
    if state.current_wave is not None:
        reasons.append("the waves have started: the path is chosen")
    return reasons


def _c_rollback(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    progress = state.nodes.get(a.node or "")
    if progress is None:
        return [f"unknown node {a.node!r}"]
    reasons = []
    if runbook.rollback is None:
        reasons.append("the runbook has no rollback procedure")
    if progress.current in (ROLLING_BACK, ROLLED_BACK, ROLLBACK_FAILED):
        reasons.append(f"{progress.node} is already {progress.current}")
    elif progress.current in (PENDING, HELD):
        reasons.append(f"{progress.node} has not started: nothing to roll back")
    if not progress.baseline:
        reasons.append(f"{progress.node} has no recorded baseline to restore")
    reasons.extend(_running_block(progress.stage))
    if nt and not (a.reason or "").strip():
        reasons.append("a rollback needs a reason")
    return reasons


def _c_finish_rollback(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str,
                       nt: bool) -> list[str]:
    progress = state.nodes.get(a.node or "")
    if progress is None:
        return [f"unknown node {a.node!r}"]
    if progress.current != ROLLING_BACK or progress.rollback is None:
        return [f"{progress.node} is not rolling back"]
    return _running_block(progress.rollback)


def _c_decision(state: CockpitState, runbook: Runbook, a: Action, actor: str, op: str, nt: bool) -> list[str]:
    return ["a decision needs its outcome (note)"] if nt and not (a.note or "").strip() else []


_CHECKERS: dict[ActionKind, Any] = {
    ActionKind.RUN_STEP: _c_run_step,
    ActionKind.TICK_ITEM: _c_tick,
    ActionKind.VERIFY_ITEM: _c_verify,
    ActionKind.SIGN_OFF: _c_signoff,
    ActionKind.PASS_GATE: _c_pass,
    ActionKind.OVERRIDE: _c_override,
    ActionKind.RAISE_TRIGGER: _c_raise,
    ActionKind.CLEAR_TRIGGER: _c_clear,
    ActionKind.ARM_TRIGGERS: _c_arm,
    ActionKind.START_WAVE: _c_wave,
    ActionKind.CHOOSE_PATH: _c_path,
    ActionKind.START_ROLLBACK: _c_rollback,
    ActionKind.FINISH_ROLLBACK: _c_finish_rollback,
    ActionKind.RECORD_DECISION: _c_decision,
}


def _stage_candidates(stage: StageState, node: str | None) -> Iterable[Action]:
    sid = stage.id
    for step in stage.steps.values():
        yield Action(kind=ActionKind.RUN_STEP, stage=sid, node=node, step=step.id)
    for item in stage.items.values():
        kind = {Verify.MANUAL: ActionKind.TICK_ITEM, Verify.SIGNOFF: ActionKind.SIGN_OFF}.get(
            Verify(item.verify), ActionKind.VERIFY_ITEM)
        yield Action(kind=kind, stage=sid, node=node, item=item.id)
    if stage.scope != "rollback":
        yield Action(kind=ActionKind.PASS_GATE, stage=sid, node=node)
        yield Action(kind=ActionKind.OVERRIDE, stage=sid, node=node)
    else:
        yield Action(kind=ActionKind.FINISH_ROLLBACK, node=node)


def allowed_actions(state: CockpitState, runbook: Runbook, actor: str, operator: str) -> list[Action]:
    """What ``actor`` may do now. Actions that need words (a reason, a note, a path) are
    listed without them when they would be allowed once the words are given."""
    cands: list[Action] = [Action(kind=ActionKind.NOTE)]
    cur = state.window_current
    if cur is not None:
        cands.extend(_stage_candidates(state.window[cur], None))
    for name, progress in state.nodes.items():
        stage = progress.stage
        if stage is not None:
            cands.extend(_stage_candidates(stage, name))
        if progress.current not in (PENDING, HELD, ROLLING_BACK, ROLLED_BACK):
            cands.append(Action(kind=ActionKind.START_ROLLBACK, node=name))
    nxt = 0 if state.current_wave is None else state.current_wave + 1
    cands.append(Action(kind=ActionKind.START_WAVE, wave=nxt))
    cands.append(Action(kind=ActionKind.ARM_TRIGGERS))
    for trig in state.triggers.values():
        if trig.mode == TriggerMode.MANUAL:
            cands.append(Action(kind=ActionKind.RAISE_TRIGGER, trigger=trig.id))
        if trig.status == "fired":
            cands.append(Action(kind=ActionKind.CLEAR_TRIGGER, trigger=trig.id))
    cands.append(Action(kind=ActionKind.CHOOSE_PATH))
    cands.append(Action(kind=ActionKind.RECORD_DECISION))
    return [a for a in cands if not _check(state, runbook, a, actor, operator, need_text=False)]


__all__ = [
    "Action",
    "ActionKind",
    "CockpitState",
    "Folder",
    "ItemState",
    "NodeProgress",
    "StageState",
    "StepState",
    "TriggerState",
    "Verdict",
    "allowed_actions",
    "applicable",
    "check_action",
    "fold",
    "gate_blockers",
    "gate_open",
    "is_destructive",
    "wave_through",
]
