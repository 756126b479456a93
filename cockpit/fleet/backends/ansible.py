"""The Ansible backend: a wave's node work as one ``ansible-runner`` job.

The cockpit keeps the waves, gates, triggers, sign-offs and the change log; Ansible does
the node work. The executor releases a backend step node by node, concurrently; the
releases of one step that arrive within :data:`BATCH_WINDOW_S` of each other become one
runner job over the whole inventory, ``--limit`` to those nodes (the wave, never more),
running either

- a playbook the site already has (``playbooks[action]``: a path), given the change's
  reason and the action as extra variables (``cockpit_reason``, ``cockpit_action``) and
  each node's release context as host variables (``cockpit_<key>``), or
- runbook steps as a generated playbook: the SSH path of the stage that holds the
  backend step (:meth:`AnsibleBackend.use_runbook`, :mod:`.ansible_steps`), or tasks
  given outright (:meth:`AnsibleBackend.use_steps`): one task per step, by the module the
  step declares (``[stages.steps.ansible]``: ``apt``, ``dnf``, ``systemd_service``, or
  ``command`` with ``creates`` / ``changed_if``), else ``ansible.builtin.command`` with
  ``argv`` (``ansible.builtin.reboot`` for a reboot step); each node's filled command and
  module arguments host variables written as data (``!unsafe``), ``become`` where the step
  says ``sudo = true`` and the login is not root (as the SSH executor decides). Ansible then
  reports what each task changed (a ``read_only`` step never), and ``check=True`` runs the
  job with ``--check`` (the dry run's rehearsal: modules predict, read-only commands run,
  changing commands are skipped).

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
from typing import TYPE_CHECKING, Any, ClassVar

from cockpit.errors import BadInput
from cockpit.fleet.backends import ansible_play as play
from cockpit.fleet.backends import base
from cockpit.fleet.backends.ansible_play import PlayTask, SshSettings
from cockpit.fleet.backends.ansible_steps import play_tasks, runbook_tasks
from cockpit.fleet.redact import redact
from cockpit.fleet.targets import HostTarget, TransportOptions
from cockpit.runbook.model import Runbook

if TYPE_CHECKING:
    from cockpit.fleet.backends.registry import BackendOptions
    from cockpit.fleet.transport import Transport

__all__ = ["AnsibleBackend", "PlayTask", "SshSettings", "make", "play_tasks", "ssh_settings"]

#: how long a release waits for the same step's releases for the wave's other nodes, so the
#: wave goes as one job (the executor releases a backend step one node at a time, concurrently)
BATCH_WINDOW_S = 0.25
#: where jobs' private data dirs (and their artifacts) stay when the settings name no place
DEFAULT_WORKDIR = Path("~/.local/state/cockpit/ansible")

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


def _ansible_playbook() -> str:
    """The ``ansible-playbook`` beside this interpreter (a virtualenv not on PATH), else on PATH."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    found = str(beside) if beside.exists() else shutil.which("ansible-playbook")
    if found is None:
        raise base.BackendError("ansible-playbook is not installed: pip install 'gpu-driver-cockpit[ansible]'")
    return found


@dataclass
class _Job:
    """One runner job while it runs: what its thread hands the loop, and the cancel flag it polls."""

    id: str
    action: base.BackendAction
    nodes: tuple[str, ...]
    cancelled: threading.Event = field(default_factory=threading.Event)
    stats: dict[str, Any] = field(default_factory=dict)
    last: dict[str, base.Observation] = field(default_factory=dict)
    #: the node's first failure (a later task cannot make it good again)
    failed: dict[str, base.Observation] = field(default_factory=dict)
    strays: set[str] = field(default_factory=set)  # hosts outside the limit that produced events (never expected)


@dataclass
class _Batch:
    """The releases of one step gathered for one job: each node's context and listener."""

    action: base.BackendAction
    reason: str
    done: asyncio.Future[list[base.ReleaseResult]]
    timeout_s: float = 0.0
    contexts: dict[str, dict[str, str]] = field(default_factory=dict)
    listeners: dict[str, base.ObservationCallback | None] = field(default_factory=dict)
    left: set[str] = field(default_factory=set)  # cancelled before the job started: not in its --limit
    started: bool = False

    def hear(self, observation: base.Observation) -> None:
        listener = self.listeners.get(observation.node)
        if listener is not None:
            listener(observation)


class AnsibleBackend(base.Backend):
    """Node work through Ansible: each release is one ``ansible-runner`` job limited to the wave."""

    name: ClassVar[base.BackendName] = base.BackendName.ANSIBLE
    # Ansible reboots nothing by itself (it is SSH underneath): a runbook's reboot step stays the
    # cockpit's own round trip, or is a task of a generated playbook (ansible.builtin.reboot);
    # drain, upgrade and resume are the site playbook's, or the stage's SSH path as a playbook
    actions: ClassVar[frozenset[base.BackendAction]] = frozenset(
        {base.BackendAction.DRAIN, base.BackendAction.UPGRADE, base.BackendAction.RESUME}
    )
    reports_state: ClassVar[bool] = False  # Ansible keeps no node state between jobs

    def __init__(
        self,
        targets: Sequence[HostTarget],
        ssh: SshSettings,
        workdir: Path,
        *,
        playbooks: Mapping[base.BackendAction, Path] | None = None,
        runbook: Runbook | None = None,
        forks: int = 64,
        ansible_playbook: str | None = None,
        batch_window_s: float = BATCH_WINDOW_S,
        check: bool = False,
    ) -> None:
        self.targets = {play.check_name(t.name): t for t in targets}
        self.ssh = ssh
        self.workdir = Path(workdir)
        self.playbooks = {a: Path(p) for a, p in (playbooks or {}).items()}
        self.forks = forks
        self._binary = ansible_playbook
        self.runbook = runbook  # where an action without a playbook finds its steps (ansible_steps.runbook_tasks)
        self.batch_window_s = batch_window_s
        #: Ansible's check mode (``--check``): module tasks predict what they would change and change
        #: nothing, read-only commands still run, changing commands are skipped (each says so)
        self.check = check
        self._open: dict[tuple[base.BackendAction, str], _Batch] = {}
        self._launches: set[asyncio.Task[None]] = set()
        self._steps: dict[base.BackendAction, list[PlayTask]] = {}
        self._jobs: dict[str, _Job] = {}
        self._seen: dict[str, base.Observation] = {}  # each node's last observation, from any job

    # --- what the backend knows ---------------------------------------------------------

    def _unknown(self, node: str, native: str) -> base.Observation:
        return base.Observation(backend=self.name, node=node, native_state=native, stage=base.ObservedStage.UNKNOWN)

    async def discover(self) -> list[base.Observation]:
        """The inventory's nodes; Ansible reports no state of its own, so each is as last seen or unknown."""
        return await self.observe(list(self.targets))

    async def observe(self, nodes: Sequence[str]) -> list[base.Observation]:
        return [
            self._seen.get(n) or self._unknown(n, "in inventory" if n in self.targets else "not in inventory")
            for n in nodes
        ]

    def use_runbook(self, runbook: Runbook) -> None:
        """Give an action without a playbook the runbook's steps: the SSH path of the stage that
        asks for it (:func:`~cockpit.fleet.backends.ansible_steps.runbook_tasks`)."""
        self.runbook = runbook

    def use_steps(self, action: base.BackendAction, tasks: Sequence[PlayTask]) -> None:
        """Run ``action`` as a generated playbook of ``tasks`` (:func:`play_tasks`) instead of a site playbook."""
        self._steps[action] = list(tasks)

    # --- release and cancel ---------------------------------------------------------------

    async def release(
        self, request: base.ReleaseRequest, on_observation: base.ObservationCallback | None = None
    ) -> list[base.ReleaseResult]:
        """Release ``request.action`` for ``request.nodes``: releases of the same action and reason
        that arrive within :attr:`batch_window_s` of each other run as one job (the executor asks
        node by node; the wave goes as one ``--limit``). ``request.context`` is its nodes' own."""
        action, nodes, reason = request.action, request.nodes, request.reason
        if action not in self.actions:
            raise base.BackendError(
                f"the Ansible backend does not {action.value}: a reboot step stays the cockpit's own"
            )
        unknown = [n for n in nodes if n not in self.targets]
        if unknown:
            raise base.BackendError(f"not in the Ansible inventory: {', '.join(unknown)}")
        if not nodes:
            return []
        key = (action, reason)
        batch = self._open.get(key)
        if batch is None or batch.started or set(nodes) & set(batch.contexts):
            batch = _Batch(action=action, reason=reason, done=asyncio.get_running_loop().create_future())
            self._open[key] = batch
            launch = asyncio.create_task(self._launch(key, batch))
            self._launches.add(launch)
            launch.add_done_callback(self._launches.discard)
        batch.timeout_s = max(batch.timeout_s, request.timeout_s)
        for node in nodes:
            batch.contexts[node] = {k: str(v) for k, v in request.context.items()}
            batch.listeners[node] = on_observation
        results = await asyncio.shield(batch.done)
        return [r for r in results if r.node in nodes]

    async def _launch(self, key: tuple[base.BackendAction, str], batch: _Batch) -> None:
        await asyncio.sleep(self.batch_window_s)
        if self._open.get(key) is batch:
            del self._open[key]
        batch.started = True
        try:
            batch.done.set_result(await self._job(batch))
        except asyncio.CancelledError:
            batch.done.cancel()
            raise
        except Exception as exc:  # every waiting release hears it (a BackendError, one line)
            batch.done.set_exception(exc)
            batch.done.exception()  # retrieved: a batch whose callers all went logs nothing

    async def _job(self, batch: _Batch) -> list[base.ReleaseResult]:
        nodes = [n for n in batch.contexts if n not in batch.left]
        if not nodes:
            return []
        action = batch.action
        try:
            limit = play.limit_expression(nodes)
            site = self.playbooks.get(action)
            tasks = None if site is not None else self._steps.get(action)
            if site is None and tasks is None:
                if self.runbook is None:
                    raise BadInput(
                        f"the Ansible backend has no playbook (its playbook setting) and no runbook "
                        f"(use_runbook) to take the {action.value} steps from"
                    )
                tasks = runbook_tasks(self.runbook, action, list(self.targets.values()), batch.contexts)
        except BadInput as exc:
            raise base.BackendError(str(exc)) from None
        job = _Job(id=str(uuid.uuid4()), action=action, nodes=tuple(nodes))
        private = self.workdir.expanduser() / job.id
        try:
            kwargs = self._prepare(private, job, limit, tasks, site, batch)
        except BadInput as exc:  # a path ssh could not take, a name Ansible would read as a pattern
            raise base.BackendError(str(exc)) from None
        self._jobs[job.id] = job
        started = time.monotonic()
        try:
            runner = await self._run(job, kwargs, batch.timeout_s, batch.hear)
        finally:
            del self._jobs[job.id]
        return self._results(job, runner, private, time.monotonic() - started, batch.hear)

    async def cancel(self, nodes: Sequence[str]) -> None:
        """Cancel every running job that holds any of ``nodes``: a job is the whole wave, so the
        wave stops; nodes a task already changed stay as the job left them (their results say so).
        A node whose job has not started yet is left out of it."""
        wanted = set(nodes)
        for batch in self._open.values():
            batch.left |= wanted & set(batch.contexts)
        for job in list(self._jobs.values()):
            if wanted & set(job.nodes):
                job.cancelled.set()

    # --- the job ------------------------------------------------------------------------

    def _prepare(
        self, private: Path, job: _Job, limit: str, tasks: list[PlayTask] | None, site: Path | None, batch: _Batch
    ) -> dict[str, Any]:
        """Write the runner's private data dir (inventory, playbook, extra vars) and its arguments."""
        for sub in ("inventory", "project", "env", "tmp"):
            (private / sub).mkdir(parents=True, exist_ok=True)
        targets = list(self.targets.values())
        inventory = private / "inventory" / "hosts.yml"
        # a site playbook reads each node's release context as host variables cockpit_<key>
        context = {n: {f"cockpit_{k}": v for k, v in c.items() if k.isidentifier()} for n, c in batch.contexts.items()}
        document = play.inventory_document(targets, self.ssh, tasks or (), host_vars=context if site else None)
        inventory.write_text(play.dump_yaml(document))
        if tasks is not None:
            playbook = private / "project" / f"cockpit-{job.action.value}.yml"
            title = f"cockpit {job.action.value}: {batch.reason}"
            playbook.write_text(play.dump_yaml(play.playbook_document(title, tasks)))
        else:
            assert site is not None
            playbook = site.expanduser().resolve()
            if not playbook.is_file():
                raise base.BackendError(f"{site}: no such playbook")
        variables = private / "env" / "cockpit-vars.yml"
        extra = {"cockpit_reason": batch.reason, "cockpit_action": job.action.value}
        variables.write_text(play.dump_yaml(extra))
        return {
            "private_data_dir": str(private),
            "ident": job.id,
            "inventory": str(inventory),
            "limit": limit,
            "forks": self.forks,
            "binary": self._binary or _ansible_playbook(),
            # the binary given, the runner adds no playbook itself: it is the command line's argument
            "cmdline": shlex.join(["-e", f"@{variables}", *(["--check"] if self.check else []), str(playbook)]),
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
        self, job: _Job, kwargs: dict[str, Any], timeout_s: float, on_observation: base.ObservationCallback | None
    ) -> Any:
        """The runner job in a worker thread; its events reach ``on_observation`` on the loop as they happen."""
        try:
            import ansible_runner
        except ImportError:
            raise base.BackendError(
                "ansible-runner is not installed: pip install 'gpu-driver-cockpit[ansible]'"
            ) from None
        loop = asyncio.get_running_loop()

        def deliver(observation: base.Observation) -> None:
            self._note(job, observation, on_observation)

        def on_event(event: dict[str, Any]) -> bool:  # in the runner's thread
            if event.get("event") == "playbook_on_stats":
                job.stats = dict(event.get("event_data") or {})
            seen = play.observation_from_event(event, job.action, job.id, check=self.check)
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

    def _note(self, job: _Job, observation: base.Observation, on_observation: base.ObservationCallback | None) -> None:
        """Keep ``observation`` (redacted) and hand it on when it changed since the node's last one."""
        if observation.node not in job.nodes:
            job.strays.add(observation.node)
        if "stderr" in observation.evidence or observation.reason:  # the change log gets no secret a command printed
            evidence = dict(observation.evidence)
            if "stderr" in evidence:
                evidence["stderr"] = redact(evidence["stderr"])
            reason = redact(observation.reason) if observation.reason else None
            observation = observation.model_copy(update={"evidence": evidence, "reason": reason})
        if observation.stage in (base.ObservedStage.FAILED, base.ObservedStage.DOWN):
            job.failed.setdefault(observation.node, observation)
        earlier = job.last.get(observation.node)
        job.last[observation.node] = observation
        self._seen[observation.node] = observation
        if on_observation is not None and observation.changed_from(earlier):
            on_observation(observation)

    def _results(
        self, job: _Job, runner: Any, private: Path, waited: float, on_observation: base.ObservationCallback | None
    ) -> list[base.ReleaseResult]:
        artifacts = private / "artifacts" / job.id
        status = str(getattr(runner, "status", "unknown"))
        evidence = {
            "job_id": job.id,
            "runner_status": status,
            "rc": str(getattr(runner, "rc", "")),
            "artifacts": str(artifacts),
            "artifacts_sha256": play.tree_sha256(artifacts) if artifacts.is_dir() else "",
            "check_mode": str(self.check).lower(),
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
                ended = play.ended_observation(node, job.action, job.id, counts, check=self.check)
                self._note(job, ended, on_observation)
            results.append(
                base.ReleaseResult(
                    node=node,
                    action=job.action,
                    ok=error is None,
                    final=job.last.get(node),
                    error=error,
                    waited_s=round(waited, 3),
                    # past the job's timeout a node's outcome is unknown (it may be mid-task), not failed
                    timed_out=failed is None and status == "timeout",
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


def make(
    options: BackendOptions, *, transport: Transport | None, runner: base.CommandRunner | None = None
) -> AnsibleBackend:
    """The Ansible backend of ``cockpit run --backend ansible`` (:func:`registry.make_backend`):
    the window's hosts and SSH files as the transport has them, the site's playbook for every
    action when the settings name one (it reads ``cockpit_action``), else the runbook's steps
    (:meth:`AnsibleBackend.use_runbook`). ``runner`` is not needed: ansible-runner runs here."""
    del runner
    if transport is None:
        raise BadInput("the Ansible backend needs the window's hosts (--hosts or an inventory) and their SSH settings")
    settings = options.ansible
    playbook = settings.playbook
    workdir = getattr(settings, "workdir", None) or DEFAULT_WORKDIR
    ssh = ssh_settings(transport.options)
    interpreter = settings.python_interpreter
    if interpreter:
        ssh = ssh.model_copy(update={"python_interpreter": str(interpreter)})
    return AnsibleBackend(
        [transport.target(h) for h in transport.hosts],
        ssh,
        Path(workdir),
        playbooks=dict.fromkeys(base.BackendAction, Path(playbook)) if playbook is not None else None,
    )
