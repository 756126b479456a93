"""The Slurm backend: Slurm drains, reboots and resumes the nodes; the cockpit asks and watches.

A site that runs Slurm lets no second tool reboot a node behind slurmctld's back: a node
rebooted outside Slurm comes back DOWN "Node unexpectedly rebooted" (slurm.conf(5),
``ReturnToService``), and jobs may be started on it while the driver is half installed.
So the cockpit asks Slurm, with Slurm's own commands, and reads Slurm's answer:

- **drain**: ``scontrol update nodename=N state=drain reason=<the change>``, then waits
  until the node is ``IDLE+DRAIN`` (DRAINED) and ``squeue -w N`` lists no job; the job
  ids seen while it drained are the evidence (scontrol(1) ``State=DRAIN``: "Existing jobs
  are allowed to run to completion, leaving the node in a DRAINED state");
- **reboot**: ``scontrol reboot ASAP nextstate=DOWN reason=<the change> N`` (a node someone
  else drained: a plain ``scontrol reboot N``, which keeps their drain and reason); Slurm runs
  its ``RebootProgram`` when the node is idle. Watched through the state flags
  (``REBOOT_REQUESTED``, then ``REBOOT_ISSUED``) until slurmd registers again: the flags
  cleared, responding, a new ``BootTime``. A node that does not come back fails with its
  state and reason as evidence, when the timeout passes or as soon as Slurm itself gives
  up ("reboot timed out" after ``ResumeTimeout``, scontrol(1) ``reboot``);
- **held until the smoke test**: slurmctld clears DRAIN when a node rebooted with any
  ``nextstate`` registers (``validate_node_specs``, src/slurmctld/node_mgr.c: ``if
  (node_ptr->next_state != NO_VAL) node_flags &= (~NODE_STATE_DRAIN)``), and a boot-time
  health check's drain with it; with ``nextstate=DOWN`` it leaves the node DOWN, its reason
  appended with "reboot complete", so no job lands on a node whose smoke test has not run.
  The cockpit then drains it again with its own reason (DOWN+DRAIN): under
  ``ReturnToService=2`` a DOWN node returns to service at its next registration, a drained one
  only as IDLE+DRAIN. (``hold="resume"``, the old ``nextstate=RESUME``, returns it to service
  as slurmd registers: kept for the leak benchmark's comparison, never the default);
- **resume**: ``scontrol update nodename=N state=resume`` once the runbook's smoke test passed,
  waited for until the node responds: slurmctld asks the resumed node to register again
  (``_require_node_reg``: NOT_RESPONDING, ``BootTime`` cleared) and marks it DOWN "Not
  responding" if that takes longer than ``SlurmdTimeout`` (ping_nodes.c). Only a drain whose
  reason is exactly one this change writes (``cockpit CHANGE: STEP`` for its drain and reboot
  steps, :func:`change_reasons`, plus Slurm's own reboot suffixes) is resumed: never by prefix.

The install between them stays the runbook's SSH steps. Node names and states come from
``sinfo --json`` where the installed Slurm offers it and ``scontrol show node -o``
otherwise (:mod:`cockpit.fleet.backends.slurm_nodes`). Every command is an argv list, run
through a :class:`CommandRunner` (:mod:`cockpit.fleet.backends.runners`): on the jump host,
or on the control host ``BackendOptions.slurm.control_host`` names, over the window's SSH
(``shlex.join`` of the argv, so no value is ever concatenated into a line unquoted).
"""

from __future__ import annotations

import asyncio
import math
import re
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar, Literal

from cockpit.fleet.backends import base
from cockpit.fleet.backends.slurm_nodes import (
    SinfoJsonWithoutNodes,
    SlurmNode,
    SlurmParseError,
    config_seconds,
    driver_features,
    parse_scontrol_nodes,
    parse_show_config,
    parse_sinfo_json,
    parse_squeue_jobs,
    stage_of,
    time_left_s,
    unknown_flags,
)
from cockpit.fleet.results import CommandResult

if TYPE_CHECKING:
    from cockpit.fleet.backends.registry import BackendOptions
    from cockpit.fleet.transport import Transport
    from cockpit.runbook.model import Runbook

#: what the cockpit's own reasons start with, so a later resume can tell its drain from another's
REASON_TAG = "cockpit"
#: Slurm node names as slurm.conf(5) allows them in practice; anything else never reaches argv
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: scontrol(1) reboot: "The reason will be appended with ... 'reboot timed out' when the node
#: fails to register within ResumeTimeout"
_TIMED_OUT = "reboot timed out"
#: what slurmctld appends to the reason of a node rebooted with ``nextstate=DOWN`` when it
#: registers (``validate_node_specs``, src/slurmctld/node_mgr.c)
REBOOT_COMPLETE = "reboot complete"
#: what slurmctld appends to a reason as a reboot goes (captured: "... : reboot issued : reboot
#: complete"; scontrol(1): "reboot timed out"): the only words allowed after the cockpit's own text
_SLURMS_SUFFIXES = re.compile(r"(?: : reboot issued)?(?: : (?:reboot complete|reboot timed out))?")

Form = Literal["auto", "json", "text"]
#: how a rebooted node waits for its smoke test, the runbook's ``slurm_hold``: "down"
#: (``nextstate=DOWN``, then the cockpit's drain) or "reservation" (a maintenance reservation
#: on the node, made before the reboot and deleted by the resume) hold it out of service;
#: "resume" (``nextstate=RESUME``) does not, and exists only so the leak benchmark can show
#: what holding it saves
Hold = Literal["down", "reservation", "resume"]
HOLDS: tuple[Hold, ...] = ("down", "reservation", "resume")
#: the maintenance reservation that holds a node (the name says whose, to a new process too)
RESERVATION_PREFIX = "cockpit-hold-"
#: what the smoke job runs when the runbook names nothing (``slurm_smoke_command``)
DEFAULT_SMOKE_COMMAND = "nvidia-smi -L"
#: the first wait between two looks at released nodes; each later one doubles, up to poll_s
FIRST_POLL_S = 0.25


def clean_reason(reason: str) -> str:
    """The change's words as one Slurm reason: one line, printable, not too long, and starting
    with the cockpit's tag (the executor's reasons already do: "cockpit CHG-1: drain")."""
    # scontrol strips double quotes from a reason= value (captured: a reason ending in '"' is
    # stored without it), so they become single ones: Slurm keeps what the change log says
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in reason).replace('"', "'").split())
    if not text.startswith(REASON_TAG):
        text = f"{REASON_TAG}: {text}"
    return text[:200]


def change_reasons(change_id: str, step_ids: Iterable[str]) -> frozenset[str]:
    """The exact reasons a change writes into Slurm: the executor's ``cockpit CHANGE: STEP`` for
    each of its steps that drains or reboots, as :func:`clean_reason` sends them."""
    return frozenset(clean_reason(f"cockpit {change_id}: {step}") for step in step_ids)


def written_by(reason: str | None, owned: Iterable[str]) -> bool:
    """Whether Slurm's ``reason`` is one of ``owned`` exactly, followed at most by what slurmctld
    itself appends during a reboot. Never a prefix: "cockpit said GPU3 missing - RMA 4711" or an
    earlier change's "cockpit CHG-6: drain" is someone else's drain, and stays."""
    if not reason:
        return False
    return any(reason.startswith(text) and _SLURMS_SUFFIXES.fullmatch(reason[len(text) :]) for text in owned)


def _first_line(result: CommandResult) -> str:
    if result.error_kind is not None and result.error:
        return result.error  # the runner's own word: a timeout, no connection to the control host
    said = (result.stderr.strip() or result.stdout.strip() or result.error or "").splitlines()
    return said[0].strip() if said else f"exit status {result.exit_status}"


class SlurmBackend(base.Backend):
    """Drain, reboot and resume through slurmctld; node state read from sinfo/scontrol."""

    name: ClassVar[base.BackendName] = base.BackendName.SLURM
    actions: ClassVar[frozenset[base.BackendAction]] = frozenset(
        {
            base.BackendAction.PREFLIGHT, base.BackendAction.DRAIN, base.BackendAction.REBOOT,
            base.BackendAction.SMOKE, base.BackendAction.RESUME,
        }
    )  # fmt: skip
    reports_state: ClassVar[bool] = True

    def __init__(
        self,
        runner: base.CommandRunner,
        *,
        poll_s: float = 5.0,
        command_timeout_s: float = 30.0,
        form: Form = "auto",
        hold: Hold = "down",
    ) -> None:
        self._run = runner
        self.hold: Hold = hold
        self.poll_s = poll_s
        self._command_timeout_s = command_timeout_s
        self._form: Form = form
        #: nodes this backend drained (they were not drained before): the only ones cancel undrains
        self._drained: set[str] = set()
        #: nodes someone else had drained when the window first acted on them, with their reason:
        #: never resumed, never given the cockpit's reason, drained again if a cancel undid it
        self._foreign: dict[str, str] = {}
        #: the cockpit's name -> Slurm's, for nodes Slurm knows by another name (``cockpit_node_name``):
        #: a cancel names the cockpit's node, and only Slurm's name reaches its reboot
        self._slurm_names: dict[str, str] = {}
        #: nodes rebooted with ``nextstate=DOWN``: out of service until the resume step
        self._held: set[str] = set()
        #: nodes held in the cockpit's maintenance reservation until the resume step
        self._reserved: set[str] = set()
        #: the exact reasons this backend wrote into Slurm, and the ids of the runbook's steps
        #: that drain or reboot (:meth:`use_runbook`); with the change id (the request's
        #: context) they name every reason this change writes, so a resumed window knows its own
        self._wrote: set[str] = set()
        self._step_ids: set[str] = set()
        self._change_id: str | None = None

    def use_runbook(self, runbook: Runbook) -> None:
        """Keep the ids of the steps that drain or reboot through Slurm: their reasons are this change's."""
        wanted = {base.BackendAction.DRAIN, base.BackendAction.REBOOT}
        rollback = runbook.rollback.steps if runbook.rollback is not None else []
        steps = [s for stage in runbook.stages for s in stage.steps] + rollback
        self._step_ids = {s.id for s in steps if s.backend_action(self.actions) in wanted}

    def _reservation(self, node: str) -> str:
        """The maintenance reservation this change holds ``node`` in: named by the change, so a
        resume deletes its own, never an earlier window's or a site's of a like name."""
        return f"{RESERVATION_PREFIX}{self._change_id}-{node}" if self._change_id else f"{RESERVATION_PREFIX}{node}"

    def owned_reasons(self) -> frozenset[str]:
        """Every reason this change wrote (or would write) into Slurm: the only drains it resumes."""
        derived = change_reasons(self._change_id, self._step_ids) if self._change_id else frozenset()
        return derived | self._wrote

    # -- reading -----------------------------------------------------------------------------

    async def _command(self, argv: Sequence[str]) -> CommandResult:
        return await self._run(list(argv), timeout=self._command_timeout_s)

    async def nodes(self, names: Sequence[str] | None = None) -> dict[str, SlurmNode]:
        """Slurm's records of ``names`` (every node when None); raises BackendError when Slurm cannot be read."""
        if self._form in ("auto", "json"):
            result = await self._command(["sinfo", "--json"])
            if result.ok:
                try:
                    found = parse_sinfo_json(result.stdout)
                except SinfoJsonWithoutNodes:
                    found = None  # Slurm 23.02 or later: the text form has every version's node records
                except SlurmParseError as exc:
                    raise base.BackendError(f"slurm: {exc}") from exc
                if found is not None:
                    self._form = "json"
                    wanted = set(names) if names is not None else None
                    return {n.name: n for n in found if wanted is None or n.name in wanted}
            else:
                said = _first_line(result)
                # Slurm before 21.08 has no --json ("unrecognized option"); anything else is a real failure
                if self._form == "json" or result.error_kind is not None or "option" not in said.lower():
                    raise base.BackendError(f"slurm: sinfo --json failed: {said}")
            self._form = "text"
        argv = ["scontrol", "show", "node", "-o"]
        if names:
            argv.append(",".join(names))
        result = await self._command(argv)
        try:
            found = parse_scontrol_nodes(result.stdout)
        except SlurmParseError as exc:
            raise base.BackendError(f"slurm: {exc}") from exc
        if not result.ok and not found:
            said = _first_line(result)
            if "not found" not in said:
                raise base.BackendError(f"slurm: scontrol show node failed: {said}")
        return {n.name: n for n in found}

    async def jobs_on(self, node: str) -> list[tuple[str, str]]:
        """The jobs squeue lists on ``node``: (job id, state)."""
        result = await self._command(["squeue", "-h", "-w", node, "-o", "%i|%T"])
        if not result.ok:
            raise base.BackendError(f"slurm: squeue -w {node} failed: {_first_line(result)}")
        try:
            return parse_squeue_jobs(result.stdout)
        except SlurmParseError as exc:
            raise base.BackendError(f"slurm: {exc}") from exc

    def observation(self, node: SlurmNode, jobs: Sequence[str] | None = None) -> base.Observation:
        evidence = {"slurm_state": node.native}
        for key, value in (
            ("boot_time", node.boot_time), ("gres", node.gres), ("gres_used", node.gres_used),
            ("reason_by", node.reason_by), ("next_state", node.next_state),
        ):  # fmt: skip
            if value:
                evidence[key] = value
        if node.gpus is not None:
            evidence["gpus"] = str(node.gpus)
        if jobs is not None:
            evidence["jobs"] = ",".join(jobs) or "none"
        strange = unknown_flags(node)
        if strange:  # read as unknown, never as done, and said: the operator sees which word it was
            evidence["not_slurms_known_states"] = "+".join(strange)
        return base.Observation(
            backend=base.BackendName.SLURM, node=node.name, native_state=node.native, stage=stage_of(node),
            reason=node.reason, evidence=evidence,
        )  # fmt: skip

    @staticmethod
    def _unknown(name: str) -> base.Observation:
        return base.Observation(
            backend=base.BackendName.SLURM, node=name, native_state="not in slurm", stage=base.ObservedStage.UNKNOWN,
            reason="slurmctld does not know this node",
        )  # fmt: skip

    async def discover(self) -> list[base.Observation]:
        return [self.observation(n) for n in (await self.nodes()).values()]

    async def observe(self, nodes: Sequence[str]) -> list[base.Observation]:
        names = [n for n in nodes if _NODE_NAME.match(n)]
        found = await self.nodes(names) if names else {}
        return [self.observation(found[n]) if n in found else self._unknown(n) for n in nodes]

    # -- acting --------------------------------------------------------------------------------

    async def release(
        self, request: base.ReleaseRequest, on_observation: base.ObservationCallback | None = None
    ) -> list[base.ReleaseResult]:
        if request.action not in self.actions:
            return request.refused(f"slurm does not {request.action} nodes")
        # the executor releases one node at a time, with its facts: where Slurm knows the node by
        # another name (``cockpit_node_name``), Slurm is asked by that name, and the cockpit hears
        # of it by its own
        nodes = request.nodes
        alias: dict[str, str] = {}
        slurm_name = request.context.get("node_name")
        if len(nodes) == 1 and slurm_name and slurm_name != nodes[0]:
            alias = {slurm_name: nodes[0]}
            self._slurm_names[nodes[0]] = slurm_name
        hear = on_observation
        if alias and on_observation is not None:

            def hear(seen: base.Observation) -> None:
                on_observation(seen.model_copy(update={"node": alias.get(seen.node, seen.node)}))

        change = request.context.get("change_id")
        if change and self._change_id is None:
            self._change_id = change
        asked = replace(request, nodes=tuple(alias) or nodes, reason=clean_reason(request.reason))
        if request.action in (base.BackendAction.DRAIN, base.BackendAction.REBOOT):
            self._wrote.add(asked.reason)
        results = await self._release(asked, hear)
        return [_renamed(r, alias) for r in results]

    async def _release(
        self, request: base.ReleaseRequest, on_observation: base.ObservationCallback | None
    ) -> list[base.ReleaseResult]:
        """``request`` in Slurm's words (its node names, a reason scontrol takes), done and waited for."""
        action, nodes = request.action, request.nodes
        started = time.monotonic()
        results: dict[str, base.ReleaseResult] = {}
        for n in nodes:
            if not _NODE_NAME.match(n):
                results[n] = base.ReleaseResult(node=n, action=action, ok=False, error=f"not a Slurm node name: {n!r}")
        names = [n for n in nodes if n not in results]
        before = await self.nodes(names) if names else {}
        for n in names:
            if n not in before:
                final = self._unknown(n)
                results[n] = base.ReleaseResult(node=n, action=action, ok=False, final=final, error=final.reason)
        names = [n for n in names if n in before]
        watch = _Watch(self, action, before, started, on_observation)
        if action is base.BackendAction.PREFLIGHT:
            results.update(await self._preflight(names, before, request.context, watch))
            return [results[n] for n in nodes]
        asked = request.context.get("slurm_hold") or self.hold
        hold = next((h for h in HOLDS if h == asked), None)
        if hold is None:
            error = f"slurm_hold {asked!r}: not one of {', '.join(HOLDS)}"
            results.update({n: watch.result(n, before[n], ok=False, error=error) for n in names})
            return [results[n] for n in nodes]
        if action is base.BackendAction.SMOKE:
            results.update(await self._smoke(names, before, request.context, request.timeout_s, watch))
            return [results[n] for n in nodes]
        if action is base.BackendAction.RESUME and names:
            results.update(await self._update_features(names, before, request.context, watch))
            names = [n for n in names if n not in results]
            results.update(await self._end_reservations(names, before, watch))
            names = [n for n in names if n not in results]
        if action is base.BackendAction.REBOOT and hold == "reservation" and names:
            results.update(await self._reserve(names, before, watch))
            names = [n for n in names if n not in results]
        if names:
            results.update(await self._ask(action, names, before, request.reason, watch, hold))
            pending = [n for n in names if n not in results]
            results.update(await watch.until_done(pending, request.timeout_s))
        if action is base.BackendAction.REBOOT:
            back = [n for n in names if n in self._held and results[n].ok]
            if back:
                results.update(await self._drain_held(back, request.reason, results, watch))
        return [results[n] for n in nodes]

    async def _drain_held(
        self, names: list[str], reason: str, results: Mapping[str, base.ReleaseResult], watch: _Watch
    ) -> dict[str, base.ReleaseResult]:
        """Put the cockpit's drain on nodes back DOWN from a ``nextstate=DOWN`` reboot. DOWN alone
        holds them only until their next registration where ``ReturnToService=2`` (slurm.conf(5):
        "A DOWN node will become available for use upon registration with a valid
        configuration"); DOWN+DRAIN comes back IDLE+DRAIN at worst. The reboot stays done if
        scontrol refuses: the node is DOWN, out of service, and the evidence says so."""
        argv = ["scontrol", "update", f"nodename={','.join(names)}", "state=drain", f"reason={reason}"]
        drained = await self._command(argv)
        self._drained.update(names)
        now = await self.nodes(names)
        updated: dict[str, base.ReleaseResult] = {}
        for n in names:
            node = now.get(n)
            if node is None:
                continue
            watch._tell(self.observation(node))
            result = watch.result(n, node, ok=True)
            evidence = {**result.evidence, "held": "DOWN until its smoke test passes"}
            if not drained.ok:
                evidence["hold_drain"] = f"scontrol refused: {_first_line(drained)}"
            updated[n] = result.model_copy(update={"evidence": evidence, "waited_s": results[n].waited_s})
        return updated

    async def _preflight(
        self, names: list[str], before: dict[str, SlurmNode], context: Mapping[str, str], watch: _Watch
    ) -> dict[str, base.ReleaseResult]:
        """What would make Slurm fail the window, asked before the node is touched (nothing changes):

        - ``ResumeTimeout`` shorter than the runbook's reboot timeout: Slurm marks a node still
          in its POST "reboot timed out" and DOWN (power_save.c), and the cockpit rolls back a node
          that was only slow (an HGX takes 5 to 15 minutes; Slurm's default is 60 s);
        - no ``RebootProgram``: scontrol refuses every reboot;
        - a running job with more time left than the drain waits (``UNLIMITED`` included): the
          drain would time out with the job still there;
        - node features that name the old driver branch: said here, renamed by the resume step.
        """
        said = await self._command(["scontrol", "show", "config"])
        if not said.ok:
            error = f"scontrol show config failed: {_first_line(said)}"
            return {n: watch.result(n, before[n], ok=False, error=error) for n in names}
        config = parse_show_config(said.stdout)
        resume_timeout = config_seconds(config.get("ResumeTimeout"))
        reboot_timeout = _int(context.get("reboot_timeout_s"))
        drain_timeout = _int(context.get("drain_timeout_s"))
        common: list[str] = []
        if resume_timeout is not None and reboot_timeout is not None and resume_timeout < reboot_timeout:
            common.append(
                f"ResumeTimeout is {resume_timeout} s, shorter than the reboot's {reboot_timeout} s: Slurm would "
                "mark a node still booting DOWN 'reboot timed out' (raise ResumeTimeout in slurm.conf)"
            )
        if config.get("RebootProgram") in (None, "", "(null)"):
            common.append("slurm.conf sets no RebootProgram: scontrol refuses every reboot")
        results: dict[str, base.ReleaseResult] = {}
        for n in names:
            problems = list(common)
            listed = await self._command(["squeue", "-h", "-w", n, "-t", "RUNNING,COMPLETING", "-o", "%i|%L"])
            if not listed.ok:
                problems.append(f"squeue -w {n} failed: {_first_line(listed)}")
            lefts = []
            for job, left in parse_squeue_jobs(listed.stdout) if listed.ok else []:
                lefts.append(f"{job}={left}")
                seconds = time_left_s(left)
                if drain_timeout is not None and (seconds is None or seconds > drain_timeout):
                    problems.append(
                        f"job {job} has {left} left, longer than the drain's {drain_timeout} s: "
                        "wait for it, or end it with its owner"
                    )
            result = watch.result(n, before[n], ok=not problems, error="; ".join(problems) or None)
            evidence = {**result.evidence, "jobs_time_left": ",".join(lefts) or "none"}
            for key, value in (
                ("resume_timeout_s", resume_timeout), ("reboot_timeout_s", reboot_timeout),
                ("return_to_service", config.get("ReturnToService")), ("reboot_program", config.get("RebootProgram")),
            ):  # fmt: skip
                if value is not None:
                    evidence[key] = str(value)
            renamed = driver_features(before[n].features, context.get("target_branch", ""))
            if renamed and context.get("target_branch"):
                evidence["features_to_rename"] = ",".join(f"{a}->{b}" for a, b in renamed.items())
            results[n] = result.model_copy(update={"evidence": evidence})
        return results

    async def _update_features(
        self, names: list[str], before: dict[str, SlurmNode], context: Mapping[str, str], watch: _Watch
    ) -> dict[str, base.ReleaseResult]:
        """Rename the node features that name the old driver branch before the node takes jobs
        again (scontrol(1) ``update AvailableFeatures= ActiveFeatures=``); the nodes scontrol
        refused, as failed results. slurm.conf keeps its own list: the evidence says what to write."""
        target = context.get("target_branch", "")
        failed: dict[str, base.ReleaseResult] = {}
        if not target.isdigit():
            return failed
        for n in names:
            node = before[n]
            renamed = driver_features(node.features, target)
            if not renamed:
                continue
            available = ",".join(renamed.get(f, f) for f in node.features)
            active = ",".join(renamed.get(f, f) for f in node.active_features) or available
            argv = ["scontrol", "update", f"nodename={n}", f"AvailableFeatures={available}", f"ActiveFeatures={active}"]
            updated = await self._command(argv)
            if not updated.ok:
                error = f"not resumed: renaming its driver features ({available}) failed: {_first_line(updated)}"
                failed[n] = watch.result(n, node, ok=False, error=error)
        return failed

    async def _reserve(
        self, names: list[str], before: dict[str, SlurmNode], watch: _Watch
    ) -> dict[str, base.ReleaseResult]:
        """A maintenance reservation on each node before its reboot (scontrol(1) ``create
        reservation``, ``flags=maint,ignore_jobs``): once back, the node is up but runs only jobs
        that name the reservation (IDLE+MAINTENANCE+RESERVED), until the resume step deletes it.
        Its user is the account the cockpit's Slurm commands run as. The nodes Slurm refused
        one, as failed results: they are not rebooted."""
        who = await self._command(["id", "-un"])
        user = who.stdout.strip()
        if not who.ok or not _NODE_NAME.match(user):
            error = f"not rebooted: who runs scontrol could not be told for the reservation ({_first_line(who)})"
            return {n: watch.result(n, before[n], ok=False, error=error) for n in names}
        failed: dict[str, base.ReleaseResult] = {}
        for n in names:
            argv = [
                "scontrol", "create", "reservation", f"reservationname={self._reservation(n)}", "starttime=now",
                "duration=infinite", f"nodes={n}", "flags=maint,ignore_jobs", f"users={user}",
            ]  # fmt: skip
            made = await self._command(argv)
            if made.ok or "Duplicate reservation name" in _first_line(made):  # ours, from before a crash
                self._reserved.add(n)
            else:
                error = f"not rebooted: its maintenance reservation was refused: {_first_line(made)}"
                failed[n] = watch.result(n, before[n], ok=False, error=error)
        return failed

    async def _smoke(
        self,
        names: list[str],
        before: dict[str, SlurmNode],
        context: Mapping[str, str],
        timeout_s: float,
        watch: _Watch,
    ) -> dict[str, base.ReleaseResult]:
        """The runbook's smoke command as a Slurm job on the node, inside the cockpit's maintenance
        reservation (``slurm_hold = "reservation"``), asking for every GPU its GRES declares:
        what a user's job will meet once the node is back, Slurm's GPU allocation included
        (``srun`` execs the command's words itself, no shell). A node not held in the
        reservation is refused: no job can run on a DOWN node, and outside a hold it would be
        just another job."""
        words = shlex.split(context.get("slurm_smoke_command") or DEFAULT_SMOKE_COMMAND)
        minutes = max(1, math.ceil(timeout_s / 60))
        results: dict[str, base.ReleaseResult] = {}
        for n in names:
            node = before[n]
            if n not in self._reserved and not node.has("MAINTENANCE"):
                error = (
                    f"not run: the smoke runs as a Slurm job only inside the cockpit's maintenance reservation "
                    f'(slurm_hold = "reservation"); Slurm says {node.native}'
                )
                results[n] = watch.result(n, node, ok=False, error=error)
                continue
            gres = [f"--gres=gpu:{node.gpus}"] if node.gpus else []
            argv = [
                "srun", f"--reservation={self._reservation(n)}", "-w", n, "-N", "1", *gres, "-t", str(minutes),
                "-J", "cockpit-smoke", "--", *words,
            ]  # fmt: skip
            ran = await self._run(argv, timeout=timeout_s)
            failed = None if ran.ok else f"the smoke job failed: {_first_line(ran)}"
            result = watch.result(n, node, ok=ran.ok, error=failed)
            said = (ran.stdout or "").strip()
            evidence = {**result.evidence, "command": shlex.join(words), "output": said[-2000:] or "(none)"}
            results[n] = result.model_copy(update={"evidence": evidence})
        return results

    async def _end_reservations(
        self, names: list[str], before: dict[str, SlurmNode], watch: _Watch
    ) -> dict[str, base.ReleaseResult]:
        """Delete the cockpit's reservation on each node in one (this process made it, or the node
        is in maintenance and one by the cockpit's name exists); the nodes whose delete failed, as
        failed results."""
        failed: dict[str, base.ReleaseResult] = {}
        for n in names:
            name = self._reservation(n)
            if n not in self._reserved:
                if not before[n].has("MAINTENANCE"):
                    continue
                # in maintenance: the cockpit's reservation from before a crash, or a site's own one
                shown = await self._command(["scontrol", "show", "reservation", name])
                if not shown.ok:
                    continue  # "Reservation ... not found": someone else's maintenance, left alone
            gone = await self._command(["scontrol", "delete", f"reservationname={name}"])
            said = _first_line(gone)
            if gone.ok:
                self._reserved.discard(n)
                watch.unreserved.add(n)
                continue
            failed[n] = watch.result(n, before[n], ok=False, error=f"not resumed: its reservation stays: {said}")
        return failed

    async def _ask_reboot(
        self, names: list[str], before: dict[str, SlurmNode], reason: str, watch: _Watch, hold: Hold
    ) -> dict[str, base.ReleaseResult]:
        """``ASAP nextstate=DOWN``: Slurm reboots the node once it is idle and leaves it DOWN when
        slurmd registers again, until the resume step after the smoke test. A node someone else
        drained is rebooted as it is, without ``reason=`` (it would replace theirs) and without
        ``ASAP`` or a ``nextstate``, either of which clears the DRAIN flag after the reboot
        (scontrol(1)): it stays theirs, and out of service.

        (Round 2 saw a node resumed just after a plain reboot go NOT_RESPONDING, then DOWN: the
        resume asks slurmd to register again, and the test cluster's ``SlurmdTimeout=5`` was too
        short for a loaded machine to answer (ping_nodes.c marks it "Not responding"); the fixture
        now gives it Slurm's default order of time.)"""
        self._note_foreign(names, before)
        foreign = [n for n in names if n in self._foreign and n not in self._drained and before[n].has("DRAIN")]
        rest = [n for n in names if n not in foreign]
        if hold == "down":
            self._held.update(rest)
        nextstate = "nextstate=DOWN" if hold == "down" else "nextstate=RESUME"
        results: dict[str, base.ReleaseResult] = {}
        for group, how in ((foreign, []), (rest, ["ASAP", nextstate, f"reason={reason}"])):
            if group:
                argv = ["scontrol", "reboot", *how, ",".join(group)]
                results.update(await self._send(argv, group, before, watch))
        return results

    def _ours(self, name: str, node: SlurmNode) -> bool:
        """A drain this change made: its reason is exactly one this change writes (whichever process
        wrote it: a window resumed after a crash knows its own). Not "this backend drained it": a
        person may have drained it again since, with their own reason, and that one stays."""
        return written_by(node.reason, self.owned_reasons())

    def _held_by_us(self, name: str, node: SlurmNode) -> bool:
        """DOWN from the cockpit's own ``nextstate=DOWN`` reboot (this process asked for it, or
        the reason says so: the cockpit's tag, then Slurm's "reboot complete")."""
        if node.state != "DOWN" or node.rebooting:
            return False
        return name in self._held or (self._ours(name, node) and REBOOT_COMPLETE in (node.reason or ""))

    def _note_foreign(self, names: Sequence[str], before: Mapping[str, SlurmNode]) -> None:
        for n in names:
            node = before[n]
            if not node.has("DRAIN"):
                self._foreign.pop(n, None)  # its owner undrained it: nothing of theirs left to keep
            elif n not in self._foreign and not self._ours(n, node):
                # scontrol refuses an empty reason= when the drain is put back after a cancel
                self._foreign[n] = node.reason or "drained before the window (no reason given)"

    async def _ask(
        self,
        action: base.BackendAction,
        names: list[str],
        before: dict[str, SlurmNode],
        reason: str,
        watch: _Watch,
        hold: Hold,
    ) -> dict[str, base.ReleaseResult]:
        """Send Slurm the command(s) for ``action``; the nodes it refused, as failed results."""
        target = names
        if action is base.BackendAction.DRAIN:
            # a node someone else drained keeps that drain, and its reason, when the window ends
            # (cancel undrains only ours): only the nodes not drained yet are asked
            self._note_foreign(names, before)
            target = [n for n in names if not before[n].has("DRAIN")]
            self._drained.update(target)
            for n in target:  # the drain is the cockpit's now (its owner's ended before it)
                self._foreign.pop(n, None)
            if not target:
                return {}
            argv = ["scontrol", "update", f"nodename={','.join(target)}", "state=drain", f"reason={reason}"]
        elif action is base.BackendAction.REBOOT:
            return await self._ask_reboot(names, before, reason, watch, hold)
        else:
            refused: dict[str, base.ReleaseResult] = {}
            for n in names:
                node = before[n]
                # resume only a drain the cockpit made: a node drained for another reason (a health
                # check that found a GPU missing, an administrator) would be put back into service
                if node.rebooting:
                    # never came back (or not yet): resuming would clear the drain Slurm keeps on it
                    refused[n] = watch.result(n, node, ok=False, error=f"not resumed: still rebooting ({node.native})")
                elif node.has("DRAIN") and (n in self._foreign or not self._ours(n, node)):
                    said = self._foreign.get(n, node.reason)
                    refused[n] = watch.result(
                        n, node, ok=False, error=f"drained by someone else (Reason={said}): not resumed"
                    )
                elif self._held_by_us(n, node):
                    pass  # DOWN from its reboot, held for the smoke test that has now passed
                elif not node.has("DRAIN") and stage_of(node) is not base.ObservedStage.IN_SERVICE:
                    # DOWN or not responding, and not by the cockpit's drain: resuming would hide why
                    said = f"Slurm says {node.native}" + (f", Reason={node.reason}" if node.reason else "")
                    refused[n] = watch.result(n, node, ok=False, error=f"not resumed: {said}")
            target = [
                n for n in names if n not in refused and (before[n].has("DRAIN") or self._held_by_us(n, before[n]))
            ]
            if not target:
                return refused
            argv = ["scontrol", "update", f"nodename={','.join(target)}", "state=resume"]
            self._drained.difference_update(target)
            self._held.difference_update(target)
            refused.update(await self._send(argv, target, before, watch))
            return refused
        return await self._send(argv, target, before, watch)

    async def _send(
        self, argv: list[str], names: list[str], before: dict[str, SlurmNode], watch: _Watch
    ) -> dict[str, base.ReleaseResult]:
        """Run one scontrol command for ``names``; when Slurm refuses it, each of them failed."""
        result = await self._command(argv)
        if result.ok:
            return {}
        said = f"scontrol refused: {_first_line(result)}"
        return {n: watch.result(n, before[n], ok=False, error=said) for n in names}

    async def cancel(self, nodes: Sequence[str]) -> None:
        """Take back what is not done: a reboot Slurm has not issued yet (``scontrol cancel_reboot``,
        scontrol(1)), and a drain this backend made. A drain someone else made stays (put back
        with its reason where the cancel cleared it): the cockpit undrains only what it drained,
        and a node already rebooting is left to Slurm.

        Raises BackendError when someone else's drain, cleared by the cancel, could not be put
        back: that node may take jobs again, and the operator must hear of it."""
        names = [slurm for n in nodes if _NODE_NAME.match(slurm := self._slurm_names.get(n, n))]
        found = await self.nodes(names) if names else {}
        pending = [n for n, node in found.items() if node.has("REBOOT_REQUESTED") and not node.has("REBOOT_ISSUED")]
        if pending:
            await self._command(["scontrol", "cancel_reboot", ",".join(pending)])
            found = await self.nodes(names)
            # cancel_reboot of a reboot asked without nextstate clears the DRAIN flag as well
            # (seen on slurmctld 22.05): someone else's drain is put back with its own reason
            lost = [n for n, node in found.items() if n in pending and n in self._foreign and not node.has("DRAIN")]
            for n in lost:
                put_back = await self._command(
                    ["scontrol", "update", f"nodename={n}", "state=drain", f"reason={self._foreign[n]}"]
                )
                if not put_back.ok:
                    raise base.BackendError(
                        f"slurm: the cancel cleared {n}'s drain (Reason={self._foreign[n]}) and putting it back "
                        f"failed: {_first_line(put_back)}; drain it again by hand"
                    )
        self._drained.difference_update(n for n, node in found.items() if not node.has("DRAIN"))
        # a node held after its reboot stays held: its new driver has not passed a smoke test
        ours = [
            n for n, node in found.items()
            if n in self._drained and n not in self._held and node.has("DRAIN") and not node.rebooting
            and self._ours(n, node)
        ]  # fmt: skip
        if ours:
            await self._command(["scontrol", "update", f"nodename={','.join(ours)}", "state=resume"])
            self._drained.difference_update(ours)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _renamed(result: base.ReleaseResult, alias: Mapping[str, str]) -> base.ReleaseResult:
    """``result`` under the cockpit's name of its node (``alias``: Slurm's name -> the cockpit's)."""
    name = alias.get(result.node)
    if name is None:
        return result
    final = result.final.model_copy(update={"node": name}) if result.final is not None else None
    evidence = {**result.evidence, "slurm_node": result.node}
    return result.model_copy(update={"node": name, "final": final, "evidence": evidence})


class _Watch:
    """Polls the released nodes until each reached the action's end, failed, or the time ran out."""

    def __init__(
        self,
        backend: SlurmBackend,
        action: base.BackendAction,
        before: dict[str, SlurmNode],
        started: float,
        on_observation: base.ObservationCallback | None,
    ) -> None:
        self.backend = backend
        self.action = action
        self.before = before
        self.started = started
        self.on_observation = on_observation
        self.last: dict[str, base.Observation] = {}
        self.jobs: dict[str, list[str]] = {}  # job ids seen on a draining node, in the order seen
        self.seen_rebooting: set[str] = set()
        #: nodes whose cockpit reservation the resume deleted: in service once MAINTENANCE is gone
        self.unreserved: set[str] = set()

    def result(
        self, name: str, node: SlurmNode, *, ok: bool, error: str | None = None, timed_out: bool = False
    ) -> base.ReleaseResult:
        final = self.backend.observation(node, self.jobs.get(name) if self.action is base.BackendAction.DRAIN else None)
        evidence = {"slurm_state": node.native}
        if self.action is base.BackendAction.DRAIN:
            evidence["jobs"] = ",".join(self.jobs.get(name, [])) or "none"
        if self.action is base.BackendAction.REBOOT:
            evidence["boot_time_before"] = self.before[name].boot_time or "unknown"
            evidence["boot_time"] = node.boot_time or "unknown"
        if node.reason:
            evidence["reason"] = node.reason
        return base.ReleaseResult(
            node=name, action=self.action, ok=ok, final=final, error=error, timed_out=timed_out,
            waited_s=round(time.monotonic() - self.started, 3), evidence=evidence,
        )  # fmt: skip

    def _tell(self, obs: base.Observation) -> None:
        if obs.changed_from(self.last.get(obs.node)) and self.on_observation is not None:
            self.on_observation(obs)
        self.last[obs.node] = obs

    async def until_done(self, pending: list[str], timeout_s: float) -> dict[str, base.ReleaseResult]:
        done: dict[str, base.ReleaseResult] = {}
        deadline = self.started + timeout_s
        rounds = 0
        while True:
            now = await self.backend.nodes(pending)
            jobs: dict[str, list[str]] = {}
            if self.action is base.BackendAction.DRAIN:
                listed = await asyncio.gather(*(self.backend.jobs_on(n) for n in pending if n in now))
                jobs = {n: [j for j, _ in js] for n, js in zip([n for n in pending if n in now], listed, strict=True)}
                for n, ids in jobs.items():
                    self.jobs.setdefault(n, []).extend(j for j in ids if j not in self.jobs.get(n, []))
            for n in list(pending):
                node = now.get(n)
                if node is None:
                    done[n] = base.ReleaseResult(
                        node=n, action=self.action, ok=False, final=self.backend._unknown(n),
                        error="slurmctld no longer knows this node", waited_s=round(time.monotonic() - self.started, 3),
                    )  # fmt: skip
                    pending.remove(n)
                    continue
                self._tell(self.backend.observation(node, jobs.get(n) if jobs else None))
                verdict = self._verdict(n, node, jobs.get(n, []))
                if verdict is not None:
                    ok, error = verdict
                    done[n] = self.result(n, node, ok=ok, error=error)
                    pending.remove(n)
            if not pending:
                return done
            if time.monotonic() >= deadline:
                for n in pending:
                    node = now[n]
                    what = {
                        base.BackendAction.DRAIN: "drained",
                        base.BackendAction.REBOOT: "back from the reboot",
                        base.BackendAction.RESUME: "back in service",
                    }.get(self.action, "done")
                    error = f"not {what} after {timeout_s:g} s: Slurm says {node.native}"
                    if node.reason:
                        error += f", Reason={node.reason}"
                    done[n] = self.result(n, node, ok=False, error=error, timed_out=True)
                return done
            # quick looks first (a drain with no job, a resume, end in a second), then no more
            # often than poll_s: a real reboot takes minutes, and slurmctld serves everyone
            interval = min(self.backend.poll_s, FIRST_POLL_S * 2**rounds)
            rounds += 1
            await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))

    def _verdict(self, name: str, node: SlurmNode, jobs: list[str]) -> tuple[bool, str | None] | None:
        """(ok, error) once ``node`` has reached the action's end or failed; None while it is on its way."""
        stage = stage_of(node)
        if self.action is base.BackendAction.DRAIN:
            if not node.has("DRAIN"):
                return False, f"no longer drained ({node.native}): someone resumed it"
            # the drain's end: nothing new lands on the node (DRAIN) and no work is left on it. A
            # node also DOWN, not responding or INVAL (a rollback's drain of a node that came back
            # short of GPUs, or never came back) is drained as well: its health is the
            # observation's stage, for the triggers, and the next step over SSH finds the rest
            if not jobs and node.state not in ("ALLOCATED", "MIXED") and not node.has("COMPLETING"):
                return True, None
            return None
        if self.action is base.BackendAction.REBOOT:
            if node.rebooting:
                self.seen_rebooting.add(name)
                return None
            rebooted = node.boot_time is not None and node.boot_time != self.before[name].boot_time
            if stage is base.ObservedStage.FAILED:
                return False, f"came back {node.native}" + (f": {node.reason}" if node.reason else "")
            if _TIMED_OUT in (node.reason or ""):
                return False, f"did not come back: Slurm says {node.native}, Reason={node.reason}"
            if rebooted and name in self.backend._held and node.state == "DOWN" and node.responding:
                if REBOOT_COMPLETE in (node.reason or ""):
                    return True, None  # back, and DOWN as asked: held until its smoke test
                return None  # DOWN for another reason (not responding again): its timeout says so
            if rebooted and stage in (base.ObservedStage.IN_SERVICE, base.ObservedStage.DRAINED):
                # back: in service (nextstate=RESUME), or still drained by whoever drained it (_ask_reboot)
                if (stage is base.ObservedStage.DRAINED) == (name in self.backend._foreign):
                    return True, None
                if stage is base.ObservedStage.IN_SERVICE:
                    return False, f"came back in service ({node.native}): its owner's drain was cleared"
                return None  # drained by something else at boot (a health check): its timeout says so
            if not rebooted and name in self.seen_rebooting and stage is not base.ObservedStage.DOWN:
                return False, f"the reboot request was cleared without a reboot (BootTime unchanged, {node.native})"
            return None  # not yet asked (the first look) or registered but not yet responding
        if stage is base.ObservedStage.IN_SERVICE:
            return (True, None) if not (name in self.unreserved and node.has("MAINTENANCE")) else None
        if stage is base.ObservedStage.FAILED:
            return False, f"{node.native}" + (f": {node.reason}" if node.reason else "")
        return None


def make(options: BackendOptions, *, transport: Transport | None, runner: base.CommandRunner) -> SlurmBackend:
    """The registry's way in (:func:`cockpit.fleet.backends.registry.make_backend`): ``runner``
    already runs where ``options.slurm.control_host`` says (that host over SSH, or here)."""
    return SlurmBackend(runner)
