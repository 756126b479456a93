"""A saved log folded with every event judged (:mod:`cockpit.engine.judge`): what ``cockpit
verify`` adds to the chain and the signatures, so a hand-written event the rules refuse
fails the check even when its bytes and signature hold."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cockpit.changelog.events import Event
from cockpit.changelog.header import SessionHeader
from cockpit.changelog.reader import SessionLog, gc_paused, start_reading
from cockpit.changelog.runbook_of import session_runbook
from cockpit.changelog.trust import found_runbook, load_site_trust
from cockpit.changelog.verify import Verification
from cockpit.engine.fold import Folder
from cockpit.engine.judge import refused_words
from cockpit.engine.state import RefusedEvent
from cockpit.errors import BadInput
from cockpit.runbook.loader import LoadedRunbook


class JudgedFold:
    """A fold that judges every event (:mod:`cockpit.engine.judge`), fed chunk by chunk as a
    reader reads the log (``cockpit verify`` reads it once): the runbook is found from the
    header; when it cannot be, :attr:`unjudged` says why and nothing is folded."""

    def __init__(self, path: Path, signatures: Mapping[int, str] | None = None) -> None:
        self.path, self.signatures = path, signatures
        self.folder: Folder | None = None
        self.unjudged: str | None = None

    def __call__(self, header: SessionHeader, events: list[Event]) -> None:
        if self.folder is None and self.unjudged is None:
            try:
                loaded = found_runbook(header, self.path)
            except BadInput as exc:
                self.unjudged = f"the rules not checked: {exc}"
                return
            self.folder = Folder(
                loaded.runbook, header.window_parameters(), header.hosts, operator=header.operator,
                signatures=self.signatures, judge=True,
            )  # fmt: skip
        if self.folder is not None:
            self.folder.apply_all(events)

    @property
    def refused(self) -> list[RefusedEvent]:
        return list(self.folder.state.refused) if self.folder is not None else []


def judged_refusals(
    data: bytes, path: Path, signatures: Mapping[int, str] | None
) -> tuple[list[RefusedEvent], str | None]:
    """The events of the log (its bytes ``data``) the fold refuses, judged by the rules and,
    with ``signatures`` (seq -> principal, verified already), by their signatures; and why
    the fold could not be done (the runbook not found), else None."""
    reading, header_end = start_reading(data, str(path))
    fold = JudgedFold(path, signatures)
    reading.consume, reading.keep_events, reading.keep_blocks = fold, False, False
    with gc_paused():
        reading.read(data, header_end, len(data))
    if fold.folder is None and fold.unjudged is None:  # no event: judged against the header alone
        fold(reading.header, [])
    return fold.refused, fold.unjudged


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
    # the signatures judged only where the site or the header requires them; the rules always
    signatures = verification.signed if load_site_trust().with_runbook(loaded).require_for(header) else None
    folder = Folder(
        loaded.runbook, header.window_parameters(), header.hosts, operator=header.operator,
        signatures=signatures, judge=True,
    )  # fmt: skip
    with gc_paused():
        folder.apply_all(log.events)
    words = refused_words(folder.state.refused)
    return f"{line}; {words}" if words else line
