"""Events and actions in words: the one place an event or an action becomes text.

:func:`event_text` says what an event did, for every audience: the exports' timeline and
the UI's event log read the long form (a sentence with the telling fact: the evidence,
the reason, the error), cast chapters, replay markers and the scrub bar read the short
form (a few words naming the moment). :func:`describe` says what an action would do, for
the Next line, the palette and notifications. This module is the only one in the view
that reads an event's facts.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from cockpit.changelog.events import Event, EventKind, SessionEndedEvent, UnknownEvent, wave_number
from cockpit.changelog.facts import NodeObservedFacts
from cockpit.engine.actions import describe  # an action in words lives with the action models
from cockpit.fleet.results import ErrorKind

__all__ = ["Form", "describe", "event_text", "event_tone", "is_failure", "why_rollback_failed"]


class Form(StrEnum):
    """How much an event's words say."""

    LONG = "long"  # a sentence with the telling fact: exports' timeline, the event log
    SHORT = "short"  # a few words naming the moment: cast chapters, replay markers, the scrub bar


#: Kinds that open a chapter of a cast (and a marker of the replay's timeline).
CHAPTER_KINDS: frozenset[EventKind] = frozenset(
    {
        EventKind.SESSION_STARTED,
        EventKind.SESSION_RESUMED,
        EventKind.SESSION_ENDED,
        EventKind.GATE_PASSED,
        EventKind.OVERRIDE,
        EventKind.TRIGGER_FIRED,
        EventKind.TRIGGER_CLEARED,
        EventKind.WAVE_STARTED,
        EventKind.WAVE_HALTED,
        EventKind.WAVE_DONE,
        EventKind.TRIGGERS_ARMED,
        EventKind.ROLLBACK_STARTED,
        EventKind.ROLLBACK_FINISHED,
        EventKind.DECISION,
    }
)


SESSION_KINDS: frozenset[EventKind] = frozenset(
    {EventKind.SESSION_STARTED, EventKind.SESSION_RESUMED, EventKind.SESSION_PAUSED, EventKind.SESSION_ENDED}
)


#: Why a rollback left its node unrestored, by the built-in check its gate failed on, in
#: the words the screen and the ticket both use.
ROLLBACK_FAILED_BECAUSE: dict[str, str] = {
    "gpus_match_baseline": (
        "a GPU missing before the rollback is still missing after it: a rollback puts the old driver "
        "back, not the hardware (a GPU that fell off the bus comes back only with a power cycle or a repair)"
    ),
    "boot_id_changed": "the node did not come back from the rollback's reboot",
    "driver_library_match": "the old driver's kernel module and libraries still disagree after the rollback",
    "no_fatal_xid": "the GPUs still log fatal Xid errors after the rollback",
    "fatal_xid": "the GPUs still log fatal Xid errors after the rollback",
}
#: What a failed rollback leaves, said after why.
ROLLBACK_FAILED_LEAVES = "the node stays out of service until a person has looked at it"


def why_rollback_failed(failed_checks: Iterable[str | None], failed_steps: Iterable[tuple[str, str]] = ()) -> str:
    """Why a node's rollback failed, in plain words: its steps that failed (id, failure),
    then the built-in checks of its rollback that did not hold (unknown ones, or none
    known, say so generally)."""
    reasons = [f"its {step} step failed ({failure})" for step, failure in failed_steps]
    reasons += [ROLLBACK_FAILED_BECAUSE[c] for c in dict.fromkeys(failed_checks) if c in ROLLBACK_FAILED_BECAUSE]
    why = "; ".join(reasons) if reasons else "the rollback's checks did not hold"
    return f"{why}; {ROLLBACK_FAILED_LEAVES}"


def is_failure(event: Event) -> bool:
    """A step that failed, a check that did not hold, or a rollback that did not succeed."""
    if event.kind is EventKind.STEP_FINISHED or event.kind is EventKind.ITEM_VERIFIED:
        return event.facts.ok is False
    return event.kind is EventKind.ROLLBACK_FINISHED and not event.facts.ok


def event_tone(event: Event) -> str:
    """The semantic tone of an event in a log: ``alarm``, ``signoff`` or plain (``""``)."""
    if event.kind in (EventKind.TRIGGER_FIRED, EventKind.OVERRIDE) or is_failure(event):
        return "alarm"
    if event.kind is EventKind.NODE_OBSERVED and event.facts.stage == "failed":
        return "alarm"  # the engine says the node failed
    return "signoff" if event.kind is EventKind.SIGNOFF else ""


#: the most characters of a note, a reason or evidence an event's words show: a 10 MB note
#: written into the log by hand took the review screen 14 s and 1.3 GB to draw
SHOWN_MAX_CHARS = 4_000


def _with(text: str, detail: object) -> str:
    """``text: detail``, or ``text`` alone when there is no detail (a long detail cut, saying so)."""
    if not detail:
        return text
    said = str(detail)
    if len(said) > SHOWN_MAX_CHARS:
        said = f"{said[:SHOWN_MAX_CHARS]} [... {len(said) - SHOWN_MAX_CHARS:,} more characters in the change log]"
    return f"{text}: {said}"


def event_text(event: Event, form: Form = Form.LONG) -> str:
    """What ``event`` did, in words (see :class:`Form`)."""
    return _short(event) if form is Form.SHORT else _long(event)


def _long(event: Event) -> str:
    if isinstance(event, UnknownEvent):
        return f"Event of a kind this cockpit does not know: {event.raw_kind}"
    kind = event.kind
    on = f" on {event.node}" if event.node else ""
    ref = "/".join(x for x in (event.stage, event.step or event.item) if x)
    if kind is EventKind.SESSION_STARTED:
        return "Change window opened"
    if event.kind is EventKind.SESSION_RESUMED:
        interrupted = event.facts.interrupted or []
        return "Session resumed" + (f" (interrupted: {', '.join(map(str, interrupted))})" if interrupted else "")
    if kind is EventKind.SESSION_PAUSED:
        return _with("Session paused", event.note)
    if kind is EventKind.SESSION_ENDED:
        outcome = event.facts.outcome if isinstance(event, SessionEndedEvent) else None
        return _with("Change window closed" + (f" (outcome: {outcome})" if outcome else ""), event.note)
    if event.kind is EventKind.PATH_CHOSEN:
        return f"Recovery path chosen: {event.facts.path or '?'} (owner {event.facts.owner or '?'})"
    if event.kind is EventKind.TRIGGERS_ARMED:
        return f"Rollback triggers armed ({len(event.facts.triggers or [])})"
    if event.kind is EventKind.WAVE_STARTED:
        # recorded from 0; people count waves from 1, as every screen and export shows them
        how = f" (runs itself, confirmed {event.facts.confirmed!r})" if event.facts.confirmed else ""
        return f"Wave {wave_number(event.wave or 0)} started{how}: {', '.join(event.facts.nodes or [])}"
    if event.kind is EventKind.WAVE_HALTED:
        return _with(f"Wave {wave_number(event.wave or 0)} HALTED", event.facts.reason)
    if event.kind is EventKind.WAVE_DONE:
        done = len(event.facts.done or [])
        return f"Wave {wave_number(event.wave or 0)} done: {done} node(s) through, {event.facts.actions or 0} actions"
    if event.kind is EventKind.TRIGGER_FIRED:
        return _with(f"Trigger {event.trigger} FIRED{on}", event.facts.evidence or event.note)
    if kind is EventKind.TRIGGER_CLEARED:
        return _with(f"Trigger {event.trigger} cleared", event.reason)
    if kind is EventKind.OVERRIDE:
        return _with(f"OVERRIDE of {event.stage}{on}", event.reason)
    if kind is EventKind.ROLLBACK_STARTED:
        return _with(f"Rollback started{on}", event.reason)
    if event.kind is EventKind.ROLLBACK_FINISHED:
        if event.facts.ok:
            return f"Rollback succeeded{on}"
        return f"Rollback FAILED{on}" + (f": {'; '.join(event.facts.blocked_by)}" if event.facts.blocked_by else "")
    if event.kind is EventKind.DECISION:
        return f"Decision: {event.facts.outcome or '?'}"
    if kind is EventKind.SIGNOFF:
        what = f"{event.stage}/{event.item}" if event.item else f"{event.stage} gate"
        return f"Signed off {what}{on}"
    if kind is EventKind.STEP_STARTED:
        return f"Step {ref}{on} started"
    if event.kind is EventKind.STEP_FINISHED:
        if event.facts.ok:
            return f"Step {ref}{on} done"
        error = event.facts.error or f"exit {event.facts.exit_status}"
        if event.facts.error_kind == ErrorKind.INTERRUPTED:
            return f"Step {ref}{on} {error}"  # "interrupted: outcome unknown", not a failure seen
        how = "cancelled" if event.facts.error_kind == ErrorKind.CANCELLED else "failed"
        return f"Step {ref}{on} {how}: {error}"
    if kind is EventKind.ITEM_TICKED:
        return _with(f"Ticked {ref}{on}", event.note)
    if event.kind is EventKind.ITEM_VERIFIED:
        verdict = "verified" if event.facts.ok else "FAILED its check"
        return _with(f"{ref}{on} {verdict}", event.facts.evidence or event.note)
    if kind is EventKind.GATE_PASSED:
        return f"Gate {event.stage} passed{on}"
    if kind is EventKind.BASELINE_RECORDED:
        return f"Baseline recorded{on}"
    if event.kind is EventKind.PROBE:
        return f"Probed{on}" + (f": {event.facts.health}" if event.facts.health else "")
    if kind is EventKind.NOTE:
        return _with("Note", event.note)
    if event.kind is EventKind.NODE_OBSERVED:
        return _observed(event.facts, on)
    if event.kind is EventKind.NOTIFICATION_SENT:
        f = event.facts
        how = "sent" if f.ok else "NOT delivered"
        tries = f", {f.attempts} tries" if (f.attempts or 0) > 1 else ""
        return f"Notification {f.notice or '?'} {how} to {f.sink or '?'} ({f.status or '?'}{tries})"
    if event.kind is EventKind.WATCH_STARTED:
        started = event.facts
        again = "resumed" if started.resumed else "started"
        return f"Watch {again} on {len(started.nodes or [])} node(s) until {started.until or '?'}"
    if event.kind is EventKind.WATCH_FINDING:
        return _with(f"Watch: trigger {event.trigger} FIRED{on}", event.facts.evidence)
    if event.kind is EventKind.WATCH_ENDED:
        return _with(f"Watch ended ({event.facts.findings or 0} finding(s))", event.facts.reason)
    return _with(f"{kind}{on}", event.reason or event.note)


def _observed(facts: NodeObservedFacts, on: str) -> str:
    """An engine's word on a node: ``slurm reports gpu01: DRAIN+REBOOT_ISSUED (rebooting),
    driver 580.95.05: reboot requested; job 42``."""
    native = facts.native_state or "?"
    seen = f"{native} ({facts.stage})" if facts.stage and facts.stage != native else native
    text = f"{facts.backend or 'the engine'} reports{on.removeprefix(' on')}: {seen}"
    if facts.driver_version:
        text += f", driver {facts.driver_version}"
    details = [facts.reason] if facts.reason else []
    details += [f"{k} {v}" for k, v in (facts.evidence or {}).items()]
    return _with(text, "; ".join(details))


def _short(event: Event) -> str:
    if isinstance(event, UnknownEvent):
        return f"unknown kind {event.raw_kind}"
    kind = event.kind
    on = f" on {event.node}" if event.node else ""
    if kind is EventKind.GATE_PASSED:
        return f"{event.stage} passed{on}"
    if kind is EventKind.OVERRIDE:
        return _with(f"OVERRIDE {event.stage}{on}", event.reason)
    if kind is EventKind.TRIGGER_FIRED:
        return f"TRIGGER {event.trigger} fired{on}"
    if kind is EventKind.TRIGGER_CLEARED:
        return f"trigger {event.trigger} cleared"
    if kind is EventKind.WAVE_STARTED:
        return f"wave {wave_number(event.wave or 0)} started"
    if kind is EventKind.WAVE_HALTED:
        return f"wave {wave_number(event.wave or 0)} halted"
    if kind is EventKind.WAVE_DONE:
        return f"wave {wave_number(event.wave or 0)} done"
    if kind is EventKind.TRIGGERS_ARMED:
        return "triggers armed"
    if kind is EventKind.ROLLBACK_STARTED:
        return f"rollback started{on}"
    if event.kind is EventKind.ROLLBACK_FINISHED:
        return f"rollback finished{on}" + ("" if event.facts.ok else " (failed)")
    if event.kind is EventKind.DECISION:
        return f"decision: {event.facts.outcome or '?'}"
    if event.kind is EventKind.PATH_CHOSEN:
        return f"path: {event.facts.path or '?'}"
    if kind is EventKind.SIGNOFF:
        return f"sign-off by {event.actor}"
    if event.kind is EventKind.NODE_OBSERVED:
        return f"{event.facts.backend or 'engine'}: {event.facts.native_state or '?'}{on}"
    if event.kind is EventKind.NOTIFICATION_SENT:
        return f"notified {event.facts.sink or '?'}" + ("" if event.facts.ok else " (failed)")
    if kind is EventKind.WATCH_FINDING:
        return f"WATCH {event.trigger} fired{on}"
    if kind in (EventKind.WATCH_STARTED, EventKind.WATCH_ENDED):
        return str(kind).replace("-", " ")
    if kind in SESSION_KINDS:
        return str(kind).replace("-", " ")
    ref = "/".join(x for x in (event.stage, event.step or event.item) if x)
    if is_failure(event):
        return f"failure: {ref}{on}"
    return f"{kind}" + (f" {ref}" if ref else "") + on
