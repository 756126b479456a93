"""Small change logs written by hand: a header of the shipped runbook's id on one node, and,
for the export and terminal-safety tests, a clock that moves a minute per event, so the
timelines the exports print are the same on every run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cockpit.changelog.journal import Journal, SessionHeader

START = datetime(2026, 8, 5, 22, tzinfo=UTC)


def gpu01_header(change_id: str, **more: Any) -> SessionHeader:
    """The header of alice's window of the shipped runbook on gpu01; ``more`` sets further fields."""
    return SessionHeader(change_id=change_id, runbook_id="driver-upgrade-r580", runbook_sha256="0" * 64,
                         operator="alice", hosts=["gpu01"], **more)  # fmt: skip


def minute_journal(directory: Path, change_id: str) -> Journal:
    """A new journal for ``change_id`` on gpu01 whose events are a minute apart."""
    ticks = iter(range(1000))
    header = gpu01_header(change_id, created_at=START)
    return Journal.create(directory, header, clock=lambda: START + timedelta(minutes=next(ticks)))
