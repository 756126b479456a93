"""Every command in the log: a checklist item verified by a command records the filled
command line (redacted as a step's is) and its output, exit status and where it ran, as a
step does; a long output goes to an artifact. Real commands on this host (``where =
"local"``), a real session and its change log."""

from __future__ import annotations

from pathlib import Path

from cockpit.changelog.events import ItemVerifiedEvent
from cockpit.changelog.facts import StepFinishedFacts
from cockpit.changelog.journal import read_session
from cockpit.engine.actions import VerifyItem
from cockpit.export import export_text
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load_runbook
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.operator import Session

RUNBOOK = Path(__file__).resolve().parents[1] / "fixtures" / "runbooks" / "command-items.toml"
TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ0123456789"


def _session(tmp_path: Path, **params: ParamValue) -> Session:
    return Session.start(
        sessions_dir=tmp_path, change_id="CHG-CMD", loaded=load_runbook(RUNBOOK), params=params,
        targets=[HostTarget(name="gpu01")], operator="alice", transport=None,
    )  # fmt: skip


def _verified(path: Path, item: str) -> ItemVerifiedEvent:
    found = [e for e in read_session(path).events if isinstance(e, ItemVerifiedEvent) and e.item == item]
    assert len(found) == 1, found
    return found[0]


async def test_a_command_item_records_its_command_line_and_output_redacted(tmp_path: Path) -> None:
    session = _session(tmp_path)
    try:
        await session.perform(VerifyItem(stage="preflight", item="says-hello"))
        await session.perform(VerifyItem(stage="preflight", item="fails"))
    finally:
        await session.close()
    hello = _verified(session.path, "says-hello").facts
    assert hello.ok is True and hello.exit_status == 0 and hello.where == "local"
    # the filled command line, its secret masked as in a step's record, and what it said
    assert hello.command == "printf 'hello %s\\n' [REDACTED]; printf 'warned\\n' >&2", hello.command
    assert hello.stdout == "hello [REDACTED]\n" and hello.stderr == "warned\n"
    events = session.path.read_text().split("# end of session header", 1)[1]
    assert TOKEN not in events  # (the header records the window's parameters as given)
    failed = _verified(session.path, "fails").facts
    assert failed.ok is False and failed.exit_status == 3
    assert failed.command == "printf 'no GPU here\\n'; exit 3" and failed.stdout == "no GPU here\n"
    assert failed.evidence is not None and "got 3" in failed.evidence
    # as a step records the same: the keys an item's run shares with a step's facts
    shared = set(type(failed).model_fields) & set(StepFinishedFacts.model_fields)
    assert {"command", "where", "target", "exit_status", "stdout", "stderr", "error", "error_kind"} <= shared


async def test_a_long_output_goes_to_an_artifact_as_a_steps_does(tmp_path: Path) -> None:
    big = "x" * 70_000
    session = _session(tmp_path, probe_token=big)
    try:
        await session.perform(VerifyItem(stage="preflight", item="says-hello"))
    finally:
        await session.close()
    facts = _verified(session.path, "says-hello").facts
    assert facts.stdout_artifact is not None and facts.artifact == facts.stdout_artifact
    assert facts.stdout is not None and f"characters in artifact {facts.stdout_artifact}" in facts.stdout
    stored = list(session.path.parent.rglob(f"*{facts.stdout_artifact.removeprefix('sha256:')}*"))
    assert stored, "the whole output is kept beside the log"
    assert big in stored[0].read_text()
    # the ticket lists it with the command line that made it, as a step's
    ticket = export_text(read_session(session.path), "markdown")
    row = next(line for line in ticket.splitlines() if facts.stdout_artifact in line)
    assert "preflight/says-hello" in row and "printf 'hello %s" in row
