"""Render the ticket's blocks as Markdown, Jira wiki markup, Jira ADF or plain text."""

from __future__ import annotations

import re
from typing import Any

from cockpit.export.document import (
    Block,
    Bullets,
    Code,
    Heading,
    Inline,
    Panel,
    Para,
    Rule,
    Span,
    Table,
)


def merge(spans: Inline) -> Inline:
    """Join neighbours of the same formatting, so markup never meets itself (``****``)."""
    out: list[Span] = []
    for span in spans:
        if out and (out[-1].strong, out[-1].code, out[-1].em) == (span.strong, span.code, span.em):
            out[-1] = Span(out[-1].text + span.text, span.strong, span.code, span.em)
        elif span.text:
            out.append(span)
    return tuple(out)


def _wrap(out: str, marker: str) -> str:
    """``marker`` around ``out``, keeping its outer spaces outside (``**a **`` is not bold)."""
    core = out.strip(" ")
    if not core:
        return out
    lead = out[: len(out) - len(out.lstrip(" "))]
    trail = out[len(out.rstrip(" ")) :]
    return f"{lead}{marker}{core}{marker}{trail}"


# --------------------------------------------------------------------------- Markdown (GitHub / GitLab)

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~])")


def _md_text(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text)


def _md_code(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_span(span: Span) -> str:
    if span.code:
        out = _md_code(span.text)
    else:
        out = _md_text(span.text)
    if span.strong:
        out = _wrap(out, "**")
    if span.em:
        out = _wrap(out, "*")
    return out


def _md_inline(spans: Inline, *, cell: bool = False) -> str:
    out = "".join(_md_span(s) for s in merge(spans))
    if cell:
        out = out.replace("\n", "<br>")
        # a pipe inside a code span still ends a table cell in GFM unless escaped
        out = re.sub(r"(?<!\\)\|", r"\\|", out)
    return out


def _md_blocks(blocks: tuple[Block, ...] | list[Block]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {_md_text(block.text)}")
        elif isinstance(block, Para):
            out.append(_md_inline(block.spans).replace("\n", "  \n"))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_md_inline(item)}".replace("\n", "\n  ") for item in block.items))
        elif isinstance(block, Table):
            lines = ["| " + " | ".join(_md_text(h) for h in block.header) + " |", "|" + "---|" * len(block.header)]
            lines += ["| " + " | ".join(_md_inline(cell, cell=True) for cell in row) + " |" for row in block.rows]
            out.append("\n".join(lines))
        elif isinstance(block, Code):
            fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", block.text)), default=0) + 1)
            out.append(f"{fence}text\n{block.text}\n{fence}")
        elif isinstance(block, Panel):
            label = {"warning": "WARNING", "error": "ATTENTION", "info": "NOTE", "note": "NOTE", "success": "OK"}[
                block.kind
            ]
            inner = "\n\n".join(_md_blocks(block.blocks))
            quoted = "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))
            out.append(f"> **{label}: {_md_text(block.title)}**\n>\n{quoted}")
        elif isinstance(block, Rule):
            out.append("---")
    return out


def markdown(blocks: list[Block]) -> str:
    return "\n\n".join(_md_blocks(blocks)) + "\n"


# --------------------------------------------------------------------------- Jira wiki markup

_JIRA_SPECIAL = re.compile(r"([\\*_{}\[\]|^+~!])")
_JIRA_PANEL = {
    "warning": "bgColor=#FFF7E6|borderColor=#FFAB00",
    "error": "bgColor=#FFEBE6|borderColor=#DE350B",
    "info": "bgColor=#DEEBFF|borderColor=#0052CC",
    "note": "bgColor=#EAE6FF|borderColor=#5243AA",
    "success": "bgColor=#E3FCEF|borderColor=#00875A",
}


def _jira_text(text: str) -> str:
    return _JIRA_SPECIAL.sub(r"\\\1", text)


def _jira_span(span: Span) -> str:
    if span.code:
        out = "{{" + _jira_text(span.text) + "}}"
    else:
        out = _jira_text(span.text)
    if span.strong:
        out = _wrap(out, "*")
    if span.em:
        out = _wrap(out, "_")
    return out


def _jira_inline(spans: Inline) -> str:
    # Jira ends a table row or paragraph at a newline; \\ is its forced line break
    return "".join(_jira_span(s) for s in merge(spans)).replace("\n", " \\\\ ")


def _jira_blocks(blocks: tuple[Block, ...] | list[Block]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"h{block.level}. {_jira_text(block.text)}")
        elif isinstance(block, Para):
            out.append(_jira_inline(block.spans))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"* {_jira_inline(item)}" for item in block.items))
        elif isinstance(block, Table):
            lines = ["||" + "||".join(_jira_text(h) for h in block.header) + "||"]
            lines += ["|" + "|".join(_jira_inline(cell) or " " for cell in row) + "|" for row in block.rows]
            out.append("\n".join(lines))
        elif isinstance(block, Code):
            out.append("{noformat}\n" + block.text.replace("{noformat}", "{ noformat}") + "\n{noformat}")
        elif isinstance(block, Panel):
            title = _jira_text(block.title).replace("|", "\\|")
            inner = "\n\n".join(_jira_blocks(block.blocks))
            out.append(f"{{panel:title={title}|{_JIRA_PANEL[block.kind]}}}\n{inner}\n{{panel}}")
        elif isinstance(block, Rule):
            out.append("----")
    return out


def jira(blocks: list[Block]) -> str:
    return "\n\n".join(_jira_blocks(blocks)) + "\n"


# --------------------------------------------------------------------------- Jira ADF (Atlassian Document Format)


def _adf_text(span: Span) -> dict[str, Any] | None:
    if not span.text:
        return None  # ADF forbids empty text nodes
    node: dict[str, Any] = {"type": "text", "text": span.text}
    marks = []
    if span.code:
        marks.append({"type": "code"})  # code combines with no other formatting mark
    else:
        if span.strong:
            marks.append({"type": "strong"})
        if span.em:
            marks.append({"type": "em"})
    if marks:
        node["marks"] = marks
    return node


def _adf_paragraph(spans: Inline) -> dict[str, Any]:
    content = [n for s in merge(spans) if (n := _adf_text(s)) is not None]
    return {"type": "paragraph", "content": content} if content else {"type": "paragraph"}


def _adf_blocks(blocks: tuple[Block, ...] | list[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(
                {"type": "heading", "attrs": {"level": block.level}, "content": [{"type": "text", "text": block.text}]}
            )
        elif isinstance(block, Para):
            out.append(_adf_paragraph(block.spans))
        elif isinstance(block, Bullets):
            out.append(
                {
                    "type": "bulletList",
                    "content": [{"type": "listItem", "content": [_adf_paragraph(i)]} for i in block.items],
                }
            )
        elif isinstance(block, Table):
            rows = [
                {
                    "type": "tableRow",
                    "content": [
                        {"type": "tableHeader", "content": [_adf_paragraph((Span(h, strong=True),))]}
                        for h in block.header
                    ],
                }
            ]
            rows += [
                {
                    "type": "tableRow",
                    "content": [{"type": "tableCell", "content": [_adf_paragraph(cell)]} for cell in row],
                }
                for row in block.rows
            ]
            out.append(
                {"type": "table", "attrs": {"isNumberColumnEnabled": False, "layout": "default"}, "content": rows}
            )
        elif isinstance(block, Code):
            content = [{"type": "text", "text": block.text}] if block.text else []
            out.append({"type": "codeBlock", "attrs": {"language": "text"}, "content": content})
        elif isinstance(block, Panel):
            inner = [{"type": "heading", "attrs": {"level": 3}, "content": [{"type": "text", "text": block.title}]}]
            inner += _adf_blocks(block.blocks)
            out.append({"type": "panel", "attrs": {"panelType": block.kind}, "content": inner})
        elif isinstance(block, Rule):
            out.append({"type": "rule"})
    return out


def adf(blocks: list[Block]) -> dict[str, Any]:
    return {"version": 1, "type": "doc", "content": _adf_blocks(blocks)}


# --------------------------------------------------------------------------- plain text (ServiceNow fields)


def _plain_inline(spans: Inline) -> str:
    return "".join(s.text for s in spans)


def plain(blocks: tuple[Block, ...] | list[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(block.text.upper() if block.level <= 2 else block.text)
        elif isinstance(block, Para):
            out.append(_plain_inline(block.spans))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_plain_inline(i)}" for i in block.items))
        elif isinstance(block, Table):
            lines = [" | ".join(block.header)]
            lines += [" | ".join(_plain_inline(cell) for cell in row) for row in block.rows]
            out.append("\n".join(lines))
        elif isinstance(block, Code):
            out.append(block.text)
        elif isinstance(block, Panel):
            out.append(f"*** {block.title} ***\n" + plain(block.blocks))
        elif isinstance(block, Rule):
            out.append("-" * 20)
    return "\n\n".join(out)
