"""The Ansible backend: a wave's node work as one ``ansible-runner`` job.

The cockpit keeps the waves, gates, triggers, sign-offs and the change log; Ansible does
the node work. One :meth:`AnsibleBackend.release` is one runner job over the whole
inventory, ``--limit`` to the wave's nodes (never more), running either

- a playbook the site already has (``playbooks[action]``: a path), given the change's
  reason and context as extra variables (``cockpit_reason``, ``cockpit_<key>``), or
- the runbook's node steps of a stage as a generated playbook (:meth:`use_steps` with
  :func:`play_tasks`): one ``ansible.builtin.command`` task with ``argv`` per step, each
  node's filled command a host variable written as data (``!unsafe``), ``become`` where
  the step says ``sudo = true`` and the login is not root (as the SSH executor decides).

The job runs in a worker thread (``ansible_runner.run``, output kept out of the
terminal); its events come back as they happen through the runner's ``event_handler``
and are handed to the event loop (``call_soon_threadsafe``) as :class:`Observation`
values: ``runner_on_ok`` / ``runner_on_failed`` / ``runner_on_unreachable`` per host and
task, with the task, its exit status and the runner's job id as evidence. Cancelling
goes through the runner's ``cancel_callback`` (it stops ``ansible-playbook``). Each
node's :class:`ReleaseResult` names the job and the SHA-256 of its artifacts directory
(``artifacts/<job id>``: the command line, every job event, stdout, rc, status), which
stays under ``workdir`` for the audit.

Host keys are never accepted silently: ``ANSIBLE_HOST_KEY_CHECKING`` stays on and ssh
gets ``StrictHostKeyChecking=yes`` with the cockpit's own known_hosts and ssh_config
(:func:`~cockpit.fleet.backends.ansible_play.ssh_common_args`).
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from cockpit.errors import BadInput
from cockpit.fleet import privilege
from cockpit.fleet.backends import ansible_play as play
from cockpit.fleet.backends.ansible_play import PlayTask, SshSettings
from cockpit.fleet.backends.base import (
    Backend,
    BackendAction,
    BackendError,
    BackendName,
    Observation,
    ObservationCallback,
    ObservedStage,
    ReleaseResult,
)
from cockpit.fleet.redact import redact
from cockpit.fleet.targets import HostTarget, TransportOptions
from cockpit.runbook.conditions import RECORDED_PREFIX, when_holds, when_text
from cockpit.runbook.model import Step, StepKind, Where
from cockpit.runbook.placeholders import ParamValue, fill
from cockpit.runbook.waves import resolve_int

__all__ = ["AnsibleBackend", "PlayTask", "SshSettings", "play_tasks", "ssh_settings"]

#: how often (seconds) the runner looks at the cancel flag while ansible-playbook is quiet
CANCEL_POLL_S = 0.25
#: ansible-runner's end states (Runner.status) and what they say to the operator
_UNFINISHED = {"canceled": "the Ansible job was cancelled", "timeout": "the Ansible job ran past its timeout"}


def ssh_settings(options: TransportOptions) -> SshSettings:
    """The SSH executor's files and host-key policy, for Ansible's ssh (the same known_hosts)."""
    return SshSettings(
        known_hosts=options.known_hosts,
        ssh_config=options.ssh_config,
        identity_files=tuple(options.client_keys or ()),
        accept_new_host_keys=options.accept_new_host_keys,
        connect_timeout_s=max(1, round(options.connect_timeout_s)),
    )


def play_tasks(
    steps: Sequence[Step],
    targets: Sequence[HostTarget],
    params: Mapping[str, ParamValue],
    *,
    facts: Mapping[str, ParamValue] | None = None,
    node_facts: Mapping[str, Mapping[str, object]] | None = None,
) -> list[PlayTask]:
    """A stage's steps as generated-playbook tasks, filled per node as the SSH executor fills them.

    Placeholders get the same values (:meth:`Executor.values`: parameters, shared facts,
    ``{node}``, ``{host}``, ``{node_name}``, the node's recorded facts); a step whose
    ``when`` does not hold for a node is left out for that node. Raises :class:`BadInput`
    for a step Ansible cannot run here (not a node command) or that cannot be filled.
    """
    from cockpit.fleet.executor import DEFAULT_REBOOT_COMMAND, Executor  # where placeholder values are decided

    executor = Executor(transport=None, params=params, facts=facts)
    tasks: list[PlayTask] = []
    for step in steps:
        reboot = step.kind is StepKind.REBOOT
        template = step.run or (DEFAULT_REBOOT_COMMAND if reboot else None)
        if step.kind not in (StepKind.COMMAND, StepKind.REBOOT) or step.where is not Where.NODE or not template:
            raise BadInput(
                f"step {step.id}: the Ansible backend runs node command and reboot steps; "
                f"a {step.kind.value} step on the {step.where.value} stays with the cockpit"
            )
        timeout = resolve_int(step.timeout_s, params, f"step {step.id} timeout_s")
        commands: dict[str, str] = {}
        become: dict[str, bool] = {}
        for target in targets:
            own = (node_facts or {}).get(target.name) or {}
            recorded = {k: v for k, v in own.items() if k.startswith(RECORDED_PREFIX)}
            holds = when_holds(step.when, params, recorded or None)
            if holds is False:
                continue
            if holds is None:
                raise BadInput(f"step {step.id}: its condition ({when_text(step.when)}) waits for the node's baseline")
            values = executor.values(target.name, own)
            values["host"] = target.address or target.name
            values["node_name"] = target.node_name or target.name
            commands[target.name] = fill(template, values)
            become[target.name] = step.sudo and not privilege.login_is_root(own, target.user)
        tasks.append(
            PlayTask(id=step.id, title=step.title, timeout_s=timeout, commands=commands, become=become, reboot=reboot)
        )
    return tasks


def _ansible_playbook() -> str:
    """The ``ansible-playbook`` beside this interpreter (a virtualenv not on PATH), else on PATH."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    found = str(beside) if beside.exists() else shutil.which("ansible-playbook")
    if found is None:
        raise BackendError("ansible-playbook is not installed: pip install 'gpu-driver-cockpit[ansible]'")
    return found


@dataclass
class _Job:
    """One runner job while it runs: what its thread hands the loop, and the cancel flag it polls."""

    id: str
    action: BackendAction
    nodes: tuple[str, ...]
    cancelled: threading.Event = field(default_factory=threading.Event)
    stats: dict[str, Any] = field(default_factory=dict)
    last: dict[str, Observation] = field(default_factory=dict)
    #: the node's first failure (a later task cannot make it good again)
    failed: dict[str, Observation] = field(default_factory=dict)
    strays: set[str] = field(default_factory=set)  # hosts outside the limit that produced events (never expected)


class AnsibleBackend(Backend):
    """Node work through Ansible: each release is one ``ansible-runner`` job limited to the wave."""

    name: ClassVar[BackendName] = BackendName.ANSIBLE
    actions: ClassVar[frozenset[BackendAction]] = frozenset(BackendAction)  # whatever the site's playbooks do
    reports_state: ClassVar[bool] = False  # Ansible keeps no node state between jobs

    def __init__(
        self,
        targets: Sequence[HostTarget],
        ssh: SshSettings,
        workdir: Path,
        *,
        playbooks: Mapping[BackendAction, Path] | None = None,
        forks: int = 64,
        ansible_playbook: str | None = None,
    ) -> None:
        self.targets = {play.check_name(t.name): t for t in targets}
        self.ssh = ssh
        self.workdir = Path(workdir)
        self.playbooks = {a: Path(p) for a, p in (playbooks or {}).items()}
        self.forks = forks
        self._binary = ansible_playbook
        self._steps: dict[BackendAction, list[PlayTask]] = {}
        self._jobs: dict[str, _Job] = {}
        self._seen: dict[str, Observation] = {}  # each node's last observation, from any job

    # --- what the backend knows ---------------------------------------------------------

    def _unknown(self, node: str, native: str) -> Observation:
        return Observation(backend=self.name, node=node, native_state=native, stage=ObservedStage.UNKNOWN)

    async def discover(self) -> list[Observation]:
        """The inventory's nodes; Ansible reports no state of its own, so each is as last seen or unknown."""
        return await self.observe(list(self.targets))

    async def observe(self, nodes: Sequence[str]) -> list[Observation]:
        return [
            self._seen.get(n) or self._unknown(n, "in inventory" if n in self.targets else "not in inventory")
            for n in nodes
        ]

    def use_steps(self, action: BackendAction, tasks: Sequence[PlayTask]) -> None:
        """Run ``action`` as a generated playbook of ``tasks`` (:func:`play_tasks`) instead of a site playbook."""
        self._steps[action] = list(tasks)

    # --- release and cancel ---------------------------------------------------------------

    async def release(
        self,
        action: BackendAction,
        nodes: Sequence[str],
        *,
        reason: str,
        timeout_s: float,
        on_observation: ObservationCallback | None = None,
        context: Mapping[str, str] | None = None,
    ) -> list[ReleaseResult]:
        try:
            unknown = [n for n in nodes if n not in self.targets]
            if unknown:
                raise BadInput(f"not in the Ansible inventory: {', '.join(unknown)}")
            limit = play.limit_expression(nodes)
            tasks = self._steps.get(action)
            site = self.playbooks.get(action)
            if tasks is None and site is None:
                raise BadInput(f"the Ansible backend has no playbook and no runbook steps for {action.value}")
        except BadInput as exc:
            raise BackendError(str(exc)) from None
        job = _Job(id=str(uuid.uuid4()), action=action, nodes=tuple(nodes))
        private = self.workdir / job.id
        try:
            kwargs = self._prepare(private, job, limit, tasks if site is None else None, site, reason, context or {})
        except BadInput as exc:  # a path ssh could not take, a name Ansible would read as a pattern
            raise BackendError(str(exc)) from None
        self._jobs[job.id] = job
        started = time.monotonic()
        try:
            runner = await self._run(job, kwargs, timeout_s, on_observation)
        finally:
            del self._jobs[job.id]
        return self._results(job, runner, private, time.monotonic() - started, on_observation)

    async def cancel(self, nodes: Sequence[str]) -> None:
        """Cancel every running job that holds any of ``nodes``: a job is the whole wave, so the
        wave stops; nodes a task already changed stay as the job left them (their results say so)."""
        wanted = set(nodes)
        for job in list(self._jobs.values()):
            if wanted & set(job.nodes):
                job.cancelled.set()

    # --- the job ------------------------------------------------------------------------

    def _prepare(
        self,
        private: Path,
        job: _Job,
        limit: str,
        tasks: list[PlayTask] | None,
        site: Path | None,
        reason: str,
        context: Mapping[str, str],
    ) -> dict[str, Any]:
        """Write the runner's private data dir (inventory, playbook, extra vars) and its arguments."""
        for sub in ("inventory", "project", "env", "tmp"):
            (private / sub).mkdir(parents=True, exist_ok=True)
        targets = list(self.targets.values())
        inventory = private / "inventory" / "hosts.yml"
        inventory.write_text(play.dump_yaml(play.inventory_document(targets, self.ssh, tasks or ())))
        if tasks is not None:
            playbook = private / "project" / f"cockpit-{job.action.value}.yml"
            playbook.write_text(play.dump_yaml(play.playbook_document(f"cockpit {job.action.value}: {reason}", tasks)))
        else:
            assert site is not None
            playbook = site.expanduser().resolve()
            if not playbook.is_file():
                raise BackendError(f"{site}: no such playbook")
        variables = private / "env" / "cockpit-vars.yml"
        extra = {"cockpit_reason": reason, "cockpit_action": job.action.value}
        extra.update({f"cockpit_{k}": v for k, v in context.items() if k.isidentifier()})
        variables.write_text(play.dump_yaml(extra))
        return {
            "private_data_dir": str(private),
            "ident": job.id,
            "inventory": str(inventory),
            "limit": limit,
            "forks": self.forks,
            "binary": self._binary or _ansible_playbook(),
            # the binary given, the runner adds no playbook itself: it is the command line's argument
            "cmdline": shlex.join(["-e", f"@{variables}", str(playbook)]),
            "quiet": True,  # the cockpit's screen is not Ansible's terminal
            # the runner polls cancel_callback between reads of ansible-playbook's output, each
            # waiting up to pexpect_timeout (5 s by default): poll often so a cancel stops the wave at once
            "settings": {"pexpect_timeout": CANCEL_POLL_S},
            "envvars": {
                "ANSIBLE_HOST_KEY_CHECKING": "True",  # never off: unknown keys fail, they are not learnt
                "ANSIBLE_SSH_ARGS": "-o ControlMaster=no",  # no master left behind after the job
                "ANSIBLE_PIPELINING": "True",  # one ssh per task
                "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
                "ANSIBLE_LOCAL_TEMP": str(private / "tmp"),
                "ANSIBLE_RETRY_FILES_ENABLED": "False",
                "ANSIBLE_NOCOLOR": "True",
            },
        }

    async def _run(
        self, job: _Job, kwargs: dict[str, Any], timeout_s: float, on_observation: ObservationCallback | None
    ) -> Any:
        """The runner job in a worker thread; its events reach ``on_observation`` on the loop as they happen."""
        try:
            import ansible_runner
        except ImportError:
            raise BackendError("ansible-runner is not installed: pip install 'gpu-driver-cockpit[ansible]'") from None
        loop = asyncio.get_running_loop()

        def deliver(observation: Observation) -> None:
            self._note(job, observation, on_observation)

        def on_event(event: dict[str, Any]) -> bool:  # in the runner's thread
            if event.get("event") == "playbook_on_stats":
                job.stats = dict(event.get("event_data") or {})
            seen = play.observation_from_event(event, job.action, job.id)
            if seen is not None:
                loop.call_soon_threadsafe(deliver, seen)
            return True  # the runner keeps every event in the artifacts

        kwargs = {
            **kwargs,
            "event_handler": on_event,
            "cancel_callback": job.cancelled.is_set,  # given, so the runner installs no signal handlers
            "timeout": max(1, round(timeout_s)),
        }
        future = loop.run_in_executor(None, lambda: ansible_runner.run(**kwargs))
        try:
            runner = await asyncio.shield(future)
        except asyncio.CancelledError:
            job.cancelled.set()  # the caller gave up: stop ansible-playbook before going
            await asyncio.wait([future])
            raise
        await asyncio.sleep(0)  # the thread's last call_soon_threadsafe deliveries run first
        return runner

    def _note(self, job: _Job, observation: Observation, on_observation: ObservationCallback | None) -> None:
        if observation.node not in job.nodes:
            job.strays.add(observation.node)
        if "stderr" in observation.evidence or observation.reason:  # the change log gets no secret a command printed
            evidence = dict(observation.evidence)
            if "stderr" in evidence:
                evidence["stderr"] = redact(evidence["stderr"])
            reason = redact(observation.reason) if observation.reason else None
            observation = observation.model_copy(update={"evidence": evidence, "reason": reason})
        if observation.stage in (ObservedStage.FAILED, ObservedStage.DOWN):
            job.failed.setdefault(observation.node, observation)
        earlier = job.last.get(observation.node)
        job.last[observation.node] = observation
        self._seen[observation.node] = observation
        if on_observation is not None and observation.changed_from(earlier):
            on_observation(observation)

    def _results(
        self, job: _Job, runner: Any, private: Path, waited: float, on_observation: ObservationCallback | None
    ) -> list[ReleaseResult]:
        artifacts = private / "artifacts" / job.id
        status = str(getattr(runner, "status", "unknown"))
        evidence = {
            "job_id": job.id,
            "runner_status": status,
            "rc": str(getattr(runner, "rc", "")),
            "artifacts": str(artifacts),
            "artifacts_sha256": play.tree_sha256(artifacts) if artifacts.is_dir() else "",
        }
        tail = _stdout_tail(artifacts)
        results = []
        for node in job.nodes:
            counts = play.recap(job.stats, node)
            failed = job.failed.get(node)
            error: str | None = None
            if failed is not None:
                error = failed.reason or failed.native_state
            elif status in _UNFINISHED:
                error = _UNFINISHED[status]
            elif not counts:
                error = f"the Ansible job never ran on {node}" + (f": {tail}" if tail else "")
            elif counts.get("failures") or counts.get("dark"):
                error = f"the play recap counts a failure for {node}"
            elif job.strays:
                error = f"the Ansible job also ran on {', '.join(sorted(job.strays))}, outside the wave"
            if error is None:
                self._note(job, play.ended_observation(node, job.action, job.id, counts), on_observation)
            results.append(
                ReleaseResult(
                    node=node,
                    action=job.action,
                    ok=error is None,
                    final=job.last.get(node),
                    error=error,
                    waited_s=round(waited, 3),
                    evidence={**evidence, **({"task": failed.evidence["task"]} if failed else {})},
                )
            )
        return results


def _stdout_tail(artifacts: Path) -> str:
    """The last line of the job's stdout (a syntax error, a missing playbook say it there)."""
    stdout = artifacts / "stdout"
    if not stdout.is_file():
        return ""
    lines = [line.strip() for line in stdout.read_text(errors="replace").splitlines() if line.strip()]
    return play.short(redact(lines[-1])) if lines else ""
