"""Pydantic's validation errors, mapped back to the TOML line and said in the runbook's terms."""

from __future__ import annotations

import re
import typing
from types import UnionType
from typing import Any

from pydantic import BaseModel, ValidationError

from cockpit.runbook.keylines import KeyLines
from cockpit.runbook.model import Runbook
from cockpit.runbook.problems import Loc, Problem, format_loc, shown_value, type_name


def _split_loc(loc: tuple[Any, ...], doc: Any, missing: bool) -> tuple[Loc, tuple[str, ...]]:
    """Split pydantic's ``loc`` into the path present in the document and the union tags after it."""
    path: list[str | int] = []
    node = doc
    for position, part in enumerate(loc):
        if isinstance(node, dict) and isinstance(part, str) and part in node:  # noqa: SIM114 - apart, so each index is narrowed
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        elif missing and position == len(loc) - 1:
            path.append(part)
            break
        else:
            return tuple(path), tuple(str(p) for p in loc[position:])
        path.append(part)
    return tuple(path), ()


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class holding the keys at ``loc`` (for listing the allowed keys)."""
    current: Any = Runbook
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            if not isinstance(part, str) or part not in current.model_fields:
                return None
            current = current.model_fields[part].annotation
        elif typing.get_origin(current) is list and isinstance(part, int):
            current = typing.get_args(current)[0]
        elif typing.get_origin(current) is dict and isinstance(part, str):
            current = typing.get_args(current)[1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, UnionType):
            models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
            if len(models) != 1:
                return annotation
            annotation = models[0]
        else:
            return annotation


def _expected(error: Any, path: Loc) -> str:
    kind = error["type"]
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        model = _model_at(path[:-1])
        allowed = ", ".join(model.model_fields) if model else ""
        return f"unknown key (expected one of: {allowed})" if allowed else "unknown key"
    if kind == "string_pattern_mismatch":
        return (
            "expected an id of lower-case letters, digits, '-' and '_', starting with a letter or digit, "
            f"got {shown_value(error['input'])}"
        )
    message = str(error["msg"])
    message = re.sub(r"^Input should be ", "expected ", message)
    if (
        kind.endswith("_type")
        or kind.endswith("_parsing")
        or kind.startswith(("enum", "literal", "greater", "less", "too_", "int_", "string_"))
    ):
        message += f", got {type_name(error['input'])} {shown_value(error['input'])}"
    return message


def validation_problems(exc: ValidationError, doc: Any, index: KeyLines, name: str) -> list[Problem]:
    groups: dict[Loc, list[tuple[Any, tuple[str, ...]]]] = {}
    for error in exc.errors(include_url=False):
        path, tags = _split_loc(error["loc"], doc, error["type"] == "missing")
        groups.setdefault(path, []).append((error, tags))
    problems = []
    for path, errors in groups.items():
        if len(errors) > 1 and all(tags for _, tags in errors):
            # one value failing every member of a union: say which types would do
            members = list(dict.fromkeys(tags[0] for _, tags in errors))
            value = errors[0][0]["input"]
            deeper = [e for e, tags in errors if len(tags) > 1]
            if deeper:  # a member matched the shape but failed inside: that is the useful error
                message = _expected(deeper[0], path)
            else:
                message = f"expected {' or '.join(members)}, got {type_name(value)} {shown_value(value)}"
        else:
            message = "; ".join(dict.fromkeys(_expected(e, path) for e, _ in errors))
        problems.append(Problem(name, index.line(path), format_loc(path), message))
    return sorted(problems, key=lambda p: p.line)
