"""A change log written before the hash chain (schema 1) still reads, replays, exports and
takes appends, reported as unchained (tests/fixtures/schema1: the example as committed then)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from repo_paths import REPO

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import Journal, read_session
from cockpit.cli import main
from cockpit.export import FORMATS, export_text
from cockpit.runbook.loader import load_runbook
from cockpit.session.review import session_runbook
from cockpit.view.replay import Replay

OLD = REPO / "tests" / "fixtures" / "schema1" / "demo-gpu-missing.toml"


def test_an_unchained_log_reads_replays_and_exports_as_unchained() -> None:
    log = read_session(OLD)
    assert log.schema_written == 1 and not log.chain.chained and log.chain.broken_at is None
    assert len(log.events) == 66 and log.torn is None
    loaded = session_runbook(log.header, OLD)
    replay = Replay.for_session(log, loaded.runbook)
    assert replay.final.last_seq == 66
    for fmt in FORMATS:
        text = export_text(log, fmt, load_runbook(OLD.parent / "checklists" / "driver-upgrade-r580.toml"))
        assert "chain: unchained: written before the chain" in text, fmt


def test_verify_says_unchained_and_resume_appends_stay_unchained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the old example skipped steps its runbook requires: the rules refuse them, whatever the schema
    assert main(["verify", str(OLD)]) == 1
    out = capsys.readouterr()
    assert "chain: unchained: written before the chain" in out.out
    assert "FAILED at seq 5: refused (gate-passed by alice)" in out.err, out.err
    copy = tmp_path / OLD.name
    shutil.copy(OLD, copy)
    with Journal.open_for_append(copy, "bob", exclusive=False) as journal:
        assert journal.append(EventKind.NOTE, note="read later").seq == 67
    log = read_session(copy)
    assert log.schema_written == 1 and not log.chain.chained and log.events[-1].note == "read later"
    assert b"prev = " not in copy.read_bytes()  # an old log is not half chained
