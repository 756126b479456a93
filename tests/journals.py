"""A small change log written by hand for the export and terminal-safety tests: the
shipped runbook's id, one node, and a clock that moves a minute per event, so the
timelines the exports print are the same on every run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from cockpit.changelog.journal import Journal, SessionHeader

START = datetime(2026, 8, 5, 22, tzinfo=UTC)


def minute_journal(directory: Path, change_id: str) -> Journal:
    """A new journal for ``change_id`` on gpu01 whose events are a minute apart."""
    ticks = iter(range(1000))
    header = SessionHeader(change_id=change_id, runbook_id="driver-upgrade-r580", runbook_sha256="0" * 64,
                           operator="alice", hosts=["gpu01"], created_at=START)  # fmt: skip
    return Journal.create(directory, header, clock=lambda: START + timedelta(minutes=next(ticks)))
