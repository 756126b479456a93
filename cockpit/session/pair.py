"""Pair review over tmux: the operator's cockpit in a named tmux session, and the two
commands a second person on the same host runs to join it.

The tmux server listens on an explicit socket path (not tmux's per-user default
under ``/tmp/tmux-UID``), so someone logged in as another Unix user can reach it
once the operator allows it: give the socket to a shared group
(``chmod g+rw SOCKET``) and, with tmux 3.3 or later, let them in with
``tmux -S SOCKET server-access -a NAME`` (``-r`` makes every client of theirs
read-only). The same account needs nothing more.

- *watch*: ``tmux -S SOCKET attach -r -t NAME``: a read-only client of the operator's
  session; the viewer sees every frame, their keys never reach the cockpit.
- *review*: a session grouped with the operator's (same windows, its own current
  window) plus a new window running ``cockpit review SESSION --as THEM``, so the two
  people never fight over one active window.

Every tmux call is an argument list; printed commands are quoted with :mod:`shlex`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.changelog.journal import validate_change_id
from cockpit.errors import BadInput

TMUX_MISSING = (
    "tmux is not installed; install it (Debian/Ubuntu: sudo apt-get install tmux, "
    "RHEL/Fedora: sudo dnf install tmux, macOS: brew install tmux) and run cockpit pair again"
)
#: tmux turns these into "_" in session names; we do it first so the printed names are exact.
_TMUX_UNSAFE = re.compile(r"[.:]")
#: What the printed review command passes to --as when no reviewer is named: the joiner's login.
LOGIN_NAME = '"$USER"'


def find_tmux() -> str:
    """The tmux binary, or :class:`BadInput` saying how to install it."""
    found = shutil.which("tmux")
    if found is None:
        raise BadInput(TMUX_MISSING)
    return found


def session_name(change_id: str) -> str:
    """``cockpit-<change-id>``, with the characters tmux would rewrite already rewritten."""
    return "cockpit-" + _TMUX_UNSAFE.sub("_", validate_change_id(change_id))


def default_socket(change_id: str) -> Path:
    """An explicit socket path another user can be given access to (see the module doc)."""
    base = Path(os.environ.get("TMUX_TMPDIR") or "/tmp")
    return base / f"cockpit-pair-{validate_change_id(change_id)}.sock"


@dataclass(frozen=True)
class JoinCommands:
    watch: str  # read-only view of the operator's screen
    review: str  # the reviewer's own window in a grouped session
    access: str  # what the operator runs to let another Unix user in


def cockpit_command() -> list[str]:
    """How the second person starts cockpit: ``cockpit`` when it is on PATH, else this interpreter's module."""
    return ["cockpit"] if shutil.which("cockpit") else [sys.executable, "-m", "cockpit"]


def join_commands(
    tmux: str,
    socket: Path,
    name: str,
    session_file: Path,
    *,
    reviewer: str | None = None,
    cockpit: Sequence[str] = ("cockpit",),
) -> JoinCommands:
    """The exact commands a second person types (shell syntax, every value quoted)."""
    sock = shlex.quote(str(socket))
    t = shlex.quote(tmux)
    watch = f"{t} -S {sock} attach -r -t {shlex.quote(name)}"
    who = shlex.quote(reviewer) if reviewer else LOGIN_NAME
    review_argv = shlex.join([*cockpit, "review", str(session_file), "--as"]) + f" {who}"
    review = (
        f"{t} -S {sock} new-session -t {shlex.quote(name)} -s {shlex.quote(name + '-review')} "
        f"\\; new-window -n review -- {review_argv}"
    )
    access = f"chmod g+rw {sock} && {t} -S {sock} server-access -a THEIR-LOGIN"
    return JoinCommands(watch=watch, review=review, access=access)


class Tmux:
    """One tmux server, addressed by its socket path. Argument lists only, never a shell."""

    def __init__(self, binary: str, socket: Path) -> None:
        self.binary = binary
        self.socket = socket

    def argv(self, *args: str) -> list[str]:
        return [self.binary, "-S", str(self.socket), *args]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            raise BadInput(f"tmux {args[0]} did not answer within 20 s (socket {self.socket})") from None
        if check and done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise BadInput(f"tmux {args[0]} failed: {detail[0] if detail else f'exit {done.returncode}'}")
        return done

    def has_session(self, name: str) -> bool:
        if not self.socket.exists():
            return False
        return self.run("has-session", "-t", f"={name}", check=False).returncode == 0

    def new_session(self, name: str, argv: Sequence[str], *, cwd: Path, width: int = 160, height: int = 48) -> None:
        """A detached session running ``argv`` directly (tmux 3 runs a multi-word command without a shell)."""
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.run("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), "-c", str(cwd), "--", *argv)
        # keep the pane after the cockpit exits, so its last words can be read
        self.run("set-option", "-t", f"={name}", "remain-on-exit", "on", check=False)


def operator_argv(
    python: str, *, demo: bool, change_id: str, sessions: Path, resume: bool, passthrough: Sequence[str]
) -> list[str]:
    """The operator's cockpit command: demo, run, or resume of an existing session file."""
    base = [python, "-m", "cockpit"]
    session_file = sessions / f"{change_id}.toml"
    if resume:
        return [*base, "resume", str(session_file), *passthrough]
    command = "demo" if demo else "run"
    return [*base, command, "--change-id", change_id, "--sessions", str(sessions), *passthrough]
