"""`cockpit export --to jira|servicenow` against local HTTP servers the test starts on
127.0.0.1, which hold the requests to the vendors' published shapes: Jira Cloud REST v3
(the description and comments validated against Atlassian's ADF JSON schema,
tests/fixtures/tickets/adf-full-v1.json), ServiceNow's Table API on change_request (its
columns and close codes). They check the basic auth, keep the issues and records they
are given, and search them as the vendors do, so a second export must find and update
the same ticket. A refused login and a missing project are one line each."""

from __future__ import annotations

import base64
import json
import re
import shutil
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # the dev pins carry no stubs for it
import pytest
from adf_schema import SCHEMA, adf_problems
from damaged_logs import a_window, damage
from repo_paths import EXAMPLE

from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.export.document import Bullets, Code, Heading, Panel, Para, Rule, Span, Table
from cockpit.export.render import adf
from cockpit.export.tickets import jira_comment

USER, SECRET, PROJECT = "ops@example.com", "s3cret-api-token", "OPS"

#: Jira Cloud's request bodies (the REST v3 reference: IssueUpdateDetails, SearchAndReconcileRequestBean)
JIRA_ISSUE_KEYS = {"fields", "update", "transition", "properties", "historyMetadata"}
JIRA_SEARCH_KEYS = {"jql", "fields", "maxResults", "nextPageToken", "expand", "properties", "fieldsByKeys",
                    "failFast", "reconcileIssues"}  # fmt: skip
#: change_request columns the export may write (ServiceNow's change_request and task tables)
SNOW_COLUMNS = {"short_description", "description", "implementation_plan", "backout_plan", "test_plan",
                "start_date", "end_date", "close_code", "close_notes", "work_notes", "correlation_id",
                "correlation_display"}  # fmt: skip
SNOW_CLOSE_CODES = {"successful", "successful_issues", "unsuccessful"}
SNOW_DATE = re.compile(r"\A(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})?\Z")


@dataclass
class Vendor:
    """What one fake vendor holds and saw."""

    auth: str = "Basic " + base64.b64encode(f"{USER}:{SECRET}".encode()).decode()
    projects: set[str] = field(default_factory=lambda: {PROJECT})
    issues: dict[str, dict[str, Any]] = field(default_factory=dict)  # Jira key or ServiceNow sys_id -> fields
    #: Jira's search index lags: an issue is found by JQL only from this many searches after its
    #: creation on, unless the search reconciles its id (``reconcileIssues``)
    lag: int = 1
    indexed_at: dict[str, int] = field(default_factory=dict)  # Jira key -> the search from which JQL finds it
    searches: int = 0
    comments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # bodies that broke the vendor's schema


class _Handler(BaseHTTPRequestHandler):
    vendor: Vendor
    kind: str

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, body: object | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.headers.get("Content-Type") != "application/json":
            self.vendor.problems.append(f"{self.command} {self.path}: Content-Type {self.headers.get('Content-Type')}")
        return json.loads(raw) if raw else None

    def _handle(self) -> None:
        v = self.vendor
        v.requests.append((self.command, self.path))
        if self.headers.get("Authorization") != v.auth:
            if self.kind == "jira":
                return self._answer(401, {"errorMessages": ["Client must be authenticated to access this resource."]})
            return self._answer(
                401,
                {"error": {"message": "User Not Authenticated", "detail": "Required to provide Auth information"},
                 "status": "failure"},
            )  # fmt: skip
        if self.kind == "jira":
            return self._jira()
        return self._snow()

    do_GET = do_POST = do_PUT = do_PATCH = _handle

    # -- Jira Cloud REST v3 --------------------------------------------------------------
    def _jira(self) -> None:
        v, path = self.vendor, urllib.parse.urlsplit(self.path).path
        body = self._body()
        if self.command == "POST" and path == "/rest/api/3/search/jql":
            if not set(body) <= JIRA_SEARCH_KEYS:
                v.problems.append(f"search: unknown keys {set(body) - JIRA_SEARCH_KEYS}")
            m = re.fullmatch(r'project = "([A-Z0-9_]+)" AND labels = "([^"\s]+)"', body.get("jql", ""))
            if m is None:
                return self._answer(
                    400, {"errorMessages": [f"Error in the JQL Query: {body.get('jql')}"], "errors": {}}
                )
            if m.group(1) not in v.projects:
                return self._answer(
                    400, {"errorMessages": [f"The value '{m.group(1)}' does not exist for the field 'project'."],
                          "errors": {}},
                )  # fmt: skip
            v.searches += 1
            reconcile = body.get("reconcileIssues", [])
            if not (isinstance(reconcile, list) and len(reconcile) <= 50 and all(type(i) is int for i in reconcile)):
                v.problems.append(f"reconcileIssues {reconcile!r}")
            found = [{"id": _jira_id(k), "key": k, "fields": {"summary": f["summary"], "labels": f["labels"]}}
                     for k, f in v.issues.items()
                     if f["project"]["key"] == m.group(1) and m.group(2) in f.get("labels", [])
                     and (v.searches >= v.indexed_at[k] or int(_jira_id(k)) in reconcile)]  # fmt: skip
            return self._answer(200, {"issues": found[: body.get("maxResults", 50)], "isLast": True})
        if self.command == "POST" and path == "/rest/api/3/issue":
            if not set(body) <= JIRA_ISSUE_KEYS:
                v.problems.append(f"create: unknown keys {set(body) - JIRA_ISSUE_KEYS}")
            fields = body["fields"]
            project = fields.get("project", {}).get("key")
            if project not in v.projects:
                return self._answer(400, {"errorMessages": [], "errors": {"project": "valid project is required"}})
            self._check_fields(fields, creating=True)
            key = f"{project}-{len(v.issues) + 1}"
            v.issues[key] = fields
            v.indexed_at[key] = v.searches + 1 + v.lag
            return self._answer(201, {"id": _jira_id(key), "key": key, "self": f"/rest/api/3/issue/{key}"})
        m = re.fullmatch(r"/rest/api/3/issue/([A-Z0-9_]+-\d+)(/comment)?", path)
        if m is None or m.group(1) not in v.issues:
            return self._answer(
                404, {"errorMessages": ["Issue does not exist or you do not have permission to see it."], "errors": {}}
            )
        key = m.group(1)
        if self.command == "PUT" and m.group(2) is None:
            if not set(body) <= JIRA_ISSUE_KEYS:
                v.problems.append(f"update: unknown keys {set(body) - JIRA_ISSUE_KEYS}")
            self._check_fields(body["fields"], creating=False)
            v.issues[key] |= body["fields"]
            return self._answer(204)
        if self.command == "POST" and m.group(2) == "/comment":
            v.problems += [f"comment: {p}" for p in adf_problems(body.get("body"))]
            v.comments.setdefault(key, []).append(body["body"])
            return self._answer(201, {"id": str(len(v.comments[key])), "body": body["body"]})
        return self._answer(405, {"errorMessages": ["Method not allowed"], "errors": {}})

    def _check_fields(self, fields: dict[str, Any], *, creating: bool) -> None:
        v = self.vendor
        allowed = {"project", "issuetype", "summary", "description", "labels"}
        if not set(fields) <= allowed:
            v.problems.append(f"fields: unexpected {set(fields) - allowed}")
        if creating and not ({"project", "issuetype", "summary"} <= set(fields)):
            v.problems.append("create: project, issuetype and summary are required")
        summary = fields.get("summary", "")
        if not isinstance(summary, str) or not summary or len(summary) > 255 or "\n" in summary:
            v.problems.append(f"summary: {summary!r}")
        if "description" in fields:
            v.problems += [f"description: {p}" for p in adf_problems(fields["description"])]
        for label in fields.get("labels", []):
            if not isinstance(label, str) or not label or " " in label or len(label) > 255:
                v.problems.append(f"label {label!r}")

    # -- ServiceNow Table API --------------------------------------------------------------
    def _snow(self) -> None:
        v = self.vendor
        url = urllib.parse.urlsplit(self.path)
        table = "/api/now/table/change_request"
        if url.path == table and self.command == "GET":
            query = urllib.parse.parse_qs(url.query)
            m = re.fullmatch(r"correlation_id=([A-Za-z0-9._-]+)", query.get("sysparm_query", [""])[0])
            if m is None:
                v.problems.append(f"query: {query}")
                return self._answer(200, {"result": []})
            found = [{"sys_id": sid, "number": r["number"]} for sid, r in v.issues.items()
                     if r.get("correlation_id") == m.group(1)]  # fmt: skip
            return self._answer(200, {"result": found[: int(query.get("sysparm_limit", ["10000"])[0])]})
        if url.path == table and self.command == "POST":
            body = self._body()
            self._check_columns(body)
            sys_id = f"{len(v.issues) + 1:032x}"
            record = {k: val for k, val in body.items() if k != "work_notes"}
            record["number"] = f"CHG{30000 + len(v.issues) + 1:07d}"
            v.issues[sys_id] = record
            v.comments[sys_id] = [body["work_notes"]] if body.get("work_notes") else []
            return self._answer(201, {"result": record | {"sys_id": sys_id}})
        m = re.fullmatch(r"/api/now/table/change_request/([0-9a-f]{32})", url.path)
        if m is None or m.group(1) not in v.issues:
            return self._answer(
                404, {"error": {"message": "No Record found",
                                "detail": "Record doesn't exist or ACL restricts the record retrieval"},
                      "status": "failure"},
            )  # fmt: skip
        if self.command == "PATCH":
            body = self._body()
            self._check_columns(body)
            if "correlation_id" in body and body["correlation_id"] != v.issues[m.group(1)]["correlation_id"]:
                v.problems.append("update changed the correlation id")
            v.issues[m.group(1)] |= {k: val for k, val in body.items() if k != "work_notes"}
            if body.get("work_notes"):
                v.comments[m.group(1)].append(body["work_notes"])
            return self._answer(200, {"result": v.issues[m.group(1)] | {"sys_id": m.group(1)}})
        return self._answer(405, {"error": {"message": "Method not Supported"}, "status": "failure"})

    def _check_columns(self, body: dict[str, Any]) -> None:
        v = self.vendor
        if not set(body) <= SNOW_COLUMNS:
            v.problems.append(f"columns: unknown {set(body) - SNOW_COLUMNS}")
        if body.get("close_code") not in SNOW_CLOSE_CODES | {None}:
            v.problems.append(f"close_code {body.get('close_code')!r}")
        for name in ("start_date", "end_date"):
            if name in body and not SNOW_DATE.match(body[name]):
                v.problems.append(f"{name} {body[name]!r}")
        if not all(isinstance(val, str) for val in body.values()):
            v.problems.append("every column's value is a string")
        if len(body.get("short_description", "")) > 160:
            v.problems.append("short_description longer than 160")


def _jira_id(key: str) -> str:
    return str(10000 + int(key.rsplit("-", 1)[1]))


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The example change log and its folder, copied: an export keeps the issue id beside it."""
    copy = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, copy)
    if EXAMPLE.with_suffix("").is_dir():
        shutil.copytree(EXAMPLE.with_suffix(""), copy.with_suffix(""))
    return copy


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, Vendor]]:
    vendor = Vendor()
    handler = type("Handler", (_Handler,), {"vendor": vendor, "kind": request.param})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # shutdown() waits for serve_forever's next poll: 10 ms, not the default half second
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", vendor
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _jira_env(monkeypatch: pytest.MonkeyPatch, url: str, *, token: str = SECRET, project: str = PROJECT) -> None:
    for name, value in (("URL", url), ("USER", USER), ("TOKEN", token), ("PROJECT", project)):
        monkeypatch.setenv(f"COCKPIT_JIRA_{name}", value)


def _snow_env(monkeypatch: pytest.MonkeyPatch, url: str, *, password: str = SECRET) -> None:
    for name, value in (("URL", url), ("USER", USER), ("PASSWORD", password)):
        monkeypatch.setenv(f"COCKPIT_SNOW_{name}", value)


def _texts(node: object) -> str:
    if isinstance(node, dict):
        return (node.get("text") or "") + "".join(_texts(c) for c in node.get("content", []))
    return ""


@pytest.mark.parametrize("server", ["jira"], indirect=True)
def test_jira_creates_the_issue_then_updates_the_same_one(
    server: tuple[str, Vendor], example: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url, jira = server
    _jira_env(monkeypatch, url)
    head = read_session(example).chain.head
    assert main(["export", str(example), "--to", "jira"]) == 0
    first = capsys.readouterr().out
    assert first.startswith("jira: created OPS-1 (") and "label cockpit-change-" in first, first
    kept = json.loads((example.with_suffix("") / "tickets.json").read_text())
    assert kept == {"jira": {f"{url} {PROJECT}": [int(_jira_id("OPS-1"))]}}
    # at once: the index does not hold the new issue yet, the search reconciles its id
    assert main(["export", str(example), "--to", "jira"]) == 0
    assert capsys.readouterr().out.startswith("jira: updated OPS-1 (")
    # without the kept id, once the index holds it: found by its label
    (example.with_suffix("") / "tickets.json").unlink()
    assert main(["export", str(example), "--to", "jira"]) == 0
    assert capsys.readouterr().out.startswith("jira: updated OPS-1 (")
    assert jira.problems == []
    assert list(jira.issues) == ["OPS-1"]  # one issue, found again
    issue = jira.issues["OPS-1"]
    change_id = read_session(example).header.change_id
    assert issue["labels"] == [f"cockpit-change-{change_id}"] and issue["issuetype"] == {"name": "Task"}
    described = _texts(issue["description"])
    assert "Change log: " in described and head in described  # the verification and the chain head
    notes = [_texts(c) for c in jira.comments["OPS-1"]]
    assert len(notes) == 3 and all(head in n and "verification: chain:" in n for n in notes)
    assert [m for m, _ in jira.requests] == ["POST", "POST", "POST"] + ["POST", "PUT", "POST"] * 2


@pytest.mark.parametrize("server", ["jira"], indirect=True)
def test_without_the_kept_id_the_index_lag_would_duplicate(
    server: tuple[str, Vendor], example: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the server's lag is real: what the kept id protects against
    url, jira = server
    _jira_env(monkeypatch, url)
    assert main(["export", str(example), "--to", "jira"]) == 0
    (example.with_suffix("") / "tickets.json").unlink()
    assert main(["export", str(example), "--to", "jira"]) == 0
    assert "created OPS-2" in capsys.readouterr().out and len(jira.issues) == 2


@pytest.mark.parametrize("server", ["servicenow"], indirect=True)
def test_servicenow_creates_the_change_request_then_updates_the_same_one(
    server: tuple[str, Vendor], example: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url, snow = server
    _snow_env(monkeypatch, url)
    head = read_session(example).chain.head
    assert main(["export", str(example), "--to", "servicenow"]) == 0
    assert capsys.readouterr().out.startswith("servicenow: created CHG0030001 (sys_id ")
    assert main(["export", str(example), "--to", "servicenow"]) == 0
    assert capsys.readouterr().out.startswith("servicenow: updated CHG0030001 (sys_id ")
    assert snow.problems == []
    ((sys_id, record),) = snow.issues.items()
    assert record["correlation_id"].startswith("cockpit-change-") and head in record["description"]
    notes = snow.comments[sys_id]
    assert len(notes) == 2 and all(head in n for n in notes)  # each export's own work note
    assert "verification: chain:" in notes[1] and len(notes[1]) < len(notes[0])  # the timeline only once


@pytest.mark.parametrize("server", ["jira"], indirect=True)
def test_jira_refusals_are_one_line(
    server: tuple[str, Vendor], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url, jira = server
    _jira_env(monkeypatch, url, token="wrong")
    assert main(["export", str(EXAMPLE), "--to", "jira"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("cockpit: Jira refused the login (401)") and "COCKPIT_JIRA_TOKEN" in err, err
    assert "Client must be authenticated" in err and "wrong" not in err
    _jira_env(monkeypatch, url, project="NOPE")
    assert main(["export", str(EXAMPLE), "--to", "jira"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "cockpit: Jira answered 400 on the search for the change's issue: "
        "The value 'NOPE' does not exist for the field 'project'."
    ), err
    assert jira.issues == {}


@pytest.mark.parametrize("server", ["servicenow"], indirect=True)
def test_servicenow_refused_login_is_one_line(
    server: tuple[str, Vendor], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url, snow = server
    _snow_env(monkeypatch, url, password="wrong")
    assert main(["export", str(EXAMPLE), "--to", "servicenow"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "cockpit: ServiceNow refused the login (401) on the search for the change's record: check "
        "COCKPIT_SNOW_USER and COCKPIT_SNOW_PASSWORD: User Not Authenticated; Required to provide Auth information"
    ), err
    assert snow.issues == {}


@pytest.mark.parametrize("server", ["jira"], indirect=True)
def test_a_damaged_log_goes_to_jira_with_the_damage_at_the_top_and_exit_1(
    server: tuple[str, Vendor], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, jira = server
    _jira_env(monkeypatch, url)
    path = a_window(tmp_path)
    damage(path, deleted=4, swapped=(6, 7), edited=9)
    assert main(["export", str(path), "--to", "jira"]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("jira: created OPS-1") and "damaged change log (seq 4, 5, 6, 7, 9)" in out.err
    assert jira.problems == []
    description = jira.issues["OPS-1"]["description"]["content"]
    top = _texts(description[1])  # under the title: the verification, every damaged seq named
    assert top.startswith("Change log: chain: BROKEN at seq 5") and "DAMAGED, read past:" in top
    for seq in (4, 6, 7, 9):
        assert f"seq {seq} " in top.split("DAMAGED, read past:")[1]


def test_credentials_never_go_in_clear_to_another_host(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _jira_env(monkeypatch, "http://jira.example.com")
    assert main(["export", str(EXAMPLE), "--to", "jira"]) == 2
    assert "plain http would send the credentials in clear" in capsys.readouterr().err
    monkeypatch.setenv("COCKPIT_JIRA_URL", "https://jira.example.com")
    monkeypatch.delenv("COCKPIT_JIRA_TOKEN")
    assert main(["export", str(EXAMPLE), "--to", "jira"]) == 2
    assert capsys.readouterr().err.strip() == "cockpit: --to jira: set COCKPIT_JIRA_TOKEN in the environment"


def test_the_adf_of_the_example_is_valid_against_atlassians_schema() -> None:
    from cockpit.export import export_text

    assert adf_problems(json.loads(export_text(read_session(EXAMPLE), "jira-adf"))) == []


SMALL_DOCS: list[tuple[str, bool, dict[str, Any]]] = [
    ("the renderer's every kind of block", True, adf([
        Heading(2, "Nodes"), Para((Span("a "), Span("b", strong=True), Span("c", code=True))), Bullets(((Span("x"),),)),
        Table(("node", "outcome"), (((Span("gpu01"),), (Span("upgraded", em=True),)),)), Code("apt-get install"),
        Panel("warning", "Overrides", (Para((Span("o"),)), Table(("a",), (((Span("b"),),),)))), Rule(),
    ])),
    ("a comment", True, jira_comment("chain head sha256:00")["body"]),
    ("a table inside a panel", False, {"version": 1, "type": "doc", "content": [
        {"type": "panel", "attrs": {"panelType": "warning"}, "content": [
            {"type": "table", "content": [{"type": "tableRow", "content": [
                {"type": "tableCell", "content": [{"type": "paragraph"}]}]}]}]}]}),
    ("an empty text node", False, {"version": 1, "type": "doc", "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": ""}]}]}),
    ("a heading of level 9", False, {"version": 1, "type": "doc", "content": [
        {"type": "heading", "attrs": {"level": 9}, "content": [{"type": "text", "text": "h"}]}]}),
    ("no version", False, {"type": "doc", "content": []}),
    ("code with strong", False, {"version": 1, "type": "doc", "content": [{"type": "paragraph", "content": [
        {"type": "text", "text": "x", "marks": [{"type": "code"}, {"type": "strong"}]}]}]}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "valid", "document"), SMALL_DOCS, ids=[d[0] for d in SMALL_DOCS])
def test_the_schema_walk_agrees_with_jsonschema(name: str, valid: bool, document: dict[str, Any]) -> None:
    by_jsonschema = jsonschema.Draft4Validator(SCHEMA).is_valid(document)
    assert by_jsonschema == valid, name  # the published schema says so
    assert (adf_problems(document) == []) == valid, adf_problems(document)
