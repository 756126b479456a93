"""Pair review over tmux: the operator's cockpit in a named tmux session, and the two
commands a second person on the same host runs to join it.

The tmux server listens on an explicit socket path (not tmux's per-user default
under ``/tmp/tmux-UID``, but beside it: ``/tmp/cockpit-pair-UID/<change-id>.sock``,
checked as tmux checks its own, :func:`check_socket`), so someone logged in as another
Unix user can reach it once the operator allows it: give the folder and the socket to
a shared group (``chmod g+x FOLDER && chmod g+rw SOCKET``) and, with tmux 3.3 or later, let them in with
``tmux -S SOCKET server-access -a NAME`` (``-r`` makes every client of theirs
read-only). The same account needs nothing more.

- *watch*: ``tmux -S SOCKET attach -r -t NAME``: a read-only client of the operator's
  session; the viewer sees every frame, their keys never reach the cockpit.
- *review*: ``tmux -L cockpit-review-<change-id> new-session -A -s NAME-review -- cockpit
  review SESSION --as THEM``: the reviewer's own view in a session on *their own* tmux
  server (``-L``: a socket in their private tmux folder). A session on the operator's
  server, even a separate one, could be left for the operator's with ``switch-client``
  and typed into; from another server it cannot be reached at all. So another Unix user
  only ever needs read-only access to the operator's server (``server-access -a -r``).

Every tmux call is an argument list; printed commands are quoted with :mod:`shlex`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.changelog.journal import SessionLog, validate_change_id
from cockpit.errors import BadInput

TMUX_MISSING = (
    "tmux is not installed; install it (Debian/Ubuntu: sudo apt-get install tmux, "
    "RHEL/Fedora: sudo dnf install tmux, macOS: brew install tmux) and run cockpit pair again"
)
#: tmux turns these into "_" in session names; we do it first so the printed names are exact.
_TMUX_UNSAFE = re.compile(r"[.:]")
#: What the printed review command passes to --as when no reviewer is named: the joiner's login.
LOGIN_NAME = '"$USER"'
#: What the printed review command passes to --signing-key when the log requires signatures:
#: the joiner's usual key, expanded by their shell (the public half is in the allowed signers).
REVIEWER_KEY = '"$HOME/.ssh/id_ed25519"'


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
    """An explicit socket path another user can be given access to (see the module doc), in
    this user's own folder ``cockpit-pair-UID`` (as tmux keeps its own in ``tmux-UID``):
    directly in /tmp, anyone could create the socket first and have the operator join them."""
    base = Path(os.environ.get("TMUX_TMPDIR") or "/tmp")
    return base / f"cockpit-pair-{os.getuid()}" / f"{validate_change_id(change_id)}.sock"


def check_socket(socket: Path, *, private_folder: bool) -> None:
    """Refuse (:class:`BadInput`) a tmux socket another user could own, reach or replace.

    tmux itself (tmux.c, ``expand_paths``/``make_label``) uses ``/tmp/tmux-UID`` only if it
    is a directory (lstat: not a symlink) owned by the user with no permission for others.
    The same here: the folder (created 0700 when missing; with ``private_folder``, our
    default, no permission for others at all, as tmux's) must be the user's and not
    writable by group or others (so nobody can replace the socket);
    an existing socket must be a socket, the user's, with no permission for others (group
    access is how a second Unix user is let in, see the module doc)."""
    uid = os.getuid()
    folder = socket.parent
    try:
        folder.mkdir(mode=0o700)  # a missing folder is made private; an existing one is judged below
    except FileExistsError:
        pass
    except OSError as exc:
        raise BadInput(
            f"tmux socket folder {folder}: cannot create it ({(exc.strerror or str(exc)).lower()})"
        ) from None
    try:
        st = folder.lstat()
    except OSError as exc:
        raise BadInput(f"tmux socket folder {folder}: {(exc.strerror or str(exc)).lower()}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput(f"tmux socket folder {folder}: not a folder (a link?); refusing it")
    if st.st_uid != uid:
        raise BadInput(f"tmux socket folder {folder}: owned by uid {st.st_uid}, not you (uid {uid}); refusing it")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or (private_folder and st.st_mode & stat.S_IRWXO):
        raise BadInput(
            f"tmux socket folder {folder}: mode {stat.S_IMODE(st.st_mode):04o} lets others replace the socket; "
            f"chmod go-w (and o-rwx) it, or pick a private folder with --socket"
        )
    try:
        sock = socket.lstat()
    except FileNotFoundError:
        return  # tmux creates it (mode 0600: its umask keeps group and others out)
    except OSError as exc:
        raise BadInput(f"tmux socket {socket}: {(exc.strerror or str(exc)).lower()}") from None
    if not stat.S_ISSOCK(sock.st_mode):
        raise BadInput(f"tmux socket {socket}: not a socket; refusing it")
    if sock.st_uid != uid:
        raise BadInput(
            f"tmux socket {socket}: owned by uid {sock.st_uid}, not you (uid {uid}); refusing to join another "
            "user's tmux server"
        )
    if sock.st_mode & stat.S_IRWXO:
        raise BadInput(
            f"tmux socket {socket}: mode {stat.S_IMODE(sock.st_mode):04o} gives everyone access; "
            f"chmod o-rwx it (a second user is let in by group, see cockpit pair --help)"
        )


@dataclass(frozen=True)
class JoinCommands:
    watch: str  # read-only view of the operator's screen
    review: str  # the reviewer's own view, on their own tmux server
    access: str  # what the operator runs to let another Unix user in


def installed_cockpit(python: str | None = None) -> list[str]:
    """The installed cockpit, never a ``cockpit.py`` or ``cockpit/`` in the current directory.

    The console script beside the interpreter when it is this package's entry point (a
    script puts its own folder on ``sys.path``, not the cwd); else the interpreter with
    ``-P`` (Python 3.11: the cwd is not prepended to ``sys.path``) and ``-m cockpit``.
    ``python -m cockpit`` alone would import whatever ``cockpit`` the cwd holds first."""
    python = python or sys.executable
    script = Path(python).parent / "cockpit"
    if _is_entry_point(script):
        return [str(script)]
    return [python, "-P", "-m", "cockpit"]


def _is_entry_point(script: Path) -> bool:
    """``script`` is an executable file that pip wrote for ``cockpit.cli:main``."""
    try:
        if not script.is_file() or not os.access(script, os.X_OK):
            return False
        with script.open("rb") as fh:
            head = fh.read(2048)
    except OSError:
        return False
    return head.startswith(b"#!") and b"from cockpit.cli import main" in head


def cockpit_command() -> list[str]:
    """How the second person starts cockpit: the same installed entry point as the operator's."""
    return installed_cockpit()


def join_commands(
    tmux: str,
    socket: Path,
    name: str,
    session_file: Path,
    *,
    reviewer: str | None = None,
    cockpit: Sequence[str] = ("cockpit",),
    signatures: bool = False,
) -> JoinCommands:
    """The exact commands a second person types (shell syntax, every value quoted).

    ``signatures``: the log requires signed sign-offs, so the review command names the
    reviewer's key (``cockpit review`` refuses to start without one, or an ssh-agent).
    The review window pauses on an error: it is a tmux session of its own, which would
    end with its command and show only "[exited]"."""
    sock = shlex.quote(str(socket))
    t = shlex.quote(tmux)
    watch = f"{t} -S {sock} attach -r -t {shlex.quote(name)}"
    who = shlex.quote(reviewer) if reviewer else LOGIN_NAME
    review_argv = shlex.join([*cockpit, "review", str(session_file), "--pause-on-error", "--as"]) + f" {who}"
    if signatures:
        review_argv += f" --signing-key {REVIEWER_KEY}"
    own_server = "cockpit-review-" + name.removeprefix("cockpit-")  # -L: in the reviewer's own tmux folder
    review = f"{t} -L {shlex.quote(own_server)} new-session -A -s {shlex.quote(name + '-review')} -- {review_argv}"
    folder = shlex.quote(str(socket.parent))
    access = f"chmod g+x {folder} && chmod g+rw {sock} && {t} -S {sock} server-access -a -r THEIR-LOGIN"
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
        """A detached session running ``argv`` directly (tmux 3 runs a multi-word command without a shell).

        The pane is kept after the cockpit exits, so its last words can be read: the session
        starts on a placeholder, gets ``remain-on-exit``, and only then runs ``argv`` (a cockpit
        that fails at once would otherwise take its session, and its error, with it)."""
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        size = ("-x", str(width), "-y", str(height))
        self.run("new-session", "-d", "-s", name, *size, "-c", str(cwd), "--", "sleep", "600")
        self.run("set-option", "-w", "-t", f"={name}:", "remain-on-exit", "on")  # a window option
        self.run("respawn-pane", "-k", "-t", f"={name}:", "-c", str(cwd), "--", *argv)

    def pane_dead(self, name: str) -> bool | None:
        """Whether the session's pane has exited (None: the session is gone)."""
        done = self.run("display-message", "-p", "-t", f"={name}:", "#{pane_dead}", check=False)
        return None if done.returncode != 0 else done.stdout.strip() == "1"

    def screen(self, name: str) -> str:
        return self.run(
            "capture-pane", "-p", "-J", "-S", "-", "-t", f"={name}:", check=False
        ).stdout  # wrapped lines joined

    def kill_session(self, name: str) -> None:
        self.run("kill-session", "-t", f"={name}", check=False)


def operator_argv(
    cockpit: Sequence[str], *, demo: bool, change_id: str, sessions: Path, resume: bool, passthrough: Sequence[str]
) -> list[str]:
    """The operator's cockpit command (``cockpit``: :func:`installed_cockpit`): demo, run, or
    resume of an existing session file."""
    base = list(cockpit)
    session_file = sessions / f"{change_id}.toml"
    if resume:
        return [*base, "resume", str(session_file), *passthrough]
    command = "demo" if demo else "run"
    return [*base, command, "--change-id", change_id, "--sessions", str(sessions), *passthrough]


def first_error_line(screen: str) -> str:
    """The line of a dead cockpit's pane that says why: its ``cockpit:`` line, else the first words."""
    lines = [ln.strip() for ln in screen.splitlines() if ln.strip() and not ln.startswith("Pane is dead")]
    said = next((ln for ln in lines if ln.startswith("cockpit")), None)
    return said or (lines[-1] if lines else "it printed nothing")


def wait_until_started(
    tmux: Tmux, name: str, session_file: Path, before: SessionLog | None, timeout: float = 30.0
) -> str | None:
    """Wait for the cockpit in ``name`` to write its start (or resume) to the change log.

    ``before``: the log as read before a resume (None for a new one): only what is appended
    after it is read, so a big log is not parsed again on every look. None once it has
    written; else why not, in one line: the error its dead pane shows, or that it wrote
    nothing in ``timeout`` seconds."""
    from cockpit.changelog.reader import JournalFollower, follower_after

    follower = follower_after(before) if before is not None else JournalFollower(session_file)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = tmux.pane_dead(name)
        if dead is None:
            return "its tmux session is gone"
        if dead:
            return first_error_line(tmux.screen(name))
        try:
            if session_file.exists() and follower.poll():
                return None
        except (BadInput, ValueError):
            follower = follower_after(before) if before is not None else JournalFollower(session_file)
            # the header is being written, or half of a block: look again
        time.sleep(0.2)
    return (
        f"it wrote nothing to {session_file} in {timeout:g} s; its screen ends: {first_error_line(tmux.screen(name))}"
    )
