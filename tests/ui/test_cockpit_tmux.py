"""End to end: the real ``cockpit demo`` in tmux, read back with ``capture-pane``.

Each test starts its own tmux server on a private socket and kills only that server.
What the panes show is checked against the session's change log on disk.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tmux_server import TmuxServer, private_tmux

from cockpit.changelog.events import StepFinishedEvent
from cockpit.changelog.journal import read_session

pytestmark = [pytest.mark.tmux, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[TmuxServer]:
    with private_tmux(f"cockpit-test-{os.getpid()}-{tmp_path.name}", target="demo") as server:
        yield server


def _start(tmux: TmuxServer, sessions: Path, width: int, height: int, term: str, *extra: str, nodes: int = 8) -> Path:
    # python -m runs the checkout under test (an editable install may point elsewhere)
    # COLUMNS/LINES from the test runner would pin the app to their size: drop them
    command = (
        f"cd {REPO} && exec env -u COLUMNS -u LINES TERM={term} {sys.executable} -m cockpit demo "
        f"--nodes {nodes} --sessions {sessions} "
        f"--change-id CHG-TMUX --speed 20 --refresh 0.5 {' '.join(extra)}"
    )
    tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-s", "demo", command)
    # with no client attached, only a manual window size holds (and resizes) reliably
    tmux("set-option", "-g", "window-size", "manual")
    tmux("resize-window", "-t", "demo", "-x", str(width), "-y", str(height))
    return sessions / "CHG-TMUX.toml"


def _kinds(path: Path) -> list[str]:
    return [str(e.kind) for e in read_session(path).events]


def _wait_log(path: Path, predicate: Callable[[list[str]], bool], what: str, timeout: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout
    kinds: list[str] = []
    while time.monotonic() < deadline:
        if path.exists():
            kinds = _kinds(path)
            if predicate(kinds):
                return kinds
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; the log has {kinds}")


def test_demo_in_tmux_80x24(tmux: TmuxServer, tmp_path: Path) -> None:
    log = _start(tmux, tmp_path / "sessions", 80, 24, "tmux-256color")
    screen = tmux.wait_for(
        lambda s: "CHG-TMUX" in s and "gpu08" in s and "575.57.08" in s, "the fleet with probed drivers"
    )
    lines = screen.splitlines()
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    nodes = [line.split()[0] for line in lines if line.strip().startswith("gpu")]
    assert nodes == [f"gpu{i:02d}" for i in range(1, 9)]
    assert "freeze: Freeze the evidence" in screen
    assert "Rollback triggers: NOT ARMED" in screen
    assert "Next: run step freeze/host-smi" in screen
    # n runs the step; the screen shows what the change log recorded
    tmux("send-keys", "-t", "demo", "n")
    _wait_log(log, lambda k: "step-finished" in k, "the first step to finish")
    finished = next(e for e in read_session(log).events if isinstance(e, StepFinishedEvent))
    assert finished.step == "host-smi"
    mark = "✓" if finished.facts.ok else "✗"
    tmux.wait_for(lambda s: any(mark in ln and "host-smi" in ln for ln in s.splitlines()), f"{mark} host-smi")
    tmux.wait_for(lambda s: "Next: run step freeze/image-inspect" in s, "Next to move on")
    # q pauses the session and closes the log cleanly
    tmux("send-keys", "-t", "demo", "q")
    kinds = _wait_log(log, lambda k: k[-1] == "session-paused", "the pause on quit")
    assert kinds[0] == "session-started" and read_session(log).torn is None


def test_demo_in_tmux_200x50_after_resize(tmux: TmuxServer, tmp_path: Path) -> None:
    log = _start(tmux, tmp_path / "sessions", 120, 30, "xterm-256color")
    tmux.wait_for(lambda s: "gpu08" in s and "575.57.08" in s, "the fleet")
    tmux("resize-window", "-t", "demo", "-x", "200", "-y", "50")
    size = tmux("display-message", "-p", "-t", "demo", "#{window_width}x#{window_height}").strip()
    assert size == "200x50", size
    screen = tmux.wait_for(lambda s: len(s.splitlines()[0]) > 120 or "unexplained-in-window" in s, "the wide layout")
    # wide: every trigger listed, node detail with the per-GPU table, all stages by name
    assert "unexplained-in-window" in screen and "gpu-missing" in screen
    tmux.wait_for(lambda s: "memory MiB" in s and "boot " in s, "the node detail with its GPU table")
    screen = tmux.screen()
    assert "prefix-cache ○" in screen and "drain 0/8" in screen
    tmux("send-keys", "-t", "demo", "q")
    _wait_log(log, lambda k: k[-1] == "session-paused", "the pause on quit")


@pytest.mark.slow
def test_three_fired_triggers_readable_at_80x24(tmux: TmuxServer, tmp_path: Path) -> None:
    """The autopilot drives the gpu-missing story until three triggers have fired; at 80x24
    each is on screen or one named key away, and the header keeps the operator and the wave."""
    log = _start(tmux, tmp_path / "sessions", 80, 24, "tmux-256color", "--scenario gpu-missing", "--autopilot", nodes=4)
    _wait_log(log, lambda k: k.count("trigger-fired") >= 3, "three triggers to fire", timeout=90)
    fired = [str(e.trigger) for e in read_session(log).events if e.kind == "trigger-fired"]
    # the header repaints on its own tick: wait for the panel and the header's alarm together
    screen = tmux.wait_for(
        lambda s: "3 fired" in s and "TRIGGERS FIRED" in s.splitlines()[0],
        "the trigger panel to count three fired and the header to raise the alarm",
    )
    lines = screen.splitlines()
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    header = lines[0]
    assert "op demo-operator" in header and "wave " in header and "TRIGGERS FIRED" in header, header
    on_screen = [t for t in fired if f"{t} FIRED" in screen]
    if len(on_screen) < len(fired):  # folded: the panel names the key that shows them all
        assert "T shows every trigger" in screen, screen
        tmux("send-keys", "-t", "demo", "T")
        screen = tmux.wait_for(lambda s: all(f"{t} FIRED" in s for t in fired), "every fired trigger")
        tmux("send-keys", "-t", "demo", "Escape")
    # the fired triggers stand right under the panel's summary: no toast covers them (toasts sit top right)
    panel_at = next(i for i, line in enumerate(lines) if "Rollback triggers:" in line)
    assert all("FIRED" in line for line in lines[panel_at + 1 : panel_at + 1 + len(on_screen)]), screen
    # quit: while the autopilot's step runs the cockpit asks first. On a loaded machine the
    # autopilot may have ended the window (rolled back) by now: then there is nothing to pause.
    closed = ("session-paused", "session-ended")
    tmux("send-keys", "-t", "demo", "q")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _kinds(log)[-1] not in closed:
        try:
            asking = "Quit anyway" in tmux.screen()
        except subprocess.CalledProcessError:
            break  # the cockpit quit between the two looks, and its tmux server with it
        if asking:
            tmux("send-keys", "-t", "demo", "y")
        time.sleep(0.3)
    ended = read_session(log)
    assert str(ended.events[-1].kind) in closed and ended.torn is None, _kinds(log)
    assert sum(str(e.kind) in closed for e in ended.events) == 1  # closed once, nothing after it


def test_E_ends_the_window_and_the_terminal_says_where_the_log_is(tmux: TmuxServer, tmp_path: Path) -> None:
    log = _start(tmux, tmp_path / "sessions", 80, 24, "tmux-256color", nodes=2)
    tmux("set-option", "-t", "demo", "remain-on-exit", "on")  # what the cockpit prints on exit stays readable
    tmux.wait_for(lambda s: "Next: run step freeze/host-smi" in s, "the first frame")
    tmux("send-keys", "-t", "demo", "E")
    tmux.wait_for(lambda s: "how did it end" in s, "the outcome dialog")
    time.sleep(0.5)  # the dialog's settle time: the key that opened it is no answer
    tmux("send-keys", "-t", "demo", "Enter")
    screen = tmux.wait_for(lambda s: "cockpit export" in s, "the words on exit")
    flat = "".join(screen.split())  # a long path wraps at 80 columns
    assert "windowended(outcome:" in flat and "".join(str(log).split()) in flat, screen
    assert f"cockpitexport{log}--formatmarkdown" in flat, screen
    kinds = _kinds(log)
    assert kinds[-1] == "session-ended" and "session-paused" not in kinds
    assert not log.with_suffix(".lock").exists()
