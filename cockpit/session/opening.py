"""Opening a change window's log: a new one (its header, written first), or a saved one
reread and folded, with the runbook it was started with. :class:`~.operator.Session`
starts and resumes on what these return, and records the session-started or -resumed
event itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from cockpit import __version__
from cockpit.changelog.journal import Journal, SessionHeader, SessionLog, read_session
from cockpit.engine.fold import Folder
from cockpit.errors import BadInput
from cockpit.fleet.targets import ConnectionSource
from cockpit.fleet.transport import HostTarget
from cockpit.runbook.loader import LoadedRunbook, load_runbook
from cockpit.session.review import session_runbook


def open_new(
    *,
    sessions_dir: Path,
    change_id: str,
    loaded: LoadedRunbook,
    params: Mapping[str, object],
    targets: Sequence[HostTarget],
    operator: str,
    connection: ConnectionSource | None,
    clock: Callable[[], datetime],
) -> tuple[Journal, Folder]:
    """Write a new window's header and return its journal and (empty) fold.

    ``connection`` is how the nodes were named and reached; the header keeps it, with
    the runbook's absolute path, so the window resumes from any directory."""
    hosts = [t.name for t in targets]
    merged = {**loaded.runbook.defaults(), **params}
    # planning the waves validates the fleet against the runbook before anything is written
    folder = Folder(loaded.runbook, merged, hosts, operator=operator)
    header = SessionHeader(
        change_id=change_id,
        runbook_id=loaded.runbook.id,
        runbook_sha256=loaded.sha256,
        runbook_path=str(Path(loaded.path).resolve()),
        operator=operator,
        hosts=hosts,
        targets=[t.model_dump(exclude_none=True) for t in targets],
        parameters=merged,
        **(connection or ConnectionSource()).header_fields(),
        tool_version=__version__,
        created_at=clock(),
    )
    return Journal.create(sessions_dir, header, clock=clock), folder


def reopen(path: Path, *, operator: str | None, runbook: Path | None) -> tuple[SessionLog, LoadedRunbook, Folder]:
    """A saved window read back: its log, its runbook and the fold of every event.

    Only the operator who started it may resume it. The runbook is ``runbook`` when
    given (it must hash as recorded), else the one the header names, found as
    :func:`~cockpit.session.review.session_runbook` finds it."""
    log = read_session(path)
    header = log.header
    if (operator or header.operator) != header.operator:
        raise BadInput(f"session {header.change_id} belongs to operator {header.operator}, not {operator}")
    if runbook is not None:
        loaded = load_runbook(runbook)
        if loaded.sha256 != header.runbook_sha256:
            raise BadInput(
                f"--runbook {runbook}: not the runbook session {header.change_id} started with "
                f"(sha256 {loaded.sha256[:12]}, recorded {header.runbook_sha256[:12]})"
            )
    else:
        loaded = session_runbook(header, path)
    folder = Folder(loaded.runbook, header.parameters, header.hosts, operator=header.operator)
    folder.apply_all(log.events)
    return log, loaded, folder
