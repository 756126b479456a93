"""The small CLI defects of the operator-safety issue: a driver version that is not one, a
name that does not resolve, unreachable nodes that fold although each message names its
host, and a node set too big to probe."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.commands.probe import render_folded
from cockpit.gpu.nodestate import Health, NodeState


def test_triage_refuses_a_driver_that_is_not_a_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "engine.log"
    log.write_text("INFO starting\n")
    assert main(["triage", str(log), "--driver", "banana"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a driver version: 'banana'" in err
    assert main(["triage", str(log), "--image-cuda", "thirteen"]) == 2
    assert "not a CUDA version: 'thirteen'" in capsys.readouterr().err
    assert main(["triage", str(log), "--driver", "r580", "--image-cuda", "13.0"]) == 0  # real ones go through


def test_unreachable_nodes_fold_when_each_message_names_its_host() -> None:
    states = [
        NodeState(host=h, health=Health.UNREACHABLE, health_evidence=f"{h}: cannot connect to {h}:22: no route to host")
        for h in ("gpu01", "gpu02", "gpu03")
    ]
    out = render_folded(states)
    assert out.count("health") == 1 and "gpu[01-03] (3)" in out
    assert "cannot connect to <node>:22: no route to host" in out
    # a name inside a longer one is not taken out
    other = NodeState(host="gpu1", health=Health.UNREACHABLE, health_evidence="gpu1: cannot connect to gpu10:22: x")
    assert "to gpu10:22" in render_folded([other])


@pytest.mark.binary
def test_probe_says_an_unknown_name_does_not_resolve(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cockpit", "probe", "nosuch[1-3].invalid", "--timeout", "10"],
        capture_output=True, text=True, timeout=60, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "nosuch[1-3].invalid (3)" in done.stdout  # one group for the three
    assert "cannot connect to <node>: the name does not resolve" in done.stdout
    assert "unknown error" not in done.stdout


def test_a_huge_node_set_is_refused_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert main(["probe", "gpu[01-99999]"]) == 2
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "99999 names, larger than the 10000" in err
