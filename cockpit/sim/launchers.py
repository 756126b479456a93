"""The shell builtins of a simulated node that run another of its commands: ``sh``/``bash``,
``env``, ``nohup``, ``timeout``, ``command``, ``which``, ``xargs``, and what sudo runs once it
let the login. They know the node only through what it gives them: how it finds a command,
its shell, its files, and how its shell says a command does not exist.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import replace

from cockpit.sim.shell import Handler, Io, Resolve, Shell, run_argv, strip_prefix


class Launchers:
    """The builtins over one node's commands (``resolve``), shell and files."""

    def __init__(
        self, resolve: Resolve, shell: Callable[[bool], Shell], read_file: Callable[[str], str | None], not_found: str
    ) -> None:
        self.resolve = resolve
        self.shell = shell  # the node's shell as root (True) or as the login
        self.read_file = read_file
        self.not_found = not_found

    def handlers(self) -> dict[str, Handler]:
        return {
            "sh": self.sh,
            "bash": self.sh,
            "env": self.env,
            "nohup": self.prefix,
            "timeout": self.timeout,
            "command": self.command,
            "which": self.which,
            "xargs": self.xargs,
        }

    async def run(self, argv: list[str], io: Io) -> int:
        """Run ``argv`` as a command of the node."""
        return await run_argv(self.resolve, argv, io, not_found=self.not_found)

    async def sh(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        while args and args[0].startswith("-") and args[0] != "-c":
            args = args[1:]
        shell = self.shell(io.root)  # as whoever runs sh: root under sudo
        if args[:1] == ["-c"] and len(args) >= 2:
            return await shell.run(args[1], io.out, io.err, io.stdin)
        if not args:
            return await shell.run(io.stdin, io.out, io.err, "")
        content = self.read_file(args[0])
        if content is None:
            io.err(f"{argv[0]}: 0: cannot open {args[0]}: No such file\n")
            return 2
        return await shell.run(content, io.out, io.err, "")

    async def prefix(self, argv: list[str], io: Io) -> int:
        return await self.run(strip_prefix(argv), io)

    async def as_root(self, argv: list[str], io: Io) -> int:
        """What sudo runs, once it let the login: the command, as root."""
        return await self.run(strip_prefix(argv), replace(io, root=True))

    async def env(self, argv: list[str], io: Io) -> int:
        """``env [VAR=value]... COMMAND``: the command runs with the variables set."""
        args = strip_prefix(argv)
        env = dict(io.env)
        while args and "=" in args[0] and args[0].split("=", 1)[0].isidentifier():
            name, value = args.pop(0).split("=", 1)
            env[name] = value
        return await self.run(args, replace(io, env=env))

    async def xargs(self, argv: list[str], io: Io) -> int:
        """GNU xargs: the command with the words of stdin appended; ``-r``: not run on empty input."""
        args = argv[1:]
        skip_empty = False
        while args and args[0].startswith("-"):
            skip_empty |= args.pop(0) in ("-r", "--no-run-if-empty")
        words = io.stdin.split()
        if not words and skip_empty:
            return 0
        status = await self.run([*(args or ["echo"]), *words], replace(io, stdin=""))
        return 123 if 0 < status < 125 else status  # xargs: 123 when the command failed

    async def timeout(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        while args and args[0].startswith("-"):
            opt = args.pop(0)
            if opt in ("-s", "-k", "--signal", "--kill-after"):
                args = args[1:]
        if not args:
            io.err("timeout: missing operand\n")
            return 125
        limit = _seconds(args[0])
        try:
            return await asyncio.wait_for(self.run(args[1:], io), timeout=limit)
        except TimeoutError:
            return 124

    async def command(self, argv: list[str], io: Io) -> int:
        if len(argv) >= 3 and argv[1] in ("-v", "-V"):
            return await self.which(["which", *argv[2:]], io)
        return await self.run(argv[1:], io)

    async def which(self, argv: list[str], io: Io) -> int:
        status = 0
        for name in argv[1:]:
            if self.resolve(name) is None:
                status = 1
            else:
                prefix = "/usr/sbin/" if name in ("reboot", "shutdown", "modinfo", "lsmod") else "/usr/bin/"
                io.out(prefix + name + "\n")
        return status


def _seconds(text: str) -> float:
    """GNU timeout's DURATION: a number with an optional unit, s, m, h or d; 0.0 when unreadable."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text)
    if not m:
        return 0.0
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
