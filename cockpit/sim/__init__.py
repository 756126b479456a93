"""The fleet simulator: GPU nodes and a control host behind real SSH servers on loopback.

Used by ``cockpit demo``, ``cockpit sim``, the integration tests and the benchmarks.
"""

from __future__ import annotations

from cockpit.sim.fleet import CONTROL, SimClientFiles, SimFleet, node_names
from cockpit.sim.scenarios import DEFAULT_SCENARIO, SCENARIOS, Scenario

__all__ = ["CONTROL", "DEFAULT_SCENARIO", "SCENARIOS", "Scenario", "SimClientFiles", "SimFleet", "node_names"]
