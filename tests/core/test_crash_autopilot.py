"""Kill the writing process with SIGKILL at many random points of an autopilot run.

After each kill the change log parses (a torn last block at most, reported), every
event the writer had acknowledged is there, and a resumed writer carries on; in the
end the window finishes as the scenario intends. The fleet runs in its own
``cockpit sim`` process so that it outlives the writer, as real nodes would.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.changelog.journal import read_session

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]

CHILD = Path(__file__).with_name("crash_autopilot_child.py")
KILLS = 100


def start_sim(tmp: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cockpit",
            "sim",
            "--nodes",
            "2",
            "--scenario",
            "happy",
            "--speed",
            "16",
            "--dir",
            str(tmp / "sim"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "ready" in line:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail("cockpit sim did not get ready")


def test_sigkill_at_random_points_loses_nothing_acknowledged(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    sim = start_sim(tmp_path)
    sessions = tmp_path / "sessions"
    args = [sys.executable, str(CHILD), "--fork", str(sessions), "CHG-CRASH", str(tmp_path / "sim" / "ssh_config")]
    server = subprocess.Popen(
        [*args, "gpu[01-02]"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert server.stdin is not None and server.stdout is not None
    acked: set[int] = set()
    kills = torn_seen = 0
    finished = False
    try:
        for life in range(KILLS + 40):
            out_path, err_path = tmp_path / f"out{life}", tmp_path / f"err{life}"
            os.mkfifo(out_path)
            server.stdin.write(f"{out_path} {err_path}\n")
            server.stdin.flush()
            pid = int(server.stdout.readline())
            with out_path.open() as child_out:  # opens once the writer has opened its end
                ready = child_out.readline()
                assert ready.startswith("ready"), ready + err_path.read_text()
                kill_now = kills < KILLS
                if kill_now:
                    time.sleep(rng.uniform(0.0, 0.35))
                    os.kill(pid, signal.SIGKILL)
                out = child_out.read()  # to the end: the writer has exited
            status = server.stdout.readline()
            err = err_path.read_text()
            acked.update(int(line.split()[1]) for line in (ready + out).splitlines() if line.startswith("ack "))
            log = read_session(sessions / "CHG-CRASH.toml")
            seqs = [e.seq for e in log.events]
            assert seqs == list(range(1, len(seqs) + 1)), "sequence numbers must stay dense"
            missing = acked - set(seqs)
            assert not missing, f"acknowledged events lost after kill {kills}: {sorted(missing)[:5]}"
            torn_seen += log.torn is not None
            if kill_now:
                kills += 1
                continue
            assert status.strip() == "exit 0", status + err
            if "ended True" in out:
                finished = True
                break
        assert kills == KILLS
        assert finished, "the resumed autopilot did not finish the window"
        log = read_session(sessions / "CHG-CRASH.toml")
        kinds = [str(e.kind) for e in log.events]
        assert kinds.count("session-resumed") >= KILLS
        assert kinds[-1] == "session-ended"
        print(f"{kills} kills, {len(log.events)} events, {torn_seen} torn tails seen and recovered")
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        sim.send_signal(signal.SIGTERM)
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()
