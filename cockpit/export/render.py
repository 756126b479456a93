"""Render the ticket's blocks as Markdown, Jira wiki markup, Jira ADF or plain text."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

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


Out = TypeVar("Out")


class BlockWriter(ABC, Generic[Out]):
    """One format's way of writing each kind of block; the walk over the document is shared."""

    def blocks(self, blocks: Sequence[Block]) -> list[Out]:
        return [self.block(block) for block in blocks]

    def block(self, block: Block) -> Out:
        # Each kind of block is written by the method of its name (Heading -> heading);
        # the abstract methods below make every format write every kind, and
        # tests/core/test_export_formats.py that every kind has its method.
        write: Callable[[Block], Out] = getattr(self, type(block).__name__.lower())
        return write(block)

    @abstractmethod
    def heading(self, block: Heading) -> Out: ...
    @abstractmethod
    def para(self, block: Para) -> Out: ...
    @abstractmethod
    def bullets(self, block: Bullets) -> Out: ...
    @abstractmethod
    def table(self, block: Table) -> Out: ...
    @abstractmethod
    def code(self, block: Code) -> Out: ...
    @abstractmethod
    def panel(self, block: Panel) -> Out: ...
    @abstractmethod
    def rule(self, block: Rule) -> Out: ...


class TextMarkup(BlockWriter[str]):
    """A wiki-style markup: escaped text, a code-span form and the marks for strong and emphasis."""

    escape: Callable[[str], str]
    code_span: Callable[[str], str]
    strong_mark: str
    em_mark: str

    def span(self, span: Span) -> str:
        out = self.code_span(span.text) if span.code else self.escape(span.text)
        if span.strong:
            out = _wrap(out, self.strong_mark)
        if span.em:
            out = _wrap(out, self.em_mark)
        return out

    def document(self, blocks: Sequence[Block]) -> str:
        return self.joined(blocks) + "\n"

    def joined(self, blocks: Sequence[Block]) -> str:
        return "\n\n".join(self.blocks(blocks))


# --------------------------------------------------------------------------- Markdown (GitHub / GitLab)

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~])")
_MD_LABEL = {"warning": "WARNING", "error": "ATTENTION", "info": "NOTE", "note": "NOTE", "success": "OK"}


def _md_text(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text)


def _md_code(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


class _Markdown(TextMarkup):
    escape = staticmethod(_md_text)
    code_span = staticmethod(_md_code)
    strong_mark = "**"
    em_mark = "*"

    def inline(self, spans: Inline, *, cell: bool = False) -> str:
        out = "".join(self.span(s) for s in merge(spans))
        if cell:
            out = out.replace("\n", "<br>")
            # a pipe inside a code span still ends a table cell in GFM unless escaped
            out = re.sub(r"(?<!\\)\|", r"\\|", out)
        return out

    def heading(self, block: Heading) -> str:
        return f"{'#' * block.level} {_md_text(block.text)}"

    def para(self, block: Para) -> str:
        return self.inline(block.spans).replace("\n", "  \n")

    def bullets(self, block: Bullets) -> str:
        return "\n".join(f"- {self.inline(item)}".replace("\n", "\n  ") for item in block.items)

    def table(self, block: Table) -> str:
        lines = ["| " + " | ".join(_md_text(h) for h in block.header) + " |", "|" + "---|" * len(block.header)]
        lines += ["| " + " | ".join(self.inline(cell, cell=True) for cell in row) + " |" for row in block.rows]
        return "\n".join(lines)

    def code(self, block: Code) -> str:
        fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", block.text)), default=0) + 1)
        return f"{fence}text\n{block.text}\n{fence}"

    def panel(self, block: Panel) -> str:
        inner = self.joined(block.blocks)
        quoted = "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))
        return f"> **{_MD_LABEL[block.kind]}: {_md_text(block.title)}**\n>\n{quoted}"

    def rule(self, block: Rule) -> str:
        return "---"


def markdown(blocks: list[Block]) -> str:
    return _Markdown().document(blocks)


# --------------------------------------------------------------------------- Jira wiki markup

#: Jira wiki's markup characters, escaped with a backslash wherever they stand.
_JIRA_SPECIAL = re.compile(r"([\\*_{}\[\]|^+~!])")
#: ... and those that are markup only in some places, escaped only there, so that
#: ``demo-gpu-missing`` stays readable: a hyphen opening or closing a word (``-text-``
#: strikes through), a doubled question mark (``??text??`` cites), the emoticons
#: (``(x)``, ``(/)``, ``:)``, ...), a ``#`` opening a line (a numbered list).
_JIRA_CONTEXT = re.compile(
    r"(?<![\w\\])-(?=\S)|(?<=[^\s\\])-(?![\w])|\?(?=\?)|(?<=\?)\?"
    r"|\((?=(?:x|/|!|\?|y|n|i|\\?\+|-|on|off|\*[rgby]?|flag|flagoff)\))|(?<=[:;])(?=[()PDp])|^(?=#)",
    re.MULTILINE,
)
_JIRA_PANEL = {
    "warning": "bgColor=#FFF7E6|borderColor=#FFAB00",
    "error": "bgColor=#FFEBE6|borderColor=#DE350B",
    "info": "bgColor=#DEEBFF|borderColor=#0052CC",
    "note": "bgColor=#EAE6FF|borderColor=#5243AA",
    "success": "bgColor=#E3FCEF|borderColor=#00875A",
}


def _jira_text(text: str) -> str:
    escaped = _JIRA_SPECIAL.sub(r"\\\1", text)
    return _JIRA_CONTEXT.sub(lambda m: "\\" + m.group(0), escaped)


def _jira_code(text: str) -> str:
    return "{{" + _jira_text(text) + "}}"


class _Jira(TextMarkup):
    escape = staticmethod(_jira_text)
    code_span = staticmethod(_jira_code)
    strong_mark = "*"
    em_mark = "_"

    def inline(self, spans: Inline) -> str:
        # Jira ends a table row or paragraph at a newline; \\ is its forced line break
        return "".join(self.span(s) for s in merge(spans)).replace("\n", " \\\\ ")

    def heading(self, block: Heading) -> str:
        return f"h{block.level}. {_jira_text(block.text)}"

    def para(self, block: Para) -> str:
        return self.inline(block.spans)

    def bullets(self, block: Bullets) -> str:
        return "\n".join(f"* {self.inline(item)}" for item in block.items)

    def table(self, block: Table) -> str:
        lines = ["||" + "||".join(_jira_text(h) for h in block.header) + "||"]
        lines += ["|" + "|".join(self.inline(cell) or " " for cell in row) + "|" for row in block.rows]
        return "\n".join(lines)

    def code(self, block: Code) -> str:
        return "{noformat}\n" + block.text.replace("{noformat}", "{ noformat}") + "\n{noformat}"

    def panel(self, block: Panel) -> str:
        title = _jira_text(block.title).replace("|", "\\|")
        return f"{{panel:title={title}|{_JIRA_PANEL[block.kind]}}}\n{self.joined(block.blocks)}\n{{panel}}"

    def rule(self, block: Rule) -> str:
        return "----"


def jira(blocks: list[Block]) -> str:
    return _Jira().document(blocks)


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


#: what the published ADF schema (@atlaskit/adf-schema, json-schema/v1/full.json) lets a panel hold
_ADF_IN_PANEL = frozenset({"paragraph", "heading", "bulletList", "orderedList", "codeBlock", "rule"})


class _Adf(BlockWriter[dict[str, Any]]):
    def blocks(self, blocks: Sequence[Block]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for block in blocks:
            node = self.block(block)
            out.append(node)
            if node["type"] == "panel":  # a table may not stand in a panel: it follows it
                out += [n for n in node["content"] if n["type"] not in _ADF_IN_PANEL]
                node["content"] = [n for n in node["content"] if n["type"] in _ADF_IN_PANEL]
        return out

    def heading(self, block: Heading) -> dict[str, Any]:
        return {"type": "heading", "attrs": {"level": block.level}, "content": [{"type": "text", "text": block.text}]}

    def para(self, block: Para) -> dict[str, Any]:
        return _adf_paragraph(block.spans)

    def bullets(self, block: Bullets) -> dict[str, Any]:
        return {
            "type": "bulletList",
            "content": [{"type": "listItem", "content": [_adf_paragraph(i)]} for i in block.items],
        }

    def table(self, block: Table) -> dict[str, Any]:
        rows = [
            {
                "type": "tableRow",
                "content": [
                    {"type": "tableHeader", "content": [_adf_paragraph((Span(h, strong=True),))]} for h in block.header
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
        return {"type": "table", "attrs": {"isNumberColumnEnabled": False, "layout": "default"}, "content": rows}

    def code(self, block: Code) -> dict[str, Any]:
        content = [{"type": "text", "text": block.text}] if block.text else []
        return {"type": "codeBlock", "attrs": {"language": "text"}, "content": content}

    def panel(self, block: Panel) -> dict[str, Any]:
        inner = [{"type": "heading", "attrs": {"level": 3}, "content": [{"type": "text", "text": block.title}]}]
        inner += self.blocks(block.blocks)
        return {"type": "panel", "attrs": {"panelType": block.kind}, "content": inner}

    def rule(self, block: Rule) -> dict[str, Any]:
        return {"type": "rule"}


def adf(blocks: list[Block]) -> dict[str, Any]:
    return {"version": 1, "type": "doc", "content": _Adf().blocks(blocks)}


# --------------------------------------------------------------------------- plain text (ServiceNow fields)


def _plain_inline(spans: Inline) -> str:
    return "".join(s.text for s in spans)


class _Plain(BlockWriter[str]):
    def heading(self, block: Heading) -> str:
        return block.text.upper() if block.level <= 2 else block.text

    def para(self, block: Para) -> str:
        return _plain_inline(block.spans)

    def bullets(self, block: Bullets) -> str:
        return "\n".join(f"- {_plain_inline(i)}" for i in block.items)

    def table(self, block: Table) -> str:
        lines = [" | ".join(block.header)]
        lines += [" | ".join(_plain_inline(cell) for cell in row) for row in block.rows]
        return "\n".join(lines)

    def code(self, block: Code) -> str:
        return block.text

    def panel(self, block: Panel) -> str:
        return f"*** {block.title} ***\n" + plain(block.blocks)

    def rule(self, block: Rule) -> str:
        return "-" * 20


def plain(blocks: Sequence[Block]) -> str:
    return "\n\n".join(_Plain().blocks(blocks))
