"""The Ansible backend's pure half: the inventory, the generated playbook, ssh's arguments,
the events read as observations, and the artifacts' hash. Values in, values out; the
runner job itself is :mod:`cockpit.fleet.backends.ansible`.

Ansible templates (Jinja2) every string of a playbook and an inventory it loads, so a
value the cockpit writes (a node name, a filled command, a path) could be evaluated on
the control host if it held ``{{ ... }}``. Every such string is written tagged
``!unsafe`` (Ansible docs, "Advanced playbook syntax: Unsafe or raw strings": "Ansible
provides the ``!unsafe`` data type to block templating"), so it stays data. The only
templates in what the cockpit writes are its own constant expressions naming a host
variable (``{{ cockpit_argv['install'] }}``).

A runbook step is a shell command line whose placeholders were shell-quoted by
:func:`cockpit.runbook.placeholders.fill`. On a node the SSH executor hands it to the
login shell; here it becomes an ``ansible.builtin.command`` task with ``argv`` (the
command module never uses a shell): the words themselves when the line has no shell
syntax (so a value is one argv element, parsed by no shell at all), else
``["/bin/sh", "-c", line]``, the same shell the SSH executor's command reaches.

A step that declares its module (``[stages.steps.ansible]``, the runbook's own word, never
a guess from the command line) becomes that module's task instead, its per-node arguments
(packages, a unit, a ``creates`` path) host variables as data: the module then says what
it changed and predicts it under ``--check``. A ``read_only`` command is ``changed_when:
false`` and runs in check mode too; a ``changed_if`` command is changed only when its
output matches the step's regular expression (play data, never a template).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from cockpit.errors import BadInput
from cockpit.fleet.backends.base import BackendAction, BackendName, Observation, ObservedStage
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.model import AnsibleModuleName

#: what the SSH executor reads the boot id with (cockpit.fleet.executor.BOOT_ID_COMMAND)
BOOT_ID_COMMAND = "cat /proc/sys/kernel/random/boot_id"
#: the host variables the generated playbook reads (data, written ``!unsafe``)
ARGV_VAR = "cockpit_argv"
BECOME_VAR = "cockpit_become"
#: a module task's per-node arguments (packages, a unit, a ``creates`` path), also data
ARGS_VAR = "cockpit_args"
#: the play's variables: each ``changed_if`` step's regular expression (data), and its registered result
CHANGED_IF_VAR = "cockpit_changed_if"
RESULT_VAR = "cockpit_result"
#: the module each step kind maps to (``[stages.steps.ansible] module``), by its full name
MODULES: dict[AnsibleModuleName, str] = {
    AnsibleModuleName.APT: "ansible.builtin.apt",
    AnsibleModuleName.DNF: "ansible.builtin.dnf",
    AnsibleModuleName.SYSTEMD_SERVICE: "ansible.builtin.systemd_service",
    AnsibleModuleName.COMMAND: "ansible.builtin.command",
}

#: an inventory name / limit word: Ansible's pattern syntax (``:`` ``,`` ``!`` ``&`` ``*``
#: ``~`` ``[``) must never reach ``--limit`` from a node name
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: characters after which a command line needs a shell (operators, expansions, globs, quoting aside)
_SHELL_SYNTAX = set("|&;<>()$`*?[]{}~#!\\\n")
#: a path written into ssh's arguments: no whitespace or quotes (ssh_config(5) would split it)
_PLAIN_PATH = re.compile(r"^[^\s\"'=]+$")

#: runner events that speak of one host's task (ansible-runner's "Runner Artifact Job Events")
HOST_EVENTS = ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped")

#: the stage a node is in while the job's tasks are still running, per action
_RUNNING: dict[BackendAction, ObservedStage] = {
    BackendAction.DRAIN: ObservedStage.DRAINING,
    BackendAction.UPGRADE: ObservedStage.UPGRADING,
    BackendAction.REBOOT: ObservedStage.REBOOTING,
    BackendAction.RESUME: ObservedStage.VALIDATING,
}
#: the stage a node reaches when the job ended with no failure for it
_ENDED: dict[BackendAction, ObservedStage] = {
    BackendAction.DRAIN: ObservedStage.DRAINED,
    BackendAction.UPGRADE: ObservedStage.DONE,
    BackendAction.REBOOT: ObservedStage.DONE,
    BackendAction.RESUME: ObservedStage.IN_SERVICE,
}
#: one short value per evidence entry (the change log keeps evidence, not transcripts)
EVIDENCE_CHARS = 300


class PlayTask(BaseModel):
    """One runbook step as a task of the generated playbook, filled for each node it runs on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    title: str
    timeout_s: int = Field(ge=1)
    #: node -> the step's command line as filled for it (a node absent here skips the task: its ``when``)
    commands: dict[str, str]
    #: node -> whether the task runs as root there (``sudo = true`` and the login is not root)
    become: dict[str, bool] = Field(default_factory=dict)
    #: a reboot step: ``ansible.builtin.reboot`` issues the command and waits for a new boot id
    reboot: bool = False
    #: the module that does the step (``[stages.steps.ansible]``); a command task of the line otherwise
    module: AnsibleModuleName = AnsibleModuleName.COMMAND
    #: node -> the module's arguments filled for it (``name``: packages or a unit, ``creates``: a path)
    args: dict[str, dict[str, str | list[str]]] = Field(default_factory=dict)
    #: the module's constant arguments (``state``, ``update_cache``)
    options: dict[str, str | bool] = Field(default_factory=dict)
    #: the step only reads: reported ok, never changed, and run in check mode too
    read_only: bool = False
    #: a command step's regular expression over its output that says it changed the node
    changed_if: str | None = None


class SshSettings(BaseModel):
    """How Ansible's ssh reaches the nodes: the cockpit's own files, host keys always checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    known_hosts: Path | None = None  # None: ssh_config's UserKnownHostsFile, else ~/.ssh/known_hosts (as the cockpit)
    ssh_config: Path | None = None
    identity_files: tuple[Path, ...] = ()
    #: OpenSSH accept-new, only when the operator asked the cockpit for it (--accept-new-host-keys)
    accept_new_host_keys: bool = False
    connect_timeout_s: int = Field(default=10, ge=1)
    #: the nodes' Python for Ansible's modules (``ansible_python_interpreter``); None: Ansible discovers it
    python_interpreter: str | None = None


# --- names and commands --------------------------------------------------------------------


def check_name(name: str) -> str:
    """``name`` when Ansible reads it as one host, never as a pattern; else :class:`BadInput`."""
    if not _PLAIN_NAME.match(name):
        raise BadInput(f"node {name!r}: the Ansible backend takes letters, digits, '.', '_' and '-' in node names")
    return name


def limit_expression(nodes: Iterable[str]) -> str:
    """``--limit`` for exactly ``nodes`` (Ansible's pattern list: names joined by ``,``)."""
    names = [check_name(n) for n in nodes]
    if not names:
        raise BadInput("the Ansible backend was given no nodes to run on")
    return ",".join(names)


def command_argv(line: str) -> list[str]:
    """The argv of one filled command line: its words when no shell is needed, else ``sh -c``."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise BadInput(f"command {line!r}: {exc}") from None
    if not words:
        raise BadInput("an empty command cannot run")
    # A word with shell syntax left after shlex's unquoting, or an assignment in front,
    # needs the shell: "a && b", "x > f", "$VAR", "*.deb", "FOO=1 cmd". A quoted value
    # that holds such characters makes the check say "shell" - the safe direction.
    if any(set(w) & _SHELL_SYNTAX for w in words) or "=" in words[0]:
        return ["/bin/sh", "-c", line]
    return words


# --- YAML with every string data ---------------------------------------------------------------


class _Unsafe(str):
    """A string Ansible must not template."""


class Template(str):
    """One of the cockpit's own constant expressions: the only strings written without ``!unsafe``."""


class _Dumper(yaml.SafeDumper):
    pass


def _unsafe(dumper: yaml.SafeDumper, value: _Unsafe) -> yaml.Node:
    return dumper.represent_scalar("!unsafe", str(value), style="'")


def _template(dumper: yaml.SafeDumper, value: Template) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style='"')


def _any_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return _unsafe(dumper, _Unsafe(value))


def _mapping(dumper: yaml.SafeDumper, value: dict[Any, Any]) -> yaml.Node:
    # keys are the cockpit's own names (keywords, variable names, node names checked by
    # check_name): plain strings, since Ansible reads a playbook's keywords untemplated
    pairs = [
        (dumper.represent_scalar("tag:yaml.org,2002:str", str(k)), dumper.represent_data(v)) for k, v in value.items()
    ]
    return yaml.MappingNode("tag:yaml.org,2002:map", pairs, flow_style=False)


_Dumper.add_representer(_Unsafe, _unsafe)
_Dumper.add_representer(dict, _mapping)
_Dumper.add_representer(Template, _template)
_Dumper.add_representer(str, _any_str)


def dump_yaml(document: Any) -> str:
    """``document`` as YAML, every ``str`` value tagged ``!unsafe`` (keys plain); :class:`Template` as is."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


# --- inventory and playbook --------------------------------------------------------------------


def ssh_common_args(settings: SshSettings) -> list[str]:
    """ssh's own options for every host: the cockpit's ssh_config, keys and known_hosts, never accept silently."""
    args: list[str] = []
    if settings.ssh_config is not None:
        args += ["-F", str(_plain_path(settings.ssh_config))]
    for key in settings.identity_files:
        args += ["-i", str(_plain_path(key))]
    if settings.identity_files:
        args += ["-o", "IdentitiesOnly=yes"]  # the cockpit's keys, not whatever an agent offers first
    if settings.known_hosts is not None:
        args += ["-o", f"UserKnownHostsFile={_plain_path(settings.known_hosts)}"]
    # ssh's default (ask) fails without a terminal, but says so as a question; "yes" refuses in words
    args += ["-o", "StrictHostKeyChecking=" + ("accept-new" if settings.accept_new_host_keys else "yes")]
    args += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={settings.connect_timeout_s}"]
    return args


def _plain_path(path: Path) -> Path:
    resolved = path.expanduser().resolve()
    if not _PLAIN_PATH.match(str(resolved)):
        raise BadInput(f"{path}: the Ansible backend takes paths without spaces, quotes or '=' for ssh's files")
    return resolved


def inventory_document(
    targets: Sequence[HostTarget],
    settings: SshSettings,
    tasks: Sequence[PlayTask] = (),
    host_vars: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """The YAML inventory (Ansible's ``yaml`` inventory plugin) of ``targets``: address, port,
    user as the cockpit's inventory has them, ssh's arguments, each node's filled commands,
    and ``host_vars`` (a node's release context, for a site playbook)."""
    common = shlex.join(ssh_common_args(settings))
    hosts: dict[str, dict[str, Any]] = {}
    for target in targets:
        variables: dict[str, Any] = {"ansible_host": target.address or target.name}
        if target.port is not None:
            variables["ansible_port"] = target.port
        if target.user is not None:
            variables["ansible_user"] = target.user
        variables["ansible_ssh_common_args"] = common
        if settings.python_interpreter is not None:
            variables["ansible_python_interpreter"] = settings.python_interpreter
        # a command task's argv; a reboot task's command line (the reboot module hands it to the shell)
        argv = {
            t.id: t.commands[target.name] if t.reboot else command_argv(t.commands[target.name])
            for t in tasks
            if target.name in t.commands
        }
        if tasks:
            variables[ARGV_VAR] = argv
            variables[BECOME_VAR] = {t.id: bool(t.become.get(target.name)) for t in tasks if target.name in t.commands}
            variables[ARGS_VAR] = {t.id: t.args[target.name] for t in tasks if target.name in t.args}
        variables.update((host_vars or {}).get(target.name) or {})
        hosts[check_name(target.name)] = variables
    return {"all": {"hosts": hosts}}


def playbook_document(title: str, tasks: Sequence[PlayTask]) -> list[dict[str, Any]]:
    """One play over the inventory (``--limit`` narrows it to the wave): a command task per step."""
    if not tasks:
        raise BadInput("the stage has no node steps for the Ansible backend to run")
    play_tasks: list[dict[str, Any]] = []
    for task in tasks:
        key = repr(task.id)  # an Identifier: letters, digits, '_' and '-', so its repr is a Jinja string literal
        entry: dict[str, Any] = {"name": f"{task.id}: {task.title}"}
        command = Template(f"{{{{ {ARGV_VAR}[{key}] }}}}")
        if task.reboot:
            # the reboot module's own wait: the boot id the cockpit reads changes, then the node answers
            entry["ansible.builtin.reboot"] = {
                "reboot_command": command,
                "boot_time_command": BOOT_ID_COMMAND,
                "reboot_timeout": task.timeout_s,
            }
        else:
            entry.update(_module_entry(task, key, command))
            entry["timeout"] = task.timeout_s
        entry["become"] = Template(f"{{{{ {BECOME_VAR}[{key}] }}}}") if any(task.become.values()) else False
        entry["when"] = Template(f"{key} in {ARGV_VAR}")
        play_tasks.append(entry)
    document: dict[str, Any] = {"name": title, "hosts": "all", "gather_facts": False}
    changed_if = {t.id: t.changed_if for t in tasks if t.changed_if is not None}
    if changed_if:
        document["vars"] = {CHANGED_IF_VAR: changed_if}
    return [{**document, "tasks": play_tasks}]


def _module_entry(task: PlayTask, key: str, command: Template) -> dict[str, Any]:
    """A step's module call: its module with the node's arguments (host variables, data) and
    the constant ones; a read-only command reports ok and runs in check mode too (it changes
    nothing), a changing one is skipped there by Ansible itself, saying so."""
    names = {name for args in task.args.values() for name in args}
    args: dict[str, Any] = {name: Template(f"{{{{ {ARGS_VAR}[{key}][{name!r}] }}}}") for name in sorted(names)}
    args.update(task.options)
    if task.module is AnsibleModuleName.COMMAND:
        entry: dict[str, Any] = {MODULES[task.module]: {"argv": command, **args}}
        if task.read_only:
            entry["changed_when"] = False
            entry["check_mode"] = False
            # what it reads may be what a changing step writes, which check mode skipped: there
            # its failure is reported (ignored: true) and the dry run goes on
            entry["ignore_errors"] = Template("{{ ansible_check_mode }}")
        elif task.changed_if is not None:
            entry["register"] = RESULT_VAR
            entry["changed_when"] = Template(f"{RESULT_VAR}.stdout is search({CHANGED_IF_VAR}[{key}])")
        return entry
    entry = {MODULES[task.module]: args}
    if task.read_only:  # the module's check-mode answer is the step: a dry run, never a change
        entry["check_mode"] = True
        entry["changed_when"] = False
    return entry


# --- events as observations -----------------------------------------------------------------


def short(text: object) -> str:
    """One evidence value: its last lines first kept, at most :data:`EVIDENCE_CHARS` characters."""
    value = str(text).strip()
    return value if len(value) <= EVIDENCE_CHARS else "…" + value[-(EVIDENCE_CHARS - 1) :]


#: why a command task is skipped in check mode (the command module's own words, which the runner drops)
CHECK_MODE_SKIP = "Command would have run if not in check mode"


def _skip_reason(data: Mapping[str, Any], check: bool) -> str:
    """Why Ansible skipped a task: a changing command in check mode, else the task's ``when``
    (the generated playbook's only one: the step does not run on this node)."""
    if check and data.get("task_action") == MODULES[AnsibleModuleName.COMMAND]:
        return CHECK_MODE_SKIP
    return "the step does not run on this node (its when)"


def observation_from_event(
    event: Mapping[str, Any], action: BackendAction, job_id: str, *, check: bool = False
) -> Observation | None:
    """A runner event about one host's task, as an observation; None for any other event.
    ``check``: the job runs in check mode (a skipped command says why)."""
    name = event.get("event")
    data = event.get("event_data") or {}
    host = data.get("host")
    if name not in HOST_EVENTS or not isinstance(host, str):
        return None
    task = str(data.get("task") or "")
    raw = data.get("res")
    res: dict[str, Any] = raw if isinstance(raw, dict) else {}
    evidence = {"task": short(task), "job_id": job_id}
    if res.get("rc") is not None:
        evidence["rc"] = str(res["rc"])
    if name == "runner_on_ok":  # what the task did: Ansible's own changed (a read-only step's is false)
        evidence["changed"] = str(bool(res.get("changed"))).lower()
        if res.get("msg"):  # a module's own word on it ("Command would have run if not in check mode")
            evidence["msg"] = short(res["msg"])
    if name == "runner_on_skipped":  # why it did not run (the runner's event carries no result to say it)
        evidence["skipped"] = short(res.get("msg") or _skip_reason(data, check))
    if res.get("rebooted") is not None:  # the reboot module: rebooted, and how long the node took
        evidence["rebooted"] = str(bool(res["rebooted"])).lower()
        evidence["elapsed_s"] = str(res.get("elapsed", ""))
    reason: str | None = None
    if name == "runner_on_ok" or name == "runner_on_skipped":
        stage = _RUNNING[action]
    elif name == "runner_on_failed" and data.get("ignore_errors"):
        stage, evidence["ignored"] = _RUNNING[action], "true"  # the playbook says go on: Ansible does
        reason = failure_text(res)  # still a failure, said in words
    elif name == "runner_on_failed":
        stage = ObservedStage.FAILED
        reason = failure_text(res)
    else:
        stage = ObservedStage.DOWN
        reason = short(res.get("msg") or "unreachable")
    if name == "runner_on_failed" and res.get("stderr"):
        evidence["stderr"] = short(res["stderr"])
    return Observation(
        backend=BackendName.ANSIBLE,
        node=host,
        native_state=f"{name}: {short(task)}",
        stage=stage,
        reason=reason,
        evidence=evidence,
    )


def failure_text(res: Mapping[str, Any]) -> str:
    """A failed task's result in one line: exit status and the last line of stderr, else Ansible's msg."""
    stderr_lines = str(res.get("stderr") or "").strip().splitlines()
    parts = []
    if res.get("rc") is not None:
        parts.append(f"exit status {res['rc']}")
    parts.append(stderr_lines[-1] if stderr_lines else str(res.get("msg") or "failed"))
    return short(": ".join(parts))


def ended_observation(
    node: str, action: BackendAction, job_id: str, counts: Mapping[str, int], *, check: bool = False
) -> Observation:
    """A node the job ran through with no failure: the action's end, with the play recap's counts
    (``changed``: how many tasks changed something). A check-mode job changed nothing: the node
    stays where it was (the action's running stage), its counts what Ansible predicted."""
    return Observation(
        backend=BackendName.ANSIBLE,
        node=node,
        native_state="playbook_on_stats: check mode, nothing changed" if check else "playbook_on_stats: ok",
        stage=_RUNNING[action] if check else _ENDED[action],
        evidence={"job_id": job_id, **{k: str(v) for k, v in counts.items()}, "check_mode": str(check).lower()},
    )


def recap(stats: Mapping[str, Any], node: str) -> dict[str, int]:
    """A node's line of the play recap (``playbook_on_stats``: ok, changed, failures, dark, skipped, ...);
    empty when the play never reached it. Ansible lists a host only under the counts it has, so a
    count it leaves out is 0 (``changed: 0`` is what says a run changed nothing)."""
    keys = ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored")
    counts: dict[str, int] = {}
    for key in keys:
        per_host = stats.get(key)
        if isinstance(per_host, dict) and node in per_host:
            counts[key] = int(per_host[node])
    return {key: counts.get(key, 0) for key in keys} if counts else {}


# --- artifacts ------------------------------------------------------------------------------


def tree_sha256(root: Path) -> str:
    """SHA-256 over a directory: each file's relative path and its own SHA-256, in sorted order
    (``cd DIR && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs sha256sum | sha256sum``)."""
    lines = []
    for name in sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()):
        digest = hashlib.sha256((root / name).read_bytes()).hexdigest()
        lines.append(f"{digest}  {name}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()
