"""The one way an event is written: judged by the gate, appended durably, folded, then the
triggers are evaluated and subscribers told. Shared by the session, its step runner and its
prober; knows the runbook's steps and items and where a window step runs."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from cockpit.changelog.events import Event, EventKind
from cockpit.changelog.journal import Journal, JournalFollower
from cockpit.engine.actions import Action, ActionRefused
from cockpit.engine.fold import Folder
from cockpit.engine.rules import check_action
from cockpit.engine.state import ROLLBACK_STAGE, SYSTEM_ACTOR, CockpitState
from cockpit.engine.triggers import evaluate as evaluate_triggers
from cockpit.errors import BadInput
from cockpit.runbook.conditions import recorded_facts
from cockpit.runbook.model import Item, Runbook, Step
from cockpit.runbook.placeholders import SECRET_SHOWN
from cockpit.session.pacing import Pacer

#: The fields an action and the event it records share: where it acts, and the words a
#: person wrote for it (a note's text is written as the event's ``note``).
_ACTION_EVENT_FIELDS = ("stage", "node", "step", "item", "trigger", "wave", "reason", "note")

#: Kinds whose fold, for an event naming a node, moves that node's progress and nothing
#: any per-node trigger judge reads of another node or of a trigger's state: after one,
#: the triggers judge that node's changes alone (:func:`cockpit.engine.triggers.evaluate`).
NODE_LOCAL_KINDS: frozenset[EventKind] = frozenset(
    {
        EventKind.PROBE,
        EventKind.BASELINE_RECORDED,
        EventKind.STEP_STARTED,
        EventKind.STEP_FINISHED,
        EventKind.ITEM_TICKED,
        EventKind.ITEM_VERIFIED,
        EventKind.SIGNOFF,
        EventKind.GATE_PASSED,
        EventKind.NODE_OBSERVED,
    }
)


def masked(value: Any, secrets: Collection[str]) -> Any:
    """``value`` (text, or the lists, tables and facts models holding it) with each of
    ``secrets`` written as ``***`` (the longest first: one secret may contain another)."""
    if isinstance(value, str):
        for secret in sorted(secrets, key=len, reverse=True):
            value = value.replace(secret, SECRET_SHOWN)
        return value
    if isinstance(value, dict):
        return {k: masked(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(masked(v, secrets) for v in value)
    if isinstance(value, BaseModel):
        return type(value).model_validate(masked(value.model_dump(), secrets))
    return value


@dataclass(kw_only=True, eq=False)
class Recorder:
    """The change log, the folded state, and the rule that nothing is shown before it is on disk."""

    journal: Journal
    folder: Folder
    runbook: Runbook
    operator: str
    params: dict[str, Any]
    clock: Callable[[], datetime]
    #: what a new firing is recorded as, and in whose name: ``trigger-fired`` by the cockpit in
    #: a window; ``watch-finding`` by the person running ``cockpit watch`` after it (signed)
    finding_kind: EventKind = EventKind.TRIGGER_FIRED
    finding_actor: str = SYSTEM_ACTOR
    #: the secret parameters' values: written as *** wherever an event would hold them
    secrets: tuple[str, ...] = ()
    #: turns for the bookkeeping of the tasks that record (steps, probes): a key between two
    pacer: Pacer = field(default_factory=Pacer)
    _subscribers: list[Callable[[Event], None]] = field(default_factory=list, init=False)
    _follower: JournalFollower | None = field(default=None, init=False)  # for events other processes append

    @property
    def state(self) -> CockpitState:
        return self.folder.state

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        self._subscribers.append(callback)

    # -- recording

    def record(
        self, kind: EventKind, *, gate: Action | None = None, judge_only: str | None = None, **fields: Any
    ) -> Event:
        """Append durably, fold, evaluate the triggers, tell subscribers.

        With ``gate``, the action is judged again under the change log's lock, after
        folding whatever another process (a reviewer raising a trigger) appended since
        the first check: a refusal then writes nothing. ``judge_only``: the triggers judge
        that node alone (a probe round's probe: the round ends with a whole evaluation).
        """
        fields.setdefault("actor", self.operator)
        actor = fields["actor"]

        def recheck() -> None:
            assert gate is not None
            self.check(gate, actor)

        if self.secrets:  # a filled command, its output, a person's words: none keeps a secret parameter
            fields = {k: masked(v, self.secrets) for k, v in fields.items()}
        folded_seq = self.state.last_seq
        event = self.journal.append(kind, precondition=recheck if gate is not None else None, **fields)
        self._fold_appended(event)
        if kind is self.finding_kind:
            return event
        if judge_only is not None:
            self.evaluate_triggers(nodes=(judge_only,))
        elif event.node is not None and kind in NODE_LOCAL_KINDS and event.seq == folded_seq + 1:
            # only this node moved (no other process's event was folded in between)
            self.evaluate_triggers(changed=(event.node,))
        else:
            self.evaluate_triggers()
        return event

    def record_action(
        self, kind: EventKind, action: Action, actor: str, *, recheck: bool = False, **fields: Any
    ) -> Event:
        """Record what ``action`` did: the event names the action's stage, node, step, item,
        trigger, wave and words (``fields`` add to them or replace them). ``recheck``: judge
        the action again under the lock (:meth:`record`'s ``gate``)."""
        named = {name: getattr(action, name, None) for name in _ACTION_EVENT_FIELDS}
        context = {name: value for name, value in named.items() if value is not None}
        return self.record(kind, gate=action if recheck else None, actor=actor, **{**context, **fields})

    def _notify(self, event: Event) -> None:
        for callback in list(self._subscribers):
            callback(event)

    def evaluate_triggers(
        self,
        now: datetime | None = None,
        *,
        nodes: Collection[str] | None = None,
        changed: Collection[str] | None = None,
    ) -> list[Event]:
        """Record a trigger-fired event for every new firing (the moment it is seen).
        ``nodes``, ``changed``: the first pass judges only these, or only these nodes'
        changes (:func:`cockpit.engine.triggers.evaluate`)."""
        fired: list[Event] = []
        for _ in range(10):  # a firing can enable another (e.g. the wave budget); bounded
            findings = evaluate_triggers(
                self.runbook, self.state, self.params, now or self.clock(), nodes=nodes, changed=changed
            )
            nodes = changed = None  # after a firing, everything is judged again
            if not findings:
                break
            for finding in findings:
                event = self.journal.append(
                    self.finding_kind,
                    actor=self.finding_actor,
                    trigger=finding.trigger_id,
                    node=finding.node,
                    facts={"evidence": finding.evidence},  # trigger-fired's facts, or watch-finding's
                )
                self._fold_appended(event)
                fired.append(event)
        return fired

    def _fold_appended(self, event: Event) -> None:
        """Fold an event this process just appended; others' appends before it are folded first.
        Its signature is this process's own (made with the key it holds): counted as that
        person's without checking it again."""
        signed, signer = self.folder.signatures, self.journal.signer
        if isinstance(signed, dict) and signer is not None:
            signed[event.seq] = signer.principal
        if event.seq == self.state.last_seq + 1:
            self.folder.apply(event)
            self._notify(event)
        else:
            self.absorb_foreign()

    def follow(self, follower: JournalFollower) -> None:
        """Follow the file from where ``follower`` stands (a resume's follower starts past what it read)."""
        self._follower = follower

    def absorb_foreign(self) -> list[Event]:
        """Fold, in file order, the events other processes (a reviewer) appended since the last fold.

        Cheap when nothing changed (one ``stat``); the first call reads the file once.
        The UI calls it on a short timer; every gate check and probe round calls it too.
        """
        if self._follower is None:
            self._follower = JournalFollower(self.journal.path)
        fresh = [e for e in self._follower.poll() if e.seq > self.state.last_seq]
        signed = self.folder.signatures
        if isinstance(signed, dict) and self._follower.signatures:
            signed.update(self._follower.signatures)  # verified by the follower as they arrived
        for event in fresh:
            self.folder.apply(event)
            self._notify(event)
        return fresh

    def check(self, action: Action, actor: str) -> None:
        """Raise :class:`ActionRefused` unless the gate allows ``action`` now (others' events folded first)."""
        self.absorb_foreign()
        verdict = check_action(self.state, self.runbook, action, actor, operator=self.operator)
        if not verdict.allowed:
            raise ActionRefused(action, verdict.reasons)

    # -- runbook lookups

    def stage_spec(self, stage: str) -> tuple[list[Step], list[Item]]:
        """The steps and items of a stage, or of the rollback procedure."""
        if stage == ROLLBACK_STAGE and self.runbook.rollback is not None:
            return list(self.runbook.rollback.steps), list(self.runbook.rollback.items)
        try:
            spec = self.runbook.stage(stage)
        except KeyError:
            raise BadInput(f"no stage {stage!r} in runbook {self.runbook.id}") from None
        return list(spec.steps), list(spec.items)

    def step(self, stage: str, step: str) -> Step:
        found = next((s for s in self.stage_spec(stage)[0] if s.id == step), None)
        if found is None:
            raise BadInput(f"no step {step!r} in stage {stage!r}")
        return found

    def item(self, stage: str, item: str) -> Item:
        found = next((i for i in self.stage_spec(stage)[1] if i.id == item), None)
        if found is None:
            raise BadInput(f"no item {item!r} in stage {stage!r}")
        return found

    def is_window(self, stage: str) -> bool:
        return stage in self.state.window

    def window_target(self) -> str | None:
        """Where a window step that runs ``where = "node"`` runs: the canary."""
        waves = self.state.waves
        return waves[0][0] if waves and waves[0] else None

    def node_facts(self, node: str | None) -> dict[str, Any]:
        """Recorded facts of a node (its baseline) for ``{recorded_*}`` placeholders and ``when``
        conditions (empty before its baseline is recorded), and its ``{node_name}``."""
        if node is None or node not in self.state.nodes:
            return {}
        # the scheduler's name for the node, as the header recorded its target (the inventory
        # name when none was given, and in logs written before node_name existed)
        target = next((t for t in self.journal.header.targets if t.get("name") == node), {})
        return {
            "node_name": target.get("node_name") or node,
            **recorded_facts(self.state.nodes[node].baseline.to_toml()),
        }
