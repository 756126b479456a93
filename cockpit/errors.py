"""Errors the CLI turns into one line on stderr and an exit status."""

from __future__ import annotations


class CockpitError(Exception):
    """A failure the user can act on; its message is one line, shown as is."""

    exit_status = 1


class BadInput(CockpitError):
    """The command line, a file or a value given by the user is wrong (exit 2)."""

    exit_status = 2
