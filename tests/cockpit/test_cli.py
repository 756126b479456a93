"""The CLI contract: bad usage is one line on stderr and exit status 2."""

from __future__ import annotations

import subprocess
import sys


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
