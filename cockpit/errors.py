"""Errors the CLI turns into one line on stderr and an exit status."""

from __future__ import annotations

from pathlib import Path


class CockpitError(Exception):
    """A failure the user can act on; its message is one line, shown as is."""

    exit_status = 1


class BadInput(CockpitError):
    """The command line, a file or a value given by the user is wrong (exit 2)."""

    exit_status = 2


def read_user_file(path: Path, what: str = "a file") -> bytes:
    """The bytes of a file the user named; a missing, unreadable or misplaced one is
    :class:`BadInput` in one line, never a traceback."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a directory, expected {what}") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
