"""A simulated node's systemd services: ``systemctl`` and the fabric manager's state.

Fabric manager only starts with a loaded driver of exactly its own version: otherwise it
exits with its real log line, "fabric manager NVIDIA GPU driver interface version X
doesn't match with driver version Y. Please update with the matching NVIDIA driver
package." (NVIDIA/gpu-operator#544, siderolabs/pkgs#720, NVIDIA/gpu-driver-container#735),
and CUDA on the NVSwitch system fails with error 802 (the container runtime reads
``fabric_manager``). The fabric-manager scenario makes it fail on the target once the
node runs a branch other than the one it started with, versions matching or not.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

from cockpit.sim.driver import DriverStack
from cockpit.sim.shell import Handler, Io

FM_PID = 3228

FABRIC_MANAGER = "nvidia-fabricmanager"
#: NVIDIA's IMEX daemon (GB200 NVL): like fabric manager, it runs only beside the driver of its own version
IMEX = "nvidia-imex"
#: units that run on every node and never change during a driver change
ALWAYS_ACTIVE = ("docker", "containerd", "ssh", "kubelet", "slurmd", "nvidia-persistenced")


class ServiceManager:
    def __init__(
        self,
        driver: DriverStack,
        reboot: Handler,
        fabric_manager_version: Callable[[], str | None],
        *,
        fabric_manager_fails_after_upgrade: bool,
    ) -> None:
        self.driver = driver
        self.reboot = reboot  # `systemctl reboot` reboots as `reboot` does
        self.fabric_manager_version = fabric_manager_version  # the installed package's version, None = none
        self.fabric_manager_fails_after_upgrade = fabric_manager_fails_after_upgrade
        self._first_branch: str | None = None  # the module branch of the node's first boot
        self.fabric_manager: str | None = "active"  # None = not installed
        #: the installed nvidia-imex package's version (None: none) and its unit's state after the boot
        self.imex_version: Callable[[], str | None] = lambda: None
        self.imex: str | None = None
        #: unit -> UnitFileState of units besides the always-active ones (None: not installed)
        self.unit_files: dict[str, str | None] = {}
        #: the running units' main pids (the node's platform knows them)
        self.main_pids: Callable[[], dict[str, int]] = dict
        self.fabric_manager_log = ""  # its last start's journal lines, shown by `systemctl status`
        #: units this node runs besides the always-active ones (a DCGM exporter holding the GPUs)
        self.extra_units: set[str] = set()
        #: units `systemctl stop` stopped during this boot: an enabled unit starts again at the next
        self.stopped: set[str] = set()

    def fabric_manager_starts(self) -> bool:
        module = self.driver.module
        version = self.fabric_manager_version()
        if module is None:
            self.fabric_manager_log = "nv-fabricmanager: request to query NVIDIA driver failed: driver not loaded\n"
            return False
        if version is not None and version.split("-", 1)[0] != module.version:
            self.fabric_manager_log = (
                f"nv-fabricmanager[{FM_PID}]: fabric manager NVIDIA GPU driver interface version "
                f"{version.split('-', 1)[0]} doesn't match with driver version {module.version}. "
                "Please update with the matching NVIDIA driver package.\n"
            )
            return False
        # "after the upgrade": on a branch other than the one the node first booted (575, or a
        # profile's own: precompiled-rollback's 570-server), so the record stage sees it healthy
        first = self._first_branch = self._first_branch or module.branch
        if self.fabric_manager_fails_after_upgrade and module.branch != first:
            self.fabric_manager_log = (
                f"nv-fabricmanager[{FM_PID}]: NVSwitch training failed: fabric manager failed to initialize\n"
            )
            return False
        self.fabric_manager_log = ""
        return True

    def kill_fabric_manager(self) -> None:
        """The fabric manager's main process killed (the OOM killer, a person's ``kill -9``):
        systemd marks the unit failed with result ``signal``, in the words of its journal; it
        stays failed until started again (nothing here restarts it: where unsure, stricter).
        The fault NVIDIA/NVSentinel#891 found 20 days after a maintenance."""
        if self.fabric_manager is None:
            return
        self.fabric_manager = "failed"
        self.fabric_manager_log = (
            f"systemd[1]: {FABRIC_MANAGER}.service: Main process exited, code=killed, status=9/KILL\n"
            f"systemd[1]: {FABRIC_MANAGER}.service: Failed with result 'signal'.\n"
        )

    def after_boot(self) -> None:
        """The fabric manager's state once a boot is through: started if installed, failed if it cannot start."""
        self.stopped.clear()  # systemd starts the enabled units at boot, whoever stopped them before
        if self.fabric_manager_version() is None:
            self.fabric_manager = None
        elif not self.fabric_manager_starts():
            self.fabric_manager = "failed"
        else:
            self.fabric_manager = "active"
        imex, module = self.imex_version(), self.driver.module
        if imex is None:
            self.imex = None
        else:  # started at boot; it exits when the driver is not the version it was built for
            self.imex = "active" if module is not None and imex.split("-", 1)[0] == module.version else "failed"

    def unit_state(self, unit: str) -> str | None:
        name = unit.removesuffix(".service")
        if name == FABRIC_MANAGER:
            return self.fabric_manager
        if name == IMEX:
            return None if self.imex is None else "inactive" if name in self.stopped else self.imex
        file_state = self.unit_files.get(name.split(".")[0])
        if name not in ALWAYS_ACTIVE and name not in self.extra_units and file_state is None:
            return None
        if name in self.stopped or file_state == "disabled":
            return "inactive"
        return "active"

    def _list_units(self, patterns: list[str], argv: list[str], io: Io) -> int:
        # systemctl list-units [--no-legend] [--state=active] PATTERN...: one row per loaded unit
        # that matches, "UNIT LOAD ACTIVE SUB DESCRIPTION"; without --state, failed units too
        names = [*ALWAYS_ACTIVE, *sorted(self.extra_units), FABRIC_MANAGER, IMEX]
        names += [n for n, state in self.unit_files.items() if state is not None]
        units = [n if "." in n else n + ".service" for n in dict.fromkeys(names)]
        wanted = ("active",) if "--state=active" in argv else ("active", "failed")
        if "--no-legend" not in argv:
            io.out("UNIT LOAD ACTIVE SUB DESCRIPTION\n")
        for unit in units:
            state = self.unit_state(unit)
            if state in wanted and (not patterns or any(fnmatch.fnmatchcase(unit, p) for p in patterns)):
                io.out(f"{unit} loaded {state} {'running' if state == 'active' else 'failed'} {unit}\n")
        return 0

    async def systemctl(self, argv: list[str], io: Io) -> int:
        args = [a for a in argv[1:] if not a.startswith("--") or a.startswith("--value") or a.startswith("--property")]
        value_only = "--value" in argv
        props: list[str] = []
        words: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-p", "--property"):
                props += args[i + 1].split(",")
                i += 2
                continue
            if a.startswith("--property="):
                props += a.split("=", 1)[1].split(",")
            elif a.startswith("-") or a == "--value":
                pass
            else:
                words.append(a)
            i += 1
        if not words:
            io.out("UNIT LOAD ACTIVE SUB DESCRIPTION\n")
            return 0
        action, units = words[0], [u.removesuffix(".service") for u in words[1:]]
        if action == "list-units":
            return self._list_units(words[1:], argv, io)
        if action in ("reboot",):
            return await self.reboot(["reboot"], io)
        states = [self.unit_state(u) for u in units]
        if action == "is-active":
            for s in states:
                io.out((s or "inactive") + "\n")
            return 0 if states and all(s == "active" for s in states) else 3
        if action == "is-failed":
            for s in states:
                io.out((s or "inactive") + "\n")
            return 0 if any(s == "failed" for s in states) else 1
        if action == "is-enabled":
            return self._is_enabled(units, io)
        if action == "show":
            return self._show(units, states, props, value_only, io)
        if action == "status":
            return self._status(units, states, io)
        if action in ("start", "restart", "stop", "enable", "disable", "try-restart"):
            return self._change(action, units, io)
        io.err(f"Unknown command verb {action}.\n")
        return 1

    def _is_enabled(self, units: list[str], io: Io) -> int:
        # systemctl is-enabled: the UnitFileState of each unit found; a unit without a unit file is
        # an error on stderr; exit 0 only when one of them is enabled
        enabled = False
        for unit in units:
            state = self.unit_files.get(unit.split(".")[0]) if unit.split(".")[0] in self.unit_files else None
            if state is None and self.unit_state(unit) is not None:
                state = "enabled"
            if state is None:
                io.err(f"Failed to get unit file state for {unit}: No such file or directory\n")
                continue
            io.out(state + "\n")
            enabled = enabled or state == "enabled"
        return 0 if enabled else 1

    def _show(self, units: list[str], states: list[str | None], props: list[str], value_only: bool, io: Io) -> int:
        pids = self.main_pids()
        for n, (unit, s) in enumerate(zip(units, states, strict=True)):
            if n:
                io.out("\n")  # systemctl show separates the units' blocks by an empty line
            name = unit.split(".")[0]
            if name in self.unit_files or unit.endswith(".timer"):
                s = "active" if self.unit_files.get(name) == "enabled" else None
                s = "inactive" if s and unit in self.stopped else s
            values = {
                "LoadState": "loaded" if s is not None else "not-found",
                "ActiveState": s or "inactive",
                "SubState": {"active": "running", "failed": "failed"}.get(s or "", "dead"),
                "Id": unit if "." in unit else unit + ".service",
                "MainPID": str(pids.get(unit if "." in unit else unit + ".service", 0)),
            }
            for p in props or list(values):
                io.out((values.get(p, "") if value_only else f"{p}={values.get(p, '')}") + "\n")
        return 0

    def _status(self, units: list[str], states: list[str | None], io: Io) -> int:
        status = 0
        for unit, s in zip(units, states, strict=True):
            if s is None:
                io.err(f"Unit {unit}.service could not be found.\n")
                status = 4
                continue
            sub = "running" if s == "active" else "failed"
            io.out(
                f"● {unit}.service - NVIDIA fabric manager service\n"
                f"     Loaded: loaded (/usr/lib/systemd/system/{unit}.service; enabled; preset: enabled)\n"
                f"     Active: {s} ({sub})\n"
            )
            if unit == FABRIC_MANAGER and s == "failed" and self.fabric_manager_log:
                io.out("\n" + self.fabric_manager_log)
            if s != "active":
                status = 3
        return status

    def _change(self, action: str, units: list[str], io: Io) -> int:
        for unit in units:
            if self.unit_state(unit) is None:
                io.err(f"Failed to {action} {unit}.service: Unit {unit}.service not found.\n")
                return 5
            if unit == FABRIC_MANAGER and action in ("start", "restart", "try-restart"):
                if not self.fabric_manager_starts():
                    self.fabric_manager = "failed"
                    io.err(
                        f"Job for {unit}.service failed because the control process exited with error code.\n"
                        f'See "systemctl status {unit}.service" and "journalctl -xeu {unit}.service" for details.\n'
                    )
                    return 1
                self.fabric_manager = "active"
            elif unit == FABRIC_MANAGER and action == "stop":
                self.fabric_manager = "inactive"
            elif action == "stop":
                self.stopped.add(unit)
            elif action in ("start", "restart"):
                self.stopped.discard(unit)
        return 0
