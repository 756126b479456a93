"""Ticket formats: ADF against a schema of the node types it may use, escaping, torn logs, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from journals import minute_journal
from repo_paths import EXAMPLE, REPO

from cockpit.changelog.events import EventKind as K
from cockpit.changelog.journal import read_session
from cockpit.export import FORMATS, export_text
from cockpit.export.document import Block, Code, Para, Span
from cockpit.export.render import BlockWriter, adf, jira, markdown

# ---------------------------------------------------------------------------- a small ADF schema
# node type -> (allowed child types, required attrs, whether it may be a leaf without content)
BLOCKS = {"paragraph", "heading", "bulletList", "table", "codeBlock", "rule", "panel"}
ADF_SCHEMA: dict[str, tuple[set[str], set[str]]] = {
    "doc": (BLOCKS, set()),
    "paragraph": ({"text"}, set()),
    "heading": ({"text"}, {"level"}),
    "bulletList": ({"listItem"}, set()),
    "listItem": ({"paragraph", "bulletList", "codeBlock"}, set()),
    "table": ({"tableRow"}, set()),
    "tableRow": ({"tableHeader", "tableCell"}, set()),
    "tableHeader": ({"paragraph", "bulletList", "codeBlock", "heading", "rule", "panel"}, set()),
    "tableCell": ({"paragraph", "bulletList", "codeBlock", "heading", "rule", "panel"}, set()),
    "codeBlock": ({"text"}, set()),
    "rule": (set(), set()),
    "panel": ({"paragraph", "heading", "bulletList", "codeBlock", "rule"}, {"panelType"}),  # no table: full.json
}
MARKS = {"strong", "code", "em"}
PANEL_TYPES = {"info", "note", "warning", "success", "error"}
MUST_HAVE_CONTENT = {"bulletList", "listItem", "table", "tableRow", "tableHeader", "tableCell", "panel", "doc"}


def validate_adf(node: dict[str, Any], path: str = "doc") -> list[str]:
    problems: list[str] = []
    kind = node.get("type")
    if kind == "text":
        if not isinstance(node.get("text"), str) or not node["text"]:
            problems.append(f"{path}: text node needs non-empty text")
        marks = [m.get("type") for m in node.get("marks", [])]
        if not set(marks) <= MARKS:
            problems.append(f"{path}: unknown marks {marks}")
        if "code" in marks and len(marks) > 1:
            problems.append(f"{path}: the code mark combines with no other formatting")
        if set(node) - {"type", "text", "marks"}:
            problems.append(f"{path}: unexpected keys {set(node) - {'type', 'text', 'marks'}}")
        return problems
    if kind not in ADF_SCHEMA:
        return [f"{path}: node type {kind!r} is not allowed"]
    children, required = ADF_SCHEMA[kind]
    attrs = node.get("attrs", {})
    for attr in required:
        if attr not in attrs:
            problems.append(f"{path}: {kind} needs attrs.{attr}")
    if kind == "heading" and attrs.get("level") not in range(1, 7):
        problems.append(f"{path}: heading level {attrs.get('level')}")
    if kind == "panel" and attrs.get("panelType") not in PANEL_TYPES:
        problems.append(f"{path}: panelType {attrs.get('panelType')}")
    content = node.get("content", [])
    if kind in MUST_HAVE_CONTENT and not content:
        problems.append(f"{path}: {kind} must have content")
    if kind == "codeBlock" and any(c.get("marks") for c in content):
        problems.append(f"{path}: codeBlock text takes no marks")
    for i, child in enumerate(content):
        if child.get("type") not in children:
            problems.append(f"{path}.{kind}[{i}]: {child.get('type')!r} not allowed inside {kind}")
        problems += validate_adf(child, f"{path}.{kind}[{i}]")
    return problems


def test_adf_of_the_example_is_valid() -> None:
    doc = json.loads(export_text(read_session(EXAMPLE), "jira-adf"))
    assert doc["version"] == 1 and doc["type"] == "doc"
    assert validate_adf(doc) == []
    kinds = {child["type"] for child in doc["content"]}
    assert {"heading", "panel", "table", "bulletList", "paragraph", "rule"} <= kinds


def test_the_adf_schema_catches_bad_documents() -> None:
    """The validator is not a rubber stamp."""
    bad: dict[str, Any] = {
        "version": 1,
        "type": "doc",
        "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": ""}]},
            {
                "type": "paragraph",
                "content": [{"type": "text", "text": "x", "marks": [{"type": "code"}, {"type": "strong"}]}],
            },
            {"type": "heading", "content": [{"type": "text", "text": "no level"}]},
            {"type": "bulletList", "content": [{"type": "paragraph"}]},
            {"type": "panel", "attrs": {"panelType": "shout"}, "content": [{"type": "paragraph"}]},
            {"type": "mediaSingle"},
        ],
    }
    problems = validate_adf(bad)
    for i in range(len(bad["content"])):  # every bad child is caught
        assert any(p.startswith(f"doc.doc[{i}]") for p in problems), (i, problems)


def test_codeblock_and_empty_spans_render_as_valid_adf() -> None:
    doc = adf([Para((Span(""), Span("a", code=True, strong=True))), Code("line1\nline2"), Code("")])
    assert validate_adf(doc) == []


NASTY = "pipe | star * under_score [link](x) {macro} `tick` <b>html</b> #1 ~strike~ ^sup^ +u+ !img!"


def test_markdown_and_jira_escape_user_text() -> None:
    blocks: list[Block] = [Para((Span(NASTY),)), Para((Span(NASTY, code=True),))]
    md = markdown(blocks)
    assert "\\|" in md and "\\*" in md and "\\_" in md and "\\[" in md and "\\<b\\>" in md
    assert "``" in md  # a code span holding a backtick gets a longer fence
    wiki = jira(blocks)
    for raw in ("\\|", "\\*", "\\_", "\\{", "\\[", "\\!", "\\^", "\\+", "\\~"):
        assert raw in wiki


def test_bold_label_keeps_its_space_outside_the_markers() -> None:
    assert markdown([Para((Span("Path: ", strong=True), Span("A")))]) == "**Path:** A\n"
    assert jira([Para((Span("Path: ", strong=True), Span("A")))]) == "*Path:* A\n"
    # neighbours of the same formatting merge rather than produce ****
    assert markdown([Para((Span("a", strong=True), Span("b", strong=True)))]) == "**ab**\n"


def _small_log(tmp_path: Path, *, end: bool) -> Path:
    with minute_journal(tmp_path, "CHG-T") as j:
        j.append(K.SESSION_STARTED)
        j.append(K.OVERRIDE, stage="drain", node="gpu01", reason="scheduler | down * for _maintenance_")
        j.append(K.TRIGGER_FIRED, trigger="smoke-failed", node="gpu01", actor="cockpit", facts={"evidence": "exit 1"})
        if end:
            j.append(K.SESSION_ENDED)
    return j.path


def test_torn_log_gets_a_banner_and_open_session_a_warning(tmp_path: Path) -> None:
    path = _small_log(tmp_path, end=False)
    with open(path, "ab") as fh:
        fh.write(b"\n[events.000004]\nseq = 4\nts = 2026-")
    md = export_text(read_session(path), "markdown")
    assert "**ATTENTION: Incomplete change log**" in md and "torn final block ignored" in md
    assert "Session not closed" in md
    assert "Rollback triggers still fired: 1" in md
    assert "scheduler \\| down \\* for \\_maintenance\\_" in md  # the override reason, escaped, prominent
    sn = json.loads(export_text(read_session(path), "servicenow"))["change_request"]
    assert sn["close_code"] == "unsuccessful" and "torn final block" in sn["close_notes"]
    assert validate_adf(json.loads(export_text(read_session(path), "jira-adf"))) == []


def cockpit(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.mark.binary
def test_cli_writes_each_format_and_refuses_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "ticket.md"
    result = cockpit("export", str(EXAMPLE), "--format", "markdown", "-o", str(out))
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    golden = (REPO / "tests" / "core" / "golden" / "demo-gpu-missing.md").read_text()
    # the runbook the session ran is found by its sha256 (the recorded path, else beside the
    # session, as replay finds it), even when the shipped one of that name changed since
    assert out.read_text() == golden
    adf_result = cockpit("export", str(EXAMPLE), "--format", "jira-adf")
    assert adf_result.returncode == 0 and validate_adf(json.loads(adf_result.stdout)) == []

    missing = cockpit("export", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "nope.toml: no such file" in missing.stderr
    garbage = tmp_path / "garbage.toml"
    garbage.write_text("this is = not [ toml")
    bad = cockpit("export", str(garbage))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1


@pytest.mark.binary
def test_cli_warns_about_a_torn_tail_on_stderr(tmp_path: Path) -> None:
    path = _small_log(tmp_path, end=True)
    with open(path, "ab") as fh:
        fh.write(b"\n[events.000005]\nseq = 5\n")
    result = cockpit("export", str(path), "--format", "jira")
    assert result.returncode == 0
    assert "torn final block ignored" in result.stderr and "Incomplete change log" in result.stdout


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_names_the_essentials(fmt: str) -> None:
    text = export_text(read_session(EXAMPLE), fmt)
    for needle in ("demo-gpu-missing", "PLAT-311", "gpu-missing", "HW-4471", "580.65.06", "575.57.08", "bob"):
        assert needle in text, (fmt, needle)


@pytest.mark.binary
def test_export_refuses_a_runbook_other_than_the_one_the_session_ran() -> None:
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "sessions" / "examples" / "demo-gpu-missing.toml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cockpit",
            "export",
            str(example),
            "--format",
            "markdown",
            "--runbook",
            "minimal-driver-upgrade",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "is not the runbook this session ran" in result.stderr
    assert result.stderr.count("\n") == 1


def test_every_block_kind_has_its_writer_method() -> None:
    """``BlockWriter.block`` calls the method named after the block's class: a kind added to
    ``Block`` without one would fail on the first export that holds it."""
    missing = [
        kind.__name__ for kind in get_args(Block) if not callable(getattr(BlockWriter, kind.__name__.lower(), None))
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("(x) failed, (/) passed", "\\(x) failed, \\(/) passed"),
        ("-struck through-", "\\-struck through\\-"),
        ("??cited??", "\\?\\?cited\\?\\?"),
        ("#1 first", "\\#1 first"),
        ("well :) done", "well :\\) done"),
        ("demo-gpu-missing keeps its hyphens", "demo-gpu-missing keeps its hyphens"),
    ],
)
def test_jira_wiki_escapes_emoticons_strikethrough_citations_and_lists(text: str, shown: str) -> None:
    assert jira([Para((Span(text),))]) == shown + "\n"


def test_notes_and_accepted_host_keys_reach_every_ticket(tmp_path: Path) -> None:
    with minute_journal(tmp_path, "CHG-N") as j:
        j.append(K.SESSION_STARTED)
        j.append(K.NOTE, actor="cockpit", node="gpu01", note="new host key accepted for gpu01: ssh-ed25519 AAAAC3")
        j.append(K.NOTE, actor="bob", note="reviewer: canary output looked right")
    log = read_session(j.path)
    for fmt in FORMATS:
        out = export_text(log, fmt)
        assert "new host key accepted for gpu01" in out and "canary output looked right" in out, fmt
