"""`cockpit pair --demo` end to end in real tmux: the printed commands work as printed, the
read-only client cannot type into the cockpit, and the reviewer's window signs off.

Two private tmux servers, both on sockets under the test's temp dir: the pair's (the
operator's cockpit) and an "outer" one standing in for the second person's terminals.
Only those two servers are stopped at the end.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from repo_paths import REPO

from cockpit.changelog.events import EventKind
from cockpit.changelog.identity import SYSTEM_ACTOR
from cockpit.changelog.journal import read_session

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(90)]

CHANGE = "PAIR-E2E"
NAME = f"cockpit-{CHANGE}"


@pytest.fixture
def tmux_bin() -> str:
    found = shutil.which("tmux")
    if found is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("tmux is not installed but CI=true")
        pytest.skip("tmux not installed")
    return found


@pytest.fixture
def sockets(tmp_path: Path, tmux_bin: str) -> Iterator[tuple[Path, Path]]:
    pair, outer = tmp_path / "pair.sock", tmp_path / "outer.sock"
    yield pair, outer
    for sock in (outer, pair):
        if sock.exists():
            subprocess.run([tmux_bin, "-S", str(sock), "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def tmux_tmpdir(tmux_bin: str) -> Iterator[Path]:
    """Where the reviewer's own ``-L`` server puts its socket: a short folder, because a unix
    socket's path holds at most 107 bytes and pytest's (an xdist worker's ``popen-gwN`` level
    included) with ``tmux-UID/cockpit-review-CHANGE`` after it does not fit; tmux then exits
    at once and the test saw only a vanished window. Its servers are stopped afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="cptmux-", dir="/tmp"))
    yield folder
    for sock in folder.glob("tmux-*/*"):
        subprocess.run([tmux_bin, "-S", str(sock), "kill-server"], capture_output=True, timeout=10)
    shutil.rmtree(folder, ignore_errors=True)


def wait_until(what: str, check: Callable[[], object], timeout: float = 20.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_pair_demo_watch_read_only_and_review_sign_off(
    tmp_path: Path, tmux_bin: str, sockets: tuple[Path, Path], tmux_tmpdir: Path
) -> None:
    pair_sock, outer_sock = sockets
    sessions = tmp_path / "sessions"
    session_file = sessions / f"{CHANGE}.toml"
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env["USER"] = "bob"  # the second person's login: --as "$USER" in the printed command
    env["TMUX_TMPDIR"] = str(tmux_tmpdir)  # where the reviewer's own -L server puts its socket

    def tmux(sock: Path, *args: str) -> str:
        done = subprocess.run([tmux_bin, "-S", str(sock), *args], capture_output=True, text=True, timeout=10, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def kinds() -> list[tuple[str, str]]:
        return [(e.kind, e.actor) for e in read_session(session_file).events]

    # a hostile cockpit.py and cockpit/ in the cwd the operator's pane starts in: the pair
    # must start the installed cockpit (python -m cockpit would import these first)
    marker = tmp_path / "hostile-ran"
    hostile = f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit(0)\n"
    (tmp_path / "cockpit.py").write_text(hostile)
    (tmp_path / "cockpit").mkdir()
    (tmp_path / "cockpit" / "__init__.py").write_text(hostile)
    (tmp_path / "cockpit" / "__main__.py").write_text(hostile)
    pair = [
        sys.executable,
        "-P",  # this test's own start of pair must not take them either
        "-m",
        "cockpit",
        "pair",
        "--demo",
        "--change-id",
        CHANGE,
        "--sessions",
        str(sessions),
        "--socket",
        str(pair_sock),
        "--runbook",
        "minimal-driver-upgrade",
        "--nodes",
        "2",
        "--speed",
        "8",
        "--no-attach",
    ]
    out = subprocess.run(pair, capture_output=True, text=True, timeout=30, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert f"started the cockpit for {CHANGE} in tmux session {NAME}" in out.stdout
    lines = [ln.strip() for ln in out.stdout.splitlines()]
    watch = next(ln for ln in lines if " attach -r -t " in ln)
    review = next(ln for ln in lines if " new-session -A " in ln)
    assert watch == f"{tmux_bin} -S {pair_sock} attach -r -t {NAME}"
    assert f"-L cockpit-review-{CHANGE} new-session -A -s {NAME}-review" in review and '--as "$USER"' in review

    # the operator's cockpit is up in the named session and has written its change log
    wait_until("the session file", lambda: session_file.exists() and kinds())
    wait_until("the cockpit on screen", lambda: CHANGE in tmux(pair_sock, "capture-pane", "-p", "-t", f"{NAME}:0"))

    # running pair again joins instead of starting a second cockpit
    again = subprocess.run(pair, capture_output=True, text=True, timeout=30, cwd=tmp_path, env=env)
    assert again.returncode == 0 and "already running" in again.stdout
    assert tmux(pair_sock, "list-sessions", "-F", "#{session_name}").split() == [NAME]

    # watch, exactly as printed, from the second person's terminal
    tmux(outer_sock, "new-session", "-d", "-s", "watch", "-x", "140", "-y", "40", watch)
    wait_until(
        "the watcher to see the cockpit", lambda: CHANGE in tmux(outer_sock, "capture-pane", "-p", "-t", "watch")
    )

    def persons_events() -> list[tuple[str, str]]:
        # the cockpit's own probes keep arriving on their timer; only a person's actions count here
        return [(kind, actor) for kind, actor in kinds() if actor != SYSTEM_ACTOR]

    before = persons_events()
    tmux(outer_sock, "send-keys", "-t", "watch", "q", "n", "g", "o")  # quit / next / gate / override: all ignored
    time.sleep(1.5)
    assert persons_events() == before, "a read-only client's keys reached the cockpit"
    panes = tmux(pair_sock, "list-panes", "-t", f"{NAME}:0", "-F", "#{pane_dead}").split()
    assert panes == ["0"], "the cockpit quit on a read-only client's key"

    # the reviewer's own window, exactly as printed (the shell expands "$USER" to bob)
    tmux(outer_sock, "new-session", "-d", "-s", "rev", "-x", "140", "-y", "40", review)
    wait_until(
        "the reviewer's view",
        lambda: "Waiting for your sign-off (1)" in tmux(outer_sock, "capture-pane", "-p", "-t", "rev"),
    )
    # the reviewer's view runs on their own server: nothing there reaches the operator's window
    review_server = [tmux_bin, "-L", f"cockpit-review-{CHANGE}"]
    on_theirs = subprocess.run(
        [*review_server, "list-sessions", "-F", "#{session_name}"], capture_output=True, text=True, env=env, timeout=10
    )
    assert on_theirs.stdout.split() == [f"{NAME}-review"], on_theirs.stderr
    reachable = subprocess.run([*review_server, "has-session", "-t", f"={NAME}"], capture_output=True, env=env)
    assert reachable.returncode != 0  # the operator's session does not exist on the reviewer's server
    assert tmux(pair_sock, "list-sessions", "-F", "#{session_name}").split() == [NAME]
    # the operator's session keeps its own active window: the cockpit
    assert tmux(pair_sock, "display-message", "-p", "-t", NAME, "#{window_index}").strip() == "0"
    tmux(outer_sock, "send-keys", "-t", "rev", "s")
    wait_until("the note prompt", lambda: "Note (optional)" in tmux(outer_sock, "capture-pane", "-p", "-t", "rev"))
    tmux(outer_sock, "send-keys", "-t", "rev", "-l", "read the triggers over tmux")
    tmux(outer_sock, "send-keys", "-t", "rev", "Enter")
    wait_until("the sign-off in the change log", lambda: (EventKind.SIGNOFF, "bob") in kinds())
    signoff = next(e for e in read_session(session_file).events if e.kind is EventKind.SIGNOFF)
    assert (signoff.stage, signoff.item, signoff.note) == ("arm", "triggers-reviewed", "read the triggers over tmux")
    # the operator's cockpit folds it and shows the reviewer
    wait_until(
        "the operator's cockpit to show bob",
        lambda: "rev bob" in tmux(pair_sock, "capture-pane", "-p", "-t", f"{NAME}:0"),
        timeout=10,
    )

    # the operator's own keys do reach the cockpit: q pauses the session and quits
    assert not marker.exists(), "pair ran the cockpit.py found in the current directory"

    tmux(pair_sock, "send-keys", "-t", f"{NAME}:0", "q")
    wait_until("the operator's quit", lambda: (EventKind.SESSION_PAUSED, "demo-operator") in kinds())

    subprocess.run([tmux_bin, "-L", f"cockpit-review-{CHANGE}", "kill-server"], capture_output=True, env=env)


def test_pair_reports_a_cockpit_that_died_at_start(tmp_path: Path, tmux_bin: str, sockets: tuple[Path, Path]) -> None:
    pair_sock, _ = sockets
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    pair = [
        sys.executable, "-m", "cockpit", "pair", "--demo", "--change-id", "PAIR-DEAD",
        "--sessions", str(tmp_path / "sessions"), "--socket", str(pair_sock),
        "--runbook", "no-such-runbook", "--no-attach",
    ]  # fmt: skip
    out = subprocess.run(pair, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "started the cockpit" not in out.stdout
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cockpit pair: the cockpit for PAIR-DEAD did not start: cockpit")
    assert "no-such-runbook" in err[0]  # the cockpit's own first line of error
    # the dead pane is not left for a second 'pair' to join
    listed = subprocess.run([tmux_bin, "-S", str(pair_sock), "has-session", "-t", "=cockpit-PAIR-DEAD"], env=env)
    assert listed.returncode != 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
def test_pair_on_a_signed_log_prints_the_key_and_the_review_window_keeps_its_error(
    tmp_path: Path, tmux_bin: str, sockets: tuple[Path, Path], tmux_tmpdir: Path
) -> None:
    from cockpit.fleet.targets import HostTarget
    from cockpit.runbook.loader import load
    from cockpit.session.opening import Trust
    from cockpit.session.operator import Session

    pair_sock, outer_sock = sockets
    change = "PAIR-SIGNED"
    name = f"cockpit-{change}"
    sessions = tmp_path / "sessions"
    home = tmp_path / "home"  # the second person's: their key where the printed command looks
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bob", "-f", str(key)], check=True)
    signers = tmp_path / "allowed_signers"
    signers.write_text("bob " + " ".join(key.with_suffix(".pub").read_text().split()[:2]) + "\n")
    session = Session.start(
        sessions_dir=sessions,
        change_id=change,
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01"), HostTarget(name="gpu02")],
        operator="alice",
        transport=None,
        trust=Trust(require_signatures=True, allowed_signers=str(signers)),
    )
    asyncio.run(session.close())
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE", "SSH_AUTH_SOCK")}
    env.update(USER="bob", HOME=str(home), TMUX_TMPDIR=str(tmux_tmpdir))
    # the checkout's cockpit in every process, the printed commands' included (a checkout
    # other than the installed one, such as a git worktree, is tested as itself)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)

    def tmux(sock: Path, *args: str) -> str:
        done = subprocess.run([tmux_bin, "-S", str(sock), *args], capture_output=True, text=True, timeout=10, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    # the operator's session stands in the pair's tmux: pair joins it and prints the commands
    tmux(pair_sock, "new-session", "-d", "-s", name, "sleep", "600")
    pair = [sys.executable, "-m", "cockpit", "pair", "--change-id", change, "--sessions", str(sessions),
            "--socket", str(pair_sock), "--no-attach"]  # fmt: skip
    out = subprocess.run(pair, capture_output=True, text=True, timeout=30, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    review = next(ln.strip() for ln in out.stdout.splitlines() if " new-session -A " in ln)
    assert review.endswith('--as "$USER" --signing-key "$HOME/.ssh/id_ed25519"') and "--pause-on-error" in review
    assert "requires signed sign-offs" in out.stdout

    # without the key (and no agent) the review cannot start: its window stays, saying why
    unsigned = review.removesuffix(' --signing-key "$HOME/.ssh/id_ed25519"')
    tmux(outer_sock, "new-session", "-d", "-s", "rev", "-x", "160", "-y", "40", unsigned)
    said = wait_until(
        "the reviewer's error",
        lambda: (s := tmux(outer_sock, "capture-pane", "-p", "-t", "rev")) and "press Enter to close" in s and s,
    )
    assert "this session requires signatures: give --signing-key FILE" in str(said)
    time.sleep(1.0)
    assert "press Enter to close" in tmux(outer_sock, "capture-pane", "-p", "-t", "rev")  # still there
    tmux(outer_sock, "send-keys", "-t", "rev", "Enter")
    wait_until(
        "the window to close once read",
        lambda: subprocess.run([tmux_bin, "-S", str(outer_sock), "has-session", "-t", "=rev"], env=env).returncode,
    )

    # as printed, with the key: the reviewer's view starts and signs
    tmux(outer_sock, "new-session", "-d", "-s", "rev2", "-x", "160", "-y", "40", review)
    wait_until(
        "the reviewer's view",
        lambda: "Waiting for your sign-off (1)" in tmux(outer_sock, "capture-pane", "-p", "-t", "rev2"),
    )
    subprocess.run([tmux_bin, "-L", f"cockpit-review-{change}", "kill-server"], capture_output=True, env=env)
