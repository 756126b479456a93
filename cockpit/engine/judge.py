"""The rules the live session judges an intent by, applied again to an event read back.

A change log can be written by hand (anyone who can write the sessions folder can append a
well-chained block, and the operator can sign one with her own key), so the fold does not
take an event's word that it was allowed: before it applies a person's event it asks the
same question the live session asked before writing it, :func:`~cockpit.engine.rules.reasons_against`,
of the state folded so far, by that actor. An event the rules refuse stays in the log and is
listed in :attr:`~cockpit.engine.state.CockpitState.refused` with the rule it breaks; it
never moves the window.

Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cockpit.changelog.events import (
    DecisionEvent,
    Event,
    GatePassedEvent,
    ItemTickedEvent,
    ItemVerifiedEvent,
    OverrideEvent,
    PathChosenEvent,
    ProbeEvent,
    RollbackFinishedEvent,
    RollbackStartedEvent,
    SignoffEvent,
    StepStartedEvent,
    TriggerClearedEvent,
    TriggerFiredEvent,
    TriggersArmedEvent,
    WaveStartedEvent,
)
from cockpit.changelog.identity import is_system, same_person
from cockpit.engine import actions
from cockpit.engine.actions import Action
from cockpit.engine.rules import reasons_against
from cockpit.engine.state import CockpitState, RefusedEvent
from cockpit.runbook.model import Runbook

#: what the live session judged at the start of a long action and the event records at its
#: end: a pause in between does not undo a check that already ran
_STARTED_EARLIER = "the session is paused"


def action_of(state: CockpitState, event: Event) -> Action | None:
    """The intent ``event`` records, as the live session judged it; None for what is not an
    intent a person asks for (probes, a step's end, notes, the cockpit's own triggers)."""
    if isinstance(event, ProbeEvent):  # most of a long log's events, and never an intent
        return None
    # a window stage is addressed without a node (the event may name the host a step ran on)
    node = None if event.stage in state.window else event.node
    stage = event.stage or ""
    match event:
        case ItemTickedEvent():
            return actions.TickItem(stage=stage, node=node, item=event.item or "", note=event.note)
        case ItemVerifiedEvent():
            return actions.VerifyItem(stage=stage, node=node, item=event.item or "")
        case SignoffEvent():
            return actions.SignOff(stage=stage, node=node, item=event.item, note=event.note)
        case GatePassedEvent():
            return actions.PassGate(stage=stage, node=node)
        case OverrideEvent():
            return actions.Override(stage=stage, node=node, reason=event.reason or "")
        case StepStartedEvent():
            return actions.RunStep(stage=stage, node=node, step=event.step or "")
        case TriggersArmedEvent():
            return actions.ArmTriggers()
        case TriggerFiredEvent():
            if is_system(event.actor):
                return None  # an evaluator's finding, judged by the evaluator (:mod:`.triggers`)
            return actions.RaiseTrigger(trigger=event.trigger or "", note=event.note or "", node=event.node)
        case TriggerClearedEvent():
            return actions.ClearTrigger(trigger=event.trigger or "", reason=event.reason or "")
        case WaveStartedEvent():
            return actions.StartWave(wave=event.wave if event.wave is not None else -1)
        case PathChosenEvent():
            f = event.facts
            return actions.ChoosePath(path=f.path or "", rationale=f.rationale or "", owner=f.owner or "")
        case DecisionEvent():
            return actions.RecordDecision(outcome=event.facts.outcome or "")
        case RollbackStartedEvent():
            return actions.StartRollback(node=event.node or "", reason=event.reason or "")
        case RollbackFinishedEvent():
            return actions.FinishRollback(node=event.node or "")
        case _:
            return None


def rule_problem(state: CockpitState, runbook: Runbook, event: Event, operator: str) -> str | None:
    """Why the window's rules would have refused ``event`` by its actor at this point (the
    state folded up to the event before it), in words; None when they would allow it.

    The same function the live session asks before it writes (:func:`reasons_against`);
    words a person must write (a reason, a note) are not judged again: the live session
    required them, and logs written before a rule about them still read."""
    action = action_of(state, event)
    if action is None:
        return None
    # the cockpit acts for the operator (an item its own check verified)
    actor = operator if is_system(event.actor) else event.actor
    reasons = reasons_against(state, runbook, action, actor, operator, need_text=False)
    if isinstance(event, ItemVerifiedEvent | RollbackFinishedEvent):
        reasons = [r for r in reasons if r != _STARTED_EARLIER]
    return "; ".join(reasons) if reasons else None


def signature_problem(event: Event, operator: str | None, signatures: Mapping[int, str] | None) -> str | None:
    """Why ``event`` counts for nothing for want of a signature, when signatures are required
    (``signatures`` not None): none, or one by a key not listed for its actor. The cockpit's
    own events are signed with the operator's key, as the process acting for her."""
    if signatures is None:
        return None
    principal = signatures.get(event.seq)
    if principal is None:
        return f"{event.kind} by {event.actor!r} has no valid signature from an allowed key (signatures are required)"
    expected = operator if is_system(event.actor) else event.actor
    if not same_person(principal, expected):
        return f"{event.kind} by {event.actor!r} is signed with {principal}'s key, not {expected}'s"
    return None


def refused_words(refused: Sequence[RefusedEvent]) -> str:
    """The refused events in one phrase for the first line of a ticket or a screen ('' when none)."""
    if not refused:
        return ""
    first = refused[0]
    more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
    return f"REFUSED {len(refused)} event(s) the rules do not allow, first {first.words()}{more}"
