"""An operator's session with no transport: two nodes on the minimal runbook, for the tests
that need a real change log written by a real session, and no SSH; or a fleet of any size
on the shipped runbook with a frozen clock, for the UI tests and benchmarks."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
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


FROZEN = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)


def frozen_clock() -> datetime:
    return FROZEN


def start_offline(
    sessions_dir: Path, names: Iterable[str], *, change_id: str, control_host: str = "control"
) -> Session:
    """A new session on the shipped runbook over ``names`` (127.0.0.1:22 as ``ops``), operated
    by alice, with no transport and a frozen clock: what the screen shows depends only on the
    events written through it, so snapshots are the same on every run."""
    return Session.start(
        sessions_dir=sessions_dir,
        change_id=change_id,
        loaded=load(),
        params={"control_host": control_host},
        targets=[HostTarget(name=n, address="127.0.0.1", port=22, user="ops") for n in names],
        operator="alice",
        transport=None,
        clock=frozen_clock,
    )


def through_opening(session: Session, reviewer: str = "bob", *, why: str = "snapshot fixture") -> None:
    """Past the window's opening stages the quick way (overrides with reasons, the arm
    stage signed by a reviewer), then the first wave started."""
    for stage in ("freeze", "compat", "path", "preflight"):
        session.override(stage, reason=f"{stage} done on paper before the window ({why})")
    session.sign_off("arm", actor=reviewer)
    session.arm_triggers()
    session.pass_gate("arm")
    session.start_wave(0)
