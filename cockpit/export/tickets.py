"""The change's ticket in the change board's own system: the requests that create or update
it (Jira Cloud REST v3 with an ADF body; ServiceNow's Table API on ``change_request``) and
the one line a vendor's refusal becomes. Pure: values in, request bodies and words out;
``cockpit.commands.ticket_api`` sends them.

One ticket per change, found again by an id derived from the change id alone (a Jira
label, ServiceNow's ``correlation_id``), so a second export updates it, never duplicates
it. Every export names the change log's chain head and its verification, in the body and
in a comment or work note of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cockpit.export import document as doc
from cockpit.export.render import adf
from cockpit.export.servicenow import change_request
from cockpit.export.summary import ChangeSummary
from cockpit.view.inert import inert

#: Jira's summary field holds at most 255 characters (ServiceNow's short_description 160)
JIRA_SUMMARY_MAX = 255


def correlation_id(change_id: str) -> str:
    """The id a change's ticket is found by: a Jira label (no spaces, as labels require) and
    ServiceNow's ``correlation_id``. A change id is ``[A-Za-z0-9._-]{1,64}`` (its header checks it)."""
    return f"cockpit-change-{change_id}"


def summary_line(s: ChangeSummary) -> str:
    return inert(f"GPU driver change {s.change_id}: {s.runbook_id} on {len(s.nodes)} node(s) - {s.outcome}")


def export_note(s: ChangeSummary, head: str, verification: str) -> str:
    """The comment or work note every export adds: what this export rests on."""
    return inert(f"cockpit export of change {s.change_id}: chain head {head}; verification: {verification}")


# ----------------------------------------------------------------------------------- Jira


def _adf_note(text: str) -> dict[str, Any]:
    return {
        "version": 1,
        "type": "doc",
        "content": [{"type": "paragraph", "content": [{"type": "text", "text": text}]}],
    }


def jira_search(project: str, label: str, known: list[int] | None = None) -> dict[str, Any]:
    """``POST /rest/api/3/search/jql``: the change's issue in ``project``, by its label.

    ``known``: the id of the issue an earlier export created, read back with strong
    consistency (``reconcileIssues``): Jira's search index may not hold an issue created
    seconds ago, and a search that missed it would make a second one."""
    body: dict[str, Any] = {
        "jql": f'project = "{project}" AND labels = "{label}"',
        "fields": ["summary", "labels"],
        "maxResults": 2,
    }
    if known:
        body["reconcileIssues"] = known[:50]  # Jira takes at most 50
    return body


def jira_create(s: ChangeSummary, blocks: list[doc.Block], project: str, issue_type: str) -> dict[str, Any]:
    """``POST /rest/api/3/issue``: the issue, its description the ticket in ADF, its label the correlation id."""
    return {
        "fields": {
            "project": {"key": project},
            "issuetype": {"name": issue_type},
            "summary": summary_line(s)[:JIRA_SUMMARY_MAX],
            "description": adf(blocks),
            "labels": [correlation_id(s.change_id)],
        }
    }


def jira_update(s: ChangeSummary, blocks: list[doc.Block]) -> dict[str, Any]:
    """``PUT /rest/api/3/issue/{key}``: the summary and description as of this export."""
    return {"fields": {"summary": summary_line(s)[:JIRA_SUMMARY_MAX], "description": adf(blocks)}}


def jira_comment(note: str) -> dict[str, Any]:
    """``POST /rest/api/3/issue/{key}/comment``: this export's chain head and verification."""
    return {"body": _adf_note(note)}


def jira_found(answer: dict[str, Any]) -> str | None:
    """The key of the change's issue in a search's answer; None when there is none."""
    issues = answer.get("issues")
    if not isinstance(issues, list) or not issues:
        return None
    key = issues[0].get("key") if isinstance(issues[0], dict) else None
    return key if isinstance(key, str) and key else None


# ------------------------------------------------------------------------------ ServiceNow


@dataclass(frozen=True)
class SnowRecord:
    sys_id: str
    number: str


def snow_query(change_id: str) -> dict[str, str]:
    """``GET /api/now/table/change_request``'s parameters: the change's record by its correlation id."""
    return {
        "sysparm_query": f"correlation_id={correlation_id(change_id)}",
        "sysparm_fields": "sys_id,number",
        "sysparm_limit": "2",
    }


def snow_create(s: ChangeSummary, blocks: list[doc.Block], note: str) -> dict[str, Any]:
    """``POST /api/now/table/change_request``: the record's fields (as ``--format servicenow``
    writes them), its correlation id, and the timeline and this export's note as work notes."""
    fields = dict(change_request(s, blocks)["change_request"])
    fields["work_notes"] = inert(note) + "\n" + fields["work_notes"]
    return fields | {"correlation_id": correlation_id(s.change_id), "correlation_display": "cockpit"}


def snow_update(s: ChangeSummary, blocks: list[doc.Block], note: str) -> dict[str, Any]:
    """``PATCH /api/now/table/change_request/{sys_id}``: the fields as of this export; the
    work note is this export's alone (work notes are a journal: each write adds an entry)."""
    fields = dict(change_request(s, blocks)["change_request"])
    fields["work_notes"] = inert(note)
    return fields


def snow_found(answer: dict[str, Any]) -> SnowRecord | None:
    result = answer.get("result")
    if not isinstance(result, list) or not result or not isinstance(result[0], dict):
        return None
    sys_id, number = result[0].get("sys_id"), result[0].get("number")
    if not isinstance(sys_id, str) or not sys_id:
        return None
    return SnowRecord(sys_id, number if isinstance(number, str) else sys_id)


def snow_record(answer: dict[str, Any]) -> SnowRecord | None:
    """The record a create or update answered with (``{"result": {...}}``)."""
    result = answer.get("result")
    return snow_found({"result": [result]}) if isinstance(result, dict) else None


# ---------------------------------------------------------------------------- refusals


def refusal(vendor: str, what: str, status: int, body: bytes, how_to_log_in: str) -> str:
    """A vendor's refusal in one line: who refused what, why in the vendor's own words
    (Jira's ``errorMessages`` and ``errors``; ServiceNow's ``error.message`` and ``detail``)."""
    words = _vendor_words(body)
    if status in (401, 403):
        lead = f"{vendor} refused the login ({status}) on {what}: check {how_to_log_in}"
        if status == 403:
            lead = f"{vendor} refused {what} ({status}): the user may not do it; check {how_to_log_in}"
        return inert(f"{lead}{': ' + words if words else ''}", newlines=False)
    return inert(f"{vendor} answered {status} on {what}{': ' + words if words else ''}", newlines=False)


def _vendor_words(body: bytes) -> str:
    try:
        data = json.loads(body.decode("utf-8", "replace"))
    except ValueError:
        return " ".join(body.decode("utf-8", "replace").split())[:200]
    if not isinstance(data, dict):
        return ""
    parts: list[str] = []
    messages = data.get("errorMessages")  # Jira: {"errorMessages": [...], "errors": {field: message}}
    if isinstance(messages, list):
        parts += [str(m) for m in messages]
    errors = data.get("errors")
    if isinstance(errors, dict):
        parts += [f"{k}: {v}" for k, v in errors.items()]
    error = data.get("error")  # ServiceNow: {"error": {"message": ..., "detail": ...}, "status": "failure"}
    if isinstance(error, dict):
        parts += [str(error[k]) for k in ("message", "detail") if error.get(k)]
    return "; ".join(" ".join(p.split()) for p in parts)[:400]
