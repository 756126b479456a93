"""One person, however the name is spelled, cannot satisfy the two-person rule (issue 12, identity)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from repo_paths import REPO

from cockpit.changelog.events import EventKind, parse_event, writer_problem
from cockpit.changelog.identity import (
    DEMO_OPERATOR,
    DEMO_REVIEWER,
    SYSTEM_ACTOR,
    check_person_name,
    person_key,
    same_person,
)
from cockpit.changelog.journal import Journal, SessionHeader
from cockpit.engine.actions import SignOff
from cockpit.engine.fold import fold
from cockpit.engine.rules import check_action
from cockpit.errors import BadInput
from cockpit.runbook.loader import load_runbook

RUNBOOK = load_runbook(REPO / "checklists" / "driver-upgrade-r580.toml").runbook

SPELLINGS_OF_ALICE = [
    "alice",
    "Alice",
    "ALICE",
    "alice.",
    " alice ",
    '"alice"',
    "alice@localhost",
    "alice@corp.example.com",
    "CORP\\alice",
    "corp/alice",
    "al.ice",
    "a-lice",
    "alíce",
    "ａｌｉｃｅ",  # fullwidth letters: NFKC makes them ASCII
    # homoglyphs (issue 28): UTS #39's confusable skeleton
    "\u0430lice",  # Cyrillic а
    "alic\u0435",  # Cyrillic е
    "\u0430\u04cf\u0456\u0441\u0435",  # all Cyrillic: а ӏ і с е
    "\u0251lice",  # Latin alpha ɑ
    "\u03b1lice",  # Greek α
    "a1ice",
    "aIice",
    "ALlCE",
    "𝖆𝖑𝖎𝖈𝖊",  # mathematical fraktur: NFKD, then the skeleton
]


@pytest.mark.parametrize("spelling", SPELLINGS_OF_ALICE)
def test_every_spelling_of_the_operator_is_the_operator(spelling: str) -> None:
    assert same_person(spelling, "alice")
    assert person_key(spelling) == person_key("alice")


@pytest.mark.parametrize("other", ["bob", "alicia", "alice2", "malice", "ali", "\u042cob", "carol"])
def test_other_people_stay_other_people(other: str) -> None:
    assert not same_person(other, "alice")


@pytest.mark.parametrize("spelling", SPELLINGS_OF_ALICE)
def test_the_rules_refuse_the_operators_sign_off_under_any_spelling(spelling: str) -> None:
    state = fold(RUNBOOK, RUNBOOK.defaults(), ["gpu01"], [], operator="alice")
    verdict = check_action(state, RUNBOOK, SignOff(stage="compat", item="classified"), spelling, operator="alice")
    assert not verdict.allowed
    assert any("needs a second person" in r for r in verdict.reasons)


def test_the_cockpit_itself_cannot_sign_off() -> None:
    state = fold(RUNBOOK, RUNBOOK.defaults(), ["gpu01"], [], operator="alice")
    verdict = check_action(state, RUNBOOK, SignOff(stage="compat", item="classified"), SYSTEM_ACTOR, operator="alice")
    assert not verdict.allowed


def _header() -> SessionHeader:
    return SessionHeader(
        change_id="CHG-7", runbook_id=RUNBOOK.id, runbook_sha256="0" * 64, operator="alice", hosts=["gpu01"]
    )


@pytest.mark.parametrize("spelling", ["Alice", "alice@localhost", "ALICE.", "cockpit"])
def test_the_journal_refuses_a_sign_off_by_the_operator_or_the_cockpit(tmp_path: Path, spelling: str) -> None:
    with Journal.create(tmp_path, _header()) as journal:
        with pytest.raises(ValueError, match="not recorded"):
            journal.append(EventKind.SIGNOFF, actor=spelling, stage="compat", item="classified")
        assert journal.append(EventKind.SIGNOFF, actor="bob", stage="compat", item="classified").seq == 1


@pytest.mark.parametrize(
    "kind", [EventKind.GATE_PASSED, EventKind.OVERRIDE, EventKind.STEP_STARTED, EventKind.TRIGGERS_ARMED]
)
def test_operator_only_kinds_by_a_reviewer_are_refused_on_append(tmp_path: Path, kind: EventKind) -> None:
    Journal.create(tmp_path, _header()).close()
    reviewer = Journal.open_for_append(tmp_path / "CHG-7.toml", "bob", exclusive=False)
    with reviewer, pytest.raises(ValueError, match="only the operator"):
        reviewer.append(kind, stage="compat", reason="because")


def test_a_hand_written_reviewer_override_is_flagged_and_left_out_by_the_fold() -> None:
    ts = datetime(2026, 12, 2, tzinfo=UTC)
    events = [
        parse_event(dict(seq=1, ts=ts, actor="alice", kind="session-started", facts={"operator": "alice"})),
        parse_event(dict(seq=2, ts=ts, actor="bob", kind="override", stage="freeze", reason="skip it")),
        parse_event(dict(seq=3, ts=ts, actor="Alice@laptop", kind="signoff", stage="compat", item="classified")),
    ]
    state = fold(RUNBOOK, RUNBOOK.defaults(), ["gpu01"], events, operator="alice")
    assert state.overrides == []  # the reviewer's override moved nothing
    assert state.window["freeze"].status != "passed"
    assert any("seq 2 (override)" in a and "left out" in a for a in state.anomalies)
    assert any("seq 3 (signoff)" in a and "does not count" in a for a in state.anomalies)
    assert [s.counted for s in state.signoffs] == [False]
    assert state.window["compat"].items["classified"].status == "needs-signoff"
    assert state.reviewers == []


def test_writer_problem_table() -> None:
    assert writer_problem(EventKind.PROBE, SYSTEM_ACTOR, "alice") is None
    assert writer_problem(EventKind.GATE_PASSED, SYSTEM_ACTOR, "alice") is not None
    assert writer_problem(EventKind.GATE_PASSED, "ALICE", "alice") is None
    assert writer_problem(EventKind.NOTE, "bob", "alice") is None
    assert writer_problem(EventKind.DECISION, "bob", "alice") is not None


@pytest.mark.parametrize(
    "name",
    [DEMO_OPERATOR, DEMO_REVIEWER, "Demo-Operator", "cockpit", "", "-x", "a b", "é" * 3, "\u0430lice", "b\u03bfb"],
)
def test_names_refused_at_the_edge(name: str) -> None:
    with pytest.raises(BadInput) as info:
        check_person_name(name, "--operator")
    assert "\n" not in str(info.value)


def test_demo_identities_are_fine_in_the_demo() -> None:
    assert check_person_name(DEMO_OPERATOR, "--operator", demo=True) == DEMO_OPERATOR


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--change-id", "CHG-9", "--hosts", "gpu01", "--operator", "Demo-Operator", "--dry-run"],
        ["run", "--change-id", "CHG-9", "--hosts", "gpu01", "--operator", "cockpit", "--dry-run"],
        ["pair", "--change-id", "CHG-9", "--hosts", "gpu01", "--operator", "alice", "--reviewer", "ALICE"],
    ],
)
@pytest.mark.binary
def test_the_cli_refuses_identities_in_one_line(argv: list[str], tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "cockpit", *argv], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("name", "scripts"), [("\u0430lice", "Cyrillic and Latin"), ("b\u03bfb", "Latin and Greek"), ("alice", None)]
)
def test_a_name_mixing_scripts_is_refused_saying_which(name: str, scripts: str | None) -> None:
    if scripts is None:
        assert check_person_name(name, "--operator") == name
        return
    with pytest.raises(BadInput, match=f"a name mixing {scripts} letters can pass for someone else's"):
        check_person_name(name, "--operator")


def test_a_homoglyph_of_the_operator_signing_off_by_hand_does_not_count_as_a_second_person() -> None:
    """A sign-off written into the log as "аlice" (Cyrillic а) is the operator's own."""
    signoff = parse_event(
        {
            "seq": 1, "ts": datetime(2026, 8, 5, tzinfo=UTC), "actor": "\u0430lice", "kind": "signoff",
            "stage": "compat", "item": "classified",
        }
    )  # fmt: skip
    state = fold(RUNBOOK, RUNBOOK.defaults(), ["gpu01"], [signoff], operator="alice")
    verdict = check_action(state, RUNBOOK, SignOff(stage="compat", item="classified"), "\u0430lice", operator="alice")
    assert not verdict.allowed and any("needs a second person" in r for r in verdict.reasons)
    item = state.window["compat"].items["classified"]
    # recorded, but not as a second person: the item still waits for one (before: "done")
    assert item.status == "needs-signoff", item


def test_a_hand_edited_operator_name_reaches_the_cast_header_inert(tmp_path: Path) -> None:
    """The cast's title is what a player puts in the pane title: an OSC sequence in the
    operator's name (retitle, OSC 52 clipboard) is shown as stand-ins, never obeyed."""
    import dataclasses
    import json

    from cockpit.changelog.journal import read_session
    from cockpit.fleet.targets import HostTarget
    from cockpit.runbook.loader import load
    from cockpit.session.operator import Session
    from cockpit.view.cast import write_cast

    loaded = load("minimal-driver-upgrade")
    session = Session.start(
        sessions_dir=tmp_path, change_id="CHG-CAST", loaded=loaded, params={}, targets=[HostTarget(name="gpu01")],
        operator="alice", transport=None,
    )  # fmt: skip
    session.pause("lunch")
    session.journal.close()
    log = read_session(session.path)
    hostile = "alice\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07"
    log = dataclasses.replace(log, header=log.header.model_copy(update={"operator": hostile}))
    write_cast(log, loaded.runbook, tmp_path / "w.cast")
    title = json.loads((tmp_path / "w.cast").read_text().splitlines()[0])["title"]
    assert "\x1b" not in title and "\x07" not in title, title
    assert "alice␛]0;owned␇" in title
