"""Run a command on the jump host itself (a step with ``where = "local"``)."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from cockpit.fleet.results import CommandResult, ErrorKind

#: the jump host, as a step's target is named in outcomes and events
LOCAL_TARGET = "local"

OutputCallback = Callable[[str, str], None]


async def run_local(command: str, *, timeout: float, on_output: OutputCallback | None = None) -> CommandResult:
    """Run ``sh -c command`` on the jump host; on timeout or cancel the whole process group is stopped."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group, so a timeout stops its children too
    )  # fmt: skip
    chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}

    async def pump(stream: asyncio.StreamReader, name: str) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while data := await stream.read(65536):
            text = decoder.decode(data)
            if text:
                chunks[name].append(text)
                if on_output is not None:
                    on_output(name, text)
        tail = decoder.decode(b"", final=True)
        if tail:
            chunks[name].append(tail)
            if on_output is not None:
                on_output(name, tail)

    assert proc.stdout is not None and proc.stderr is not None
    pumps = asyncio.gather(pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"), proc.wait())

    def result(**kw: object) -> CommandResult:
        return CommandResult(
            host=LOCAL_TARGET,
            command=command,
            stdout="".join(chunks["stdout"]),
            stderr="".join(chunks["stderr"]),
            duration_s=round(time.monotonic() - started, 3),
            **kw,
        )

    try:
        await asyncio.wait_for(asyncio.shield(pumps), timeout=timeout)
    except TimeoutError:
        await _stop_local(proc, pumps)
        return result(error_kind=ErrorKind.TIMEOUT, error=f"local: timed out after {timeout:g} s; command stopped")
    except asyncio.CancelledError:
        await _stop_local(proc, pumps)
        raise
    status = proc.returncode
    if status is not None and status < 0:  # killed by a signal: report it the way a shell would
        return result(exit_status=128 - status, error=f"local: command killed by signal {signal.Signals(-status).name}")
    return result(exit_status=status)


async def _stop_local(proc: asyncio.subprocess.Process, pumps: asyncio.Future[Any]) -> None:
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(asyncio.shield(pumps), timeout=grace)
            return
        except TimeoutError:
            continue
        except asyncio.CancelledError:
            pumps.cancel()
            raise
    pumps.cancel()
