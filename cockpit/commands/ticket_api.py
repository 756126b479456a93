"""`cockpit export --to jira|servicenow`: send the change's ticket to the change board's system.

The requests are built by :mod:`cockpit.export.tickets`; this module sends them over
HTTP(S) with the credentials the environment gives, and says in one line what was done
(created or updated, which issue or record) or why the vendor refused.

- Jira Cloud: ``COCKPIT_JIRA_URL`` (``https://SITE.atlassian.net``), ``COCKPIT_JIRA_USER``
  (the account's e-mail), ``COCKPIT_JIRA_TOKEN`` (an API token: basic auth),
  ``COCKPIT_JIRA_PROJECT`` (the project key), ``COCKPIT_JIRA_ISSUE_TYPE`` (default Task).
- ServiceNow: ``COCKPIT_SNOW_URL`` (``https://INSTANCE.service-now.com``), ``COCKPIT_SNOW_USER``,
  ``COCKPIT_SNOW_PASSWORD`` (basic auth).

Credentials go only over HTTPS, or plain HTTP to this machine (a test's server).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.changelog.files import write_atomically
from cockpit.errors import BadInput, CockpitError
from cockpit.export import document as doc
from cockpit.export import tickets
from cockpit.export.summary import ChangeSummary

DESTINATIONS = ("jira", "servicenow")

#: how long one request may take (a change board's API is slow, never this slow)
TIMEOUT_S = 30.0

#: the most of an answer read (a search answers a few issues; an error a few lines)
ANSWER_MAX_BYTES = 4 * 1024 * 1024


class TicketRefused(CockpitError):
    """The ticket system refused a request (its words in one line): exit 1."""


@dataclass(frozen=True)
class Endpoint:
    vendor: str
    base: str  # scheme://host[:port][/path], no trailing slash
    authorization: str  # the Authorization header's value
    how_to_log_in: str  # the variables a refused login points at


def _need(env: Mapping[str, str], name: str, what: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise BadInput(f"--to {what}: set {name} in the environment")
    return value


def _base(url: str, name: str) -> str:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("https", "http") or not parsed.hostname:
        raise BadInput(f"{name}={url!r}: expected https://HOST (the site's base URL)")
    if parsed.query or parsed.fragment or parsed.username or parsed.password:
        raise BadInput(f"{name}: the base URL takes no query, fragment or credentials (they come from the environment)")
    if parsed.scheme == "http" and not _loopback(parsed.hostname):
        raise BadInput(f"{name}: plain http would send the credentials in clear; use https")
    return url.rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _basic(user: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")


def jira_endpoint(env: Mapping[str, str]) -> tuple[Endpoint, str, str]:
    """The Jira site, and the project key and issue type the ticket goes to."""
    base = _base(_need(env, "COCKPIT_JIRA_URL", "jira"), "COCKPIT_JIRA_URL")
    user, token = _need(env, "COCKPIT_JIRA_USER", "jira"), _need(env, "COCKPIT_JIRA_TOKEN", "jira")
    project = _need(env, "COCKPIT_JIRA_PROJECT", "jira")
    if not project.replace("_", "").isalnum() or len(project) > 64:
        raise BadInput(f"COCKPIT_JIRA_PROJECT={project!r}: expected a project key (letters, digits, _)")
    issue_type = env.get("COCKPIT_JIRA_ISSUE_TYPE", "").strip() or "Task"
    if '"' in issue_type or len(issue_type) > 255:
        raise BadInput(f"COCKPIT_JIRA_ISSUE_TYPE={issue_type!r}: expected an issue type's name")
    how = "COCKPIT_JIRA_USER and COCKPIT_JIRA_TOKEN (an API token)"
    return Endpoint("Jira", base, _basic(user, token), how), project, issue_type


def snow_endpoint(env: Mapping[str, str]) -> Endpoint:
    base = _base(_need(env, "COCKPIT_SNOW_URL", "servicenow"), "COCKPIT_SNOW_URL")
    user, password = _need(env, "COCKPIT_SNOW_USER", "servicenow"), _need(env, "COCKPIT_SNOW_PASSWORD", "servicenow")
    return Endpoint("ServiceNow", base, _basic(user, password), "COCKPIT_SNOW_USER and COCKPIT_SNOW_PASSWORD")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as it is: following it would resend the credentials elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener(base: str) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
    host = urllib.parse.urlsplit(base).hostname or ""
    if _loopback(host):  # this machine's server: never through a proxy the environment names
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)


def call(
    end: Endpoint, method: str, path: str, what: str, body: Any = None, query: Mapping[str, str] | None = None
) -> Any:
    """One request; its JSON answer (None for an empty one). A refusal is :class:`TicketRefused`."""
    url = end.base + path + (("?" + urllib.parse.urlencode(query)) if query else "")
    data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", end.authorization)
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with _opener(end.base).open(request, timeout=TIMEOUT_S) as answer:
            raw = answer.read(ANSWER_MAX_BYTES)
    except urllib.error.HTTPError as exc:
        text = exc.read(ANSWER_MAX_BYTES) if exc.fp is not None else b""
        raise TicketRefused(tickets.refusal(end.vendor, what, exc.code, text, end.how_to_log_in)) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TicketRefused(f"{end.vendor} at {end.base} cannot be reached on {what}: {reason}") from None
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise TicketRefused(f"{end.vendor} answered {what} with something that is not JSON") from None


def send(
    to: str,
    s: ChangeSummary,
    blocks: list[doc.Block],
    head: str,
    verification: str,
    env: Mapping[str, str] = os.environ,
    folder: Path | None = None,
) -> str:
    """Create or update the change's ticket in ``to``; what was done, in one line.

    ``folder``: the session's folder, where the id of the Jira issue an export created is
    kept (``tickets.json``) for the next export's search to reconcile."""
    note = tickets.export_note(s, head, verification)
    if to == "jira":
        return _to_jira(s, blocks, note, env, folder)
    if to == "servicenow":
        return _to_snow(s, blocks, note, env)
    raise BadInput(f"--to {to}: expected one of {', '.join(DESTINATIONS)}")


def _to_jira(s: ChangeSummary, blocks: list[doc.Block], note: str, env: Mapping[str, str], folder: Path | None) -> str:
    end, project, issue_type = jira_endpoint(env)
    label = tickets.correlation_id(s.change_id)
    known = _remembered(folder, end.base, project)
    found = call(end, "POST", "/rest/api/3/search/jql", "the search for the change's issue",
                 tickets.jira_search(project, label, known))  # fmt: skip
    key = tickets.jira_found(found if isinstance(found, dict) else {})
    if key is None:
        made = call(end, "POST", "/rest/api/3/issue", f"creating the issue in project {project}",
                    tickets.jira_create(s, blocks, project, issue_type))  # fmt: skip
        key = made.get("key") if isinstance(made, dict) else None
        if not isinstance(key, str) or not key:
            raise TicketRefused("Jira created the issue but did not say its key")
        issue_id = made.get("id") if isinstance(made, dict) else None
        if isinstance(issue_id, str) and issue_id.isdigit():
            _remember(folder, end.base, project, int(issue_id))
        done = "created"
    else:
        call(end, "PUT", f"/rest/api/3/issue/{urllib.parse.quote(key)}", f"updating {key}",
             tickets.jira_update(s, blocks))  # fmt: skip
        done = "updated"
    call(end, "POST", f"/rest/api/3/issue/{urllib.parse.quote(key)}/comment", f"commenting on {key}",
         tickets.jira_comment(note))  # fmt: skip
    return f"jira: {done} {key} ({end.base}/browse/{key}), label {label}"


#: beside the change log (in its session folder): the Jira issues its exports created
TICKETS_FILE = "tickets.json"


def _remembered(folder: Path | None, base: str, project: str) -> list[int]:
    """The ids of the issues an export of this log created on this site and project."""
    if folder is None:
        return []
    try:
        kept = json.loads((folder / TICKETS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # none kept, or unreadable: the label search alone finds it
    jira = kept.get("jira") if isinstance(kept, dict) else None
    ids = jira.get(f"{base} {project}") if isinstance(jira, dict) else None
    return [i for i in ids if isinstance(i, int) and not isinstance(i, bool)] if isinstance(ids, list) else []


def _remember(folder: Path | None, base: str, project: str, issue_id: int) -> None:
    """Keep ``issue_id`` for the next export; a folder that cannot be written is said, not fatal."""
    if folder is None:
        return
    path = folder / TICKETS_FILE
    try:
        kept = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError):
        kept = {}
    if not isinstance(kept, dict) or not isinstance(kept.get("jira", {}), dict):
        kept = {}
    jira = kept.setdefault("jira", {})
    jira[f"{base} {project}"] = [*_remembered(folder, base, project), issue_id][-50:]
    try:
        folder.mkdir(exist_ok=True)
        write_atomically(path, (json.dumps(kept, indent=2) + "\n").encode(), replace=True)
    except OSError as exc:
        print(f"cockpit: warning: {path}: cannot keep the issue id ({exc.strerror or exc})", file=sys.stderr)


def _to_snow(s: ChangeSummary, blocks: list[doc.Block], note: str, env: Mapping[str, str]) -> str:
    end = snow_endpoint(env)
    table = "/api/now/table/change_request"
    found = call(end, "GET", table, "the search for the change's record", query=tickets.snow_query(s.change_id))
    record = tickets.snow_found(found if isinstance(found, dict) else {})
    if record is None:
        made = call(end, "POST", table, "creating the change request", tickets.snow_create(s, blocks, note))
        record = tickets.snow_record(made if isinstance(made, dict) else {})
        if record is None:
            raise TicketRefused("ServiceNow created the change request but did not say its sys_id")
        done = "created"
    else:
        call(end, "PATCH", f"{table}/{urllib.parse.quote(record.sys_id)}", f"updating {record.number}",
             tickets.snow_update(s, blocks, note))  # fmt: skip
        done = "updated"
    corr = tickets.correlation_id(s.change_id)
    return f"servicenow: {done} {record.number} (sys_id {record.sys_id}), correlation_id {corr}"
