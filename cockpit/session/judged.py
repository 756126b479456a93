"""A saved log folded with every event judged (:mod:`cockpit.engine.judge`): what ``cockpit
verify`` adds to the chain and the signatures, so a hand-written event the rules refuse
fails the check even when its bytes and signature hold."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cockpit.changelog.events import Event
from cockpit.changelog.journal import SessionHeader, SessionLog
from cockpit.changelog.reader import gc_paused, start_reading
from cockpit.changelog.verify import Verification
from cockpit.engine.fold import Folder
from cockpit.engine.judge import refused_words
from cockpit.engine.state import RefusedEvent
from cockpit.errors import BadInput
from cockpit.runbook.loader import LoadedRunbook
from cockpit.session.review import session_runbook


def judged_refusals(
    data: bytes, path: Path, signatures: Mapping[int, str] | None
) -> tuple[list[RefusedEvent], str | None]:
    """The events of the log (its bytes ``data``) the fold refuses, judged by the rules and,
    with ``signatures`` (seq -> principal, verified already), by their signatures; and why
    the fold could not be done (the runbook not found), else None."""
    reading, header_end = start_reading(data, str(path))
    try:
        loaded = session_runbook(reading.header, path)
    except BadInput as exc:
        return [], f"the rules not checked: {exc}"
    folder: list[Folder] = []

    def fold(header: SessionHeader, events: list[Event]) -> None:
        if not folder:
            folder.append(
                Folder(
                    loaded.runbook,
                    header.window_parameters(),
                    header.hosts,
                    operator=header.operator,
                    signatures=signatures,
                    judge=True,
                )
            )
        folder[0].apply_all(events)

    reading.consume, reading.keep_events, reading.keep_blocks = fold, False, False
    with gc_paused():
        reading.read(data, header_end, len(data))
    return (list(folder[0].state.refused) if folder else []), None


def judged_integrity(log: SessionLog, verification: Verification, loaded: LoadedRunbook | None, path: Path) -> str:
    """The first line of a ticket or replay: the verification, and the events the rules
    refuse (the log's events folded, each judged), when the runbook is at hand."""
    line = verification.summary()
    if loaded is None or loaded.sha256 != log.header.runbook_sha256:
        try:
            loaded = session_runbook(log.header, path)
        except BadInput:
            return line
    header = log.header
    signatures = verification.signed if header.require_signatures else None
    folder = Folder(
        loaded.runbook, header.window_parameters(), header.hosts, operator=header.operator,
        signatures=signatures, judge=True,
    )  # fmt: skip
    with gc_paused():
        folder.apply_all(log.events)
    words = refused_words(folder.state.refused)
    return f"{line}; {words}" if words else line
