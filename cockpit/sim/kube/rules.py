"""The API server's rules the emulator (:mod:`cockpit.sim.kube.api`) follows, as pure functions:
merge patches (RFC 7386, and the strategic kind for the maps and scalars it takes), the size
limit on an object's annotations, query booleans, and label and field selectors.
"""

from __future__ import annotations

import copy
from typing import Any

KubeObject = dict[str, Any]


class BadRequest(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def merge_patch(target: Any, patch: Any, *, strategic: bool) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        if strategic and isinstance(patch, list):
            raise BadRequest(422, "Invalid", "emulator: strategic merge of lists is not implemented")
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if strategic and key.startswith("$"):
            raise BadRequest(422, "Invalid", f"emulator: strategic merge directive {key} is not implemented")
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value, strategic=strategic)
    return out


#: all of an object's annotations, keys and values, at most this many bytes
#: (k8s.io/apimachinery pkg/api/validation/objectmeta.go, TotalAnnotationSizeLimitB)
ANNOTATIONS_LIMIT = 256 * 1024


def check_annotations(meta: KubeObject) -> None:
    size = sum(len(k) + len(str(v)) for k, v in (meta.get("annotations") or {}).items())
    if size > ANNOTATIONS_LIMIT:
        raise BadRequest(422, "Invalid", f"metadata.annotations: Too long: must have at most {ANNOTATIONS_LIMIT} bytes")


def parse_bool(text: str) -> bool:
    """Query booleans as the API server parses them (Go's strconv.ParseBool)."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False", ""):
        return False
    raise BadRequest(400, "BadRequest", f"invalid boolean {text!r}")


def field_value(obj: KubeObject, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_selector(text: str, *, fields: set[str] | None) -> list[tuple[str, str, str]]:
    """``k=v,k!=v,k,!k`` into (op, key, value); set-based forms refused."""
    terms: list[tuple[str, str, str]] = []
    for raw in filter(None, (t.strip() for t in text.split(","))):
        if " in " in raw or " notin " in raw or "(" in raw:
            raise BadRequest(400, "BadRequest", f"emulator: set-based selector {raw!r} is not implemented")
        if "!=" in raw:
            key, value = raw.split("!=", 1)
            op = "!="
        elif "==" in raw:
            key, value = raw.split("==", 1)
            op = "="
        elif "=" in raw:
            key, value = raw.split("=", 1)
            op = "="
        elif raw.startswith("!"):
            if fields is not None:
                raise BadRequest(400, "BadRequest", f"invalid field selector: {raw}")
            key, value, op = raw[1:], "", "!exists"
        else:
            if fields is not None:
                raise BadRequest(400, "BadRequest", f"invalid field selector: {raw}")
            key, value, op = raw, "", "exists"
        key = key.strip()
        if fields is not None and key not in fields | {"metadata.name", "metadata.namespace"}:
            raise BadRequest(400, "BadRequest", f'field label not supported: "{key}"')
        terms.append((op, key, value.strip()))
    return terms


def matches(obj: KubeObject, labels: list[tuple[str, str, str]], fields: list[tuple[str, str, str]]) -> bool:
    have: dict[str, str] = obj.get("metadata", {}).get("labels") or {}
    for op, key, value in labels:
        if (
            (op == "exists" and key not in have)
            or (op == "!exists" and key in have)
            or (op == "=" and have.get(key) != value)
            or (op == "!=" and have.get(key) == value)
        ):
            return False
    for op, key, value in fields:
        got = field_value(obj, key)
        if (op == "=" and got != value) or (op == "!=" and got == value):
            return False
    return True
