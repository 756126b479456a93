"""Pair review on one change log: an operator's Session and a reviewer (in-process and in
another process) append to the same file; each folds the other's events in file order."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from offline_session import start_minimal

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import SessionHeader, read_session
from cockpit.engine.actions import (
    ActionRefused,
    ClearTrigger,
    SignOff,
)
from cockpit.engine.fold import fold
from cockpit.errors import BadInput
from cockpit.runbook.loader import load
from cockpit.session.operator import Session
from cockpit.session.review import ReviewerSession, ReviewRefused, session_runbook

pytestmark = pytest.mark.timeout(60)

OPERATOR = "alice"
REVIEWER = "bob"


def start_operator(tmp_path: Path, change_id: str = "CHG-PAIR") -> Session:
    """An operator on the minimal runbook: its first stage ("arm") needs a second person's sign-off."""
    return start_minimal(tmp_path, change_id, OPERATOR)


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[Session]:
    """The operator of :func:`start_operator`, closed after the test."""
    started = start_operator(tmp_path)
    try:
        yield started
    finally:
        await started.close()


def disk_state(path: Path, session: Session):
    log = read_session(path)
    return fold(session.runbook, log.header.parameters, log.header.hosts, log.events, operator=log.header.operator)


REVIEWER_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from cockpit.engine.actions import parse_action
    from cockpit.session.review import ReviewerSession, ReviewRefused

    path, name = sys.argv[1], sys.argv[2]
    with ReviewerSession(path, name) as rev:
        refusals = {}
        for kind, extra in (("run-step", {"stage": "drain", "step": "cordon", "node": "gpu01"}),
                            ("override", {"stage": "arm", "reason": "trust me"}),
                            ("pass-gate", {"stage": "arm"}),
                            ("arm-triggers", {})):
            try:
                rev.perform(parse_action({"kind": kind, **extra}))
            except ReviewRefused as exc:
                refusals[kind] = exc.reasons
        deadline = time.monotonic() + 20
        while not rev.pending_signoffs():
            if time.monotonic() > deadline:
                raise SystemExit("nothing to sign off")
            time.sleep(0.05)
            rev.poll()
        action = rev.pending_signoffs()[0]
        event = rev.sign_off(action.stage, action.item, action.node, note="read the triggers, agreed")
        print(json.dumps({"seq": event.seq, "at": time.time(), "stage": action.stage, "item": action.item,
                          "refusals": refusals}), flush=True)
""")


@pytest.mark.binary
async def test_reviewer_in_another_process_unblocks_the_operators_gate(session: Session) -> None:
    # the operator alone: cannot sign off the two-person item, so the gate stays shut
    with pytest.raises(ActionRefused) as own:
        session.sign_off("arm", "triggers-reviewed", actor=OPERATOR)
    assert any("second person" in r for r in own.value.reasons)
    with pytest.raises(ActionRefused) as shut:
        session.pass_gate("arm")
    assert any("needs sign-off by a second person" in r for r in shut.value.reasons)
    assert not any(e.kind is EventKind.SIGNOFF for e in read_session(session.path).events)

    proc = subprocess.Popen(
        [sys.executable, "-c", REVIEWER_SCRIPT, str(session.path), REVIEWER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    report = json.loads(out)
    # the reviewer could not act as the operator: every attempt refused by the gate, nothing written
    assert set(report["refusals"]) == {"run-step", "override", "pass-gate", "arm-triggers"}
    assert all(any(f"only the operator ({OPERATOR})" in r for r in reasons) for reasons in report["refusals"].values())

    # the operator's own fold picks the sign-off up within a second
    seen_at = None
    while time.time() - report["at"] < 1.0:
        if any(e.kind is EventKind.SIGNOFF for e in session.absorb_foreign()):
            seen_at = time.time()
            break
        time.sleep(0.02)
    assert seen_at is not None, "the operator did not see the reviewer's sign-off within 1 s"
    item = session.state.window["arm"].items["triggers-reviewed"]
    assert item.status == "done" and item.by == REVIEWER
    assert session.state.reviewers == [REVIEWER]

    # now the gate opens for the operator
    session.arm_triggers()
    passed = session.pass_gate("arm")
    assert passed.seq == report["seq"] + 2
    log = read_session(session.path)
    assert [e.seq for e in log.events] == list(range(1, len(log.events) + 1))
    assert [(e.kind, e.actor) for e in log.events if e.actor == REVIEWER] == [(EventKind.SIGNOFF, REVIEWER)]
    assert session.state == disk_state(session.path, session)


async def test_interleaved_appends_fold_to_one_state_on_both_sides(session: Session) -> None:
    with ReviewerSession(session.path, REVIEWER) as rev:
        assert rev.state == session.state
        rev.note("watching from the jump host")
        session.note("starting the window")  # appended after the reviewer's: operator folds both, in order
        assert [n.actor for n in session.state.notes] == [REVIEWER, OPERATOR]
        new = rev.poll()
        assert [e.actor for e in new] == [OPERATOR]  # only what is new since the last poll
        assert rev.poll() == []
        rev.sign_off("arm", "triggers-reviewed", note="agreed")
        session.arm_triggers()  # its gate check absorbs the sign-off first
        session.pass_gate("arm")
        session.start_wave()
        rev.poll()
        assert rev.state == session.state == disk_state(session.path, session)
        assert session.state.current_wave == 0


async def test_reviewer_can_raise_a_manual_trigger_that_stops_the_operator(session: Session) -> None:
    with ReviewerSession(session.path, REVIEWER) as rev:
        rev.sign_off("arm", "triggers-reviewed")
        session.arm_triggers()
        session.pass_gate("arm")
        session.start_wave()
        with pytest.raises(ReviewRefused) as auto:
            rev.raise_trigger("gpu-missing", "gpu01", note="I think a GPU is gone")
        assert any("automatic" in r for r in auto.value.reasons)
        with pytest.raises(ReviewRefused):
            rev.raise_trigger("protected-workload-failed", "gpu01", note="")
        event = rev.raise_trigger("protected-workload-failed", "gpu01", note="inference canary 500s")
        assert event.actor == REVIEWER and event.kind is EventKind.TRIGGER_FIRED
        with pytest.raises(ActionRefused) as stopped:
            session.start_wave()
        assert any("protected-workload-failed" in r for r in stopped.value.reasons)
        trig = session.state.triggers["protected-workload-failed"]
        assert trig.status == "fired" and trig.fired_by == REVIEWER
        # and the reviewer cannot clear it: that is the operator's call, with a reason
        with pytest.raises(ReviewRefused):
            rev.perform(ClearTrigger(trigger="protected-workload-failed", reason="false alarm"))


async def test_reviewer_named_like_the_operator_is_refused(session: Session) -> None:
    with pytest.raises(BadInput, match="second person"):
        ReviewerSession(session.path, OPERATOR)
    for bad in ("  ", "bob\nseq = 1", "-oops"):
        with pytest.raises(BadInput, match="a name is 1-64"):
            ReviewerSession(session.path, bad)


async def test_watching_writes_nothing_and_a_changed_runbook_is_refused(tmp_path: Path) -> None:
    session = start_operator(tmp_path)
    await session.close()
    before = session.path.read_bytes()
    with ReviewerSession(session.path, REVIEWER) as rev:
        assert rev.pending_signoffs() == [SignOff(stage="arm", item="triggers-reviewed")]
        rev.poll()
    assert session.path.read_bytes() == before

    # a copy of the runbook, edited after the session started, must not be used for the fold
    text = load("minimal-driver-upgrade").text
    edited = tmp_path / "edited.toml"
    edited.write_text(text.replace("Minimal NVIDIA driver upgrade", "Edited upgrade"))
    header = read_session(session.path).header
    moved = SessionHeader.model_validate(
        {**header.model_dump(), "runbook_path": str(edited), "runbook_id": "not-shipped"}
    )
    with pytest.raises(BadInput, match="changed since session CHG-PAIR started"):
        session_runbook(moved, session.path)
    gone = SessionHeader.model_validate(
        {**header.model_dump(), "runbook_path": str(tmp_path / "nope.toml"), "runbook_id": "not-shipped"}
    )
    with pytest.raises(BadInput, match="cannot find runbook"):
        session_runbook(gone, session.path)


def test_a_newer_schema_file_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "NEW.toml"
    path.write_text('[session]\nschema_version = 99\nchange_id = "NEW"\n# end of session header\n')
    with pytest.raises(BadInput, match="newer cockpit"):
        ReviewerSession(path, REVIEWER)
