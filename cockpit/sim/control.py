"""The simulated control host: Kubernetes (kubectl) and Slurm (scontrol, squeue, sinfo).

The host's shell dispatches ``kubectl`` to :mod:`~cockpit.sim.kubernetes` and the
Slurm commands to :mod:`~cockpit.sim.slurm`; both see the fleet's nodes and which
of them are up.
"""

from __future__ import annotations

from collections.abc import Callable

from cockpit.sim import coreutils
from cockpit.sim.kubernetes import Kubernetes
from cockpit.sim.node import SimNode
from cockpit.sim.shell import Handler, Io, Shell, Sleep, run_argv, sleeper, strip_prefix
from cockpit.sim.slurm import Slurm


class SimControl:
    def __init__(self, nodes: dict[str, SimNode], is_up: Callable[[str], bool], sleep: Sleep) -> None:
        self.nodes = nodes
        self.kubernetes = Kubernetes(nodes, is_up, sleep)
        self.slurm = Slurm(nodes, is_up, sleep)
        self.sleep = sleep
        self.files: dict[str, str] = {}

    def shell(self) -> Shell:
        return Shell(self._resolve, self.files.get, self._write)

    def _write(self, path: str, data: str, append: bool) -> None:
        self.files[path] = (self.files.get(path, "") + data) if append else data

    def _resolve(self, name: str) -> Handler | None:
        table: dict[str, Handler] = dict(coreutils.COMMANDS)
        table["sleep"] = sleeper(self.sleep)
        table.update(
            {
                "kubectl": self.kubernetes.kubectl,
                "scontrol": self.slurm.scontrol,
                "squeue": self.slurm.squeue,
                "sinfo": self.slurm.sinfo,
                "hostname": self._hostname,
                "sudo": self._sudo,
                "sh": self._sh,
                "bash": self._sh,
                "cat": self._cat,
            }
        )
        return table.get(name)

    async def _hostname(self, argv: list[str], io: Io) -> int:
        io.out("control\n")
        return 0

    async def _cat(self, argv: list[str], io: Io) -> int:
        if len(argv) == 1:
            io.out(io.stdin)
            return 0
        for path in argv[1:]:
            if path not in self.files:
                io.err(f"cat: {path}: No such file or directory\n")
                return 1
            io.out(self.files[path])
        return 0

    async def _sudo(self, argv: list[str], io: Io) -> int:
        return await run_argv(self._resolve, strip_prefix(argv), io, via="sudo")

    async def _sh(self, argv: list[str], io: Io) -> int:
        if len(argv) >= 3 and argv[1] == "-c":
            return await self.shell().run(argv[2], io.out, io.err, io.stdin)
        return await self.shell().run(io.stdin, io.out, io.err)
