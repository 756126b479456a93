"""The step and item events of a change log on disk, and the one a test asks about: for the
tests that walk a demo window by Next and then read what its log says."""

from __future__ import annotations

from pathlib import Path

from cockpit.changelog.events import ItemVerifiedEvent, StepFinishedEvent, StepStartedEvent
from cockpit.changelog.reader import read_session

Events = list[StepStartedEvent | StepFinishedEvent | ItemVerifiedEvent]


def step_events(path: Path) -> Events:
    """The log's steps started and finished and its items verified, in the order written."""
    kinds = StepStartedEvent | StepFinishedEvent | ItemVerifiedEvent
    return [e for e in read_session(path).events if isinstance(e, kinds)]


def finished(events: Events, node: str | None, stage: str, step: str) -> StepFinishedEvent:
    """The last time ``stage/step`` finished on ``node`` (None: a window-scoped step)."""
    found = [e for e in events if isinstance(e, StepFinishedEvent) and (e.node, e.stage, e.step) == (node, stage, step)]
    assert found, f"{stage}/{step} never finished on {node}"
    return found[-1]


def verified(events: Events, node: str, stage: str, item: str) -> ItemVerifiedEvent:
    """The last verdict on ``stage/item`` for ``node``."""
    found = [e for e in events if isinstance(e, ItemVerifiedEvent) and (e.node, e.stage, e.item) == (node, stage, item)]
    assert found, f"{stage}/{item} never verified on {node}"
    return found[-1]
