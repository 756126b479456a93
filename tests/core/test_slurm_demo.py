"""``cockpit demo --backend slurm``: the headless autopilot's window on the simulated fleet,
with a real Slurm (Debian's munged, slurmctld and a slurmd per node, started by the demo
itself on 127.0.0.1) draining, rebooting, holding and resuming the nodes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import slurm_fixture

from cockpit.changelog.events import EventKind, StepFinishedEvent
from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.sim import slurm_cluster

pytestmark = pytest.mark.slurm


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_demo_runs_its_window_through_a_real_slurm(tmp_path: Path) -> None:
    slurm_fixture.require_slurm()
    sessions = tmp_path / "sessions"
    demo = subprocess.Popen(
        [sys.executable, "-m", "cockpit", "demo", "--backend", "slurm", "--autopilot", "--headless",
         "--nodes", "1", "--scenario", "happy", "--speed", "20", "--sessions", str(sessions),
         "--change-id", "CHG-SLURM-DEMO"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        said, _ = demo.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        demo.terminate()  # SIGTERM pauses the window: what it was doing is the failure's evidence
        said, _ = demo.communicate(timeout=20)
        pytest.fail("the demo did not end in 150 s; its last words:\n" + "\n".join(said.splitlines()[-15:]))
    assert demo.returncode == 0, said[-3000:]
    assert "through the slurm backend" in said
    assert "outcome: keep-upgraded-path (expected keep-upgraded-path)" in said, said[-2000:]
    log = read_session(sessions / "CHG-SLURM-DEMO.toml")
    assert log.header.backend == "slurm"
    finished = {
        (e.node, e.step): e.facts for e in log.events if isinstance(e, StepFinishedEvent) and e.stage == "reboot"
    }
    reboot = finished[("gpu01", "reboot")]
    assert reboot.ok and reboot.backend == "slurm" and reboot.native_state == "DOWN+DRAIN"  # held for its smoke
    observed = {e.facts.native_state for e in log.events if e.kind is EventKind.NODE_OBSERVED and e.node == "gpu01"}
    assert any("REBOOT_" in (state or "") for state in observed) and "IDLE" in observed, observed  # Slurm's words


def test_without_slurm_the_demo_says_what_to_install_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # a machine without slurmctld: what slurm_available finds there
    monkeypatch.setattr(slurm_cluster, "find", lambda binary: None if binary == "slurmctld" else f"/usr/sbin/{binary}")
    code = main(["demo", "--backend", "slurm", "--autopilot", "--headless", "--sessions", str(tmp_path)])
    said = capsys.readouterr()
    assert code == 2, said
    assert said.err.count("\n") == 1 and "Traceback" not in said.err, said.err
    assert "apt-get install slurmctld slurmd slurm-client munge" in said.err and "slurmctld" in said.err
    assert not list(tmp_path.iterdir())  # nothing started, nothing written
