"""The runbook a change log was written under, found from its header and checked by sha256
(every reader folds with it; the trust root reads its ``[trust]`` table)."""

from __future__ import annotations

from importlib.resources.abc import Traversable
from pathlib import Path

from cockpit.changelog.header import SessionHeader
from cockpit.errors import BadInput
from cockpit.runbook.loader import LoadedRunbook, load_runbook, shipped_runbooks

__all__ = ["runbook_candidates", "session_runbook"]


def runbook_candidates(recorded: str, runbook_id: str, session_path: Path) -> list[Path | Traversable]:
    """Where a session's runbook may be, most likely first: the recorded path as given,
    then beside the session file, then the shipped runbook of that file name or id."""
    candidates: list[Path | Traversable] = []
    if recorded:
        path = Path(recorded)
        candidates += [path] if path.is_absolute() else [path, session_path.parent / path]
        shipped = shipped_runbooks().get(path.stem)
        if shipped is not None:
            candidates.append(shipped)
    shipped_by_id = shipped_runbooks().get(runbook_id)
    if shipped_by_id is not None:
        candidates.append(shipped_by_id)
    return [c for c in candidates if not isinstance(c, Path) or c.is_file()]


def session_runbook(header: SessionHeader, session_path: Path) -> LoadedRunbook:
    """The runbook the session was started with, found from its header and checked by sha256.

    Tries the recorded path as given, then beside the session file, then the shipped
    runbook of that file name; a file whose sha256 differs from the recorded one is
    never used (the fold would not mean what the operator saw).
    """
    recorded = header.runbook_path
    mismatched: list[str] = []
    for candidate in runbook_candidates(recorded, header.runbook_id, session_path):
        try:
            loaded = load_runbook(candidate)
        except BadInput:
            continue
        if loaded.sha256 == header.runbook_sha256:
            return loaded
        mismatched.append(f"{loaded.path} (sha256 {loaded.sha256[:12]})")
    if mismatched:
        raise BadInput(
            f"runbook {recorded or header.runbook_id} changed since session {header.change_id} started: "
            f"recorded sha256 {header.runbook_sha256[:12]}, found {', '.join(mismatched)}"
        )
    raise BadInput(f"cannot find runbook {recorded or header.runbook_id} of session {header.change_id}")
