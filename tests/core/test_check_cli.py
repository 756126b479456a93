"""`cockpit check` as users run it: a real process, exit status, stdout and stderr."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

MALFORMED = Path(__file__).resolve().parent / "malformed_runbooks"


def cockpit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.mark.binary
def test_check_shipped_runbook_by_id_prints_the_outline() -> None:
    result = cockpit("check", "driver-upgrade-r580")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    assert out.startswith("driver-upgrade-r580 v1: ")
    assert re.search(
        r"\n  scheduler +choice = 'kubernetes'  \(kubernetes\|slurm\|none\)\n", out
    )  # padded to the longest name
    assert (
        "waves: 1, 1, then waves of wave_size (=4); max parallel max_parallel (=1); failure budget failure_budget (=0)"
        in out
    )
    assert "  auto   gpu-missing                  gpu_count_below_baseline" in out
    assert "  manual protected-workload-failed    raised by a person" in out
    assert "  window arm                    1 step, 3 items  [arms triggers]" in out
    assert (
        "  node   record                 13 steps (5 with sudo), 19 items" in out
    )  # pre-change gate, re-join baseline
    # apt and dnf variants of the package steps: a node runs one set (recorded_package_manager)
    assert "  node   upgrade                16 steps (3 destructive, 14 with sudo), 21 items" in out  # and via Ansible
    assert (
        "rollback: Drain, reinstall the saved driver, fabric manager and nscq packages, restore holds, reboot, "
        "verify: 14 steps (3 destructive, 9 with sudo), 14 items"  # a Slurm backend drain among them
    ) in out
    assert out.endswith("ok\n")
    assert len(out.splitlines()) <= 72  # about one tall screen (engines, serve checks, re-join gate)


@pytest.mark.binary
def test_check_minimal_runbook_by_path(tmp_path: Path) -> None:
    from cockpit.runbook.loader import shipped_runbooks

    copy = tmp_path / "copy.toml"
    copy.write_bytes(shipped_runbooks()["minimal-driver-upgrade"].read_bytes())
    result = cockpit("check", str(copy))
    assert result.returncode == 0, result.stderr
    assert f"file {copy}" in result.stdout
    assert "waves: 1, 1, then waves of wave_size (=4)" in result.stdout


@pytest.mark.binary
def test_check_lists_every_problem_on_stderr() -> None:
    result = cockpit("check", "several_model_problems.toml", cwd=MALFORMED)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "several_model_problems.toml:11: parameters.wave_size.default: expected str or int or float or bool, got array [2]",
        "several_model_problems.toml:20: triggers[0].mode: expected 'auto' or 'manual', got string 'automatic'",
        "several_model_problems.toml:37: stages[1].scope: expected 'window' or 'node', got string 'nodes'",
    ]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: d / "absent.toml", "absent.toml: no such file"),
        (lambda d: d, "is a directory, expected a runbook TOML file"),
        (
            lambda d: _write(d / "garbage.toml", bytes(range(128)) * 4),
            "garbage.toml:1: invalid TOML: Invalid statement (column 1)",
        ),
        (
            lambda d: _write(d / "latin1.toml", "title = 'caf\xe9'\n".encode("latin-1")),
            "latin1.toml:1: not UTF-8 text: byte 0xe9",
        ),
        (
            lambda d: _write(d / "elf.toml", b"\x7fELF\x02\x01\x01\x00" + b"\xff" * 64),
            "elf.toml:1: not UTF-8 text: byte 0xff at column 9",
        ),
    ],
)
@pytest.mark.binary
def test_check_bad_files_exit_2_with_one_line(tmp_path: Path, make: Callable[[Path], Path], expected: str) -> None:
    target = make(tmp_path)
    result = cockpit("check", str(target))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.binary
def test_check_unknown_name_and_missing_argument() -> None:
    result = cockpit("check", "no-such-runbook")
    assert result.returncode == 2
    assert (
        result.stderr
        == "cockpit: no runbook file or shipped runbook named 'no-such-runbook' (shipped: driver-upgrade, driver-upgrade-gpu-operator, driver-upgrade-r580, minimal-driver-upgrade)\n"
    )
    result = cockpit("check")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "RUNBOOK" in result.stderr


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
