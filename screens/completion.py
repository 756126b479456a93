"""Completing an action before the session gets it: the operator's words and confirmations.

A key builds a typed :data:`~cockpit.engine.actions.Action` with the words a person
writes left empty (a reason, a note, a path, a trigger to pick). :class:`ActionDialogs`
asks for them in modal dialogs, shows a destructive step's exact command and wants
the target typed, and hands back the completed action. It decides nothing: the
session's gate judges what comes out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.screen import Screen

from cockpit.changelog.events import RollbackFinishedEvent
from cockpit.engine.actions import (
    Action,
    ChoosePath,
    ClearTrigger,
    Note,
    Override,
    RaiseTrigger,
    RecordDecision,
    RunStage,
    RunStep,
    StartRollback,
    TickItem,
    describe,
    is_destructive,
)
from cockpit.engine.gates import gate_blockers
from cockpit.engine.planner import OUTCOME_ROLLBACK
from cockpit.engine.rules import note_problem
from cockpit.engine.stagerun import StageRunResult, destructive_left, stage_of
from cockpit.engine.state import ROLLBACK_STAGE, ItemState, StageState
from cockpit.runbook.model import Runbook, TriggerMode
from cockpit.runbook.service import changes_service as step_changes_service
from screens.modals import KEY_SETTLE_S, ConfirmDestructive, Dialog, FormPrompt, PickPrompt, TextPrompt

if TYPE_CHECKING:
    from cockpit.session.operator import Session


class Cancelled(Exception):
    """The operator closed a dialog: nothing was asked of the session."""


class ActionDialogs:
    """Asks the operator, over ``host`` (the main screen), for what an action still needs.

    Every field starts empty (the demo's autopilot writes its own notes; a person's
    dialog is never pre-filled), a required note is held to the gate's rule
    (:func:`cockpit.engine.rules.note_problem`), and a choice the runbook lists is picked,
    never typed."""

    def __init__(self, host: Screen[Any], session: Session) -> None:
        self.host = host
        self.session = session

    async def ask(self, screen: Screen[Any]) -> Any:
        if isinstance(screen, Dialog):  # the key that opened it must not land in its first field
            screen.settle_s = KEY_SETTLE_S
        answer = await self.host.app.push_screen_wait(screen)
        if answer is None:
            raise Cancelled
        return answer

    async def complete(self, action: Action) -> tuple[Action, str | None]:
        """The action with the operator's words, and the typed confirmation of a destructive step."""
        match action:
            case RunStep() if is_destructive(self.session.runbook, action):
                return action, await self._confirm(action)
            case RunStep() if changes_service(self.session.runbook, action):
                return action, await self._confirm(action, service=True)
            case RunStage():
                return action, await self._confirm_stage(action)
            case TickItem():
                return await self._tick(action), None
            case Override():
                return await self._override(action), None
            case StartRollback():
                return await self._rollback(action), None
            case RaiseTrigger():
                return await self._raise(action), None
            case ClearTrigger():
                return await self._clear(action), None
            case Note():
                title = "Add a note to the change log" + (f" ({action.node})" if action.node else "")
                text = await self.ask(TextPrompt(title=title, label="Note"))
                return action.model_copy(update={"text": text}), None
            case ChoosePath():
                return await self._path(action), None
            case RecordDecision():
                return await self._decision(action), None
        return action, None

    async def _confirm(self, action: RunStep, *, service: bool = False) -> str:
        expected = action.node if action.node is not None else action.stage
        target, command = self.session.preview_step(action.stage, action.step, action.node)
        if action.node is not None and target != action.node:  # kubectl on the control host, about the node
            target = f"{target}, acting on {action.node}"
        typed: str = await self.ask(
            ConfirmDestructive(
                title=describe(action),
                target=target,
                command=command,
                expected=expected,
                warning=(
                    f"This takes {action.node} out of service or returns it (work is moved or lands on it)."
                    if service
                    else "This changes the node."
                )
                + " The change log records who confirmed it.",
                kind="Service change" if service else "Destructive step",
            )
        )
        return typed

    async def _confirm_stage(self, action: RunStage) -> str | None:
        """A stage run with a destructive step or a service change left: its steps' commands
        shown, the node's name typed once for all of them; else nothing to ask."""
        state = self.session.state
        stage = stage_of(state, action.stage, action.node)
        if stage is None:
            return None
        left = [s.id for s in stage.steps.values() if s.status in ("open", "failed")]
        destructive = destructive_left(state, action.stage, action.node)
        service = [s for s in left if step_changes_service(self.session.runbook, action.stage, s, action.node)]
        if not destructive and not service:
            return None
        commands = [f"{s}: {self.session.preview_step(action.stage, s, action.node)[1]}" for s in left]
        expected = action.node if action.node is not None else action.stage
        typed: str = await self.ask(
            ConfirmDestructive(
                title=describe(action),
                target=expected,
                command="; ".join(commands),
                expected=expected,
                warning=(
                    f"Runs {len(left)} step(s) of {action.stage} one after another, "
                    + (f"destructive: {', '.join(destructive)}; " if destructive else "")
                    + (f"taking the node out of service or returning it: {', '.join(service)}; " if service else "")
                    + "it stops at the gate, at a failure or at what needs you. The change log records who confirmed."
                ),
                kind="Destructive stage" if destructive else "Service change",
            )
        )
        return typed

    async def _rollback(self, action: StartRollback) -> StartRollback:
        evidence = [
            f"trigger {t.id} fired on {action.node}: {t.fired_nodes.get(action.node) or t.evidence}"
            for t in self.session.state.fired()
            if action.node in t.fired_nodes or t.node == action.node
        ]
        reason = await self.ask(
            TextPrompt(
                title=f"Roll back {action.node}",
                label="Reason (required)",
                explanation="\n".join(
                    [*evidence, f"Restores {action.node}'s recorded driver package, reboots and smoke-tests it."]
                ),
            )
        )
        return action.model_copy(update={"reason": reason})

    async def _tick(self, action: TickItem) -> TickItem:
        item = self.item_state(action.stage, action.node, action.item)
        required = bool(item and item.note_required)
        note = await self.ask(
            TextPrompt(
                title=f"Tick {action.stage}/{action.item}",
                label="Note (what you checked)" + (" (required)" if required else ""),
                explanation=item.text if item else "",
                required=required,
                check=(lambda note: note_problem(note, echo=item.text if item else "")) if required else None,
            )
        )
        return action.model_copy(update={"note": note or None})

    async def _override(self, action: Override) -> Override:
        stage = self.stage_of(action.stage, action.node)
        blockers = gate_blockers(stage) if stage is not None else []
        reason = await self.ask(
            TextPrompt(
                title=f"OVERRIDE the {action.stage} gate",
                label="Reason (required; recorded and shown in red)",
                danger=True,
                explanation="Bypasses: " + "; ".join(blockers),
                check=note_problem,
            )
        )
        return action.model_copy(update={"reason": reason})

    async def _raise(self, action: RaiseTrigger) -> RaiseTrigger:
        trigger = action.trigger
        if not trigger:
            manual = [
                (t.id, f"{t.id}: {t.title}") for t in self.session.runbook.triggers if t.mode is TriggerMode.MANUAL
            ]
            trigger = await self.ask(PickPrompt(title="Raise which trigger?", choices=manual))
        note = await self.ask(
            TextPrompt(
                title=f"Raise {trigger}" + (f" on {action.node}" if action.node else ""),
                label="What was seen (required)",
            )
        )
        return action.model_copy(update={"trigger": trigger, "note": note})

    async def _clear(self, action: ClearTrigger) -> ClearTrigger:
        trigger = action.trigger
        if not trigger:
            fired = [(t.id, f"{t.id}: {t.evidence}") for t in self.session.state.fired()]
            trigger = (
                fired[0][0]
                if len(fired) == 1
                else await self.ask(PickPrompt(title="Clear which trigger?", choices=fired))
            )
        reason = await self.ask(
            TextPrompt(title=f"Clear trigger {trigger}", label="Reason (required)", danger=True, check=note_problem)
        )
        return action.model_copy(update={"trigger": trigger, "reason": reason})

    async def _path(self, action: ChoosePath) -> ChoosePath:
        values = await self.ask(
            FormPrompt(
                title="Choose the recovery path",
                fields=[
                    ("path", "Path", action.path),
                    ("rationale", "Rationale", action.rationale),
                    ("owner", "Owner", action.owner),
                ],
            )
        )
        return action.model_copy(
            update={"path": values["path"], "rationale": values["rationale"], "owner": values["owner"]}
        )

    async def _decision(self, action: RecordDecision) -> RecordDecision:
        outcomes = self.session.runbook.decision_outcomes
        # picked from the runbook's list (the gate refuses any other), the suggested one first
        order = sorted(outcomes, key=lambda o: o != action.outcome)
        outcome: str = await self.ask(
            PickPrompt(
                title="Record the decision: which outcome?",
                choices=[(o, o + (" (halts the rollout)" if o == OUTCOME_ROLLBACK else "")) for o in order],
                explanation="Suggested first: a rollback trigger fired." if action.outcome == OUTCOME_ROLLBACK else "",
            )
        )
        why = await self.ask(TextPrompt(title=f"Decision: {outcome}", label="Why (required)", check=note_problem))
        return action.model_copy(
            update={"outcome": outcome, "answers": (("why", why),), "halt_rollout": outcome == OUTCOME_ROLLBACK}
        )

    def stage_of(self, stage: str, node: str | None) -> StageState | None:
        """The folded state of the stage an action names (a window stage, a node's, or its rollback)."""
        state = self.session.state
        if stage in state.window:
            return state.window[stage]
        progress = state.nodes.get(node or "")
        if progress is None:
            return None
        if stage == ROLLBACK_STAGE:
            return progress.rollback
        return progress.stages.get(stage)

    def item_state(self, stage: str, node: str | None, item: str) -> ItemState | None:
        stage_state = self.stage_of(stage, node)
        return None if stage_state is None else stage_state.items.get(item)


def changes_service(runbook: Runbook, action: RunStep) -> bool:
    """A step that takes the node out of service or returns it (cordon, drain, uncordon,
    resume; a reboot by a plain command): confirmed like a destructive step, the node's name
    typed, though the runbook does not mark it destructive (its gate rules stay as written).
    A control-host command that only reads (``kubectl get node --show-labels``) is not one:
    the core's :func:`cockpit.runbook.service.changes_service` decides, deny-by-default."""
    return step_changes_service(runbook, action.stage, action.step, action.node)


def result_text(action: Action, result: object) -> tuple[bool, str]:
    """An action's result in words: a failed step, check or rollback is not a success,
    and its words name the node and carry the evidence line."""
    what = describe(action)
    node = getattr(action, "node", None)
    if node and node not in what:
        what = f"{what} on {node}"
    if isinstance(result, RollbackFinishedEvent):
        if result.facts.ok:
            return True, f"Done: {what}: rollback succeeded"
        return False, f"rollback FAILED: {what}: " + ("; ".join(result.facts.blocked_by or []) or "it did not hold")
    if isinstance(result, StageRunResult):
        if result.ok:
            return True, f"Done: {what}: {result.taken} step(s) and check(s) taken; {result.stopped}"
        return False, f"Failed: {what}: {result.stopped}"
    ok = getattr(result, "ok", True) if not isinstance(result, bool) else result
    if ok:
        return True, f"Done: {what}"
    return False, f"Failed: {what}: {failure_evidence(result)}"


def failure_evidence(result: object) -> str:
    """One line of evidence for a failed result: its error or exit status, and the last
    line it wrote (stderr first) when that says more."""
    error = getattr(result, "error", None)
    status = getattr(result, "exit_status", None)
    evidence = getattr(result, "evidence", None)
    first = error or evidence or (f"exit {status}" if status is not None else "failed")
    output = str(getattr(result, "stderr", "") or "") or str(getattr(result, "stdout", "") or "")
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if lines and lines[-1] not in first:
        return f"{first}: {lines[-1][:160]}"
    return first
