"""``cockpit sim`` in its own process, as an operator would run it beside the cockpit (no tests here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass
class SimProcess:
    ssh_config: Path
    known_hosts: Path
    env: dict[str, str]
    ready_text: str  # what the simulator printed up to "ready"
    exit_status: int | None = None  # once stopped
    stderr: str = ""  # once stopped


def clean_env(home: Path) -> dict[str, str]:
    """No agent and a private HOME: only the simulator's own files decide how nodes are reached."""
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "COLUMNS", "LINES")}
    env["HOME"] = str(home)
    return env


@contextmanager
def running_sim(directory: Path, *, nodes: int = 2, scenario: str = "happy", speed: float = 20) -> Iterator[SimProcess]:
    """Start ``cockpit sim``, wait for "ready", stop it with SIGTERM (by its own PID) at the end;
    its exit status and stderr are on the yielded :class:`SimProcess` afterwards."""
    env = clean_env(directory)
    fleet = directory / "fleet"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cockpit", "sim", "--nodes", str(nodes), "--scenario", scenario,
         "--speed", str(speed), "--dir", str(fleet)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if line.startswith("ready"):
                break
        else:
            raise AssertionError("cockpit sim did not get ready: " + "".join(seen))
        assert seen and seen[-1].startswith("ready"), "".join(seen)
        sim = SimProcess(fleet / "ssh_config", fleet / "known_hosts", env, "".join(seen))
        yield sim
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    sim.exit_status, sim.stderr = proc.returncode, err


def probe_json(sim: SimProcess, spec: str) -> dict[str, dict[str, object]]:
    """Each node's facts, by the read-only ``cockpit probe --json``."""
    done = subprocess.run(
        [sys.executable, "-m", "cockpit", "probe", spec, "--json", "--ssh-config", str(sim.ssh_config)],
        capture_output=True, text=True, env=sim.env, timeout=60,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return {n["host"]: n for n in json.loads(done.stdout)["nodes"]}
