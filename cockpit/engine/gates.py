"""Exit gates and waves: what keeps a stage's gate or the next wave shut, in words."""

from __future__ import annotations

from cockpit.engine.state import (
    FINISHED,
    ROLLBACK_FAILED,
    ROLLED_BACK,
    ROLLING_BACK,
    CockpitState,
    StageState,
)
from cockpit.runbook.model import Runbook, Verify


def gate_blockers(stage: StageState) -> list[str]:
    """Why the stage's exit gate is shut, one phrase per blocker; empty when it is open."""
    out: list[str] = []
    for item in stage.items.values():
        if item.status in ("done", "skipped"):
            continue
        if item.verify == Verify.MANUAL:
            out.append(f"item {item.id!r} not ticked" + (" (a note is required)" if item.note_required else ""))
        elif item.verify == Verify.SIGNOFF:
            who = f" ({', '.join(item.signers)} cannot sign their own gate)" if item.signers else ""
            out.append(f"item {item.id!r} needs sign-off by a second person{who}")
        elif item.verify == Verify.STEP:
            step = stage.steps.get(item.step or "")
            if step is None:
                out.append(f"item {item.id!r}: step {item.step!r} missing")
            elif step.status == "failed":
                out.append(f"step {step.id!r} failed ({step.failure()})")
            elif step.status == "running":
                out.append(f"step {step.id!r} still running")
            else:
                out.append(f"step {step.id!r} not run")
        else:
            what = "check" if item.verify == Verify.CHECK else "command"
            if item.status == "failed":
                out.append(f"item {item.id!r} {what} failed" + (f": {item.evidence}" if item.evidence else ""))
            else:
                out.append(f"item {item.id!r} not verified")
    for step in stage.steps.values():
        if step.status == "running" and not any(i.step == step.id for i in stage.items.values()):
            out.append(f"step {step.id!r} still running")
    return out


def gate_open(stage: StageState) -> bool:
    return not gate_blockers(stage)


def wave_through(state: CockpitState, wave: int) -> bool:
    """Every node of ``wave`` passed smoke and expand, or was rolled back within the budget."""
    members = state.waves[wave]
    rolled = sum(1 for n in members if state.nodes[n].current in (ROLLED_BACK, ROLLBACK_FAILED))
    return all(state.nodes[n].current in FINISHED for n in members) and rolled <= state.failure_budget


def wave_blockers(state: CockpitState, wave: int) -> list[str]:
    members = state.waves[wave]
    out = [f"{n} at {state.nodes[n].current!r}" for n in members if state.nodes[n].current not in FINISHED]
    rolled = [n for n in members if state.nodes[n].current == ROLLED_BACK]
    failed = [n for n in members if state.nodes[n].current == ROLLBACK_FAILED]
    if len(rolled) + len(failed) > state.failure_budget:
        counts = [f"{len(rolled)} rolled back ({', '.join(rolled)})"] if rolled else []
        counts += [f"{len(failed)} rollback FAILED ({', '.join(failed)})"] if failed else []
        out.append(f"{', '.join(counts)}, failure budget {state.failure_budget}")
    return out


def _destructive_span(runbook: Runbook) -> tuple[int, int] | None:
    """Index of the first and last node stage holding a destructive step."""
    idx = [i for i, s in enumerate(runbook.node_stages) if any(p.destructive for p in s.steps)]
    return (idx[0], idx[-1]) if idx else None


def holds_destructive_slot(state: CockpitState, runbook: Runbook, node: str) -> bool:
    """Whether the node is inside its destructive stages: from its first destructive step
    until it reaches a stage past the last destructive one (a rollback holds it too).

    A node that was changed is not released until the stages after the change (the
    reboot, say) are behind it, so ``max_parallel`` bounds the nodes at risk at once.
    """
    progress = state.nodes[node]
    if progress.current == ROLLING_BACK:
        return True
    if not progress.destructive_started or progress.current not in state.node_stage_order:
        return False
    span = _destructive_span(runbook)
    return span is not None and state.node_stage_order.index(progress.current) <= span[1]
