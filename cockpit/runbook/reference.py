"""The runbook reference, written from the runbook model itself.

Every TOML table a runbook may hold is a pydantic model in :mod:`cockpit.runbook.model`;
this walks them from :class:`~cockpit.runbook.model.Runbook` down and writes one Markdown
table per TOML table: each key, its type, its default and what it means. The meaning is the
comment the model's source gives the field (a ``#:`` line above it, or a ``#`` comment after
it), so a field without one is a gap the tests name, and the reference cannot drift from
what the loader accepts.
"""

from __future__ import annotations

import ast
import enum
import inspect
import io
import json
import textwrap
import tokenize
import types
import typing
from dataclasses import dataclass

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from cockpit.runbook.model import Runbook


@dataclass(frozen=True)
class Table:
    """One TOML table of a runbook: where it sits and the model that reads it."""

    path: str  # as a runbook writes it: ``[[stages.steps]]``
    model: type[BaseModel]


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """The comment its class body gives each field: ``#:`` lines above it, then a trailing
    ``# ...`` on its own line, joined."""
    source = textwrap.dedent(inspect.getsource(model))
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    comments: dict[str, str] = {}
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            above.insert(0, lines[row].strip().removeprefix("#:").strip())
            row -= 1
        after = ""
        for tok in _tokens(lines[node.end_lineno - 1 if node.end_lineno else node.lineno - 1]):
            after = tok
        comments[node.target.id] = " ".join([*above, after]).strip()
    return comments


def member_comments(kind: type[enum.Enum]) -> str:
    """``value``: comment for each member of an enum that comments its members."""
    source = textwrap.dedent(inspect.getsource(kind)).splitlines()
    said = []
    for member in kind:
        for line in source:
            if line.strip().startswith(f"{member.name} =") and _tokens(line):
                said.append(f"`{member.value}`: {_tokens(line)[-1]}")
    return "; ".join(said)


def enum_of(annotation: object) -> type[enum.Enum] | None:
    """The enum a field holds, directly or as an optional."""
    bare = _strip(annotation)
    return bare if isinstance(bare, type) and issubclass(bare, enum.Enum) else None


def meaning(model: type[BaseModel], name: str, comments: dict[str, str]) -> str:
    """What a key means: its comment, and what each of its enum's values does."""
    parts = [comments.get(name, "")]
    kind = enum_of(model.model_fields[name].annotation)
    if kind is not None:
        parts.append(member_comments(kind))
    return ". ".join(p for p in parts if p).replace("``", "`")


def _tokens(line: str) -> list[str]:
    """The trailing comment of one source line, if any (tokenize knows strings from ``#``)."""
    try:
        found = [
            t.string.removeprefix("#").strip()
            for t in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline)
            if t.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, IndentationError):
        return []
    return found


def type_text(annotation: object) -> str:
    """A field's type in a runbook writer's words: ``str``, ``int or str``, ``list of str``,
    one of an enum's values."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin in (typing.Union, types.UnionType):
        parts = [type_text(a) for a in args if a is not type(None)]
        return " or ".join(parts)
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        return f"table of {type_text(args[0])} → {type_text(args[1])}"
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" for a in args)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation)


def default_text(info: FieldInfo) -> str:
    """The field's default as TOML would spell it, or *required*."""
    if info.is_required():
        return "*required*"
    value = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]  # pydantic's factories take no argument here
    if value is PydanticUndefined or value is None:
        return "—"
    if isinstance(value, BaseModel):
        return "(see its table)"
    return f"`{json.dumps(value, default=_plain)}`"


def _plain(value: object) -> object:
    """An enum as the word a runbook writes."""
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(type(value).__name__)


def nested_model(annotation: object) -> tuple[type[BaseModel], bool] | None:
    """The model a field holds (and whether as an array of tables), if it holds one."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return nested_model(args[0])
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            found = nested_model(arg)
            if found:
                return found
        return None
    if origin is list and args:
        inner = nested_model(args[0])
        return (inner[0], True) if inner else None
    if origin is dict and len(args) == 2:
        inner = nested_model(args[1])
        return (inner[0], False) if inner else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None


def tables(model: type[BaseModel] = Runbook, prefix: str = "") -> list[Table]:
    """Every TOML table under ``model``, depth first, in the model's field order."""
    found: list[Table] = []
    for name, info in model.model_fields.items():
        held = nested_model(info.annotation)
        if held is None:
            continue
        inner, many = held
        is_map = typing.get_origin(_strip(info.annotation)) is dict
        path = f"{prefix}{name}" + (".NAME" if is_map else "")
        found.append(Table(f"[[{path}]]" if many else f"[{path}]", inner))
        found.extend(tables(inner, f"{path}."))
    return found


def _strip(annotation: object) -> object:
    """The annotation without ``Annotated`` and ``None``."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _strip(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _strip(rest[0]) if len(rest) == 1 else annotation
    return annotation


def undocumented() -> list[str]:
    """``Model.field`` for each runbook key whose model gives it no comment."""
    gaps: list[str] = []
    seen: set[type[BaseModel]] = set()
    for table in tables():
        if table.model in seen:
            continue
        seen.add(table.model)
        comments = field_comments(table.model)
        for name in table.model.model_fields:
            held = nested_model(table.model.model_fields[name].annotation)
            if not meaning(table.model, name, comments) and held is None:
                gaps.append(f"{table.model.__name__}.{name}")
    return gaps


def reference_markdown() -> str:
    """The whole reference page."""
    out = [
        "# Runbook reference",
        "",
        "Generated from `cockpit/runbook/model.py` when the documentation is built: every",
        "table and key the loader accepts, nothing else (an unknown key is an error). How to",
        "write a runbook, with examples, is in [Runbooks](runbooks.md).",
        "",
    ]
    written: set[type[BaseModel]] = set()
    for table in [Table("(top level)", Runbook), *tables()]:
        if table.model in written:  # a rollback's steps are stages' steps: one table, its first place
            continue
        written.add(table.model)
        # the class's own docstring, never one inherited from BaseModel
        doc = inspect.cleandoc(table.model.__dict__.get("__doc__") or "")
        if table.model is Runbook:
            doc = "The top of the file: these keys hold the tables below."
        comments = field_comments(table.model)
        out += [f"## `{table.path}`" if table.model is not Runbook else "## Top level", ""]
        if doc:
            out += [" ".join(doc.split()).replace("``", "`"), ""]
        out += ["| Key | Type | Default | Meaning |", "|---|---|---|---|"]
        for name, info in table.model.model_fields.items():
            said = meaning(table.model, name, comments).replace("|", "\\|")
            kind = type_text(info.annotation).replace("|", "\\|")
            default = default_text(info).replace("|", "\\|")
            out.append(f"| `{name}` | {kind} | {default} | {said} |")
        out.append("")
    return "\n".join(out)
