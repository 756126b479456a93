"""Errors the CLI turns into one line on stderr and an exit status: the one tree.

Every error a user can meet is a :class:`CockpitError`; ``cockpit.cli.main`` prints its one
line (:func:`error_line`) and exits with its ``exit_status``. Anything else that reaches the
CLI is a defect, reported as "internal error" (``COCKPIT_DEBUG=1`` shows the traceback).

- :class:`CockpitError` (exit 1): the job ran and could not do what was asked
  - :class:`BadInput` (exit 2): the command line, a file or a value given is wrong
    - ``runbook.problems.RunbookInvalid``: a runbook ``cockpit check`` refuses, every problem named
    - ``gpu.parsers.models.ParseError``: tool output that is not what the tool prints
    - ``changelog.blocks.JournalCorrupt``: a change log that cannot be read as blocks
  - ``engine.actions.ActionRefused``: the gate refused an action, saying which rule
  - ``changelog.files.SessionLocked``: another cockpit holds the window
  - ``changelog.journal.JournalWriteError``: an event could not be made durable
  - ``changelog.sshsig.SigningError``: ssh-keygen could not sign or verify
  - ``fleet.backends.base.BackendError``: the engine could not be asked at all
    - ``fleet.backends.kubernetes_api.KubeApiError``: the Kubernetes API refused a call
    - ``fleet.backends.slurm_nodes.SlurmParseError``: Slurm printed what it does not print

Exceptions that never leave their module (a connect's retry envelope, a simulated tool's own
failures in ``cockpit.sim``) are not part of the tree; ``tests/core/test_error_tree.py`` names
each one and holds every other exception class in ``cockpit`` to it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class CockpitError(Exception):
    """A failure the user can act on; its message is one line, shown as is."""

    exit_status = 1


class BadInput(CockpitError):
    """The command line, a file or a value given by the user is wrong (exit 2)."""

    exit_status = 2


def error_line(exc: CockpitError) -> str:
    """How the CLI says ``exc`` on stderr: its one line, led by "cockpit:" unless it names itself."""
    text = str(exc)
    return text if text.startswith("cockpit") else f"cockpit: {text}"


def read_user_file(
    path: Path,
    what: str = "a file",
    *,
    max_bytes: int = 64 * 1024 * 1024,
    no_links: bool = False,
    trust_root: bool = False,
) -> bytes:
    """The bytes of a file the user named; a missing, unreadable or misplaced one is
    :class:`BadInput` in one line, never a traceback.

    Only a regular file is read (a FIFO would block the reader forever, a device
    never ends), and at most ``max_bytes`` of it: the file is opened without
    blocking and judged by ``fstat`` on that descriptor, so it cannot be swapped
    between the check and the read.

    ``no_links``: a symbolic link is refused (``O_NOFOLLOW``), for the files someone who
    can write their folder could swap for a link to another (a change log, an anchor file,
    the trust settings). ``trust_root``: the file must also be owned by this user or root
    and writable by nobody else, as sshd's StrictModes holds authorized_keys (who may sign,
    and whether signatures are required, is decided by it); group-writable passes only for
    the user's own group (umask 002 with user-private groups).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | (os.O_NOFOLLOW if no_links or trust_root else 0))
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a directory, expected {what}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(f"{path}: is a symbolic link, refused as {what} (someone may have planted it)") from None
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if trust_root and stat.S_ISREG(info.st_mode):
        problem = None
        if info.st_uid not in (os.geteuid(), 0):
            problem = f"owned by uid {info.st_uid}, neither you (uid {os.geteuid()}) nor root"
        elif info.st_mode & stat.S_IWOTH or (info.st_mode & stat.S_IWGRP and info.st_gid != os.getegid()):
            # group-writable is others when the group is not the user's own (a user-private group)
            problem = f"permissions {stat.S_IMODE(info.st_mode):04o} let others rewrite it"
        if problem is not None:
            os.close(fd)
            raise BadInput(f"{path}: {problem}; refused as {what}")
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise BadInput(f"{path}: is a directory, expected {what}")
        raise BadInput(f"{path}: not a regular file (a pipe, socket or device), expected {what}")
    if info.st_size > max_bytes:
        os.close(fd)
        raise BadInput(f"{path}: {info.st_size} bytes, more than the {max_bytes} accepted for {what}")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # it grew while being read
        raise BadInput(f"{path}: more than the {max_bytes} bytes accepted for {what}")
    return data
