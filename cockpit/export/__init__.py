"""Export a change log to a ticket: Markdown, Jira wiki markup, Jira ADF or ServiceNow JSON.

:func:`summarise` folds the events and projects what an approver needs from that state;
:func:`ticket_text` renders it, :func:`export_text` does both. Pure: the caller reads the
session (and the runbook).
"""

from __future__ import annotations

import json

from cockpit.changelog.journal import SessionLog
from cockpit.export import document, render
from cockpit.export.servicenow import change_request
from cockpit.export.summary import ChangeSummary, summarise
from cockpit.runbook.loader import LoadedRunbook

FORMATS: tuple[str, ...] = ("markdown", "jira", "jira-adf", "servicenow")

__all__ = ["FORMATS", "ChangeSummary", "export_text", "summarise", "ticket_text"]


def export_text(log: SessionLog, fmt: str, runbook: LoadedRunbook | None = None, integrity: str | None = None) -> str:
    """The ticket for ``log`` in format ``fmt`` (one of :data:`FORMATS`), ending with a newline.

    ``integrity``: the verification's line (``cockpit export`` verifies the log first);
    without it the chain is reported and the signatures counted, not checked."""
    return ticket_text(summarise(log, runbook, integrity), fmt)


def ticket_text(summary: ChangeSummary, fmt: str) -> str:
    """The ticket of ``summary`` in format ``fmt`` (one of :data:`FORMATS`), ending with a newline."""
    blocks = document.build(summary)
    if fmt == "markdown":
        return render.markdown(blocks)
    if fmt == "jira":
        return render.jira(blocks)
    if fmt == "jira-adf":
        return json.dumps(render.adf(blocks), indent=2, ensure_ascii=False) + "\n"
    if fmt == "servicenow":
        return json.dumps(change_request(summary, blocks), indent=2, ensure_ascii=False) + "\n"
    raise ValueError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
