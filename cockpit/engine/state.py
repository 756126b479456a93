"""The cockpit's state as the engine folds it: nodes, stages, steps, items, triggers.

Plain slotted dataclasses with straight-line copies (replay keeps checkpoints of them).
Conventions the session engine follows when it writes events:

- Node stages are addressed by ``(stage, node)``; the rollback procedure of a node by
  ``stage = "rollback"`` (:data:`ROLLBACK_STAGE`). Window stages by ``stage`` alone
  (their ``node`` may name the host a window step ran on; it is ignored for lookup).
- ``OVERRIDE`` passes the gate by itself (no ``GATE_PASSED`` follows).
- ``TRIGGERS_ARMED`` is written when the operator arms the triggers, which the rules
  allow only once the ``arms_triggers`` stage's gate holds.
- A ``SIGNOFF`` with no item signs the whole gate: every sign-off item of that stage.
- Events that name an unknown stage, step, item, node or trigger are not applied;
  each is noted in :attr:`CockpitState.anomalies` so replay can show it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from cockpit.changelog.facts import (
    BaselineFacts,
    DecisionFacts,
    Facts,
    NodeObservedFacts,
    PathChosenFacts,
    ProbeFacts,
    WatchEndedFacts,
    WatchStartedFacts,
)
from cockpit.changelog.identity import SYSTEM_ACTOR as SYSTEM_ACTOR  # re-exported; its home is identity
from cockpit.engine.history import History
from cockpit.errors import BadInput
from cockpit.fleet.results import ErrorKind
from cockpit.runbook.conditions import WhenValue, when_holds
from cockpit.runbook.model import Item, ItemScope, Runbook, Stage, Step, StepKind, TriggerMode, Verify
from cockpit.runbook.placeholders import ParamValue

#: The stage id under which a node's rollback procedure is recorded.
ROLLBACK_STAGE = "rollback"
#: What a step stopped without an explicit cancel records (a quit, a lost terminal, a
#: crash found on resume): the command may or may not have finished on the node.
INTERRUPTED_OUTCOME = "interrupted: outcome unknown"
#: What a step the operator cancelled explicitly (k) records.
CANCELLED_OUTCOME = "cancelled by the operator"

ItemStatus = Literal["open", "done", "failed", "running", "needs-signoff", "skipped"]
StepStatus = Literal["open", "running", "done", "failed", "skipped"]
StageStatus = Literal["locked", "active", "passed", "overridden"]
TriggerStatus = Literal["disarmed", "armed", "fired", "cleared"]
#: A stage's scope: the runbook's (window, node), or a node's rollback procedure.
StageScope = Literal["window", "node", "rollback"]

#: One glyph per stage, step and item status, shared by every view (live, review, replay, cast).
STATUS_GLYPH: dict[str, str] = {
    "done": "✓",
    "passed": "✓",
    "overridden": "✓!",
    "failed": "✗",
    "running": "…",
    "open": "○",
    "active": "●",
    "locked": "○",
    "needs-signoff": "⚑",
    "skipped": "–",
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

#: A step's ``error_kind`` values that leave its effect on the node unknown.
UNKNOWN_OUTCOME_KINDS: frozenset[ErrorKind] = frozenset(
    {ErrorKind.CANCELLED, ErrorKind.INTERRUPTED, ErrorKind.CONNECTION_LOST, ErrorKind.TIMEOUT}
)
#: ... and those that say nothing about the node at all (cut short, or it was never reached).
NO_VERDICT_KINDS: frozenset[ErrorKind] = UNKNOWN_OUTCOME_KINDS | {ErrorKind.CONNECT_FAILED}
#: A step's ``error_kind`` when sudo -n refused it (a password wanted): the command never ran.
PRIVILEGE_REFUSED = ErrorKind.PRIVILEGE


def error_kind_of(word: str | None) -> ErrorKind | None:
    """A recorded ``error_kind`` as the enum. A word this version does not know (a newer
    cockpit's) reads as none: the step counts as plainly failed, the stricter reading, as a
    person then decides rather than the autopilot running it again."""
    if word is None:
        return None
    try:
        return ErrorKind(word)
    except ValueError:
        return None


PASSED_STATUSES: frozenset[str] = frozenset({"passed", "overridden"})


def applicable(
    when: Mapping[str, WhenValue], params: Mapping[str, object], facts: Mapping[str, object] | None = None
) -> bool:
    """Whether a step or item with this ``when`` is not skipped: it holds, or waits for the
    node's baseline (a condition over a recorded fact before ``facts`` exist is pending)."""
    return when_holds(when, params, facts) is not False


# --------------------------------------------------------------------------- state

#: A node's facts before anything was recorded: empty records (frozen, so shared).
NO_BASELINE = BaselineFacts()
NO_PROBE = ProbeFacts()
NO_OBSERVATION = NodeObservedFacts()


def recorded(facts: Facts) -> bool:
    """Whether a record holds any fact. An empty one counts as none, as its empty table in
    the log did when the state kept the tables themselves."""
    return any(value is not None for _, value in facts)


def non_negative(value: int, what: str) -> int:
    if value < 0:
        raise BadInput(f"{what}: must be 0 or more, got {value}")
    return value


_T = TypeVar("_T")


def _slot_copier(cls: type[_T]) -> Callable[[_T], _T]:
    """A shallow copy for a slotted dataclass, as straight-line code (5x faster than copy.copy).

    Replay checkpoints copy thousands of these objects; generated once per class.
    """
    names = [n for c in reversed(cls.__mro__) for n in getattr(c, "__slots__", ()) if not n.startswith("__")]
    body = "\n".join(f"    new.{n} = old.{n}" for n in names) or "    pass"
    code = f"def copy(old):\n    new = _new(_cls)\n{body}\n    return new\n"
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    exec(code, scope)
    copier: Callable[[_T], _T] = scope["copy"]
    return copier


@dataclass(slots=True)
class StepState:
    id: str
    title: str
    kind: StepKind
    destructive: bool
    status: StepStatus = "open"
    exit_status: int | None = None
    error: str | None = None
    #: why a failed run has no exit status ("cancelled", "connection-lost", "timeout", "interrupted"...)
    error_kind: ErrorKind | None = None
    attempts: int = 0
    started_seq: int | None = None
    started_at: datetime | None = None
    finished_seq: int | None = None
    finished_at: datetime | None = None
    duration_s: float | None = None
    #: the step reboots its node (a reboot step, or a backend step asking the engine to reboot)
    reboots: bool = False

    def clone(self) -> StepState:
        return _copy_step(self)

    def failure(self) -> str:
        """Why the last run failed, briefly: ``exit 1``, the error, or ``failed``."""
        if self.error_kind == PRIVILEGE_REFUSED and self.error:
            return self.error  # what the login lacks says more than sudo's exit 1
        if self.exit_status is not None:
            return f"exit {self.exit_status}"
        return self.error or "failed"

    @property
    def outcome_unknown(self) -> bool:
        """Failed without a verdict of its own: cut short (cancelled, interrupted, timed
        out, the link lost), so what it did on the node is not known."""
        return self.status == "failed" and self.error_kind in UNKNOWN_OUTCOME_KINDS

    @property
    def no_verdict(self) -> bool:
        """Failed without saying anything about the node: cut short, or the node was never reached."""
        return self.status == "failed" and self.error_kind in NO_VERDICT_KINDS


@dataclass(slots=True)
class ItemState:
    id: str
    text: str
    verify: Verify
    status: ItemStatus = "open"
    step: str | None = None
    check: str | None = None
    note_required: bool = False
    #: a node stage's manual item: whom one tick covers
    scope: ItemScope = ItemScope.NODE
    note: str | None = None
    evidence: str | None = None
    by: str | None = None
    seq: int | None = None
    at: datetime | None = None
    signers: list[str] = field(default_factory=list)
    #: what its command took, where one ran for it (a command item): the machines' time in its
    #: stage, as a step's is
    duration_s: float | None = None

    def clone(self) -> ItemState:
        new = _copy_item(self)
        new.signers = list(self.signers)
        return new


@dataclass(slots=True)
class StageState:
    id: str
    title: str
    scope: StageScope
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
        new = _copy_stage(self)
        new.steps = {k: v.clone() for k, v in self.steps.items()}
        new.items = {k: v.clone() for k, v in self.items.items()}
        new.overridden_blockers = list(self.overridden_blockers)
        new.signoffs = list(self.signoffs)
        return new

    def enter(self, seq: int | None, at: datetime | None) -> None:
        """Make this the active stage, entered at ``seq``."""
        self.status = "active"
        self.entered_seq = seq
        self.entered_at = at

    @property
    def closed(self) -> bool:
        """Passed or overridden: the stage is behind us."""
        return self.status in PASSED_STATUSES


@dataclass(slots=True, eq=False)
class NodeProgress:
    node: str
    wave: int
    current: str = PENDING  # a node stage id, or pending / done / rolling-back / rolled-back
    #: the node's stages, copied from ``_templates`` when first read (see :attr:`stages`)
    _stages: dict[str, StageState] | None = field(default=None, repr=False)
    _templates: Sequence[StageState] = field(default=(), repr=False)
    rollback: StageState | None = None
    baseline: BaselineFacts = NO_BASELINE
    baseline_seq: int | None = None
    probe: ProbeFacts = NO_PROBE
    probe_seq: int | None = None
    probe_at: datetime | None = None
    #: the latest probe that carried the per-GPU detail (a step boundary's): the later rounds record the summary only
    gpus_detail: ProbeFacts = NO_PROBE
    gpus_detail_seq: int | None = None
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
    #: the engine's last word on the node (a ``node-observed`` event's facts: backend,
    #: native_state, stage, driver_version, reason, evidence), empty when no backend reported
    observation: NodeObservedFacts = NO_OBSERVATION
    observation_seq: int | None = None
    observation_at: datetime | None = None

    @property
    def stages(self) -> dict[str, StageState]:
        """The node's stages by id. Every node starts with a copy of the same templates; the
        copy is made when first read, so a 2,000-node fleet does not copy 150,000 objects
        before its first frame for nodes nobody has looked at yet."""
        stages = self._stages
        if stages is None:
            stages = self._stages = {}
            for template in self._templates:
                stage = template.clone()
                stage.node = self.node
                stages[stage.id] = stage
        return stages

    def peek_stage(self, stage_id: str) -> StageState | None:
        """The node's stage ``stage_id`` to read, not to change: its template while the node's
        stages are not copied yet (a view of 2,000 nodes asks for every node's stage)."""
        if self._stages is not None:
            return self._stages.get(stage_id)
        return next((t for t in self._templates if t.id == stage_id), None)

    def stage_statuses(self) -> Iterator[tuple[str, StageStatus]]:
        """Each stage's id and status, read without copying the templates (a fleet-wide count)."""
        for stage in self._templates if self._stages is None else self._stages.values():
            yield stage.id, stage.status

    def __eq__(self, other: object) -> bool:
        # the stages compare as read, whether or not either side has copied them yet
        if not isinstance(other, NodeProgress):
            return NotImplemented
        return _node_fields(self) == _node_fields(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value (as a dataclass with eq)

    def clone(self) -> NodeProgress:
        new = _copy_node(self)
        new._stages = None if self._stages is None else {k: v.clone() for k, v in self._stages.items()}
        new.rollback = None if self.rollback is None else self.rollback.clone()
        return new

    @property
    def begun(self) -> bool:
        """Whether anything was done on the node for the window: a step run on it, an item of
        its recorded, a gate of its passed, a rollback. A node whose wave started but on which
        nothing ran yet has not begun: nothing of it changed."""
        if self.rollback is not None or self.destructive_started or self.baseline_seq is not None:
            return True
        if self.current in FINISHED or self.current == ROLLING_BACK:
            return True
        if self._stages is None:
            return False  # never read, so never written to
        return any(
            stage.closed
            or any(step.attempts for step in stage.steps.values())
            # a wave's or the window's item ticked on another node covers this one, but did nothing on it
            or any(item.seq is not None and item.scope is ItemScope.NODE for item in stage.items.values())
            for stage in self._stages.values()
        )

    @property
    def stage(self) -> StageState | None:
        """The stage the node is in now (its rollback while rolling back)."""
        if self.current == ROLLING_BACK:
            return self.rollback
        if self._stages is None and self.current == PENDING:
            return None  # not in a stage yet: no need to copy them to say so
        return self.stages.get(self.current)


@dataclass(slots=True)
class TriggerState:
    id: str
    title: str
    mode: TriggerMode
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
        new = _copy_trigger(self)
        new.fired_nodes = dict(self.fired_nodes)
        return new


class _Stamped(Protocol):
    """What every event says of itself (:class:`cockpit.changelog.events.EventBase`)."""

    @property
    def seq(self) -> int: ...
    @property
    def ts(self) -> datetime: ...
    @property
    def actor(self) -> str: ...


_R = TypeVar("_R", bound="_Recorded")


@dataclass(slots=True, frozen=True)
class _Recorded:
    """Something one event recorded: its seq, its time and who acted, first in every such record."""

    seq: int
    at: datetime
    actor: str

    @classmethod
    def of(cls: type[_R], event: _Stamped, **fields: Any) -> _R:
        """The record of ``event``, with the fields the subclass adds."""
        return cls(seq=event.seq, at=event.ts, actor=event.actor, **fields)


@dataclass(slots=True, frozen=True)
class OverrideRecord(_Recorded):
    stage: str
    node: str | None
    reason: str
    blocked_by: tuple[str, ...]


@dataclass(slots=True, frozen=True)
class SignoffRecord(_Recorded):
    stage: str | None
    item: str | None
    node: str | None
    note: str | None
    counted: bool  # False when the operator signed their own gate


@dataclass(slots=True, frozen=True)
class NoteRecord(_Recorded):
    node: str | None
    text: str


@dataclass(slots=True, frozen=True)
class WatchFindingRecord(_Recorded):
    """A trigger that fired while ``cockpit watch`` kept it armed, after the window."""

    trigger: str
    node: str | None
    evidence: str


@dataclass(slots=True, frozen=True)
class PathRecord(_Recorded):
    """The recovery path chosen (``path-chosen``)."""

    facts: PathChosenFacts


@dataclass(slots=True, frozen=True)
class DecisionRecord(_Recorded):
    """The window's decision (``decision``)."""

    facts: DecisionFacts


@dataclass(slots=True, frozen=True)
class WatchRecord(_Recorded):
    """The latest ``watch-started``; a restart's resumed start goes on with the watch begun at ``first_seq``."""

    facts: WatchStartedFacts
    first_seq: int


@dataclass(slots=True, frozen=True)
class WatchEndedRecord(_Recorded):
    facts: WatchEndedFacts


@dataclass(slots=True, frozen=True)
class RefusedEvent:
    """An event in the log the fold did not apply: the rules (or the signatures the site
    requires) refuse it by that actor at that point. It stays in the log; it moves nothing."""

    seq: int
    kind: str
    actor: str
    why: str

    def words(self) -> str:
        return f"seq {self.seq} ({self.kind}) by {self.actor}: {self.why}"


@dataclass(slots=True)
class CockpitState:
    runbook_id: str
    operator: str | None
    hosts: list[str]
    params: dict[str, ParamValue]  # the window's parameters, as the runbook reads them
    window: dict[str, StageState]  # opening stages, then closing stages, in order
    opening: list[str]
    closing: list[str]
    node_stage_order: list[str]
    nodes: dict[str, NodeProgress]
    waves: list[list[str]]
    triggers: dict[str, TriggerState]
    #: stage ids by role, for evaluators and checks
    roles: StageRoles
    max_parallel: int = 1
    failure_budget: int = 0
    current_wave: int | None = None
    wave_started_seq: dict[int, int] = field(default_factory=dict)
    #: a wave that ran itself and ended: "done", or "halted: <why>" (wave-done / wave-halted)
    wave_ended: dict[int, str] = field(default_factory=dict)
    armed: bool = False
    armed_seq: int | None = None
    path: PathRecord | None = None
    decision: DecisionRecord | None = None
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
    #: events the fold refused (see :mod:`cockpit.engine.judge`), in log order
    refused: list[RefusedEvent] = field(default_factory=list)
    closing_open: bool = False
    halted: bool = False  # a decision stopped the rollout (see EventKind.DECISION halt_rollout)
    #: the latest ``watch-started`` event's record, None before any watch
    watch: WatchRecord | None = None
    watch_findings: list[WatchFindingRecord] = field(default_factory=list)
    watch_ended: WatchEndedRecord | None = None  # the latest ``watch-ended``, if after the start
    #: (subject, sink) of every notification whose delivery ended (sent, or given up): never sent again
    notified: set[tuple[str, str]] = field(default_factory=set)
    #: what happened on the way here, for the records of the window (the ticket, replay)
    history: History = field(default_factory=History)

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

    def all_stages(self) -> list[StageState]:
        """Every stage: the window's, then each node's, its rollback included."""
        stages = list(self.window.values())
        for progress in self.nodes.values():
            stages.extend(progress.stages.values())
            if progress.rollback is not None:
                stages.append(progress.rollback)
        return stages

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
        new = _copy_cockpit(self)
        new.window = {k: v.clone() for k, v in self.window.items()}
        new.nodes = {k: v.clone() for k, v in self.nodes.items()}
        new.triggers = {k: v.clone() for k, v in self.triggers.items()}
        new.wave_started_seq = dict(self.wave_started_seq)
        new.notified = set(self.notified)
        new.wave_ended = dict(self.wave_ended)
        new.history = self.history.copy()
        for name in (
            "hosts",
            "opening",
            "closing",
            "node_stage_order",
            "overrides",
            "signoffs",
            "notes",
            "reviewers",
            "anomalies",
            "watch_findings",
            "refused",
        ):
            setattr(new, name, list(getattr(self, name)))
        return new


_copy_step = _slot_copier(StepState)
_copy_item = _slot_copier(ItemState)
_copy_stage = _slot_copier(StageState)
_copy_node = _slot_copier(NodeProgress)
_NODE_FIELDS = tuple(f.name for f in fields(NodeProgress) if f.name not in ("_stages", "_templates"))


def _node_fields(node: NodeProgress) -> tuple[object, ...]:
    return (node.stages, *(getattr(node, name) for name in _NODE_FIELDS))


_copy_trigger = _slot_copier(TriggerState)
_copy_cockpit = _slot_copier(CockpitState)


def new_stage_state(
    steps: Sequence[Step],
    items: Sequence[Item],
    scope: StageScope,
    node: str | None,
    params: Mapping[str, object],
    *,
    sid: str,
    title: str,
    arms: bool = False,
    facts: Mapping[str, object] | None = None,
) -> StageState:
    """A stage as it starts; ``facts`` are the node's recorded facts (None before its baseline:
    a step or item conditioned on one is pending, open until :func:`settle_conditions`)."""
    st = StageState(id=sid, title=title, scope=scope, node=node, arms_triggers=arms)
    skipped_steps: set[str] = set()
    for step in steps:
        status: StepStatus = "open"
        if not applicable(step.when, params, facts):
            status = "skipped"
            skipped_steps.add(step.id)
        st.steps[step.id] = StepState(
            id=step.id, title=step.title, kind=step.kind, destructive=step.destructive, status=status,
            reboots=step.reboots,
        )  # fmt: skip
    for item in items:
        istatus: ItemStatus = "needs-signoff" if item.verify is Verify.SIGNOFF else "open"
        if not applicable(item.when, params, facts) or (item.verify is Verify.STEP and item.step in skipped_steps):
            istatus = "skipped"
        st.items[item.id] = ItemState(
            id=item.id,
            text=item.text,
            verify=item.verify,
            status=istatus,
            step=item.step,
            check=item.check,
            note_required=item.note_required,
            scope=item.scope,
        )
    return st


@dataclass(slots=True, frozen=True)
class StageRoles:
    """The node stage that plays each part (None: the runbook has none)."""

    upgrade: str | None
    reboot: str | None
    smoke: str | None
    expand: str | None


def stage_roles(runbook: Runbook) -> StageRoles:
    """Which node stage plays which part: by the conventional ids, else by content."""
    ids = [s.id for s in runbook.node_stages]

    def first(pred: Callable[[Stage], bool]) -> str | None:
        return next((s.id for s in runbook.node_stages if pred(s)), None)

    reboot = "reboot" if "reboot" in ids else first(lambda s: any(p.reboots for p in s.steps))
    upgrade = "upgrade" if "upgrade" in ids else first(lambda s: any(p.destructive for p in s.steps))
    smoke = "smoke" if "smoke" in ids else None
    if smoke is None and reboot is not None and ids.index(reboot) + 1 < len(ids):
        smoke = ids[ids.index(reboot) + 1]
    expand = "expand" if "expand" in ids else (ids[-1] if ids else None)
    return StageRoles(upgrade=upgrade, reboot=reboot, smoke=smoke, expand=expand)
