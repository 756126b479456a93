"""Events: every fact of a change window, in the order it happened.

The change log is a sequence of :class:`Event`. The session engine appends them
(to disk first, then shows them); the gating engine, the trigger evaluators, the
reviewer's view, replay and export all fold the same sequence. An event is
immutable once written.

Kind-specific facts live in ``facts`` (plain TOML-able values). The keys each kind
uses are listed in :data:`FACT_KEYS` so that writers and readers agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION = 1


class EventKind(StrEnum):
    SESSION_STARTED = "session-started"
    SESSION_RESUMED = "session-resumed"  # facts: interrupted (list of step refs whose outcome is unknown)
    SESSION_PAUSED = "session-paused"
    SESSION_ENDED = "session-ended"
    PROBE = "probe"  # node; facts: the NodeState summary (only recorded when it changed)
    BASELINE_RECORDED = "baseline-recorded"  # node; facts: driver_package, driver_version, boot_id, gpu_count, labels
    STEP_STARTED = "step-started"  # stage, step, node; facts: command, where
    STEP_FINISHED = (
        "step-finished"  # stage, step, node; facts: exit_status, ok, duration_s, stdout, stderr, artifact, error
    )
    ITEM_TICKED = "item-ticked"  # stage, item, node; note (manual tick by a person)
    ITEM_VERIFIED = "item-verified"  # stage, item, node; facts: ok, evidence
    SIGNOFF = "signoff"  # stage, item (None = the whole gate), node; actor is the reviewer
    GATE_PASSED = "gate-passed"  # stage, node
    OVERRIDE = "override"  # stage, node, reason; facts: blocked_by (what the override bypassed)
    TRIGGERS_ARMED = "triggers-armed"  # facts: triggers (ids)
    TRIGGER_FIRED = "trigger-fired"  # trigger, node; facts: evidence
    TRIGGER_CLEARED = "trigger-cleared"  # trigger, reason
    WAVE_STARTED = "wave-started"  # wave (0-based); facts: nodes
    PATH_CHOSEN = "path-chosen"  # facts: path, rationale, owner
    DECISION = "decision"  # facts: outcome, answers
    ROLLBACK_STARTED = "rollback-started"  # node, reason
    ROLLBACK_FINISHED = "rollback-finished"  # node; facts: ok
    NOTE = "note"  # note


#: Keys of ``facts`` per kind, for writers, readers and tests to agree on.
FACT_KEYS: dict[EventKind, frozenset[str]] = {
    EventKind.STEP_STARTED: frozenset({"command", "where", "target"}),
    EventKind.STEP_FINISHED: frozenset(
        {"command", "where", "target", "exit_status", "ok", "duration_s", "stdout", "stderr", "artifact", "error"}
    ),
    EventKind.ITEM_VERIFIED: frozenset({"ok", "evidence"}),
    EventKind.TRIGGER_FIRED: frozenset({"evidence"}),
    EventKind.OVERRIDE: frozenset({"blocked_by"}),
    EventKind.PATH_CHOSEN: frozenset({"path", "rationale", "owner"}),
    EventKind.DECISION: frozenset({"outcome", "answers"}),
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class Event(BaseModel):
    """One fact of the change window. ``seq`` is dense and starts at 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int = Field(ge=1)
    ts: datetime
    actor: str
    kind: EventKind
    node: str | None = None
    stage: str | None = None
    step: str | None = None
    item: str | None = None
    trigger: str | None = None
    wave: int | None = None
    reason: str | None = None  # overrides, clears, rollbacks: why
    note: str | None = None  # ticks, sign-offs, notes: what the person wrote
    facts: dict[str, Any] = Field(default_factory=dict)

    @field_validator("ts")
    @classmethod
    def _utc(cls, ts: datetime) -> datetime:
        if ts.tzinfo is None:
            raise ValueError("timestamp must carry a UTC offset")
        return ts.astimezone(UTC)

    def to_toml_dict(self) -> dict[str, Any]:
        """The event as TOML-able values: ``None`` fields dropped (TOML has no null)."""
        data = self.model_dump(mode="python", exclude_none=True)
        if not data.get("facts"):
            data.pop("facts", None)
        return data
