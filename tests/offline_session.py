"""An operator's session with no transport: two nodes on the minimal runbook, for the tests
that need a real change log written by a real session, and no SSH."""

from __future__ import annotations

from pathlib import Path

from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load
from cockpit.session.operator import Session


def start_minimal(sessions_dir: Path, change_id: str, operator: str = "alice") -> Session:
    """A new session on gpu01 and gpu02; the minimal runbook's first stage ("arm") needs a
    second person's sign-off."""
    return Session.start(
        sessions_dir=sessions_dir,
        change_id=change_id,
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01"), HostTarget(name="gpu02")],
        operator=operator,
        transport=None,
    )
