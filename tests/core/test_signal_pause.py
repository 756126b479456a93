"""SIGTERM and SIGHUP pause a session cleanly: session-paused written, the operator lock
released, a step in flight recorded as interrupted (outcome unknown), never cancelled.

Real processes, sent the signal by the PID this test started (tmux panes ``exec`` the
cockpit, so the pane's PID is the cockpit's); then the change log is read back. The
interactive case is also the resume-anywhere test: ``cockpit run`` against ``cockpit sim``
with a relative runbook path and ``--ssh-config``, paused by SIGTERM, then ``cockpit resume``
from another directory without ``--ssh-config`` reaches the nodes, and SIGHUP pauses that.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sim_process import running_sim
from tmux_server import TmuxServer, private_tmux

from cockpit.changelog.events import Event, EventKind
from cockpit.changelog.journal import read_session

pytestmark = pytest.mark.binary  # the real binary and tmux, signalled by PID: tests/conftest.py SLOW_MARKS

REPO = Path(__file__).resolve().parents[2]


def _wait(what: str, predicate: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _events(path: Path) -> list[Event]:
    try:
        return read_session(path).events
    except Exception:  # not there yet, or its header still being written
        return []


def _lock_is_free(session: Path) -> bool:
    fd = os.open(session.with_suffix(".lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_headless_demo_pauses_on_a_signal_with_the_running_step_interrupted(tmp_path: Path, signum: int) -> None:
    session = tmp_path / "sessions" / "SIG-1.toml"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cockpit", "demo", "--autopilot", "--headless", "--nodes", "2",
         "--scenario", "happy", "--speed", "0.5", "--sessions", str(tmp_path / "sessions"), "--change-id", "SIG-1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the simulated install takes seconds at this speed
            if "run-step" in line and "upgrade install gpu01" in line:
                break
        _wait("the install's step-started", lambda: any(e.kind is EventKind.STEP_STARTED and e.step == "install"
                                                          for e in _events(session)))  # fmt: skip
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and "session SIG-1 paused; resume it with 'cockpit resume" in err, err
    events = read_session(session).events
    assert events[-1].kind is EventKind.SESSION_PAUSED
    assert events[-1].note == f"{signal.Signals(signum).name} received: paused"
    finished = [e for e in events if e.kind is EventKind.STEP_FINISHED and e.step == "install"]
    assert len(finished) == 1
    assert finished[0].facts.ok is False and finished[0].facts.error_kind == "interrupted"
    assert (finished[0].facts.error or "").startswith("interrupted: outcome unknown")
    assert not any(e.kind is EventKind.STEP_FINISHED and e.facts.error_kind == "cancelled" for e in events)
    assert _lock_is_free(session)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[TmuxServer]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    with private_tmux(f"cockpit-sig-{os.getpid()}-{tmp_path.name}") as server:
        yield server


def _gone(pid: int) -> bool:
    from processes import alive

    return not alive(pid)


@pytest.mark.tmux
def test_run_paused_by_sigterm_resumes_from_elsewhere_and_sighup_pauses_it(tmp_path: Path, tmux: TmuxServer) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    shutil.copy(REPO / "checklists" / "driver-upgrade-r580.toml", work / "my-runbook.toml")
    cockpit = [sys.executable, "-m", "cockpit"]
    # run requires signatures by default: alice signs with a key made by the real ssh-keygen
    key = tmp_path / "alice_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text("alice " + " ".join(key.with_suffix(".pub").read_text().split()[:2]) + "\n")
    with running_sim(tmp_path, nodes=2) as sim:
        relative_config = os.path.relpath(sim.ssh_config, work)
        pid = tmux.start(
            "run", work,
            [*cockpit, "run", "--change-id", "CHG-SIG", "--hosts", "gpu[01-02]", "--runbook", "my-runbook.toml",
             "--ssh-config", relative_config, "--param", "control_host=control", "--operator", "alice",
             "--refresh", "0.5", "--allowed-signers", str(allowed), "--signing-key", str(key)],
            sim.env,
        )  # fmt: skip
        session = work / "sessions" / "CHG-SIG.toml"

        def reached() -> bool:
            return any(e.kind is EventKind.PROBE and e.facts.reachable for e in _events(session))

        _wait("a probe that reached a node", reached)
        os.kill(pid, signal.SIGTERM)
        _wait("the cockpit to exit", lambda: _gone(pid) or "Pane is dead" in tmux("capture-pane", "-p", "-t", "run"))
        log = read_session(session)
        assert log.events[-1].kind is EventKind.SESSION_PAUSED and log.events[-1].note == "SIGTERM received: paused"
        assert _lock_is_free(session)
        assert log.header.runbook_path == str(work / "my-runbook.toml")
        assert log.header.ssh_config == str(sim.ssh_config.resolve())
        assert log.header.host_spec == "gpu[01-02]"

        # another directory, no --ssh-config: the header says how the nodes are reached
        paused_at = log.events[-1].seq
        # a probe equal to the recorded one writes nothing: the tool log shows the connections
        tool_log = tmp_path / "resume.log"
        resume = [*cockpit, "resume", str(session), "--refresh", "0.5", "--log-file", str(tool_log)]
        resume += ["--signing-key", str(key)]
        pid = tmux.start("resume", elsewhere, resume, sim.env)

        def connected() -> bool:
            return tool_log.exists() and all(f"{n}: connected in" in tool_log.read_text() for n in ("gpu01", "gpu02"))

        _wait("the resumed cockpit to reach both nodes", connected)
        os.kill(pid, signal.SIGHUP)
        _wait(
            "the resumed cockpit to exit",
            lambda: _gone(pid) or "Pane is dead" in tmux("capture-pane", "-p", "-t", "resume"),
        )
    events = read_session(session).events
    kinds = [e.kind for e in events if e.seq > paused_at and e.kind is not EventKind.PROBE]
    assert kinds[0] is EventKind.SESSION_RESUMED and kinds[-1] is EventKind.SESSION_PAUSED, kinds
    assert events[-1].note == "SIGHUP received: paused"
    assert _lock_is_free(session)
    assert read_session(session).header.require_signatures
    from cockpit.cli import main as cockpit_main

    assert cockpit_main(["verify", str(session)]) == 0  # alice's events signed by her key, the chain whole
