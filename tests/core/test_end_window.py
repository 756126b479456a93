"""A person ends a window: ``Session.end_by_person`` (and ``cockpit end``) writes
``session-ended`` with the outcome given, removes the lock file and says where the log is and
how to export it; the ticket then reads the window as ended, not "Session not closed"."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from offline_session import start_minimal
from repo_paths import REPO

from cockpit.changelog.events import EventKind, SessionEndedEvent
from cockpit.changelog.journal import read_session
from cockpit.errors import BadInput
from cockpit.export import export_text


def _paused(tmp_path: Path, change_id: str) -> Path:
    """A window quit with q: paused, its lock released (the lock file stays behind)."""
    session = start_minimal(tmp_path, change_id)
    session.note("gpu01 and gpu02 reserved for the window until 23:00")
    session.pause("q")
    asyncio.run(session.close())
    return session.path


def test_a_window_ended_by_a_person_reads_ended_in_its_ticket(tmp_path: Path) -> None:
    session = start_minimal(tmp_path, "CHG-END")
    lock = session.path.with_suffix(".lock")
    assert lock.exists()
    assert "Session not closed" in export_text(read_session(session.path), "markdown")

    ended = asyncio.run(session.end_by_person("abandoned", note="the vendor pulled the r580 build; re-plan"))

    assert ended.path == session.path and not lock.exists()
    assert ended.export_command == f"cockpit export {session.path} --format markdown"
    assert any(str(session.path) in line for line in ended.words())
    log = read_session(session.path)
    last = log.events[-1]
    assert isinstance(last, SessionEndedEvent) and last.actor == "alice" and last.facts.outcome == "abandoned"
    assert last.seq == ended.seq
    md = export_text(log, "markdown")
    assert "Session not closed" not in md
    assert "— abandoned" in md.splitlines()[0]  # the title's outcome: no decision was recorded
    assert "Change window closed (outcome: abandoned): the vendor pulled the r580 build; re-plan" in md


def test_ending_is_refused_without_an_outcome_twice_or_with_a_step_running(tmp_path: Path) -> None:
    session = start_minimal(tmp_path, "CHG-REF")
    with pytest.raises(BadInput, match="needs its outcome"):
        asyncio.run(session.end_by_person("  "))
    session.running["upgrade/install/gpu01"] = object()  # type: ignore[assignment]  # a step in flight
    with pytest.raises(BadInput, match="still running"):
        asyncio.run(session.end_by_person("completed"))
    session.running.clear()
    assert not [e for e in read_session(session.path).events if e.kind is EventKind.SESSION_ENDED]
    asyncio.run(session.end_by_person("completed"))
    with pytest.raises(BadInput, match="already ended"):
        asyncio.run(session.end_by_person("completed"))


def cockpit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60, cwd=REPO
    )


@pytest.mark.binary
def test_cockpit_end_closes_a_paused_window(tmp_path: Path) -> None:
    path = _paused(tmp_path, "CHG-CLI")
    lock = path.with_suffix(".lock")
    assert lock.exists()  # q left it behind

    done = cockpit("end", str(path), "--outcome", "completed", "--note", "both nodes on r580, smoke passed")
    assert done.returncode == 0, done.stderr
    assert f"cockpit export {path} --format markdown" in done.stdout
    assert not lock.exists()
    md = export_text(read_session(path), "markdown")
    assert "Session not closed" not in md and "Change window closed (outcome: completed)" in md

    again = cockpit("end", str(path), "--outcome", "completed")
    assert again.returncode == 2 and "already ended" in again.stderr


@pytest.mark.binary
def test_cockpit_end_is_refused_while_the_cockpit_holds_the_window(tmp_path: Path) -> None:
    session = start_minimal(tmp_path, "CHG-HELD")
    try:
        held = cockpit("end", str(session.path), "--outcome", "completed")
        assert held.returncode == 1 and "already open by alice" in held.stderr, held.stderr  # as resume says it
        assert not [e for e in read_session(session.path).events if e.kind is EventKind.SESSION_ENDED]
    finally:
        asyncio.run(session.close())
