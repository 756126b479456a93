"""A person ends a window: ``Session.end_by_person`` (and ``cockpit end``) writes
``session-ended`` with the outcome given, removes the lock file and says where the log is and
how to export it; the ticket then reads the window as ended, not "Session not closed"."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from offline_session import start_minimal
from repo_paths import REPO

from cockpit.changelog.events import EventKind, SessionEndedEvent
from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.engine.actions import Action, RunStep
from cockpit.errors import BadInput
from cockpit.export import FORMATS, export_text
from cockpit.export.summary import left_mid_change
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session


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

    ended = asyncio.run(session.end_by_person("roll-back", note="the vendor pulled the r580 build; re-plan"))

    assert ended.path == session.path and not lock.exists()
    assert ended.export_command == f"cockpit export {session.path} --format markdown"
    assert any(str(session.path) in line for line in ended.words())
    log = read_session(session.path)
    last = log.events[-1]
    assert isinstance(last, SessionEndedEvent) and last.actor == "alice" and last.facts.outcome == "roll-back"
    assert last.seq == ended.seq
    md = export_text(log, "markdown")
    assert "Session not closed" not in md
    assert "— roll-back" in md.splitlines()[0]  # the title's outcome: no decision was recorded
    assert "Change window closed (outcome: roll-back): the vendor pulled the r580 build; re-plan" in md


def test_ending_is_refused_without_an_outcome_twice_or_with_a_step_running(tmp_path: Path) -> None:
    session = start_minimal(tmp_path, "CHG-REF")
    with pytest.raises(BadInput, match="needs its outcome"):
        asyncio.run(session.end_by_person("  "))
    session.running["upgrade/install/gpu01"] = object()  # type: ignore[assignment]  # a step in flight
    with pytest.raises(BadInput, match="still running"):
        asyncio.run(session.end_by_person("roll-back"))
    session.running.clear()
    # the minimal runbook has no decision of its own: the generic ends and roll-back, nothing else
    assert session.runbook.ending_outcomes == ("completed", "abandoned", "roll-back")
    assert session.runbook.decision_outcomes == ("roll-back",)  # (D records no other)
    with pytest.raises(BadInput, match=r"outcome 'bogus' is not one of the runbook's: completed, abandoned, roll-back"):
        asyncio.run(session.end_by_person("bogus"))
    assert not [e for e in read_session(session.path).events if e.kind is EventKind.SESSION_ENDED]
    asyncio.run(session.end_by_person("completed"))
    with pytest.raises(BadInput, match="already ended"):
        asyncio.run(session.end_by_person("roll-back"))


def cockpit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60, cwd=REPO
    )


@pytest.mark.binary
def test_cockpit_end_closes_a_paused_window(tmp_path: Path) -> None:
    path = _paused(tmp_path, "CHG-CLI")
    lock = path.with_suffix(".lock")
    assert lock.exists()  # q left it behind

    done = cockpit("end", str(path), "--outcome", "roll-back", "--note", "both nodes on r580, smoke passed")
    assert done.returncode == 0, done.stderr
    assert f"cockpit export {path} --format markdown" in done.stdout
    assert not lock.exists()
    md = export_text(read_session(path), "markdown")
    assert "Session not closed" not in md and "Change window closed (outcome: roll-back)" in md

    again = cockpit("end", str(path), "--outcome", "roll-back")
    assert again.returncode == 2 and "already ended" in again.stderr


@pytest.mark.binary
def test_cockpit_end_is_refused_while_the_cockpit_holds_the_window(tmp_path: Path) -> None:
    session = start_minimal(tmp_path, "CHG-HELD")
    try:
        held = cockpit("end", str(session.path), "--outcome", "roll-back")
        assert held.returncode == 1 and "already open by alice" in held.stderr, held.stderr  # as resume says it
        assert not [e for e in read_session(session.path).events if e.kind is EventKind.SESSION_ENDED]
    finally:
        asyncio.run(session.close())


class _Stop(Exception):
    """Raised from the autopilot's on_action: the person stops the window there."""


async def _left_mid_smoke(sessions_dir: Path) -> Path:
    """The exploratory test's window: 8 demo nodes run by alice until gpu03 is about to run its
    smoke stage, then paused (q). Wave 3 (gpu03-gpu06) has started, but no step ran on
    gpu04-gpu06; gpu07 and gpu08 are in no wave yet."""

    def stop(action: Action) -> None:
        if isinstance(action, RunStep) and action.node == "gpu03" and action.stage == "smoke":
            raise _Stop

    async with demo_session(
        in_process=True, nodes=8, scenario="happy", sessions_dir=sessions_dir, change_id="CHG-MID", speed=40.0,
        operator="alice",
    ) as (session, _fleet):  # fmt: skip
        with pytest.raises(_Stop):
            await drive(session, on_action=stop)
        state = session.state
        assert state.nodes["gpu03"].current == "smoke" and state.wave_of("gpu04") == state.wave_of("gpu03")
        assert left_mid_change(state) == ["gpu03 left mid-change: incomplete (stopped in smoke, last gate: reboot)"]
        session.pause("q")
        return session.path


def _rows_naming(text: str, fmt: str, word: str) -> list[str]:
    """The lines (a table's rows) of a ticket that name ``word``, whatever the format."""
    if fmt == "jira-adf":
        rows: list[str] = []

        def texts(node: object) -> list[str]:
            if isinstance(node, dict):
                return [node["text"]] if isinstance(node.get("text"), str) else texts(node.get("content", []))
            return [t for child in node for t in texts(child)] if isinstance(node, list) else []

        def walk(node: object) -> None:
            if isinstance(node, dict):
                if node.get("type") == "tableRow":
                    rows.append(" | ".join(texts(node)))
                walk(node.get("content", []))
            elif isinstance(node, list):
                for child in node:
                    walk(child)

        walk(json.loads(text))
        return [r for r in rows if word in r]
    if fmt == "servicenow":
        fields = [v for v in json.loads(text)["change_request"].values() if isinstance(v, str)]
        return [line for field in fields for line in field.splitlines() if word in line]
    return [line for line in text.splitlines() if word in line]


def test_cockpit_end_takes_only_the_runbooks_outcomes_and_says_what_is_left_mid_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = asyncio.run(_left_mid_smoke(tmp_path))
    capsys.readouterr()

    assert main(["end", str(path), "--outcome", "bogus-outcome"]) == 2
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("\n") == 1, said
    assert said.err.startswith("cockpit: outcome 'bogus-outcome' is not one of the runbook's: "), said.err
    # the list the screen's E and D offer for this runbook
    assert "keep-upgraded-path, keep-isolated-path, keep-cu129-transition, roll-back" in said.err, said.err
    assert not [e for e in read_session(path).events if e.kind is EventKind.SESSION_ENDED]

    # a window that went wrong still ends: roll-back, the nodes left mid-change said first
    assert main(["end", str(path), "--outcome", "roll-back", "--note", "stopped at gpu03's smoke"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "warning: gpu03 left mid-change: incomplete (stopped in smoke, last gate: reboot)", out
    assert not any("gpu04" in line or "gpu07" in line for line in out), out  # never begun: nothing to say
    assert out[1].startswith("window ended (outcome: roll-back"), out

    tickets = {}
    for fmt in FORMATS:  # as a person exports it: the runbook the header names, matched
        assert main(["export", str(path), "--format", fmt]) == 0
        tickets[fmt] = ticket = capsys.readouterr().out
        # the closing stage's silence item applies only with silence = "true": here not applicable, never open
        rows = _rows_naming(ticket, fmt, "silence-ended")
        assert rows and all("not applicable" in r and "OPEN" not in r and "[open]" not in r for r in rows), (fmt, rows)
        # gpu04 (its wave started, nothing ran) and gpu07 (no wave) were never begun
        for node in ("gpu04", "gpu05", "gpu06", "gpu07"):
            found = [r for r in _rows_naming(ticket, fmt, node) if "not started" in r or "incomplete" in r]
            assert found and all("incomplete" not in r and "N/A →" not in r for r in found), (fmt, found)
        found = [r for r in _rows_naming(ticket, fmt, "gpu03") if "incomplete" in r]
        assert found and all("incomplete (stopped in smoke, last gate: reboot)" in r for r in found), (fmt, found)
    md = tickets["markdown"]
    assert "| `gpu04` | 3 | 575.57.08 | 575.57.08 | 8 | N/A | not started |" in md  # no GPU change claimed
    assert "— roll-back" in md.splitlines()[0]
