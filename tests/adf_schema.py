"""Atlassian's published ADF JSON schema (tests/fixtures/tickets/adf-full-v1.json, from
@atlaskit/adf-schema; see tests/fixtures/README.md) applied to a document.

jsonschema's Draft 4 validator took 18 s on one 40 KB ticket here (it builds an error for
every branch of every ``anyOf`` it tries), so this walks the same keywords the schema uses
(type, enum, properties, additionalProperties, required, items, anyOf, allOf, $ref,
min/maxItems, minLength, minimum, maximum, pattern), stopping at the first branch that
holds. ``tests/core/test_ticket_api.py`` holds it to jsonschema's verdict on small documents.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parent / "fixtures" / "tickets" / "adf-full-v1.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "null": (type(None),),
    "number": (int, float), "integer": (int,),
}  # fmt: skip


def _is(value: object, kind: str) -> bool:
    if kind in ("number", "integer") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[kind])


def _ref(ref: str) -> dict[str, Any]:
    assert ref.startswith("#/definitions/"), ref
    found: dict[str, Any] = SCHEMA["definitions"][ref.removeprefix("#/definitions/")]
    return found


def problem(value: object, schema: dict[str, Any], path: str = "doc") -> str | None:
    """The first way ``value`` breaks ``schema`` (None: it holds)."""
    if "$ref" in schema:
        return problem(value, _ref(schema["$ref"]), path)
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_is(value, k) for k in kinds):
            return f"{path}: expected {kind}, got {type(value).__name__}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: {value!r} is not one of {schema['enum']}"
    for sub in schema.get("allOf", []):
        if (why := problem(value, sub, path)) is not None:
            return why
    if "anyOf" in schema:
        whys = [problem(value, sub, path) for sub in schema["anyOf"]]
        if all(w is not None for w in whys):
            what = value.get("type") if isinstance(value, dict) else type(value).__name__
            return f"{path}: {what!r} matches none of its {len(whys)} alternatives"
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                return f"{path}: {name!r} is required"
        for name, item in value.items():
            if name in props:
                if (why := problem(item, props[name], f"{path}.{name}")) is not None:
                    return why
            elif schema.get("additionalProperties") is False:
                return f"{path}: {name!r} is not allowed"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            return f"{path}: {len(value)} items"
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                if (why := problem(item, items, f"{path}[{i}]")) is not None:
                    return why
        elif isinstance(items, list):
            for i, (item, sub) in enumerate(zip(value, items, strict=False)):
                if (why := problem(item, sub, f"{path}[{i}]")) is not None:
                    return why
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{path}: shorter than {schema['minLength']}"
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            return f"{path}: does not match {schema['pattern']}"
    if _is(value, "number") and isinstance(value, int | float):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path}: below {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path}: above {schema['maximum']}"
    return None


def adf_problems(document: object) -> list[str]:
    """Why ``document`` is not ADF by Atlassian's schema (empty: it is)."""
    why = problem(document, SCHEMA)
    return [] if why is None else [why]
