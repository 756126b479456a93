"""Rollback-trigger evaluators: one pure function per built-in name.

Each evaluator reads the folded :class:`~cockpit.engine.state.CockpitState` (baselines,
latest probe summaries, stage and step states) and returns a
:class:`TriggerFinding` per node where its condition holds, with one line of
evidence naming the node and the numbers. :func:`evaluate` runs the armed automatic
triggers and keeps only *new* firings, which the session records as
``TRIGGER_FIRED`` events; manual triggers are raised by people, never here.

What counts as new:

- a trigger already fired for a node is not reported again for that node until it
  is cleared (one firing per node; a window-wide finding has ``node = None``);
- after a clear, a finding counts only if its evidence comes from an event after the
  clear (``finding.seq > cleared_seq``). Probes are recorded only when they change,
  so a condition a person looked at and cleared does not fire again until something
  new is seen. Time-based findings (``reboot_timeout``, ``seq = None``) restart their
  clock at the clear instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar, cast

from cockpit.changelog.events import wave_number
from cockpit.engine.checks import fatal_codes, no_verdict
from cockpit.engine.state import (
    ROLLBACK_FAILED,
    ROLLED_BACK,
    ROLLING_BACK,
    CockpitState,
    NodeProgress,
    StageState,
    TriggerState,
)
from cockpit.errors import BadInput
from cockpit.fleet.backends.base import ObservedStage
from cockpit.fleet.nodeset import fold_nodeset
from cockpit.gpu.nodestate import Health
from cockpit.runbook.model import Runbook, Trigger, TriggerMode, Verify
from cockpit.runbook.waves import resolve_int

#: Seconds a node may take to come back after a reboot when neither the trigger nor
#: the runbook's parameters say.
DEFAULT_REBOOT_TIMEOUT_S = 900

#: Probe verdicts that say nothing about the GPUs (the node is away or not probed).
_NOT_LOOKING = frozenset({Health.UNREACHABLE, Health.REBOOTING, Health.UNKNOWN})


@dataclass(frozen=True, slots=True)
class TriggerFinding:
    trigger_id: str
    node: str | None
    evidence: str
    #: seq of the event the evidence comes from; None when it is the passing of time
    seq: int | None = None


Evaluator = Callable[[Trigger, CockpitState, Mapping[str, object], datetime], list[TriggerFinding]]
T = TypeVar("T")
#: what a trigger saw on one node, and the seq of the event it saw it in (None: the passing of time)
Seen = tuple[str, int | None]


# -- helpers over the folded state


def _looking(p: NodeProgress) -> bool:
    """The latest probe reached the node and it was up."""
    return bool(p.probe.reachable) and p.probe.health not in _NOT_LOOKING


def _in_rollback(p: NodeProgress) -> bool:
    return p.current in (ROLLING_BACK, ROLLED_BACK, ROLLBACK_FAILED)


def _stage_closed(p: NodeProgress, stage_id: str | None) -> bool:
    if stage_id is None:
        return False
    stage = p.stages.get(stage_id)
    return stage is not None and stage.closed


def _back_from_reboot(p: NodeProgress) -> bool:
    """The node came back from a reboot: a new boot id since the baseline or the reboot step."""
    if p.back_seq is not None:
        return True
    now, before = p.probe.boot_id, p.baseline.boot_id
    return bool(now) and bool(before) and now != before


def _int_param(trigger: Trigger, keys: tuple[str, ...], params: Mapping[str, object], default: int) -> int:
    for key in keys:
        if key in trigger.params:
            value = trigger.params[key]
            if isinstance(value, int | str) and not isinstance(value, bool):
                return resolve_int(value, params, f"trigger {trigger.id}: {key}")
            raise BadInput(f"trigger {trigger.id}: {key} must be an integer or a parameter name")
    for key in keys:
        if key in params:
            return resolve_int(key, params, key)
    return default


def _failures(stage: StageState | None) -> list[tuple[int, str]]:
    """(seq, what) for every failed step and item of a stage that gave a verdict: a step
    cut short (the link lost, timed out, cancelled) or a check that could not reach the
    node saw nothing wrong; it keeps the gate shut until it is run again."""
    if stage is None or stage.entered_seq is None:
        return []  # a stage never entered ran nothing and verified nothing
    # most stages of most nodes hold no failure: said without building anything (judged for
    # every node after every event, twice: smoke_failed and the wave's failure budget)
    if all(s.status != "failed" for s in stage.steps.values()) and all(
        i.status != "failed" for i in stage.items.values()
    ):
        return []
    out = [
        (s.finished_seq or 0, f"step {s.id!r} failed ({s.failure()})")
        for s in stage.steps.values()
        if s.status == "failed" and not s.no_verdict
    ]
    for item in stage.items.values():
        step = stage.steps.get(item.step or "") if item.verify == Verify.STEP else None
        if item.status == "failed" and not no_verdict(item.evidence) and not (step and step.no_verdict):
            what = f"item {item.id!r} failed" + (f": {item.evidence}" if item.evidence else "")
            out.append((item.seq or 0, what))
    return out


def _smoke_stage(trigger: Trigger | None, state: CockpitState) -> str | None:
    if trigger is not None and isinstance(trigger.params.get("stage"), str):
        return str(trigger.params["stage"])
    return state.roles.smoke


@dataclass(frozen=True, slots=True)
class Judging:
    """What a per-node judge sees beside the node: the trigger, the whole state, the
    window's parameters and the time of the evaluation."""

    trigger: Trigger
    state: CockpitState
    params: Mapping[str, object]
    now: datetime
    #: what a judge works out from the trigger and the parameters alone, once per evaluation
    #: rather than once per node (the same for every node: a fleet's evaluation after each event)
    memo: dict[str, object] = field(default_factory=dict)

    def once(self, key: str, make: Callable[[], T]) -> T:
        """``make()``, worked out at the first node that asks and kept for the others."""
        if key not in self.memo:
            self.memo[key] = make()
        return cast(T, self.memo[key])


def per_node(judge: Callable[[NodeProgress, Judging], Seen | None]) -> Evaluator:
    """The evaluator of a trigger that judges each node on its own: a finding for each node
    ``judge`` saw the condition on, its evidence starting with the node's name."""

    def evaluate(
        trigger: Trigger, state: CockpitState, params: Mapping[str, object], now: datetime
    ) -> list[TriggerFinding]:
        on = Judging(trigger, state, params, now)
        out = []
        for name, p in state.nodes.items():
            seen = judge(p, on)
            if seen is not None:
                what, seq = seen
                out.append(TriggerFinding(trigger.id, name, f"{name}: {what}", seq))
        return out

    evaluate.__name__ = evaluate.__qualname__ = judge.__name__
    evaluate.__doc__ = judge.__doc__
    _JUDGES[evaluate] = judge
    return evaluate


#: The judge of each :func:`per_node` evaluator, to judge some nodes alone (:func:`evaluate`'s ``nodes``).
_JUDGES: dict[Evaluator, Callable[[NodeProgress, Judging], Seen | None]] = {}

#: Per-node evaluators whose verdict on an unchanged node can change with the clock alone
#: (they read ``Judging.now``): :func:`evaluate`'s ``changed`` still judges every node by them.
_CLOCK_JUDGED: set[str] = {"reboot_timeout"}


def _judge_nodes(
    evaluator: Evaluator,
    nodes: Collection[str],
    trigger: Trigger,
    state: CockpitState,
    params: Mapping[str, object],
    now: datetime,
) -> list[TriggerFinding]:
    """A per-node evaluator's findings on ``nodes`` alone; a fleet-wide one says nothing here."""
    judge = _JUDGES.get(evaluator)
    if judge is None:
        return []
    on = Judging(trigger, state, params, now)
    out = []
    for name in nodes:
        p = state.nodes.get(name)
        seen = None if p is None else judge(p, on)
        if seen is not None:
            what, seq = seen
            out.append(TriggerFinding(trigger.id, name, f"{name}: {what}", seq))
    return out


# -- the evaluators


@per_node
def gpu_count_below_baseline(p: NodeProgress, on: Judging) -> Seen | None:
    base = p.baseline.gpu_count
    if base is None or not _looking(p) or _in_rollback(p):
        return None
    health = p.probe.health
    if health == Health.DRIVER_NOT_LOADED:
        # No GPU is usable; before the reboot that may be the upgrade in progress.
        if _back_from_reboot(p):
            return f"driver not loaded after the reboot, 0 GPUs usable, baseline {base}", p.probe_seq
        return None
    if health == Health.DRIVER_LIBRARY_MISMATCH:
        return None  # nvidia-smi sees no GPU while a reboot is pending; mismatch_after_reboot covers it
    count = p.probe.gpu_count
    if count is not None and int(count) < int(base):
        return f"{count} GPUs, baseline {base}", p.probe_seq
    return None


def driver_versions_inconsistent(
    trigger: Trigger, state: CockpitState, params: Mapping[str, object], now: datetime
) -> list[TriggerFinding]:
    reboot = state.roles.reboot
    seen: dict[str, tuple[str, int, int]] = {}  # node -> (version, reboot passed seq, evidence seq)
    for name, p in state.nodes.items():
        if _in_rollback(p) or not _stage_closed(p, reboot) or not _looking(p):
            continue
        version = p.probe.driver_version
        if not version:
            continue
        passed = p.stages[reboot or ""].passed_seq or 0
        seen[name] = (str(version), passed, max(passed, p.probe_seq or 0))
    versions = Counter(v for v, _, _ in seen.values())
    if len(versions) < 2:
        return []
    # The version most nodes run is the reference; on a tie, the first node through wins.
    first = {v: min(s for vv, s, _ in seen.values() if vv == v) for v in versions}
    reference = max(versions, key=lambda v: (versions[v], -first[v]))
    peers = sorted(n for n, (v, _, _) in seen.items() if v == reference)
    # the peers as a node set: listed one by one, 2,000 of them made each finding 14 KB
    who = peers[0] if len(peers) == 1 else f"{_node_set(peers)} ({len(peers)} nodes)"
    out = []
    for name, (version, _, seq) in sorted(seen.items()):
        if version != reference:
            out.append(
                TriggerFinding(
                    trigger.id,
                    name,
                    f"{name}: driver {version}, while {who} {'runs' if len(peers) == 1 else 'run'} {reference}",
                    seq,
                )
            )
    return out


def _node_set(names: list[str]) -> str:
    try:
        return fold_nodeset(names)
    except BadInput:  # a name the folded form cannot hold (checked at the edge; never seen here)
        return ", ".join(names)


@per_node
def reboot_timeout(p: NodeProgress, on: Judging) -> Seen | None:
    timeout = on.once(
        "timeout",
        lambda: _int_param(on.trigger, ("reboot_timeout_s", "timeout_s"), on.params, DEFAULT_REBOOT_TIMEOUT_S),
    )
    if p.reboot_started_at is None or p.back_seq is not None:
        return None
    tstate = on.state.triggers.get(on.trigger.id)
    start = p.reboot_started_at
    if tstate is not None and tstate.cleared_at is not None and tstate.cleared_at > start:
        start = tstate.cleared_at  # a person cleared it: give the node another full timeout
    waited = (on.now - start).total_seconds()
    if waited > timeout:
        return f"no new boot id {int(waited)} s after the reboot began (timeout {timeout} s)", None
    return None


def _mismatched(p: NodeProgress) -> str | None:
    """The latest probe's driver/library mismatch, in words, or None."""
    kmod, user = p.probe.kernel_module_version, p.probe.driver_version
    if p.probe.health == Health.DRIVER_LIBRARY_MISMATCH or (kmod and user and kmod != user):
        return f"kernel module {kmod or 'N/A'}, userspace {user or 'N/A'}"
    return None


def _probed_since_reboot(p: NodeProgress) -> bool:
    """The latest probe is from the boot after the upgrade's reboot, not the one before it."""
    before = p.boot_id_before_reboot or p.baseline.boot_id
    return _back_from_reboot(p) and not (before and p.probe.boot_id == before)


@per_node
def mismatch_after_reboot(p: NodeProgress, on: Judging) -> Seen | None:
    # Judged from the first probe of the new boot, not once the reboot stage closed: a module
    # that was not rebuilt keeps that stage's own checks from passing, so it would never close,
    # and the fabric manager (which refuses a mismatched module) would be blamed instead
    upgrade = on.state.roles.upgrade
    if _in_rollback(p) or not _stage_closed(p, upgrade) or not _probed_since_reboot(p):
        return None
    if not p.probe.reachable:
        return None
    what = _mismatched(p)
    if what:
        return f"driver/library mismatch after the reboot ({what})", p.probe_seq
    return None


@per_node
def smoke_failed(p: NodeProgress, on: Judging) -> Seen | None:
    sid = on.once("smoke", lambda: _smoke_stage(on.trigger, on.state))
    failures = _failures(p.stages.get(sid or ""))
    if not failures:
        return None
    seq, what = max(failures)
    return f"smoke {what}", seq


@per_node
def fabric_manager_down(p: NodeProgress, on: Judging) -> Seen | None:
    # Between the package change and the reboot the fabric manager cannot match the
    # loaded module, so it is judged only once the node is back on the new driver.
    upgrade = on.state.roles.upgrade
    if p.baseline.fabric_manager != "active" or _in_rollback(p):
        return None
    if not _stage_closed(p, upgrade) or not _back_from_reboot(p) or not _looking(p):
        return None
    if _mismatched(p):
        return None  # the fabric manager refuses a mismatched module: mismatch_after_reboot names the cause
    fm = p.probe.fabric_manager
    if fm != "active":
        return f"fabric manager {fm or 'not installed'}, active before the change", p.probe_seq
    return None


def _xid_codes(trigger: Trigger, params: Mapping[str, object]) -> set[int]:
    if "codes" in trigger.params:
        return fatal_codes({"codes": trigger.params["codes"]}, "codes")
    return fatal_codes(params)


@per_node
def fatal_xid(p: NodeProgress, on: Judging) -> Seen | None:
    codes = on.once("codes", lambda: _xid_codes(on.trigger, on.params))
    if _in_rollback(p) or not _back_from_reboot(p) or not p.probe.reachable:
        return None
    before = p.boot_id_before_reboot or p.baseline.boot_id
    if before and p.probe.boot_id == before:
        return None  # the latest probe is still from the old boot
    hit = sorted({int(c) for c in p.probe.xid_codes or []} & codes)
    if hit:
        return f"fatal XID {', '.join(map(str, hit))} since the reboot", p.probe_seq
    return None


@per_node
def fatal_sxid(p: NodeProgress, on: Judging) -> Seen | None:
    if _in_rollback(p) or not _probed_since_reboot(p) or not p.probe.reachable:
        return None
    hit = p.probe.sxid_fatal or []
    if hit:
        return f"fatal NVSwitch SXid {', '.join(map(str, hit))} since the reboot", p.probe_seq
    return None


#: The cockpit's word for a node an engine reports failed.
OBSERVED_FAILED = ObservedStage.FAILED


@per_node
def engine_reported_failure(p: NodeProgress, on: Judging) -> Seen | None:
    """The node's last observation from the window's engine says it failed (``upgrade-failed``,
    a Slurm node that came back DOWN or FAIL, a playbook's failed host)."""
    seen = p.observation
    if seen.stage != OBSERVED_FAILED or _in_rollback(p):
        return None
    said = f"{seen.backend or 'the engine'} reports {seen.native_state or 'failed'}"
    reason = seen.reason
    return (f"{said} ({reason})" if reason else said), p.observation_seq


def node_failed(state: CockpitState, p: NodeProgress) -> int | None:
    """The seq at which a node counts as failed (rolled back or smoke failed), else None."""
    rolled_back = p.rollback.entered_seq if p.rollback is not None else None
    failures = _failures(p.stages.get(state.roles.smoke or ""))
    if not failures:  # most nodes (the wave's budget asks for every node after every event)
        return rolled_back
    seqs = [s for s, _ in failures]
    if rolled_back is not None:
        seqs.append(rolled_back)
    return max(seqs)


def wave_failure_budget(
    trigger: Trigger, state: CockpitState, params: Mapping[str, object], now: datetime
) -> list[TriggerFinding]:
    if "budget" in trigger.params or "failure_budget" in trigger.params:
        budget = _int_param(trigger, ("budget", "failure_budget"), params, state.failure_budget)
    else:
        budget = state.failure_budget
    out = []
    for wave in sorted(state.wave_started_seq):
        failed = {n: s for n in state.waves[wave] if (s := node_failed(state, state.nodes[n])) is not None}
        if failed and len(failed) > budget:
            last = max(failed, key=lambda n: failed[n])
            names = ", ".join(sorted(failed))
            out.append(
                TriggerFinding(
                    trigger.id,
                    last,
                    f"wave {wave_number(wave)}: {len(failed)} node(s) failed ({names}), budget {budget}",
                    failed[last],
                )
            )
    return out


EVALUATORS: dict[str, Evaluator] = {
    "gpu_count_below_baseline": gpu_count_below_baseline,
    "driver_versions_inconsistent": driver_versions_inconsistent,
    "reboot_timeout": reboot_timeout,
    "mismatch_after_reboot": mismatch_after_reboot,
    "smoke_failed": smoke_failed,
    "fabric_manager_down": fabric_manager_down,
    "fatal_xid": fatal_xid,
    "fatal_sxid": fatal_sxid,
    "wave_failure_budget": wave_failure_budget,
    "engine_reported_failure": engine_reported_failure,
}


def _is_new(tstate: TriggerState, finding: TriggerFinding) -> bool:
    if tstate.status == "fired" and (finding.node or "") in tstate.fired_nodes:
        return False
    return not (tstate.cleared_seq is not None and finding.seq is not None and finding.seq <= tstate.cleared_seq)


def evaluate(
    runbook: Runbook,
    state: CockpitState,
    params: Mapping[str, object],
    now: datetime,
    *,
    nodes: Collection[str] | None = None,
    changed: Collection[str] | None = None,
) -> list[TriggerFinding]:
    """New firings of the armed automatic triggers (see the module notes for "new").

    ``nodes``: judge only these nodes, by the evaluators that judge each node alone, and
    leave the fleet-wide evaluators out: what a probe of those nodes can newly show, when
    a whole evaluation follows soon (a probe round's, at its end). Judging 2,000 nodes
    after each of a round's 2,000 probes made the round quadratic.

    ``changed``: the same findings as a whole evaluation when only these nodes' progress
    changed since the last one (and no trigger's state): a per-node judge reads its node,
    the trigger's state, the roles and the parameters, so on any other node it would say
    what it said before, which :func:`_is_new` already weighed. The fleet-wide evaluators
    and the clock-judged ones (:data:`_CLOCK_JUDGED`) still see the whole fleet. A wave of
    200 nodes judged every node after each of its events: half the cockpit's CPU."""
    merged = {**state.params, **params}
    out: list[TriggerFinding] = []
    for trigger in runbook.triggers:
        if trigger.mode is not TriggerMode.AUTO or not trigger.evaluator:
            continue
        tstate = state.triggers.get(trigger.id)
        if tstate is None or tstate.status == "disarmed":
            continue
        fn = EVALUATORS.get(trigger.evaluator)
        if fn is None:
            raise BadInput(f"trigger {trigger.id}: unknown evaluator {trigger.evaluator!r}")
        reported: set[str] = set()
        if nodes is not None:
            found = _judge_nodes(fn, nodes, trigger, state, merged, now)
        elif changed is not None and fn in _JUDGES and trigger.evaluator not in _CLOCK_JUDGED:
            found = _judge_nodes(fn, changed, trigger, state, merged, now)
        else:
            found = fn(trigger, state, merged, now)
        for finding in found:
            key = finding.node or ""
            if key not in reported and _is_new(tstate, finding):
                reported.add(key)
                out.append(finding)
    return out
