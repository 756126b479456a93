"""What the simulated apt (:mod:`~cockpit.sim.packages`) and dnf (:mod:`~cockpit.sim.dnf`)
share: the parts of their node they work on, and the faults a scenario gives them there."""

from __future__ import annotations

import random
from dataclasses import dataclass

from cockpit.sim.driver import DriverStack
from cockpit.sim.scenarios import Scenario
from cockpit.sim.shell import Sleep


@dataclass(frozen=True)
class PackageSite:
    """The parts of its node a package manager reads and changes (shared with the node, never copied)."""

    driver: DriverStack  # an install replaces the userspace at once and builds the module on disk
    rng: random.Random  # the node's generator: download sizes draw from the same sequence as its boot ids
    sleep: Sleep
    files: dict[str, str]  # the node's files: saved packages live here
    dirs: set[str]  # the directories `mkdir` made (where a download may be saved)


@dataclass(frozen=True)
class PackageFaults:
    """What a scenario breaks in its target's package manager (nothing, on every other node)."""

    module_build_fails: bool = False  # DKMS fails to build the new module: the mismatch stays after reboot
    drops_old_after_install: bool = False  # once the new branch is in, the index stops offering the old version
    fabric_manager_lags: bool = False  # apt only: the mirror's fabric manager and nscq are older than its driver
    imex_lags: bool = False  # apt only: the mirror has the new branch's driver but not its nvidia-imex

    @classmethod
    def of(cls, scenario: Scenario) -> PackageFaults:
        return cls(
            scenario.stale_module, scenario.index_drops_old_version, scenario.fabric_manager_lags, scenario.imex_lags
        )


class NodePackages:
    """A node's package manager: the parts of the node it works on, and the scenario's faults."""

    def __init__(self, site: PackageSite, faults: PackageFaults) -> None:
        self.site = site
        self.module_build_fails = faults.module_build_fails
        #: cleared once the index dropped the old version (it happens once)
        self.drops_old_after_install = faults.drops_old_after_install

    def fabric_manager_version(self) -> str | None:
        """The installed fabric manager's version, or None where the node has none."""
        raise NotImplementedError
