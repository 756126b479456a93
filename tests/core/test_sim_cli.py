"""`cockpit sim`: listens on loopback only, writes the client files, stops on SIGTERM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sim_process import running_sim

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


@pytest.mark.binary
def test_sim_runs_until_sigterm_and_serves_ssh(tmp_path: Path) -> None:
    with running_sim(tmp_path, nodes=3) as sim:
        assert f"cockpit probe 'gpu[01-03]' --ssh-config {sim.ssh_config}" in sim.ready_text
        probe = subprocess.run(
            [sys.executable, "-m", "cockpit", "probe", "gpu[01-03]", "--ssh-config", str(sim.ssh_config)],
            capture_output=True, text=True, env=sim.env, timeout=60,
        )  # fmt: skip
        assert probe.returncode == 0, probe.stdout + probe.stderr
        assert "gpu[01-03] (3)" in probe.stdout
    assert sim.exit_status == 0
    assert "stopped" in sim.stderr and "Traceback" not in sim.stderr
