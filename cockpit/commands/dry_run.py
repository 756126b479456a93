"""`cockpit run --dry-run` (not a subcommand of its own): every command the window would run,
per node and stage, with its placeholders filled, and the gate items each stage needs.

Nothing is executed on any node but the read-only probe (the same one the cockpit runs every
refresh); its facts stand in for the baseline the window would record, so ``{recorded_*}``
placeholders show real values. No change log is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.fleet.backends.ansible import AnsibleBackend
    from cockpit.fleet.backends.base import Backend, BackendAction, Observation, ReleaseResult
    from cockpit.fleet.executor import Executor
    from cockpit.fleet.targets import HostTarget
    from cockpit.fleet.transport import Transport
    from cockpit.gpu.nodestate import NodeState
    from cockpit.runbook.loader import LoadedRunbook
    from cockpit.runbook.model import Item, Stage, Step
    from cockpit.runbook.placeholders import ParamValue


async def dry_run(
    change_id: str,
    loaded: LoadedRunbook,
    params: Mapping[str, ParamValue],
    targets: Sequence[HostTarget],
    operator: str,
    transport: Transport,
    backend: Backend | None = None,
) -> int:
    """Probe the nodes read-only over ``transport`` (closed here) and print the plan;
    0 when every node answered, else 1. ``backend``: the engine the window would go through
    (its steps are shown as what it is asked; nothing is asked of it)."""
    from cockpit.engine.fold import Folder
    from cockpit.fleet.executor import Executor
    from cockpit.fleet.probes import fact_probes, probe_fleet
    from cockpit.runbook.backends import with_backend
    from cockpit.session.recording import masked
    from cockpit.view.inert import inert

    runbook = loaded.runbook
    hosts = [t.name for t in targets]
    merged = with_backend({**runbook.defaults(), **params}, backend.name if backend is not None else None)
    waves = Folder(runbook, merged, hosts, operator=operator).state.waves  # validates the fleet as run does
    async with transport:
        # with the platform sections and the runbook's own facts: what the record step would keep
        states = await probe_fleet(transport, hosts, platform=True, facts=fact_probes(runbook))
        executor = Executor(transport, merged, facts={"change_id": change_id, "operator": operator}, backend=backend)
        # the commands are filled with a secret parameter's value: shown as ***
        secrets = [str(v) for k, v in merged.items() if k in runbook.parameters and runbook.parameters[k].secret]
        print(inert(masked(plan_text(loaded, merged, waves, states, executor), secrets), newlines=True), end="")
        checked = True
        from cockpit.fleet.backends.ansible import AnsibleBackend

        if isinstance(backend, AnsibleBackend):  # Ansible's check mode rehearses its steps on the nodes
            lines, checked = await check_mode_lines(loaded, merged, waves, states, executor, backend)
            print(inert(masked("\n".join(lines) + "\n", secrets), newlines=True), end="")
    return 0 if all(s.reachable for s in states.values()) and checked else 1


async def check_mode_lines(
    loaded: LoadedRunbook,
    params: Mapping[str, object],
    waves: Sequence[Sequence[str]],
    states: Mapping[str, NodeState],
    executor: Executor,
    backend: AnsibleBackend,
) -> tuple[list[str], bool]:
    """The Ansible backend in check mode (``--check``) rehearses each node stage's backend
    step on every reachable node the step would run on: its modules predict what they would
    change, read-only commands run, changing commands are skipped, and the nodes stay as they
    were. The lines say what each task would do; False when a node's rehearsal failed."""
    import asyncio

    from cockpit.fleet.backends.ansible_play import CHECK_MODE_SKIP
    from cockpit.runbook.conditions import when_holds
    from cockpit.runbook.model import StepKind

    backend.check = True
    if backend.runbook is None and not backend.playbooks:  # as a window's session hands it the runbook
        backend.use_runbook(loaded.runbook)
    out = ["", f"{backend.name} check mode (--check): the engine's steps rehearsed on the nodes, nothing changed there"]
    nodes = [n for wave in waves for n in wave if states.get(n) is not None and states[n].reachable]
    ok = True
    for stage in loaded.runbook.node_stages:
        for step in stage.steps:
            action = executor.backend_action(step)
            if step.kind is not StepKind.BACKEND or action is None or action not in backend.actions:
                continue
            running = [n for n in nodes if when_holds(step.when, params, _recorded(states[n]) or None) is True]
            if not running:
                continue
            rehearsed = await asyncio.gather(
                *(_rehearse(backend, executor, states[n], n, step, action) for n in running)
            )
            for result, seen in rehearsed:
                ok &= result.ok
                # a command that did not run leaves its effect out of every prediction after it: say so
                held_back = sum(1 for o in seen if CHECK_MODE_SKIP in _words(o))
                caveat = f"; {held_back} changing command(s) did not run, later tasks predict without them"
                caveat = caveat if held_back else ""
                out.append(f"  {result.node}: stage {stage.id}, step {step.id} ({action}): {_verdict(result)}{caveat}")
                out += [f"    {line}" for line in _task_lines(seen)]
    return out, ok


async def _rehearse(
    backend: Backend, executor: Executor, state: NodeState, node: str, step: Step, action: BackendAction
) -> tuple[ReleaseResult, list[Observation]]:
    """One node's release of ``step`` in check mode, with the node's context as the window would give it."""
    from cockpit.fleet.backends.base import BackendError, ReleaseRequest

    seen: list[Observation] = []
    context = {k: str(v) for k, v in executor.values(node, _recorded(state)).items()}
    reason = f"{executor.change_reason(step)} (check mode)"
    request = ReleaseRequest(action, (node,), reason=reason, timeout_s=3600.0, context=context)
    try:
        (result,) = await backend.release(request, seen.append)
    except BackendError as exc:
        return request.refused(str(exc))[0], seen
    return result, seen


def _words(observation: Observation) -> tuple[str, ...]:
    """What Ansible said of a task: why it skipped it, its module's message."""
    evidence = observation.evidence or {}
    return (evidence.get("skipped", ""), evidence.get("msg", ""))


def _verdict(result: ReleaseResult) -> str:
    evidence = (result.final.evidence if result.final is not None else None) or {}
    if not result.ok:
        return f"FAILED: {result.error}"
    return f"would change {evidence.get('changed', '?')} of {evidence.get('ok', '?')} tasks; nothing changed"


def _task_lines(seen: Sequence[Observation]) -> list[str]:
    """One line per task the rehearsal heard: would change, unchanged, skipped (why), failed."""
    lines = []
    for o in seen:
        evidence = o.evidence or {}
        task = evidence.get("task")
        if task is None or not o.native_state.startswith("runner_on_"):
            continue
        if "skipped" in evidence:
            words = f"skipped: {evidence['skipped']}"
        elif o.native_state.startswith("runner_on_ok"):
            words = "would change" if evidence.get("changed") == "true" else "unchanged"
            words += f" ({evidence['msg']})" if "msg" in evidence else ""
        else:
            words = (
                f"failed{' (ignored in check mode)' if evidence.get('ignored') else ''}: {o.reason or o.native_state}"
            )
        lines.append(f"{task}: {words}")
    return lines


def plan_text(
    loaded: LoadedRunbook,
    params: Mapping[str, object],
    waves: Sequence[Sequence[str]],
    states: Mapping[str, NodeState],
    executor: Executor,
) -> str:
    """The whole dry run as text: window stages, then each node in wave order, then the closing stages."""
    from cockpit.changelog.events import wave_number
    from cockpit.gpu.nodestate import show
    from cockpit.runbook.model import Scope

    runbook = loaded.runbook
    canary = waves[0][0] if waves and waves[0] else None
    out = [
        f"dry run of runbook {runbook.id} ({loaded.sha256[:12]}): {sum(map(len, waves))} nodes in {len(waves)} waves; "
        "nothing was run but a read-only probe"
        + (" and Ansible's check mode (below)" if _rehearses(executor) else "")
        + ", no change log written",
        "",
        "nodes now:",
    ]
    for node, state in states.items():
        if state.reachable:
            out.append(
                f"  {node}: driver {show(state.driver_version)}, package {show(state.driver_package)}, "
                f"{state.gpu_count} GPUs, boot id {show(state.boot_id)}, health {state.health}"
            )
        else:
            out.append(f"  {node}: UNREACHABLE: {state.error or state.health_evidence}")
    node_stages = [s for s in runbook.stages if s.scope is Scope.NODE]
    first_node_stage = runbook.stages.index(node_stages[0]) if node_stages else len(runbook.stages)
    opening = [s for s in runbook.stages[:first_node_stage] if s.scope is Scope.WINDOW]
    closing = [s for s in runbook.stages[first_node_stage:] if s.scope is Scope.WINDOW]
    for stage in opening:
        out += _stage_lines(stage, f"window stage {stage.id}", canary, params, states, executor)
    for index, members in enumerate(waves):
        out += ["", f"wave {wave_number(index)}: {', '.join(members)}"]
        for node in members:
            for stage in node_stages:
                out += _stage_lines(stage, f"{node}: stage {stage.id}", node, params, states, executor)
            if runbook.rollback is not None:
                out += _lines_for(
                    f"{node}: rollback (only if it is started)",
                    runbook.rollback.steps,
                    runbook.rollback.items,
                    node,
                    params,
                    states,
                    executor,
                )
    for stage in closing:
        out += _stage_lines(stage, f"window stage {stage.id}", canary, params, states, executor)
    return "\n".join(out) + "\n"


def _rehearses(executor: Executor) -> bool:
    """Whether the dry run goes on to rehearse the engine's steps (Ansible's check mode)."""
    from cockpit.fleet.backends.ansible import AnsibleBackend

    return isinstance(executor.backend, AnsibleBackend)


def _stage_lines(
    stage: Stage,
    title: str,
    node: str | None,
    params: Mapping[str, object],
    states: Mapping[str, NodeState],
    executor: Executor,
) -> list[str]:
    return _lines_for(f"{title}: {stage.title}", stage.steps, stage.items, node, params, states, executor)


def _lines_for(
    title: str,
    steps: Sequence[Step],
    items: Sequence[Item],
    node: str | None,
    params: Mapping[str, object],
    states: Mapping[str, NodeState],
    executor: Executor,
) -> list[str]:
    from cockpit.fleet.privilege import escalate
    from cockpit.runbook.conditions import when_holds, when_text
    from cockpit.runbook.model import StepKind

    recorded = _recorded(states.get(node) if node else None)
    values = executor.values(node, recorded)
    facts = recorded or None
    out = ["", title]
    for step in steps:
        where = _where(step.where, node, params)
        flags = " [destructive: asks for confirmation]" if step.destructive else ""
        engine = executor.backend_action(step) is not None
        escalated = not engine and _escalated(executor, step, node, params, values)
        flags += " [as root: sudo -n]" if escalated else ""
        head = f"  step {step.id} on {where}{flags}"
        holds = when_holds(step.when, params, facts)
        if holds is False:
            out.append(f"{head}: skipped (runs only when {when_text(step.when)})")
        elif holds is None:
            out.append(f"{head}: decided once the baseline is recorded (runs only when {when_text(step.when)})")
        elif engine:
            reason = executor.change_reason(step)
            out.append(f"{head}: asks {executor.release_preview(step, node)} (the engine does it, reason {reason!r})")
        elif step.kind is StepKind.PROBE:
            out.append(f"{head}: the read-only probe")
        elif step.kind is StepKind.RECORD:
            out.append(f"{head}: the read-only probe, recorded as the node's baseline")
        elif step.kind is StepKind.REBOOT and not step.run:
            out.append(f"{head}: reboot, then wait for a new boot id")
        else:
            command = _filled(step.run or "", values)
            out.append(f"{head}: {escalate(command) if escalated and '(cannot fill' not in command else command}")
    needed = [i for i in items if when_holds(i.when, params, facts) is not False]
    out.append("  gate needs:" if needed else "  gate needs: nothing")
    out += [f"    {item.id}: {_item_words(item, node, params, values, executor)}: {item.text}" for item in needed]
    return out


def _escalated(
    executor: Executor, spec: Step | Item, node: str | None, params: Mapping[str, object], values: Mapping[str, object]
) -> bool:
    """Whether the step or item would run under sudo -n there (its values carry the node's recorded uid)."""
    from cockpit.runbook.model import Where

    target = node if spec.where is Where.NODE else str(params.get("control_host") or "")
    return bool(target) and executor.escalates(spec, target or "", values)


def _item_words(
    item: Item, node: str | None, params: Mapping[str, object], values: Mapping[str, ParamValue], executor: Executor
) -> str:
    from cockpit.runbook.model import Verify

    if item.verify is Verify.MANUAL:
        return "ticked by the operator" + (" with a note" if item.note_required else "")
    if item.verify is Verify.STEP:
        return f"holds when step {item.step} succeeds"
    if item.verify is Verify.CHECK:
        return f"built-in check {item.check}"
    if item.verify is Verify.COMMAND:
        sudo = " as root (sudo -n)" if _escalated(executor, item, node, params, values) else ""
        return f"command on {_where(item.where, node, params)}{sudo}: {_filled(item.command or '', values)}"
    return "signed off by a second person"


def _where(where: object, node: str | None, params: Mapping[str, object]) -> str:
    from cockpit.runbook.model import Where

    if where is Where.LOCAL:
        return "this host"
    if where is Where.CONTROL:
        return f"control host {params.get('control_host') or '(control_host not set)'}"
    return node or "(no node)"


def _filled(template: str, values: Mapping[str, ParamValue]) -> str:
    from cockpit.errors import BadInput
    from cockpit.runbook.placeholders import fill

    try:
        return fill(template, values)
    except BadInput as exc:
        return f"{template}  (cannot fill: {exc})"


def _recorded(state: NodeState | None) -> dict[str, object]:
    """The facts a ``record`` step would keep, from the probe, for ``{recorded_*}`` placeholders
    and ``when`` conditions (the same baseline the record step writes)."""
    from cockpit.fleet.probes import baseline_of
    from cockpit.runbook.conditions import recorded_facts

    if state is None or not state.reachable:
        return {}
    return recorded_facts(baseline_of(state))
