"""Opening a change window's log: the header of a new one, or a saved one reread and
folded, with the runbook it was started with. :class:`~.operator.Session` starts and
resumes on what these return, and records the session-started or -resumed event itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cockpit import __version__
from cockpit.changelog.events import Event
from cockpit.changelog.journal import SessionHeader, SessionLog
from cockpit.changelog.reader import read_session_folding
from cockpit.changelog.sshsig import Signer
from cockpit.changelog.trust import load_site_trust
from cockpit.engine.fold import Folder
from cockpit.engine.forecast import StageHistory, stage_history
from cockpit.errors import BadInput
from cockpit.fleet.backends.registry import BackendOptions
from cockpit.fleet.targets import ConnectionSource
from cockpit.fleet.transport import HostTarget
from cockpit.runbook.loader import LoadedRunbook, load_runbook
from cockpit.session.review import session_runbook


@dataclass(frozen=True)
class Trust:
    """How a window treats signatures: whether two-person sign-offs count only when signed
    by a second person's allowed key (``cockpit run``: yes by default; the demo: no), the
    allowed_signers file, and the key this process signs its events with (the cockpit's own included)."""

    require_signatures: bool = False
    allowed_signers: str | None = None
    signer: Signer | None = None


def new_header(
    change_id: str,
    loaded: LoadedRunbook,
    parameters: dict[str, Any],
    targets: Sequence[HostTarget],
    operator: str,
    connection: ConnectionSource | None,
    *,
    created_at: datetime,
    require_signatures: bool = False,
    allowed_signers: str | None = None,
    backend: BackendOptions | None = None,
) -> SessionHeader:
    """The header of a new window, written before its first event.

    ``connection`` is how the nodes were named and reached; the header keeps it, with
    the runbook's absolute path, so the window resumes from any directory."""
    return SessionHeader(
        change_id=change_id,
        runbook_id=loaded.runbook.id,
        runbook_sha256=loaded.sha256,
        runbook_path=str(Path(loaded.path).resolve()),
        operator=operator,
        hosts=[t.name for t in targets],
        targets=[t.model_dump(exclude_none=True) for t in targets],
        parameters=parameters,
        **(connection or ConnectionSource()).header_fields(),
        tool_version=__version__,
        created_at=created_at,
        require_signatures=require_signatures,
        allowed_signers=str(Path(allowed_signers).resolve()) if allowed_signers else None,
        backend=str(backend.name) if backend is not None else None,
        backend_options=(backend.recorded() or None) if backend is not None else None,
    )


#: a saved window read back: its log (only its last event kept), its runbook and the fold of every event
Reopened = tuple[SessionLog, LoadedRunbook, Folder]


def reopen(path: Path, *, operator: str | None, runbook: Path | None) -> Reopened:
    """A saved window read back once and folded as it is read (a 100,000-event log is never
    held whole): its log, its runbook and the fold of every event.

    Only the operator who started it may resume it (:func:`check_operator`). The runbook is
    ``runbook`` when given (it must hash as recorded), else the one the header names, found
    as :func:`~cockpit.session.review.session_runbook` finds it."""
    started: list[tuple[LoadedRunbook, Folder]] = []
    signatures: dict[int, str] = {}  # filled by the reader chunk by chunk, before each is folded

    def fold(header: SessionHeader, events: list[Event]) -> None:
        if not started:
            check_operator(header, operator)  # judged on the header, before anything is folded
            started.append(_start_fold(header, path, runbook, signatures))
        started[0][1].apply_all(events)  # the reader has the collector paused meanwhile

    log = read_session_folding(path, fold, signatures=signatures)
    if not started:
        check_operator(log.header, operator)
        started.append(_start_fold(log.header, path, runbook, signatures))
    loaded, folder = started[0]
    return log, loaded, folder


def check_operator(header: SessionHeader, operator: str | None) -> None:
    if (operator or header.operator) != header.operator:
        raise BadInput(f"session {header.change_id} belongs to operator {header.operator}, not {operator}")


def _start_fold(
    header: SessionHeader, path: Path, runbook: Path | None, signatures: dict[int, str]
) -> tuple[LoadedRunbook, Folder]:
    if runbook is not None:
        loaded = load_runbook(runbook)
        if loaded.sha256 != header.runbook_sha256:
            raise BadInput(
                f"--runbook {runbook}: not the runbook session {header.change_id} started with "
                f"(sha256 {loaded.sha256[:12]}, recorded {header.runbook_sha256[:12]})"
            )
    else:
        loaded = session_runbook(header, path)
    # the same dict the reader fills (None when signatures are not required: every sign-off counts)
    signed = signatures if load_site_trust().with_runbook(loaded).require_for(header) else None
    folder = Folder(
        loaded.runbook, header.window_parameters(), header.hosts, operator=header.operator, signatures=signed
    )
    return loaded, folder


def read_stage_history(path: Path, stages: Sequence[str], *, window: str) -> StageHistory:
    """``--history``: an earlier window's log read back and folded (as :func:`reopen` reads
    it, by anyone: it is only read), and what its node stages ``stages`` took, for this
    window's forecast (``window``: this window's change id, never its own history). Refused
    in one line when it cannot be read or passed none of them."""
    if not path.is_file():
        raise BadInput(f"--history {path}: no such file (expected an earlier window's session file)")
    try:
        log, _, folder = reopen(path, operator=None, runbook=None)
        change_id = log.header.change_id
        if change_id == window:
            raise BadInput(f"that is window {window}'s own log; give an earlier window's")
        return stage_history(change_id, folder.state, stages)
    except BadInput as exc:
        said = str(exc).removeprefix(f"{path}: ")  # the reader names the file; said once
        raise BadInput(f"--history {path}: {said}") from None
