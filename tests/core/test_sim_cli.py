"""`cockpit sim`: listens on loopback only, writes the client files, stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.commands.sim import SCENARIO_NAMES, parse_listen
from cockpit.errors import BadInput
from cockpit.sim import SCENARIOS


def test_scenario_names_listed_in_help_match_the_simulator() -> None:
    assert set(SCENARIO_NAMES) == set(SCENARIOS)


@pytest.mark.parametrize("listen", ["10.1.2.3:0", "0.0.0.0:2222", "example.org:22", "127.0.0.1", "127.0.0.1:x"])
def test_listen_refuses_anything_but_loopback(listen: str) -> None:
    with pytest.raises(BadInput):
        parse_listen(listen)


def test_listen_accepts_loopback_forms() -> None:
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("localhost:2200") == ("127.0.0.1", 2200)
    assert parse_listen("[::1]:0") == ("::1", 0)


def test_bad_listen_is_exit_2_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--nodes", "2", "--listen", "192.168.0.10:0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "loopback" in err


def test_sim_runs_until_sigterm_and_serves_ssh(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    env["HOME"] = str(tmp_path)
    sim_dir = tmp_path / "fleet"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cockpit", "sim", "--nodes", "3", "--dir", str(sim_dir), "--scenario", "happy"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("ready"):
                break
        text = "".join(lines)
        assert "ready" in text, text
        assert f"cockpit probe 'gpu[01-03]' --ssh-config {sim_dir / 'ssh_config'}" in text
        probe = subprocess.run(
            [sys.executable, "-m", "cockpit", "probe", "gpu[01-03]", "--ssh-config", str(sim_dir / "ssh_config")],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert probe.returncode == 0, probe.stdout + probe.stderr
        assert "gpu[01-03] (3)" in probe.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "stopped" in err and "Traceback" not in err
