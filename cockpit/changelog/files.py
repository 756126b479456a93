"""The files around a change log: atomic writes, the operator's session lock, where the
per-session folder and its artifacts live."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import socket
import tempfile
from pathlib import Path

from cockpit.changelog.blocks import JournalCorrupt
from cockpit.changelog.events import utcnow
from cockpit.errors import BadInput, CockpitError


class SessionLocked(CockpitError):
    """Another operator process holds the session."""


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
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; a reviewer's view reads these files too
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
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
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
