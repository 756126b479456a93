"""The client side of one command's SSH channel: collects its output until it closes.

Apart from :mod:`cockpit.fleet.transport` because it subclasses an asyncssh class, and
the transport imports asyncssh only at its first connect (the demo's first frame needs none).
"""

from __future__ import annotations

import asyncio
import logging

import asyncssh

from cockpit.fleet.targets import OutputCallback

log = logging.getLogger(__name__)


class CommandSession(asyncssh.SSHClientSession[str]):
    """Collects one command's output; ``done`` resolves when the channel closes."""

    def __init__(self, on_output: OutputCallback | None) -> None:
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.on_output = on_output
        self.lost: Exception | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: str, datatype: asyncssh.DataType) -> None:
        stream = "stderr" if datatype == asyncssh.EXTENDED_DATA_STDERR else "stdout"
        (self.stderr if stream == "stderr" else self.stdout).append(data)
        if self.on_output is not None:
            try:
                self.on_output(stream, data)
            except Exception:
                log.exception("on_output callback failed")

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc
        if not self.done.done():
            self.done.set_result(None)
