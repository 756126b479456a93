"""The files around a change log: atomic writes, the operator's session lock, where the
per-session folder and its artifacts live."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import grp
import hashlib
import json
import os
import re
import socket
import stat
import tempfile
from pathlib import Path

from cockpit.changelog.blocks import JournalCorrupt
from cockpit.changelog.events import utcnow
from cockpit.errors import BadInput, CockpitError


class SessionLocked(CockpitError):
    """Another operator process holds the session."""


#: the group that may read change logs (``chgrp`` to it, mode 0640); unset, they are 0600
LOG_GROUP_ENV = "COCKPIT_LOG_GROUP"


def log_access() -> tuple[int, int | None]:
    """(mode, group id) for a new change log and what sits beside it: 0600 and no group; with
    ``COCKPIT_LOG_GROUP`` set, 0640 and that group (a reviewer's account reads the log)."""
    name = os.environ.get(LOG_GROUP_ENV, "").strip()
    if not name:
        return 0o600, None
    try:
        return 0o640, grp.getgrnam(name).gr_gid
    except KeyError:
        raise BadInput(f"{LOG_GROUP_ENV}={name[:40]!r}: no such group") from None


def _give_access(fd: int) -> None:
    mode, group = log_access()
    if group is not None:
        os.fchown(fd, -1, group)
    os.fchmod(fd, mode)  # after the chown: a chown may clear set-id bits, never these


def open_own_file(path: Path, flags: int, what: str, *, mode: int = 0o600, owner: int | None = None) -> int:
    """``os.open`` of a file the cockpit keeps (a change log, its lock), never through a link:
    ``O_NOFOLLOW`` (a symlink planted in a folder reviewers can write would have the cockpit
    truncate the file it points to), then ``fstat`` of what was opened: a regular file, owned
    by ``owner`` (default: this user) when given. BadInput in one line otherwise."""
    nofollow = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # NONBLOCK: a FIFO never hangs it
    try:
        fd = os.open(path, flags | nofollow, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(f"{path}: is a symbolic link, refused as {what} (someone may have planted it)") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise BadInput(f"{path}: cannot open {what}: {exc.strerror}") from None
        raise
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "not a regular file"
    elif owner is not None and info.st_uid != owner:
        problem = f"owned by uid {info.st_uid}, not by you (uid {owner}): someone else made it"
    if problem is not None:
        os.close(fd)
        raise BadInput(f"{path}: {problem}; refused as {what}")
    return fd


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(target: Path, data: bytes, *, replace: bool) -> None:
    """temp file + fsync + rename (or a no-clobber link) + directory fsync."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        _give_access(fd)  # 0600, or 0640 to the reviewers' group (COCKPIT_LOG_GROUP)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        if replace:
            os.replace(tmp, target)
        else:
            os.link(tmp, target)  # fails with FileExistsError rather than clobbering
            os.unlink(tmp)
        tmp = ""
        fsync_dir(target.parent)
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def session_paths(path: Path) -> tuple[Path, Path, Path]:
    """(lock file, per-session folder, artifacts folder) of the change log at ``path``."""
    folder = path.with_suffix("")
    return path.with_suffix(".lock"), folder, folder / "artifacts"


class OperatorLock:
    """``sessions/<id>.lock``: held with a non-blocking flock for the operator's lifetime."""

    def __init__(self, lock_path: Path, change_id: str, who: str) -> None:
        self.path = lock_path
        fd = open_own_file(lock_path, os.O_RDWR | os.O_CREAT, "the session's lock", owner=os.geteuid())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(os.pread(fd, 4096, 0))
            os.close(fd)
            raise SessionLocked(
                f"session {change_id} is already open by {holder}; join it as a reviewer, or wait until it closes"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        info = {"who": who, "pid": os.getpid(), "host": socket.gethostname(), "since": utcnow().isoformat()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self.fd = fd

    def remove_file(self) -> None:
        """Delete the lock file while still holding it, for a window that has ended. A lock
        file is otherwise left in place (unlinking one races: a second operator may hold the old
        inode while a third locks a new file); once the window has ended nobody may write again
        (``cockpit resume`` refuses an ended log), so a racer holding the old inode has nothing
        to do."""
        if self.fd >= 0:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock; the file stays (unlinking a lock file races)
            self.fd = -1


def _describe_holder(raw: bytes) -> str:
    try:
        info = json.loads(raw.decode())
        return f"{info['who']} (pid {info['pid']} on {info['host']} since {info['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


def artifact_path(session_path: str | os.PathLike[str], digest: str) -> Path:
    """Where the artifact ``digest`` of the change log at ``session_path`` lives."""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise BadInput(f"bad artifact reference {digest!r}: expected a sha256")
    return session_paths(Path(session_path))[2] / digest


def read_artifact(session_path: str | os.PathLike[str], digest: str) -> bytes:
    """An artifact's bytes, checked against its sha256."""
    target = artifact_path(session_path, digest)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"artifact {digest[:12]} is missing ({target})") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise JournalCorrupt(f"artifact {digest[:12]} does not match its sha256 ({target})")
    return data


class FileLock:
    """An exclusive ``flock`` on an open descriptor, held for one append."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
