"""The fault matrix: each known way a node comes back broken, injected on one node of a
simulated window that Next alone walks, and where it was caught.

Each fault is a named simulator scenario (:mod:`cockpit.sim.scenarios`) whose fault lands on
the second node; the window runs through the shipped runbook with the demo's autopilot
(:func:`cockpit.session.autopilot.drive`). From the change log it says where the fault was
caught (the stage the node was in, the trigger that fired or the item that stopped it),
whether that names the injected cause, and whether the node ever returned to service on the
new driver: its smoke gate passed before any rollback. A clean window (no fault) must end
with every node through and no trigger fired: no false stop.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.changelog.events import (
    Event,
    GatePassedEvent,
    ItemVerifiedEvent,
    RollbackStartedEvent,
    StepFinishedEvent,
    TriggerFiredEvent,
)
from cockpit.changelog.journal import read_session
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.autopilot import AutopilotResult, drive
from cockpit.session.demo import demo_session
from cockpit.session.kube_demo import kube_demo_session

#: the node every scenario's fault lands on (Scenario.target = 1)
TARGET = "gpu02"
#: fast, with the walks' patience (tests/walk_expectations.py)
SPEED = 100.0
PARAMS: dict[str, ParamValue] = {"reboot_timeout_s": 5, "drain_timeout_s": 3}


@dataclass(frozen=True)
class Fault:
    """A fault, the scenario that injects it, and the words a catch must hold to name its cause:
    a trigger id, ``stage/item`` of the item that failed, or words of the step that stopped Next."""

    label: str
    scenario: str
    names_cause: tuple[str, ...]
    #: the engine the window goes through: ssh (the simulated nodes) or kubernetes (the GPU Operator's)
    backend: str = "ssh"


FAULTS: tuple[Fault, ...] = (
    Fault("fabric manager down (CUDA 802)", "fabric-manager", ("fabric-manager-down",)),
    Fault("fabric manager skewed from the driver", "hgx-lockstep", ("upgrade/target-downloadable",)),
    Fault("fabric not Completed, unit active", "fabric-incomplete", ("smoke/fabric-completed",)),
    Fault("an NVLink link down", "nvlink-down", ("smoke/nvlink-links",)),
    Fault("fatal NVSwitch SXid 20034", "sxid", ("fatal-sxid",)),
    Fault("fatal XID 79 (GPU fell off the bus)", "gpu-missing", ("gpu-missing", "fatal-xid")),
    Fault("fatal XID 48 (double-bit ECC)", "xid", ("fatal-xid",)),
    Fault("fatal XID 94 (contained ECC)", "xid-94", ("fatal-xid",)),
    Fault("fatal XID 95 (uncontained ECC)", "xid-95", ("fatal-xid",)),
    Fault("fatal XID 143 (GPU init failure)", "xid-143", ("fatal-xid",)),
    Fault("fatal XID 149 (NVLink NETIR)", "xid-149", ("fatal-xid",)),
    Fault("one GPU missing, no XID", "gpu-missing-no-xid", ("gpu-missing",)),
    Fault("module flavour changed", "flavour-flip", ("smoke/module-flavour",)),
    Fault("compat libcuda in the image (803)", "smoke-false-pass", ("smoke/container-cuda",)),
    Fault("PCIe link downtrained", "pcie-downtrained", ("smoke/pcie-link",)),
    Fault("nvidia_peermem missing", "peermem-missing", ("smoke/peermem",)),
    Fault("two-node all-reduce far below baseline (ACS on)", "rejoin-slow", ("smoke/fabric-rejoin",)),
    Fault("stale CDI spec (old driver's libraries)", "cdi-stale", ("smoke/container-cuda-podman",)),
    Fault("DKMS did not build the module", "mismatch", ("mismatch-after-reboot",)),
    Fault("Secure Boot refuses the module", "secure-boot", ("record/secure-boot",)),
    Fault("DCGM without diagnostics for the driver's CUDA", "dcgm-old", ("smoke/dcgm",)),
    Fault("IMEX version skewed from the driver", "imex-skew", ("upgrade/target-downloadable",)),
    Fault("MIG layout lost", "mig-lost", ("MIG layout",)),
    Fault("double-bit ECC only under load (burn-in)", "load-ecc", ("smoke/burn-in", "fatal-xid")),
    Fault(
        "driver container crash-looping (GPU Operator)",
        "upgrade-failed",
        ("engine-reported-failure",),
        backend="kubernetes",
    ),
)

#: clean windows: the fleets the clean runs cycle through (every one must end with no stop)
CLEAN_SCENARIOS: tuple[str, ...] = (
    "happy",
    "held-packages",
    "gpu-holders",
    "k8s-holders",
    "containerd-only",
    "podman",
    "rhel9",
    "ubuntu-archive-hgx",
    "non-root",
    "imex",
)


@dataclass(frozen=True)
class Row:
    label: str
    scenario: str
    caught_stage: str | None  # the stage the node was in when it was caught
    caught_by: str | None  # "trigger ID", "item STAGE/ITEM" or "step STAGE/STEP"
    evidence: str
    names_cause: bool
    returned_to_service: bool  # its smoke gate passed on the new driver before any rollback
    outcome: str

    @property
    def false_pass(self) -> bool:
        return self.caught_by is None or self.returned_to_service


def _stage_of(events: Sequence[Event], node: str, seq: int) -> str | None:
    """The stage the node was last seen in before ``seq``."""
    stage = None
    for e in events:
        if e.seq >= seq:
            break
        if e.node == node and e.stage:
            stage = e.stage
    return stage


def read_catch(events: Sequence[Event], node: str = TARGET) -> tuple[str | None, str | None, str, int | None]:
    """(stage, what caught it, evidence, seq) of the first thing that stopped ``node``: a trigger
    fired on it, else a failed item or step that held its gate shut."""
    for e in events:
        if isinstance(e, TriggerFiredEvent) and e.node == node:
            evidence = e.facts.evidence or ""
            by = f"trigger {e.trigger}"
            failed = _SMOKE_FAILURE.search(evidence)
            if failed:  # smoke-failed: the item or step that failed is what names the cause
                by += f" ({failed.group(2)} {failed.group(1)}/{failed.group(3)})"
            return _stage_of(events, node, e.seq), by, evidence, e.seq
    return None, None, "", None


#: how smoke_failed's evidence names what failed ("gpu02: smoke item 'pcie-link' failed: ...")
_SMOKE_FAILURE = re.compile(r"(smoke) (item|step) '([^']+)' failed")


def _failed_item(events: Sequence[Event], node: str) -> tuple[str, str, int] | None:
    """The last failed item or step on ``node`` (what a stuck Next was looking at)."""
    found = None
    for e in events:
        if e.node != node:
            continue
        if isinstance(e, ItemVerifiedEvent) and not e.facts.ok:
            found = (f"item {e.stage}/{e.item}", e.facts.evidence or "", e.seq)
        elif isinstance(e, StepFinishedEvent) and (
            e.facts.ok is False or (e.facts.ok is None and e.facts.exit_status not in (0, None))
        ):
            found = (f"step {e.stage}/{e.step}", e.facts.stderr or e.facts.stdout or "", e.seq)
    return found


def returned_to_service(events: Sequence[Event], node: str, smoke: str = "smoke") -> bool:
    """The node's smoke gate passed before any rollback began: it went back on the new driver."""
    for e in events:
        if isinstance(e, RollbackStartedEvent) and e.node == node:
            return False
        if isinstance(e, GatePassedEvent) and e.node == node and e.stage == smoke:
            return True
    return False


async def _walk(fault: Fault, workdir: Path, seed: int) -> tuple[AutopilotResult, Path, str]:
    """Next alone over the fault's window: the autopilot's result, the change log, the smoke stage."""
    if fault.backend == "kubernetes":
        # the GPU Operator's cluster: its crash loop needs the simulator's passes (speed 5, as its test)
        async with kube_demo_session(nodes=4, scenario=fault.scenario, sessions_dir=workdir, speed=5) as (session, _):
            return await drive(session), session.path, session.state.roles.smoke or "smoke"
    async with demo_session(
        nodes=2, scenario=fault.scenario, sessions_dir=workdir, speed=SPEED, params=PARAMS, seed=seed
    ) as (session, _fleet):
        return await drive(session), session.path, session.state.roles.smoke or "smoke"


async def run_fault(fault: Fault, workdir: Path, *, seed: int = 0) -> Row:
    """Walk ``fault``'s scenario with Next alone and read its change log."""
    result, path, smoke = await _walk(fault, workdir, seed)
    events = list(read_session(path).events)
    stage, by, evidence, _seq = read_catch(events)
    if by is None:
        failed = _failed_item(events, TARGET)
        if failed is not None and result.stuck_on is not None:
            what, evidence, _seq = failed
            by, stage = what, what.split(" ", 1)[1].split("/", 1)[0]
    text = f"{by or ''} {evidence}"
    names = by is not None and any(word in text for word in fault.names_cause)
    return Row(
        fault.label,
        fault.scenario,
        stage,
        by,
        evidence,
        names,
        returned_to_service(events, TARGET, smoke),
        result.outcome if result.stuck_on is None else "stopped for a person",
    )


@dataclass(frozen=True)
class CleanRun:
    scenario: str
    seed: int
    false_stop: str | None  # what stopped a window that had nothing wrong, None: none


async def run_clean(scenario: str, workdir: Path, *, seed: int) -> CleanRun:
    async with demo_session(
        nodes=2, scenario=scenario, sessions_dir=workdir, speed=SPEED, params=PARAMS, seed=seed
    ) as (session, _fleet):
        result = await drive(session)
        st = session.state
        fired = [f"{t.id}: {t.evidence}" for t in st.fired()]
        behind = [f"{n} at {p.current}" for n, p in st.nodes.items() if p.current != "done"]
    stop = result.stuck_on or (fired[0] if fired else None) or (", ".join(behind) if behind else None)
    if stop is None and result.outcome != "keep-upgraded-path":
        stop = f"outcome {result.outcome}"
    return CleanRun(scenario, seed, stop)


async def run_matrix(faults: Sequence[Fault] = FAULTS, clean: int = 0) -> tuple[list[Row], list[CleanRun]]:
    """Every fault's row, then ``clean`` clean windows cycling through :data:`CLEAN_SCENARIOS`."""
    with tempfile.TemporaryDirectory(prefix="cockpit-faults-") as tmp:
        rows = [await run_fault(f, Path(tmp)) for f in faults]
        runs = [await run_clean(CLEAN_SCENARIOS[i % len(CLEAN_SCENARIOS)], Path(tmp), seed=i + 1) for i in range(clean)]
    return rows, runs


def render(rows: Sequence[Row], runs: Sequence[CleanRun]) -> str:
    """The matrix as a plain-text table, then the clean windows' tally."""
    head = ("fault", "scenario", "caught at", "by", "names cause", "back in service", "window")
    table = [head] + [
        (
            r.label,
            r.scenario,
            r.caught_stage or "-",
            r.caught_by or "NOT CAUGHT",
            "yes" if r.names_cause else "NO",
            "YES" if r.returned_to_service else "no",
            r.outcome,
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    false_passes = sum(r.false_pass for r in rows)
    wrong_cause = sum(not r.names_cause for r in rows)
    stops = [c for c in runs if c.false_stop]
    lines += [
        "",
        f"faults: {len(rows)}",
        f"false passes: {false_passes}",
        f"caught by a check or trigger naming another cause: {wrong_cause}",
        f"clean windows: {len(runs)}",
        f"false stops: {len(stops)}",
    ]
    lines += [f"  false stop in {c.scenario} (seed {c.seed}): {c.false_stop}" for c in stops]
    return "\n".join(lines)
