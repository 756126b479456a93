"""Runbook steps as the tasks of the Ansible backend's generated playbook, filled per node.

Two ways in, one filling:

- :func:`play_tasks`: given steps, parameters and node facts (a caller that holds them);
- :func:`runbook_tasks`: what a window's release asks for. The executor releases a
  ``kind = "backend"`` step to the engine with the node's placeholder values as context
  (:meth:`Executor.values`, as text); the generated playbook is then *the SSH path of the
  stage that holds that backend step*: its node command and reboot steps whose ``when``
  names the backend and holds for ``ssh`` (``when = {backend = "ssh"}`` or ``{not_backend = "ansible"}``). Under
  ``--backend ansible`` the executor skips those itself, so each runs once: in the playbook.

A step's command is filled exactly as the SSH executor fills it (every placeholder
shell-quoted by :func:`~cockpit.runbook.placeholders.fill`), its ``when`` decides per
node, and ``become`` follows the login as the executor's ``sudo -n`` does. A step's
module arguments (:func:`module_args`) are filled from the same values, each placeholder
one word; a module with nothing to do on a node (no package filled) leaves the node out.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Mapping, Sequence

from cockpit.errors import BadInput
from cockpit.fleet import privilege
from cockpit.fleet.backends.ansible_play import PlayTask
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.backends import BACKEND_CONDITION, BackendAction, BackendName
from cockpit.runbook.conditions import NEGATION_PREFIX, RECORDED_PREFIX, when_holds, when_text
from cockpit.runbook.model import AnsibleModuleName, Runbook, Stage, Step, StepKind, Where
from cockpit.runbook.placeholders import ParamValue, fill
from cockpit.runbook.targets import target_facts
from cockpit.runbook.waves import resolve_int

#: the SSH executor's reboot command (cockpit.fleet.reboot.DEFAULT_REBOOT_COMMAND)
DEFAULT_REBOOT_COMMAND = "systemctl reboot"


def _template(step: Step) -> str:
    reboot = step.kind is StepKind.REBOOT
    template = step.run or (DEFAULT_REBOOT_COMMAND if reboot else None)
    if step.kind not in (StepKind.COMMAND, StepKind.REBOOT) or step.where is not Where.NODE or not template:
        raise BadInput(
            f"step {step.id}: the Ansible backend runs node command and reboot steps; "
            f"a {step.kind.value} step on the {step.where.value} stays with the cockpit"
        )
    return template


def _task(
    step: Step,
    targets: Sequence[HostTarget],
    values: Mapping[str, Mapping[str, ParamValue]],
    conditions: Mapping[str, Mapping[str, object]],
) -> PlayTask:
    """``step`` for each of ``targets``: ``values[node]`` fill it, ``conditions[node]`` judge its ``when``."""
    template = _template(step)
    commands: dict[str, str] = {}
    become: dict[str, bool] = {}
    args: dict[str, dict[str, str | list[str]]] = {}
    timeout: int | None = None
    for target in targets:
        own = values.get(target.name) or {}
        params = conditions.get(target.name) or {}
        recorded = {k: v for k, v in own.items() if k.startswith(RECORDED_PREFIX)}
        holds = when_holds(step.when, params, recorded or None)
        if holds is False:
            continue
        if holds is None:
            raise BadInput(f"step {step.id}: its condition ({when_text(step.when)}) waits for the node's baseline")
        timeout = resolve_int(step.timeout_s, {**own, **params}, f"step {step.id} timeout_s")
        if step.ansible is not None:
            filled = module_args(step, own)
            if filled is None:  # nothing for the module to do on this node (no package fills)
                continue
            args[target.name] = filled
        commands[target.name] = fill(template, own)
        become[target.name] = step.sudo and not privilege.login_is_root(own, target.user)
    if timeout is None:
        timeout = step.timeout_s if isinstance(step.timeout_s, int) else 120  # runs nowhere: any bound will do
    return PlayTask(
        id=step.id,
        title=step.title,
        timeout_s=timeout,
        commands=commands,
        become=become,
        reboot=step.kind is StepKind.REBOOT,
        module=step.ansible.module if step.ansible is not None else AnsibleModuleName.COMMAND,
        args=args,
        options=_module_options(step),
        read_only=step.read_only,
        changed_if=step.ansible.changed_if if step.ansible is not None else None,
    )


def _words(template: str, values: Mapping[str, ParamValue]) -> list[str]:
    """A template's words as filled: each placeholder's value one word (fill quotes it, the split
    takes the quoting off again), a value that is empty no word at all."""
    return [word for word in shlex.split(fill(template, values)) if word]


def _one(step: Step, key: str, template: str, values: Mapping[str, ParamValue]) -> str:
    words = _words(template, values)
    if len(words) != 1:
        raise BadInput(f"step {step.id}: ansible.{key} ({template}) must fill to one word, not {words!r}")
    return words[0]


def module_args(step: Step, values: Mapping[str, ParamValue]) -> dict[str, str | list[str]] | None:
    """The module arguments of ``step`` (``[stages.steps.ansible]``) filled for one node; None
    when the module has nothing to do there (no package fills and no refresh is asked)."""
    task = step.ansible
    if task is None:
        return {}
    if task.module in (AnsibleModuleName.APT, AnsibleModuleName.DNF):
        names = [word for template in task.packages for word in _words(template, values)]
        if not names and not task.update_cache:
            return None
        return {"name": names}
    if task.module is AnsibleModuleName.SYSTEMD_SERVICE:
        return {"name": _one(step, "unit", task.unit or "", values)}
    return {"creates": _one(step, "creates", task.creates, values)} if task.creates is not None else {}


def _module_options(step: Step) -> dict[str, str | bool]:
    """The module's arguments that are the same on every node."""
    task = step.ansible
    if task is None or task.module is AnsibleModuleName.COMMAND:
        return {}
    if task.module is AnsibleModuleName.SYSTEMD_SERVICE:
        return {"state": str(task.state)}
    options: dict[str, str | bool] = {"state": "present", "update_cache": task.update_cache}
    if task.allowerasing:  # dnf only (the cross-checks say so); apt has no such argument
        options["allowerasing"] = True
    return options


def play_tasks(
    steps: Sequence[Step],
    targets: Sequence[HostTarget],
    params: Mapping[str, ParamValue],
    *,
    facts: Mapping[str, ParamValue] | None = None,
    node_facts: Mapping[str, Mapping[str, object]] | None = None,
) -> list[PlayTask]:
    """Steps as generated-playbook tasks, filled per node as the SSH executor fills them.

    Placeholders get the same values (:meth:`Executor.values`: parameters, shared facts,
    ``{node}``, ``{host}``, ``{node_name}``, the node's recorded facts); a step whose
    ``when`` does not hold for a node is left out for that node. Raises :class:`BadInput`
    for a step Ansible cannot run here (not a node command) or that cannot be filled.
    """
    values: dict[str, dict[str, ParamValue]] = {}
    for target in targets:
        # as Executor.values (not imported: the executor imports the backends): parameters,
        # shared facts, the node's names, then its own scalar facts (a list serves conditions only)
        own: dict[str, ParamValue] = {**params, **(facts or {})}
        own.update(node=target.name, host=target.address or target.name, node_name=target.node_name or target.name)
        recorded = (node_facts or {}).get(target.name) or {}
        own.update({k: v for k, v in recorded.items() if isinstance(v, str | int | float | bool)})
        with contextlib.suppress(BadInput):  # as Executor.values: unset, so the step is refused unfilled
            own.update(target_facts({**own, **recorded}))
        values[target.name] = own
    conditions = {t.name: dict(params) for t in targets}
    return [_task(step, targets, values, conditions) for step in steps]


def backend_stage(runbook: Runbook, action: BackendAction) -> Stage:
    """The stage whose ``kind = "backend"`` step asks for ``action`` (the first such stage)."""
    for stage in runbook.stages:
        if any(s.kind is StepKind.BACKEND and s.action is action for s in stage.steps):
            return stage
    raise BadInput(f"the runbook has no backend step that asks for {action.value}: no steps to give Ansible")


def ssh_path(stage: Stage) -> list[Step]:
    """The stage's steps written for the SSH path: ``when`` names the backend (``backend =
    "ssh"``, or ``not_backend = "ansible"`` where the same steps serve Slurm's window too)
    and holds for ``ssh``."""
    ssh = {BACKEND_CONDITION: BackendName.SSH.value}
    keys = (BACKEND_CONDITION, NEGATION_PREFIX + BACKEND_CONDITION)

    def written_for_ssh(step: Step) -> bool:
        backend = {k: step.when[k] for k in keys if k in step.when}
        return bool(backend) and when_holds(backend, ssh) is True

    return [
        s
        for s in stage.steps
        if written_for_ssh(s) and s.kind in (StepKind.COMMAND, StepKind.REBOOT) and s.where is Where.NODE
    ]


def runbook_tasks(
    runbook: Runbook,
    action: BackendAction,
    targets: Sequence[HostTarget],
    contexts: Mapping[str, Mapping[str, str]],
) -> list[PlayTask]:
    """The generated playbook for ``action``: the SSH path of the stage that asks for it, filled
    per node from the release's context (the executor's placeholder values for that node)."""
    steps = ssh_path(backend_stage(runbook, action))
    if not steps:
        raise BadInput(
            f'the runbook\'s {action.value} stage has no steps for the SSH path (when = {{backend = "ssh"}}) '
            "to give Ansible: give the Ansible backend a playbook"
        )
    chosen = [t for t in targets if t.name in contexts]
    values = {node: dict(ctx) for node, ctx in contexts.items()}
    # the SSH path's conditions, judged as the SSH executor would judge them for this node
    conditions = {node: {**ctx, BACKEND_CONDITION: BackendName.SSH.value} for node, ctx in contexts.items()}
    return [_task(step, chosen, values, conditions) for step in steps]
