"""Text from outside reaches no terminal, cast or ticket raw (issue 12, terminal safety):
control sequences show as visible stand-ins and nothing is read as Rich markup."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from journals import minute_journal
from rich.console import Console

from cockpit.changelog.events import EventKind as K
from cockpit.changelog.journal import read_session
from cockpit.export import FORMATS, export_text
from cockpit.view.detail import GpuTableView
from cockpit.view.inert import inert
from cockpit.view.lines import Line
from cockpit.view.richtext import gpu_table, line_text, safe_text

#: What a hostile note, name or node output may carry: a terminal reset, an OSC title,
#: an OSC 8 hyperlink, a BIDI override, a bell, a CR that overwrites the line, a NUL.
HOSTILE = [
    "\x1bc",
    "\x1b]0;owned\x07",
    "\x1b]8;;file:///etc/passwd\x1b\\click\x1b]8;;\x1b\\",
    "\x1b[2J\x1b[H",
    "evil\u202etxt.exe",
    "a\rb",
    "nul\x00byte",
    "\x9b31m",  # the 8-bit CSI
    "zero\u200bwidth",
    "line\u2028sep",
]
#: Text that Rich would read as markup if it were handed over as a str.
MARKUP = ["[bold red]H100[/]", "[link=https://evil.example]NVIDIA[/link]", "[reverse]x", "\\[escaped]"]

_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


@pytest.mark.parametrize("text", HOSTILE)
def test_inert_leaves_no_control_character(text: str) -> None:
    shown = inert(text)
    assert _RAW.search(shown) is None and "\n" not in shown
    assert len(shown) >= len(text.replace("\x00", ""))  # shown, not silently dropped


def _rendered(renderable: object) -> str:
    console = Console(width=200, file=None, force_terminal=True, color_system=None, record=True)
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()


@pytest.mark.parametrize("text", HOSTILE + MARKUP)
def test_view_lines_and_gpu_names_render_inert_and_literal(text: str) -> None:
    line = line_text(Line.of(f"note: {text}"))
    assert _RAW.search(line.plain) is None
    table = _rendered(gpu_table(GpuTableView(rows=((f"0 {text}",),), empty=None)))
    assert "\x1b]" not in table and "\x1bc" not in table
    if text in MARKUP:
        # the brackets are shown as written: not taken as a style or a link
        assert text in table
        assert safe_text(text).plain == text and not safe_text(text).spans


def _hostile_log(tmp_path: Path) -> Path:
    with minute_journal(tmp_path, "CHG-H") as j:
        j.append(K.SESSION_STARTED)
        for text in HOSTILE + MARKUP:
            j.append(K.NOTE, note=f"operator note {text}")
        j.append(K.OVERRIDE, stage="drain", node="gpu01", reason="because \x1bc [bold]now[/]")
        j.append(K.TRIGGER_FIRED, trigger="smoke-failed", node="gpu01", actor="cockpit",
                 facts={"evidence": "torch said \x1b]0;pwned\x07 False"})  # fmt: skip
    return j.path


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_export_format_is_inert(tmp_path: Path, fmt: str) -> None:
    path = _hostile_log(tmp_path)
    log = read_session(path)
    assert any(e.note == "operator note \x1bc" for e in log.events)  # the log keeps the original text
    out = export_text(log, fmt)
    if fmt in ("jira-adf", "servicenow"):
        out = json.dumps(json.loads(out), ensure_ascii=False)  # what the ticket system will hold
    assert _RAW.search(out.replace("\n", "")) is None, fmt
    assert "␛" in out  # shown, so a reader sees something odd was there


def test_triage_prints_a_hostile_log_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cockpit.cli import main

    log = tmp_path / "engine.log"
    log.write_text("INFO start\n\x1b]0;owned\x07RuntimeError: CUDA error: out of memory \x1bc\n")
    main(["triage", str(log)])
    out = capsys.readouterr().out
    assert _RAW.search(out.replace("\n", "")) is None and "out of memory" in out
