"""`cockpit run --dry-run` against `cockpit sim`: every command filled in, per node and stage,
the gate items, exit 0, and the simulated nodes exactly as before; `--log-file` gets the
cockpit's own diagnostics, apart from the change log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sim_process import probe_json, running_sim

pytestmark = pytest.mark.binary  # the binary against the simulator as a process: tests/conftest.py SLOW_MARKS


def test_dry_run_prints_every_filled_command_and_changes_no_node(tmp_path: Path) -> None:
    with running_sim(tmp_path, nodes=2) as sim:
        before = probe_json(sim, "gpu[01-02]")
        log_file = tmp_path / "tool.log"
        done = subprocess.run(
            [sys.executable, "-m", "cockpit", "run", "--dry-run", "--change-id", "DRY-1", "--hosts", "gpu[01-02]",
             "--ssh-config", str(sim.ssh_config), "--param", "control_host=control",
             "--sessions", str(tmp_path / "sessions"), "--log-file", str(log_file)],
            capture_output=True, text=True, env=sim.env, timeout=90, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        after = probe_json(sim, "gpu[01-02]")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for node in ("gpu01", "gpu02"):
        # placeholders filled for this node, on the host the step runs on
        assert f"step cordon on control host control: kubectl cordon {node}" in out
        assert f"{node}: stage upgrade: Install the target driver" in out
        recorded = before[node]["driver_package"]
        assert f"| grep -F {recorded}" in out  # {recorded_driver_package}, from the probe
    # the node's own set, named as NVIDIA's repository names it: the open flavour kept, fabric
    # manager and nscq without the branch from 580 on
    target_set = next(ln for ln in out.splitlines() if ln.strip().startswith("step target-set on gpu01"))
    for spec in ("nvidia-driver-580-open=580.95.05*", "nvidia-dkms-580-open=580.95.05*"):
        assert f"'{spec}'" in target_set, target_set
    for spec in ("nvidia-fabricmanager=580.95.05*", "libnvidia-nscq=580.95.05*"):
        assert f"'{spec}'" in target_set, target_set
    assert (
        "step install on gpu01 [destructive: asks for confirmation]: xargs -r env DEBIAN_FRONTEND=noninteractive "
        "apt-get -o DPkg::Lock::Timeout=120 install -y < /var/cache/cockpit/"
    ) in out
    assert "    boot-id-changed: built-in check boot_id_changed" in out  # the gate items each stage needs
    assert "cannot fill" not in out, out
    for node in ("gpu01", "gpu02"):
        for fact in ("boot_id", "driver_version", "driver_package", "kernel_module_version"):
            assert after[node][fact] == before[node][fact], (node, fact)
    assert not (tmp_path / "sessions").exists()  # no change log for a rehearsal
    diagnostics = log_file.read_text()
    assert "gpu01: connected in" in diagnostics and "probe round: 2 nodes" in diagnostics
    assert "connected in" not in done.stderr  # the diagnostics stay in their file
