"""The :class:`~cockpit.fleet.backends.base.CommandRunner` a backend's engine tools go through.

A backend never builds a shell string out of values: it hands an argv (``["scontrol",
"update", "nodename=gpu01", "state=drain", "reason=cockpit CHG-1: drain"]``) and the
runner runs it where the engine's tools live: the jump host itself (:func:`local_runner`)
or a control host over the window's SSH transport (:func:`ssh_runner`, the argv joined
with :func:`shlex.join`, so each value stays one word on the far side). Either way the
answer is a :class:`~cockpit.fleet.results.CommandResult`; failures never raise.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cockpit.fleet.backends.base import CommandRunner
from cockpit.fleet.local import run_local
from cockpit.fleet.results import CommandResult, ErrorKind

if TYPE_CHECKING:
    from cockpit.fleet.transport import Transport


def _refused(argv: Sequence[str], why: str) -> CommandResult:
    return CommandResult(host="", command=shlex.join(argv), error_kind=ErrorKind.BAD_INPUT, error=why)


def local_runner() -> CommandRunner:
    """Runs each argv on the jump host (``sh -c`` of its :func:`shlex.join`, its own process group)."""

    async def run(argv: Sequence[str], *, timeout: float) -> CommandResult:
        if not argv:
            return _refused(argv, "no command to run")
        return await run_local(shlex.join(argv), timeout=timeout)

    return run


def ssh_runner(transport: Transport, host: str) -> CommandRunner:
    """Runs each argv on ``host`` (the engine's control host) over ``transport``; ``host``
    must be one of the transport's targets (host keys checked as for every node)."""

    async def run(argv: Sequence[str], *, timeout: float) -> CommandResult:
        if not argv:
            return _refused(argv, "no command to run")
        if host not in transport.hosts:
            return _refused(argv, f"{host}: not a host this window connects to")
        return await transport.run(host, shlex.join(argv), timeout=timeout)

    return run
