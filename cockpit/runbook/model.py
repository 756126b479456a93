"""The runbook model: a driver-change procedure as validated data.

A runbook file (``checklists/*.toml``) is parsed with :mod:`tomllib` and validated
into :class:`Runbook`. Every model forbids unknown keys so a typo is an error, not
a silently ignored setting. Cross-checks that span the whole document (unique ids,
references, placeholders) live in :mod:`cockpit.runbook.crosscheck`.

TOML shape (abridged)::

    backends = ["ssh", "slurm"]   # the engines it runs through (optional; ["ssh"] when absent)

    [runbook]
    id = "driver-upgrade-r580"
    title = "..."

    [parameters.target_branch]
    type = "str"
    default = "580"

    [waves]
    sizes = [1, 1]            # canary, then a second node
    rest = "wave_size"        # then waves of this parameter (or an int)
    max_parallel = 1

    [[triggers]]
    id = "gpu-missing"
    mode = "auto"
    evaluator = "gpu_count_below_baseline"

    [[stages]]
    id = "drain"
    scope = "node"
      [[stages.steps]]
      id = "cordon"
      run = "kubectl cordon {node}"
      where = "control"
      when = { backend = "ssh" }
      [[stages.steps]]
      id = "slurm-drain"
      kind = "backend"          # the engine does it: scontrol, the operator, a playbook
      action = "drain"          # drain | upgrade | reboot | resume
      when = { backend = "slurm" }
      [[stages.items]]
      id = "drained"
      verify = "step"
      step = "cordon"

    [[stages]]
    id = "upgrade"
      [[stages.steps]]
      id = "install"
      run = "apt-get install -y {target_driver_spec}"
      when = { backend = "ssh" }  # the SSH path; under ansible a backend step runs it as a playbook
      ansible = { module = "apt", packages = ["{target_driver_spec}"] }  # ...by this module
      [[stages.steps]]
      id = "dry-run"
      run = "apt-get install -s {target_driver_spec}"
      read_only = true          # changes nothing: reported unchanged, run in check mode too

    [rollback]
      [[rollback.steps]] ...

    [decision]                # optional: when absent, see Runbook.decision_outcomes
    outcomes = ["keep-upgraded-path", "keep-isolated-path", "keep-cu129-transition", "roll-back"]

    [trust]                   # optional: merged with the site's trust settings, can only add
    require_signatures = true
    allowed_signers = "allowed_signers"   # relative to this file; the site's wins when it names one
    two_person_gates = ["arm"]            # their sign-off items cannot be overridden by the operator alone
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from cockpit.runbook.backends import DEFAULT_BACKENDS, BackendAction, BackendName
from cockpit.runbook.conditions import RECORDED_FACTS, RECORDED_PREFIX, WhenValue
from cockpit.runbook.targets import TARGET_FACTS

Identifier = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=64)]

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: Facts about the node a step runs for, usable as ``{placeholders}`` in commands.
#: Recorded facts (``recorded_*``, :data:`cockpit.runbook.conditions.RECORDED_FACTS`) come
#: from the node's ``record`` stage (the baseline); a runbook's ``[facts.NAME]`` add theirs.
NODE_FACTS: frozenset[str] = frozenset(
    {
        "node",  # the inventory name of the node
        "host",  # the address the transport connects to
        "node_name",  # the node's name in its scheduler (inventory cockpit_node_name), else "node"
        "change_id",
        "operator",
        *(RECORDED_PREFIX + name for name in RECORDED_FACTS),  # e.g. recorded_driver_package
        *TARGET_FACTS,  # e.g. target_driver_spec: what the node's change installs (cockpit.runbook.targets)
    }
)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParamType(StrEnum):
    STR = "str"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    CHOICE = "choice"


class Parameter(Strict):
    """A value the operator may set with ``--param k=v``; placeholders name it."""

    type: ParamType = ParamType.STR  # what ``--param`` values are read as (and bounded by)
    default: str | int | float | bool | None = None  # the value when ``--param`` does not name it
    choices: list[str] | None = None  # for type = "choice"
    description: str = ""  # shown by ``cockpit check`` and in the dry run
    required: bool = False  # the window refuses to start without a value
    #: a credential (a BMC password, a registry token): given only in the environment as
    #: ``COCKPIT_SECRET_<NAME>`` (never ``--param``, which ``ps`` shows), never written to the
    #: change log (the header and every event show ``***``), and no default in the runbook
    secret: bool = False


class Waves(Strict):
    """Staged rollout: fixed first waves (canary 1, then 1), then waves of ``rest``."""

    #: the first waves' sizes, in order (the canary, then the second node)
    sizes: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [1, 1])
    #: size of every later wave: an int, or the name of an int parameter; 0 = no more waves
    rest: int | str = 0
    #: how many nodes of one wave may be in a destructive stage at once (int or parameter name)
    max_parallel: int | str = 1
    #: a wave may lose this many nodes to a failed smoke before the budget trigger fires
    failure_budget: int | str = 0
    #: across the fleet, at most this many nodes out of service at once while a wave runs by
    #: itself: an int, an int parameter, or a share of the fleet (``"10%"``); 0: max_parallel alone
    max_unavailable: int | str = 0


class TriggerMode(StrEnum):
    AUTO = "auto"  # a built-in evaluator decides
    MANUAL = "manual"  # a person raises it


class Trigger(Strict):
    """A rollback trigger, written down and armed before the first change."""

    id: Identifier  # the trigger's name in the log, the panel and the ticket
    title: str  # one line: what fired means
    mode: TriggerMode  # who decides that it fired
    evaluator: str | None = None  # name of a built-in evaluator (mode = "auto")
    #: evaluator parameters (e.g. ``codes = [48, 79]`` for ``fatal_xid``)
    params: dict[str, int | float | str | bool | list[int] | list[str]] = Field(default_factory=dict)
    description: str = ""  # what to look at when it fires


class Scope(StrEnum):
    WINDOW = "window"  # once per change window
    NODE = "node"  # once per node, in wave order


class Where(StrEnum):
    NODE = "node"  # on the node, over SSH
    CONTROL = "control"  # on the control host (kubectl / scontrol)
    LOCAL = "local"  # on the operator's jump host


class StepKind(StrEnum):
    COMMAND = "command"  # run the command, succeed on exit status 0
    REBOOT = "reboot"  # record boot id, reboot, wait for a new boot id
    PROBE = "probe"  # a full probe of the node, recorded in the change log
    RECORD = "record"  # a probe whose facts become the node's baseline
    BACKEND = "backend"  # ask the window's engine (Slurm, the GPU Operator, Ansible) for ``action``


class AnsibleModuleName(StrEnum):
    """The Ansible modules a step may declare it is done by (``[stages.steps.ansible]``)."""

    APT = "apt"  # ansible.builtin.apt: packages present (or a package-list refresh)
    DNF = "dnf"  # ansible.builtin.dnf: packages present
    SYSTEMD_SERVICE = "systemd_service"  # ansible.builtin.systemd_service: a unit's state
    COMMAND = "command"  # ansible.builtin.command: the step's own ``run``, with ``creates``


class ServiceState(StrEnum):
    STARTED = "started"
    STOPPED = "stopped"
    RESTARTED = "restarted"


class AnsibleTask(Strict):
    """``[stages.steps.ansible]``: how the Ansible backend does this step, when a module does
    its job (the SSH executor runs ``run`` as always). Ansible's module then says what changed
    and predicts it in check mode; a command cannot, so the mapping is written here, never
    guessed from the command line. Which keys a module takes is checked by the cross-checks."""

    module: AnsibleModuleName
    #: apt / dnf: the packages that must be present, each one ``{placeholder}`` or word (a
    #: name or ``name=version*`` spec); an element that fills to nothing is left out
    packages: list[str] = Field(default_factory=list)
    #: apt / dnf: refresh the package lists (metadata) first
    update_cache: bool = False
    #: dnf: let dnf erase installed packages the set conflicts with (``--allowerasing``): a
    #: module stream switch, whose kmod, fabric manager and nscq packages conflict across streams
    allowerasing: bool = False
    #: systemd_service: the unit (template) and the state it must be in
    unit: str | None = None
    state: ServiceState | None = None  # systemd_service: the state the unit must be left in
    #: command: a path (template) the step leaves behind: once it exists the step has run
    #: (Ansible reports ok, not changed, and does not run it again)
    creates: str | None = None
    #: command: a regular expression over the step's output that says it changed the node
    #: (``apt-mark`` prints "Canceled hold on X." only when X was held); no match: ok, unchanged
    changed_if: str | None = None


class Step(Strict):
    """One action of a stage. ``run`` is a template; placeholders are shell-quoted."""

    id: Identifier  # unique in its stage; the log names the step ``stage/id``
    title: str  # one line, shown in the stage pane and the ticket
    kind: StepKind = StepKind.COMMAND
    run: str | None = None  # command template (required for kind = "command")
    where: Where = Where.NODE
    timeout_s: int | str = 120  # seconds, or the name of an int parameter
    destructive: bool = False  # needs triggers armed and a typed confirmation
    #: needs root: run as ``sudo -n -- sh -c COMMAND`` when the SSH login is not root (never prompts)
    sudo: bool = False
    #: run only if every condition holds: a parameter or recorded fact equals the string, or is in the list
    when: dict[str, WhenValue] = Field(default_factory=dict)
    description: str = ""  # why the step exists / what to look for in its output
    #: kind = "backend": what the engine is asked to do for the node (drain, upgrade, reboot, resume, smoke, rollback)
    action: BackendAction | None = None
    #: the step only reads (a listing, a dry run, a check): it changes nothing on the node, so
    #: an engine that reports changes reports it unchanged, and a check-mode run still runs it
    #: (through Ansible a read-only module step is that module's check-mode answer: a dry run)
    read_only: bool = False
    #: how the Ansible backend does the step with a module (else a command task of ``run``)
    ansible: AnsibleTask | None = None

    @property
    def reboots(self) -> bool:
        """Whether the step reboots its node (a reboot step, or an engine asked to reboot it):
        the fold watches for the node's return after it."""
        return self.kind is StepKind.REBOOT or (self.kind is StepKind.BACKEND and self.action is BackendAction.REBOOT)

    def backend_action(self, performs: frozenset[BackendAction] | set[BackendAction]) -> BackendAction | None:
        """What this step asks of an engine that performs ``performs``: a backend step's action,
        a reboot step's REBOOT when the engine reboots nodes (else the reboot goes over SSH as
        always), None when the engine has no part in it."""
        if self.kind is StepKind.BACKEND:
            return self.action
        if self.kind is StepKind.REBOOT and BackendAction.REBOOT in performs:
            return BackendAction.REBOOT
        return None


class Verify(StrEnum):
    MANUAL = "manual"  # ticked by a person, with a note when ``note_required``
    STEP = "step"  # holds when the named step of this stage succeeded
    CHECK = "check"  # a named built-in check over node state and events
    COMMAND = "command"  # a command whose exit status / output is compared
    SIGNOFF = "signoff"  # a second person (not the operator) signs it off


class Expect(Strict):
    """What a command item's command must do to hold."""

    exit_status: int = 0  # the exit status it must end with
    stdout_matches: str | None = None  # a regular expression searched in stdout


class ItemScope(StrEnum):
    """Whom one tick of a node stage's manual item covers."""

    NODE = "node"  # every node ticks it (the default)
    WAVE = "wave"  # ticked once per wave, on a sampled node, its note naming the nodes sampled
    WINDOW = "window"  # ticked once for the window (on the canary): the same for every node


class Item(Strict):
    """A checklist item: the stage's exit gate opens only when all items hold."""

    id: Identifier  # unique in its stage
    text: str  # what must hold, as the gate line and the ticket say it
    verify: Verify = Verify.MANUAL
    step: str | None = None  # verify = "step"
    check: str | None = None  # verify = "check": a built-in check name
    command: str | None = None  # verify = "command": template
    #: verify = "check" with check = "recorded": the earlier items ("stage/item") or stages
    #: ("stage": its gate passed) whose record in the change log proves this one
    recaps: list[str] = Field(default_factory=list)
    where: Where = Where.NODE
    expect: Expect | None = None
    #: verify = "command": seconds the command may run, or an int parameter (a DCGM diag takes minutes)
    timeout_s: int | str | None = None
    sudo: bool = False  # verify = "command": the command needs root (as a step's ``sudo``)
    note_required: bool = False  # verify = "manual": ticking it takes a note with substance
    #: a manual item of a node stage: ticked per node, once per wave, or once per window
    scope: ItemScope = ItemScope.NODE
    when: dict[str, WhenValue] = Field(default_factory=dict)  # as a step's ``when``: the item applies only then
    description: str = ""  # what the person ticking it must look at, or the rationale


class Stage(Strict):
    """A stage of the window: its steps run in order, and its gate opens when all its items hold."""

    id: Identifier  # the stage's name in the log and the ticket
    title: str  # one line, shown as the stage pane's heading
    scope: Scope  # whether it runs once or for each node
    description: str = ""  # what the stage is for
    steps: list[Step] = Field(default_factory=list)
    items: list[Item] = Field(default_factory=list)
    #: the stage is where the triggers get armed (its gate passing arms them)
    arms_triggers: bool = False


class FactSpec(Strict):
    """``[facts.NAME]``: a fact the runbook records besides the built-in ones, by a read-only
    command run in the record step's probe; its value (the regex's first group, or the whole
    match; without a regex the first line of output) is ``{recorded_NAME}`` and usable in ``when``."""

    command: Annotated[str, StringConstraints(min_length=1)]  # read-only, run on the node
    regex: str | None = None  # the value: its first group, or the whole match
    description: str = ""  # what the fact is, for the dry run and the ticket


class Rollback(Strict):
    """How to restore a node: reinstall the recorded previous driver, reboot, smoke."""

    title: str = "Roll back to the recorded driver"  # shown above the rollback's steps
    steps: list[Step] = Field(default_factory=list)
    items: list[Item] = Field(default_factory=list)


#: The outcome every runbook's decision may record: the generic end of a rollout that must
#: stop. After a rollback trigger fires the planner suggests it, halting the rollout, whatever
#: the runbook (engine.planner.OUTCOME_ROLLBACK is this word).
ROLLBACK_OUTCOME = "roll-back"
#: How a window of a runbook with no decision of its own may end besides rolling back: its
#: work done, or stopped before it was (the nodes left mid-change are named as it ends).
GENERIC_ENDINGS = ("completed", "abandoned")
#: What a decision may record in a runbook with a window stage ``decision`` but no
#: ``[decision]`` table: the four calls that stage of the r580 runbook describes (keep
#: upgraded, keep isolated, keep the cu129 build as a controlled transition, roll back). The
#: shipped r580 runbook relies on it and cannot gain a ``[decision]`` table: its sha256 would
#: change, and the recorded sessions that name it would no longer replay with it.
DEFAULT_DECISION_OUTCOMES: tuple[str, ...] = (
    "keep-upgraded-path",
    "keep-isolated-path",
    "keep-cu129-transition",
    ROLLBACK_OUTCOME,
)
#: The window stage the planner offers the decision in (engine.planner: ``current == "decision"``).
DECISION_STAGE = "decision"


class DecisionSpec(Strict):
    """``[decision]``: the outcomes the window's decision may record (the gate refuses others)."""

    outcomes: Annotated[list[Identifier], Field(min_length=1)]  # the words a decision may record


class TrustSpec(Strict):
    """``[trust]``: what the runbook asks of every window run with it, beside the site's trust
    settings (:mod:`cockpit.changelog.trust`): either can only add, and a change log's own
    header can never ask less than the two together (``cockpit verify`` fails when it does)."""

    #: every event must carry a valid signature; unset: required when ``allowed_signers`` is named
    require_signatures: bool | None = None
    #: who may sign (an allowed_signers file, relative to the runbook file); the site's file wins when it names one
    allowed_signers: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None
    #: stages whose gate only a second person's sign-off opens: an override (the operator alone) cannot pass them
    two_person_gates: list[Identifier] = Field(default_factory=list)

    @property
    def requires(self) -> bool:
        said = self.require_signatures
        return said if said is not None else self.allowed_signers is not None


class RunbookHeader(Strict):
    """``[runbook]``: what the runbook is; the change log records it with the file's sha256."""

    id: Identifier  # the runbook's name (``--runbook`` takes it for a shipped one)
    title: str  # one line, shown in the header and the ticket
    version: str = "1"  # the writer's own version of it
    description: str = ""  # what change it carries out, and for whom


class Runbook(Strict):
    runbook: RunbookHeader
    parameters: dict[Identifier, Parameter] = Field(default_factory=dict)
    facts: dict[Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=48)], FactSpec] = Field(
        default_factory=dict
    )
    waves: Waves = Field(default_factory=Waves)
    triggers: list[Trigger] = Field(default_factory=list)
    stages: list[Stage]
    rollback: Rollback | None = None
    #: None: the runbook lists no outcomes of its own (see :attr:`decision_outcomes`)
    decision: DecisionSpec | None = None
    #: who may sign and whether signatures are required, merged with the site's (None: the site's alone)
    trust: TrustSpec | None = None
    #: the engines this runbook was written for (``cockpit run --backend``); today's SSH steps when absent
    backends: Annotated[list[BackendName], Field(min_length=1)] = Field(default_factory=lambda: list(DEFAULT_BACKENDS))

    @property
    def decision_outcomes(self) -> tuple[str, ...]:
        """What the window's decision may record in this runbook, and nothing of another's:
        its ``[decision]`` outcomes; else, with a ``decision`` window stage written before that
        table existed (the shipped r580 runbook), that stage's four calls; else only the generic
        end, ``roll-back`` (the planner's suggestion once a trigger fired; it halts the rollout)."""
        if self.decision is not None:
            return tuple(self.decision.outcomes)
        if any(s.id == DECISION_STAGE and s.scope is Scope.WINDOW for s in self.stages):
            return DEFAULT_DECISION_OUTCOMES
        return (ROLLBACK_OUTCOME,)

    @property
    def ending_outcomes(self) -> tuple[str, ...]:
        """How a window of this runbook may end (``cockpit end --outcome``, the screen's end
        dialog): its decision's outcomes where it has a decision; a runbook with none (the
        minimal one) has only roll-back there, and a window that went well, or stopped before
        its work was done, must be able to say so: :data:`GENERIC_ENDINGS` then too."""
        outcomes = self.decision_outcomes
        if self.decision is not None or outcomes != (ROLLBACK_OUTCOME,):
            return outcomes
        return (*GENERIC_ENDINGS, ROLLBACK_OUTCOME)

    @property
    def id(self) -> str:
        return self.runbook.id

    def stage(self, stage_id: str) -> Stage:
        for stage in self.stages:
            if stage.id == stage_id:
                return stage
        raise KeyError(stage_id)

    def trigger(self, trigger_id: str) -> Trigger:
        for trigger in self.triggers:
            if trigger.id == trigger_id:
                return trigger
        raise KeyError(trigger_id)

    @property
    def window_stages(self) -> list[Stage]:
        return [s for s in self.stages if s.scope is Scope.WINDOW]

    @property
    def node_stages(self) -> list[Stage]:
        return [s for s in self.stages if s.scope is Scope.NODE]

    @property
    def opening_stages(self) -> list[Stage]:
        """Window stages listed before the first node stage: done before any node changes."""
        first_node = next((i for i, s in enumerate(self.stages) if s.scope is Scope.NODE), len(self.stages))
        return [s for s in self.stages[:first_node] if s.scope is Scope.WINDOW]

    @property
    def closing_stages(self) -> list[Stage]:
        """Window stages listed after the node stages: done once every wave is through."""
        opening = {s.id for s in self.opening_stages}
        return [s for s in self.window_stages if s.id not in opening]

    def defaults(self) -> dict[str, str | int | float | bool]:
        return {name: p.default for name, p in self.parameters.items() if p.default is not None}


#: The node stages of a driver change, in order. The shipped runbooks use these ids.
NODE_STAGE_IDS: tuple[str, ...] = ("drain", "record", "upgrade", "reboot", "smoke", "expand")
