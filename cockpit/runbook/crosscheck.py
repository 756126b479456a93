"""Checks that span a valid runbook model: unique ids, references, placeholders, gating order."""

from __future__ import annotations

import typing
from collections.abc import Iterator

from cockpit.errors import BadInput
from cockpit.runbook.backends import BACKEND_CONDITION, BackendAction, with_backend
from cockpit.runbook.builtins import CHECKS, TRIGGER_EVALUATORS
from cockpit.runbook.conditions import (
    RECORDED_FACTS,
    RECORDED_PREFIX,
    WhenValue,
    condition_name,
    when_holds,
    when_text,
)
from cockpit.runbook.model import (
    NODE_FACTS,
    AnsibleModuleName,
    Item,
    ParamType,
    Runbook,
    Scope,
    Step,
    StepKind,
    TriggerMode,
    Verify,
    Where,
)
from cockpit.runbook.placeholders import (
    control_character,
    placeholder_names,
    quoting_problems,
    template_problems,
)
from cockpit.runbook.problems import Loc, format_loc, shown_value, type_name
from cockpit.runbook.regexes import pattern_problem

_INT_FIELDS = {"rest": 0, "max_parallel": 1, "failure_budget": 0}


def check_parameter_values(runbook: Runbook, values: typing.Mapping[str, object]) -> None:
    """Refuse ``--param`` values the runbook's own checks would refuse as defaults.

    The values stand in for the defaults and the cross-checks run again (wave sizes,
    ``max_parallel``, the failure budget, timeouts), so a window never starts with a
    setting ``cockpit check`` would call invalid. Raises :class:`BadInput` with the first.
    """
    parameters = {
        name: param.model_copy(update={"default": values[name]}) if name in values else param
        for name, param in runbook.parameters.items()
    }
    problems = cross_check(runbook.model_copy(update={"parameters": parameters}))
    if problems:
        loc, message = problems[0]
        text = message.replace(" defaults to ", " is ")
        raise BadInput(f"--param: {format_loc(loc)}: {text}")


def cross_check(runbook: Runbook) -> list[tuple[Loc, str]]:
    """Problems that span the document, as (key path, message); empty when it holds together."""
    return list(_cross_check(runbook))


def _duplicates(ids: list[str]) -> Iterator[tuple[int, str]]:
    seen: set[str] = set()
    for index, ident in enumerate(ids):
        if ident in seen:
            yield index, ident
        seen.add(ident)


def _int_ref(runbook: Runbook, loc: Loc, value: int | str, minimum: int) -> Iterator[tuple[Loc, str]]:
    if isinstance(value, int):
        if value < minimum:
            yield loc, f"expected an integer >= {minimum}, got {value}"
        return
    param = runbook.parameters.get(value)
    if param is None:
        yield (
            loc,
            f"names parameter {value!r}, which is not defined (expected an integer or the name of an int parameter)",
        )
    elif param.type is not ParamType.INT:
        yield loc, f"names parameter {value!r} of type {param.type}, expected an int parameter"
    elif isinstance(param.default, int) and not isinstance(param.default, bool) and param.default < minimum:
        yield loc, f"parameter {value!r} defaults to {param.default}, expected an integer >= {minimum}"


def _template(runbook: Runbook, loc: Loc, template: str) -> Iterator[tuple[Loc, str]]:
    if not template.strip():
        yield loc, "a blank command: write the command, or leave the key out"
        return
    for problem in template_problems(template) + quoting_problems(template):
        yield loc, problem
    facts = node_facts(runbook)
    known = set(runbook.parameters) | facts
    for name in placeholder_names(template):
        if name not in known:
            yield (
                loc,
                f"placeholder {{{name}}} names no parameter or node fact "
                f"(parameters: {', '.join(sorted(runbook.parameters)) or 'none'}; "
                f"node facts: {', '.join(sorted(facts))})",
            )


def node_facts(runbook: Runbook) -> set[str]:
    """The node facts a template or condition may name: the built-in ones and the runbook's own."""
    return set(NODE_FACTS) | {RECORDED_PREFIX + name for name in runbook.facts}


def _when(runbook: Runbook, loc: Loc, when: dict[str, WhenValue], scope: str) -> Iterator[tuple[Loc, str]]:
    recorded = sorted(f for f in node_facts(runbook) if f.startswith(RECORDED_PREFIX))
    for written, value in when.items():
        key = condition_name(written, runbook.parameters)[0]  # not_NAME checks as NAME
        values = value if isinstance(value, list) else [value]
        where = (*loc, "when", written)
        if isinstance(value, list) and not value:
            yield where, "an empty list matches nothing: list the values that apply"
        param = runbook.parameters.get(key)
        if key == BACKEND_CONDITION:
            listed = [str(b) for b in runbook.backends]
            for one in values:
                if one not in listed:
                    yield (
                        where,
                        f"names backend {one!r}, which this runbook does not list (backends: {', '.join(listed)})",
                    )
        elif param is None and key.startswith(RECORDED_PREFIX):
            if key not in recorded:
                yield where, f"names no recorded fact (recorded facts: {', '.join(recorded)})"
            elif scope == "window":
                yield where, "a window stage has no node to read recorded facts of: use a parameter"
        elif param is None:
            yield (
                where,
                f"names no parameter or recorded fact (parameters: {', '.join(sorted(runbook.parameters)) or 'none'};"
                f" recorded facts: {', '.join(recorded)})",
            )
        elif param.type is ParamType.CHOICE and param.choices:
            for one in values:
                if one not in param.choices:
                    yield where, f"expected one of {', '.join(param.choices)}, got {one!r}"


def _facts(runbook: Runbook) -> Iterator[tuple[Loc, str]]:
    builtin = set(RECORDED_FACTS)
    for name, fact in runbook.facts.items():
        loc: Loc = ("facts", name)
        if name in builtin:
            yield loc, f"{name!r} is a built-in recorded fact (recorded_{name}); pick another name"
        if placeholder_names(fact.command) or template_problems(fact.command):
            yield (*loc, "command"), "a fact's command is run as written: no {placeholders} in it"
        if (bad := control_character(fact.command)) is not None:
            yield (*loc, "command"), f"control character {bad} not allowed in a command"
        if fact.regex is not None:
            problem = pattern_problem(fact.regex)
            if problem is not None:
                yield (*loc, "regex"), problem


def _steps(runbook: Runbook, base: Loc, steps: list[Step], scope: str = "node") -> Iterator[tuple[Loc, str]]:
    for index, ident in _duplicates([s.id for s in steps]):
        yield (*base, "steps", index, "id"), f"duplicate step id {ident!r} in this stage"
    for index, step in enumerate(steps):
        loc = (*base, "steps", index)
        if step.kind is StepKind.COMMAND and not step.run:
            yield loc, 'a command step needs run = "..."'
        yield from _backend_step(loc, step, scope)
        if step.kind in (StepKind.PROBE, StepKind.RECORD) and step.run:
            yield (*loc, "run"), f"a {step.kind} step runs the built-in probe: remove run"
        if step.run:
            yield from _template(runbook, (*loc, "run"), step.run)
        if step.sudo:
            yield from _sudo(loc, step.where, step.kind in (StepKind.COMMAND, StepKind.REBOOT), f"a {step.kind} step")
        yield from _int_ref(runbook, (*loc, "timeout_s"), step.timeout_s, 1)
        yield from _when(runbook, loc, step.when, scope)
        yield from _read_only(loc, step)
        yield from _ansible(runbook, (*loc, "ansible"), step)


def _read_only(loc: Loc, step: Step) -> Iterator[tuple[Loc, str]]:
    """``read_only`` declares a command that changes nothing: never a destructive one, nor a reboot."""
    if not step.read_only:
        return
    if step.kind is not StepKind.COMMAND:
        yield (*loc, "read_only"), f"a {step.kind} step is not a command: read_only applies to command steps"
    elif step.destructive:
        yield (*loc, "read_only"), "a destructive step changes the node: it cannot be read_only"
    elif step.ansible is not None and step.ansible.changed_if is not None:
        yield (*loc, "read_only"), "a read-only step never changes the node: remove ansible.changed_if"


#: the keys each module takes in ``[stages.steps.ansible]`` (besides ``module``)
_ANSIBLE_KEYS: dict[AnsibleModuleName, frozenset[str]] = {
    AnsibleModuleName.APT: frozenset({"packages", "update_cache"}),
    AnsibleModuleName.DNF: frozenset({"packages", "update_cache", "allowerasing"}),
    AnsibleModuleName.SYSTEMD_SERVICE: frozenset({"unit", "state"}),
    AnsibleModuleName.COMMAND: frozenset({"creates", "changed_if"}),
}


def _ansible(runbook: Runbook, loc: Loc, step: Step) -> Iterator[tuple[Loc, str]]:
    """A step's Ansible mapping: a node command step, the keys its module takes, templates that fill."""
    task = step.ansible
    if task is None:
        return
    if step.kind is not StepKind.COMMAND or step.where is not Where.NODE:
        yield loc, f"the Ansible backend runs node command steps: a {step.kind} step on the {step.where} has no module"
        return
    allowed = _ANSIBLE_KEYS[task.module]
    for key in sorted(task.model_fields_set - {"module"} - allowed):
        yield (*loc, key), f"module {task.module} does not take {key} (it takes: {', '.join(sorted(allowed))})"
    if task.module in (AnsibleModuleName.APT, AnsibleModuleName.DNF) and not (task.packages or task.update_cache):
        yield loc, f"module {task.module} needs packages = [...] or update_cache = true"
    if task.module is AnsibleModuleName.SYSTEMD_SERVICE and (task.unit is None or task.state is None):
        yield loc, 'module systemd_service needs unit = "..." and state = "started" | "stopped" | "restarted"'
    for index, package in enumerate(task.packages):
        yield from _template(runbook, (*loc, "packages", index), package)
    if task.unit is not None:
        yield from _template(runbook, (*loc, "unit"), task.unit)
    if task.creates is not None:
        yield from _template(runbook, (*loc, "creates"), task.creates)
    if task.changed_if is not None:
        problem = pattern_problem(task.changed_if)
        if problem is not None:
            yield (*loc, "changed_if"), problem


def _backend_step(loc: Loc, step: Step, scope: str) -> Iterator[tuple[Loc, str]]:
    """A backend step names its action and nothing to run: the engine does the work on a node."""
    actions = " | ".join(f'"{a}"' for a in BackendAction)
    if step.kind is not StepKind.BACKEND:
        if step.action is not None:
            yield (*loc, "action"), f'is used only with kind = "backend" (kind is {step.kind!s})'
        return
    if step.action is None:
        yield loc, f"a backend step needs action = {actions}"
    if step.run:
        yield (*loc, "run"), "a backend step asks the engine to act, it runs no command: remove run"
    if step.where is not Where.NODE:
        yield (*loc, "where"), 'a backend step acts on the node it is run for: remove where (or use "node")'
    if scope != "node":
        yield loc, "a backend step acts on a node: put it in a node stage or in [rollback]"


def _sudo(loc: Loc, where: Where, runs_command: bool, what: str) -> Iterator[tuple[Loc, str]]:
    """``sudo = true`` escalates a command run over SSH; anything else has nothing to escalate."""
    if not runs_command:
        yield (*loc, "sudo"), f"{what} runs no command of its own: sudo applies to commands"
    elif where is Where.LOCAL:
        yield (*loc, "sudo"), "a step on this host runs as the operator: the cockpit adds no sudo there"


#: verify kind -> the item key that names what verifies it, and how a runbook writes that value
_VERIFIED_BY: dict[Verify, tuple[str, str]] = {
    Verify.STEP: ("step", '"<id of a step of this stage>"'),
    Verify.CHECK: ("check", '"<built-in check>"'),
    Verify.COMMAND: ("command", '"..."'),
}


def _verified_by(
    runbook: Runbook, loc: Loc, verify: Verify, value: str, step_ids: set[str]
) -> Iterator[tuple[Loc, str]]:
    """Whether the step, check or command an item is verified by exists (or is a sound template)."""
    if verify is Verify.STEP and value not in step_ids:
        yield loc, f"names no step of this stage (steps: {', '.join(sorted(step_ids)) or 'none'})"
    elif verify is Verify.CHECK and value not in CHECKS:
        yield loc, f"unknown check {value!r} (expected one of: {', '.join(CHECKS)})"
    elif verify is Verify.COMMAND:
        yield from _template(runbook, loc, value)


def _recaps(runbook: Runbook, loc: Loc, item: Item) -> Iterator[tuple[Loc, str]]:
    """``recaps`` goes with check = "recorded" (and it with them), each naming a stage and item."""
    recorded = item.verify is Verify.CHECK and item.check == "recorded"
    if item.recaps and not recorded:
        yield (*loc, "recaps"), 'is used only with verify = "check", check = "recorded"'
    elif recorded and not item.recaps:
        yield loc, 'check = "recorded" needs recaps = ["stage/item", ...]: the earlier records it reads'
    stages = {s.id: {i.id for i in s.items} for s in runbook.stages}
    for index, ref in enumerate(item.recaps):
        sid, _, iid = ref.partition("/")
        if sid not in stages:
            yield (*loc, "recaps", index), f"names no stage {sid!r}"
        elif iid and iid not in stages[sid]:
            yield (*loc, "recaps", index), f"names no item {iid!r} of stage {sid!r}"


def _items(
    runbook: Runbook, base: Loc, items: list[Item], step_ids: set[str], scope: str = "node"
) -> Iterator[tuple[Loc, str]]:
    for index, ident in _duplicates([i.id for i in items]):
        yield (*base, "items", index, "id"), f"duplicate item id {ident!r} in this stage"
    for index, item in enumerate(items):
        loc = (*base, "items", index)
        for verify, (key, written) in _VERIFIED_BY.items():
            value = getattr(item, key)
            if item.verify is verify:
                if not value:
                    yield loc, f'verify = "{verify}" needs {key} = {written}'
                else:
                    yield from _verified_by(runbook, (*loc, key), verify, value, step_ids)
            elif value:
                yield (*loc, key), f'is used only with verify = "{verify}" (verify is {item.verify!s})'
        yield from _recaps(runbook, loc, item)
        if item.verify is not Verify.COMMAND and item.expect is not None:
            yield (*loc, "expect"), f'is used only with verify = "command" (verify is {item.verify!s})'
        if item.scope != "node" and (item.verify is not Verify.MANUAL or scope != "node"):
            yield (
                (*loc, "scope"),
                "is used only on a manual item of a node stage (one tick covering a wave or the window)",
            )
        if item.timeout_s is not None:
            if item.verify is not Verify.COMMAND:
                yield (*loc, "timeout_s"), f'is used only with verify = "command" (verify is {item.verify!s})'
            else:
                yield from _int_ref(runbook, (*loc, "timeout_s"), item.timeout_s, 1)
        if item.sudo:
            yield from _sudo(loc, item.where, item.verify is Verify.COMMAND, f'an item verified by "{item.verify}"')
        if item.expect is not None and item.expect.stdout_matches is not None:
            problem = pattern_problem(item.expect.stdout_matches)
            if problem is not None:
                yield (*loc, "expect", "stdout_matches"), problem
        yield from _when(runbook, loc, item.when, scope)


def _parameters(runbook: Runbook) -> Iterator[tuple[Loc, str]]:
    for name, param in runbook.parameters.items():
        loc: Loc = ("parameters", name)
        if param.type is ParamType.CHOICE and not param.choices:
            yield loc, 'type = "choice" needs choices = [...]'
        if param.type is not ParamType.CHOICE and param.choices is not None:
            yield (*loc, "choices"), f'choices are used only with type = "choice" (type is {param.type!s})'
        if name in node_facts(runbook):
            yield loc, f"{name!r} is a node fact; a parameter cannot take its name"
        if name == BACKEND_CONDITION:
            yield loc, "'backend' names the engine chosen with --backend; a parameter cannot take its name"
        if param.secret and param.default is not None:
            yield (*loc, "default"), "a secret parameter has no default: the runbook file is no place for a secret"
        default = param.default
        if default is None:
            continue
        expected = {
            ParamType.STR: (str,),
            ParamType.CHOICE: (str,),
            ParamType.INT: (int,),
            ParamType.FLOAT: (int, float),
            ParamType.BOOL: (bool,),
        }[param.type]
        if (isinstance(default, bool) and param.type is not ParamType.BOOL) or not isinstance(default, expected):
            yield (
                (*loc, "default"),
                f"expected a default of type {param.type!s}, got {type_name(default)} {shown_value(default)}",
            )
        elif param.type is ParamType.CHOICE and param.choices and default not in param.choices:
            yield (*loc, "default"), f"expected one of {', '.join(param.choices)}, got {default!r}"
        elif isinstance(default, str) and (bad := control_character(default)) is not None:
            yield (*loc, "default"), f"control character {bad} not allowed in a value"


def _two_person_gates(runbook: Runbook) -> Iterator[tuple[Loc, str]]:
    """Each ``[trust] two_person_gates`` entry names a stage with a sign-off item (else its
    gate could never open: no override passes it, and nothing else needs a second person)."""
    gates = runbook.trust.two_person_gates if runbook.trust is not None else []
    stages = {s.id: s for s in runbook.stages}
    for index, ident in enumerate(gates):
        stage = stages.get(ident)
        if stage is None:
            yield ("trust", "two_person_gates", index), f"no stage {ident!r} (expected one of: {', '.join(stages)})"
        elif not any(i.verify is Verify.SIGNOFF for i in stage.items):
            yield (
                ("trust", "two_person_gates", index),
                f'stage {ident!r} has no sign-off item (verify = "signoff"): a second person could never open it',
            )


def _cross_check(runbook: Runbook) -> Iterator[tuple[Loc, str]]:
    for index, name in _duplicates([str(b) for b in runbook.backends]):
        yield ("backends", index), f"backend {name!r} is listed twice"
    yield from _parameters(runbook)
    yield from _facts(runbook)

    waves = runbook.waves
    for field, minimum in _INT_FIELDS.items():
        value = getattr(waves, field)
        if field == "rest" and isinstance(value, str):
            minimum = 1  # a parameter that sizes the later waves must size them
        yield from _int_ref(runbook, ("waves", field), value, minimum)

    for index, ident in _duplicates([t.id for t in runbook.triggers]):
        yield ("triggers", index, "id"), f"duplicate trigger id {ident!r}"
    for index, trigger in enumerate(runbook.triggers):
        loc: Loc = ("triggers", index)
        if trigger.mode is TriggerMode.AUTO:
            if not trigger.evaluator:
                yield loc, 'an auto trigger needs evaluator = "<built-in evaluator>"'
            elif trigger.evaluator not in TRIGGER_EVALUATORS:
                yield (
                    (*loc, "evaluator"),
                    f"unknown evaluator {trigger.evaluator!r} (expected one of: {', '.join(TRIGGER_EVALUATORS)})",
                )
        elif trigger.evaluator is not None:
            yield (*loc, "evaluator"), "a manual trigger is raised by a person: remove evaluator"

    for index, ident in _duplicates([s.id for s in runbook.stages]):
        yield ("stages", index, "id"), f"duplicate stage id {ident!r}"
    yield from _two_person_gates(runbook)

    first_destructive: int | None = None
    armed_at: int | None = None
    node_positions = [i for i, s in enumerate(runbook.stages) if s.scope is Scope.NODE]
    for index, stage in enumerate(runbook.stages):
        loc = ("stages", index)
        yield from _steps(runbook, loc, stage.steps, str(stage.scope))
        yield from _items(runbook, loc, stage.items, {s.id for s in stage.steps}, str(stage.scope))
        for step_index, step in enumerate(stage.steps):
            if step.destructive:
                if stage.scope is not Scope.NODE:
                    yield (
                        (*loc, "steps", step_index, "destructive"),
                        "a destructive step belongs in a node stage or in [rollback]",
                    )
                if first_destructive is None:
                    first_destructive = index
        if stage.arms_triggers:
            if stage.scope is not Scope.WINDOW:
                yield (*loc, "arms_triggers"), "triggers are armed once per window: set it on a window stage"
            elif armed_at is None:
                armed_at = index

    if not node_positions:
        yield (
            ("stages",),
            'expected at least one stage with scope = "node" (drain, record, upgrade, reboot, smoke, expand)',
        )
    elif node_positions != list(range(node_positions[0], node_positions[-1] + 1)):
        gap = next(i for i in range(node_positions[0], node_positions[-1]) if i not in node_positions)
        yield ("stages", gap, "scope"), "node stages must be consecutive: window stages go before or after them"
    if first_destructive is not None:
        if armed_at is None or armed_at > first_destructive:
            yield (
                ("stages", first_destructive),
                "destructive step before the triggers are armed: "
                "add arms_triggers = true to a window stage listed before this one",
            )
        if not runbook.triggers:
            yield (
                ("stages", first_destructive),
                "destructive steps need rollback triggers written down: add [[triggers]]",
            )

    if runbook.rollback is not None:
        base: Loc = ("rollback",)
        yield from _steps(runbook, base, runbook.rollback.steps)
        yield from _items(runbook, base, runbook.rollback.items, {s.id for s in runbook.rollback.steps})


def backend_problems(
    runbook: Runbook, backend: str, performs: typing.Collection[str], params: typing.Mapping[str, object] | None = None
) -> list[str]:
    """Why ``runbook`` cannot run through ``backend``, which performs the actions ``performs``:
    one line each, empty when it can. A step whose ``when`` rules this backend out (or a
    parameter's value does, ``params`` standing in for the defaults) is never asked."""
    listed = [str(b) for b in runbook.backends]
    if backend not in listed:
        return [f"runbook {runbook.id} is not written for backend {backend} (it lists: {', '.join(listed)})"]
    values = with_backend({**runbook.defaults(), **(params or {})}, backend)
    stages = [(stage.id, stage.steps) for stage in runbook.stages]
    if runbook.rollback is not None:
        stages.append(("rollback", runbook.rollback.steps))
    can = ", ".join(sorted(str(a) for a in performs)) or "nothing"
    problems = []
    for stage_id, steps in stages:
        for step in steps:
            if step.kind is not StepKind.BACKEND or step.action is None or step.action in performs:
                continue
            if when_holds(step.when, values) is False:
                continue
            condition = f" (it runs when {when_text(step.when)})" if step.when else ""
            asks = f"step {stage_id}/{step.id} asks backend {backend} to {step.action}{condition}"
            problems.append(f"{asks}; {backend} performs: {can}")
    return problems
