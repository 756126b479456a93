"""A private tmux server for the tests that drive the real binary in a terminal (no tests here)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


class TmuxServer:
    """``tmux -L SOCKET``: a server of the test's own, so no user session is touched."""

    def __init__(self, socket: str, target: str = "main") -> None:
        self.socket = socket
        self.target = target  # the session ``screen`` and ``wait_for`` read unless told another

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout

    def screen(self, target: str | None = None) -> str:
        return self("capture-pane", "-p", "-t", target or self.target)

    def wait_for(
        self, predicate: Callable[[str], bool], what: str, timeout: float = 30, target: str | None = None
    ) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen(target)
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{text}")

    def start(
        self, name: str, cwd: Path, argv: list[str], env: dict[str, str], size: tuple[int, int] = (120, 40)
    ) -> int:
        """A detached pane of ``size`` that execs ``argv`` in ``cwd``; returns its PID (the program's)."""
        setenv = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k in ("HOME", "PATH"))
        command = (
            f"cd {shlex.quote(str(cwd))} && exec env -u SSH_AUTH_SOCK {setenv} TERM=xterm-256color {shlex.join(argv)}"
        )
        self("new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), "-s", name, command)
        self("set-option", "-t", name, "remain-on-exit", "on")
        return int(self("display-message", "-p", "-t", name, "#{pane_pid}").strip())

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


@contextmanager
def private_tmux(socket: str, target: str = "main") -> Iterator[TmuxServer]:
    """A tmux server named ``socket``, killed afterwards with everything it ran."""
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is not installed")
    server = TmuxServer(socket, target)
    try:
        yield server
    finally:
        server.kill()
