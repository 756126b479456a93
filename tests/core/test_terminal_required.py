"""The TUI commands refuse in one line (exit 2) without a terminal, naming the headless form;
headless commands end quietly when the reader of their output goes away."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import EXAMPLE

pytestmark = pytest.mark.binary  # the real binary, without a terminal: tests/conftest.py SLOW_MARKS


def _cockpit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # stdin from /dev/null and stdout a pipe: what cron, CI or `| less` give a command
    return subprocess.run(
        [sys.executable, "-m", "cockpit", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=cwd,
    )  # fmt: skip


def refusal(stderr: str) -> None:
    """Worded as every other one-line refusal: "cockpit:" first, each quoted command closed."""
    assert stderr.startswith("cockpit: ") and stderr.count("'") % 2 == 0, stderr
    assert "(stdin and stdout are not terminals)" in stderr, stderr


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (("demo", "--nodes", "2"), "'cockpit demo --autopilot --headless'"),
        (("replay", str(EXAMPLE)), f"'cockpit replay {EXAMPLE} --cast FILE'"),
        (("review", str(EXAMPLE), "--as", "rev-bob"), None),
        (
            ("run", "--change-id", "T-1", "--hosts", "gpu01"),
            "'cockpit run --dry-run ...' (a read-only look) or 'cockpit pair --no-attach ...' (the window in tmux)",
        ),
    ],
)
def test_tui_commands_refuse_without_a_terminal(tmp_path: Path, args: tuple[str, ...], hint: str | None) -> None:
    done = _cockpit(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""  # no escape codes painted into the pipe
    assert done.stderr.count("\n") == 1 and "needs a terminal" in done.stderr
    refusal(done.stderr)
    if hint:
        assert hint in done.stderr
    assert not (tmp_path / "sessions").exists()  # refused before any change log was opened


def test_resume_refuses_without_a_terminal(tmp_path: Path) -> None:
    # a session still open: the example's header (a window of alice's), none of its events
    text = EXAMPLE.read_text()
    session = tmp_path / "demo-gpu-missing.toml"
    session.write_text(text[: text.index("[events.")])
    # resume folds the log as it reads it, so it finds the recorded runbook (beside the log) first
    shutil.copytree(EXAMPLE.parent / "checklists", tmp_path / "checklists")
    done = _cockpit("resume", str(session), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "needs a terminal" in done.stderr, done.stderr
    refusal(done.stderr)
    assert "'cockpit pair --change-id demo-gpu-missing --no-attach ...' (resumed in tmux)" in done.stderr


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    capture = tmp_path / "query.csv"
    capture.write_text("name, driver_version\n" + "NVIDIA H100 80GB HBM3, 580.65.06\n" * 5000)
    done = subprocess.run(
        f"{sys.executable} -m cockpit parse query-gpu {capture} --json | head -1",
        shell=True, capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.stdout == "{\n"
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
