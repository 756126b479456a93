"""The CLI contract: bad usage is one line on stderr and exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def cockpit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60)


def test_unknown_subcommand_is_one_line_exit_2() -> None:
    result = cockpit("frobnicate")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "invalid choice" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_lists_every_command() -> None:
    result = cockpit("--help")
    assert result.returncode == 0
    for name in ("demo", "run", "check", "probe", "parse", "triage", "export", "replay"):
        assert name in result.stdout


def one_line_exit_2(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not result.stderr.startswith("cockpit: cockpit")
    return result.stderr


def test_no_command_is_one_line() -> None:
    assert "cockpit --help" in one_line_exit_2(cockpit())


@pytest.mark.binary
def test_param_values_are_checked_like_runbook_defaults(tmp_path) -> None:
    for param, words in (
        ("max_parallel=0", "waves.max_parallel"),
        ("wave_size=-1", "wave_size"),
        ("failure_budget=-1", "failure_budget"),
    ):
        err = one_line_exit_2(
            cockpit("run", "--change-id", "CHG-1", "--hosts", "gpu01", "--param", param, "--sessions", str(tmp_path))
        )
        assert words in err
    assert not list(tmp_path.iterdir()), "nothing is written for a refused window"


@pytest.mark.binary
def test_a_file_where_a_folder_belongs_is_bad_input(tmp_path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    err = one_line_exit_2(cockpit("demo", "--autopilot", "--headless", "--sessions", str(afile)))
    assert str(afile) in err


@pytest.mark.binary
def test_demo_refuses_a_fleet_too_small_for_its_story() -> None:
    assert "at least 2 nodes" in one_line_exit_2(cockpit("demo", "--autopilot", "--headless", "--nodes", "1"))


@pytest.mark.binary
def test_resume_refuses_an_ended_session() -> None:
    example = Path(__file__).resolve().parents[2] / "sessions" / "examples" / "demo-gpu-missing.toml"
    assert "nothing to resume" in one_line_exit_2(cockpit("resume", str(example)))
