"""What a resume needs is in the change log's header, and `cockpit resume` can override it:
`--runbook` (refused unless its sha256 is the recorded one), `--ssh-config`, `--known-hosts`.
A log written before those header fields existed still reads and resumes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from repo_paths import EXAMPLE, EXAMPLE_RUNBOOK, with_example_runbook

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.errors import BadInput
from cockpit.session.operator import Session

RECORDED_RUNBOOK = EXAMPLE.parent / "checklists" / "driver-upgrade-r580.toml"


def _old_open_session(folder: Path) -> Path:
    """The example's header as an older cockpit wrote it (relative runbook path, no ssh_config), no events;
    its runbook (older than the shipped one, kept in sessions/examples/checklists/) beside it."""
    text = EXAMPLE.read_text()
    assert "ssh_config" not in text and 'runbook_path = "checklists/' in text
    path = folder / "demo-gpu-missing.toml"
    path.write_text(text[: text.index("[events.")])
    with_example_runbook(folder)  # the runbook it recorded, where a session looks after its recorded path
    return path


def test_a_log_from_before_the_fields_resumes_from_any_directory(tmp_path: Path, monkeypatch) -> None:
    path = _old_open_session(tmp_path)
    monkeypatch.chdir(tmp_path.parent)  # the recorded relative path does not resolve here: beside the file does
    header = read_session(path).header
    assert header.ssh_config is None and header.known_hosts is None and header.inventory is None
    session = Session.resume(path)
    try:
        assert session.loaded.sha256 == header.runbook_sha256
        assert read_session(path).events[-1].kind is EventKind.SESSION_RESUMED
    finally:
        session.journal.close()


def test_resume_takes_a_moved_runbook_with_the_same_hash(tmp_path: Path) -> None:
    path = _old_open_session(tmp_path)
    moved = tmp_path / "moved.toml"
    shutil.copy(EXAMPLE_RUNBOOK, moved)
    session = Session.resume(path, runbook=moved)
    try:
        assert session.loaded.path == str(moved)
    finally:
        session.journal.close()


def test_resume_refuses_a_runbook_whose_hash_differs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _old_open_session(tmp_path)
    edited = tmp_path / "edited.toml"
    edited.write_text(EXAMPLE_RUNBOOK.read_text() + "\n# edited\n")
    assert main(["resume", str(path), "--runbook", str(edited)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not the runbook session demo-gpu-missing started with" in err
    with pytest.raises(BadInput, match="not the runbook"):
        Session.resume(path, runbook=edited)
    assert not read_session(path).events  # nothing written by either refusal


def test_resume_says_when_the_recorded_ssh_config_is_gone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _old_open_session(tmp_path)
    gone = tmp_path / "gone" / "ssh_config"
    text = path.read_text().replace('operator = "alice"', f'operator = "alice"\nssh_config = "{gone}"')
    path.write_text(text)
    assert read_session(path).header.ssh_config == str(gone)
    assert main(["resume", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--ssh-config {gone}, which is gone; give --ssh-config FILE" in err
