"""Load a runbook file and refuse an invalid one with every problem, each with its line.

Three passes, each reporting all it finds: the bytes must be UTF-8 TOML (tomllib's
line and column), the document must fit the :class:`~cockpit.runbook.model.Runbook` model
(pydantic errors, mapped back to the TOML line of the offending key), and the model
must hold together (unique ids, references, placeholders, gating order). The third
pass needs a model, so it runs only when the second found nothing.

A problem reads ``FILE:LINE: field.path: what was expected``.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import re
import tomllib
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from types import UnionType
from typing import Any

from pydantic import BaseModel, ValidationError

from cockpit.errors import BadInput
from cockpit.runbook.builtins import CHECKS, TRIGGER_EVALUATORS
from cockpit.runbook.model import (
    NODE_FACTS,
    Item,
    ParamType,
    Runbook,
    Scope,
    Step,
    StepKind,
    TriggerMode,
    Verify,
)
from cockpit.runbook.placeholders import (
    control_character,
    placeholder_names,
    template_problems,
)

#: The runbook ``cockpit run`` and ``cockpit demo`` use when none is given.
DEFAULT_RUNBOOK = "driver-upgrade-r580"

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a runbook file, where it is, and what was expected."""

    file: str
    line: int
    field_path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where}: {self.field_path}: {self.message}" if self.field_path else f"{where}: {self.message}"


class RunbookInvalid(BadInput):
    """The runbook file is refused; ``problems`` holds every problem found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        first = problems[0]
        more = f" (and {len(problems) - 1} more; run 'cockpit check {first.file}' for all)" if len(problems) > 1 else ""
        super().__init__(f"invalid runbook: {first}{more}")


@dataclass(frozen=True)
class LoadedRunbook:
    runbook: Runbook
    path: str  # as given, or ``checklists/<file>`` for a shipped runbook
    sha256: str  # of the file's bytes, recorded in the session header
    text: str


# ---------------------------------------------------------------------------
# finding runbooks


def shipped_runbooks() -> dict[str, Traversable]:
    """The runbooks shipped in the ``checklists`` package: file stem -> resource."""
    root = resources.files("checklists")
    found = {
        entry.name.removesuffix(".toml"): entry
        for entry in root.iterdir()
        if entry.name.endswith(".toml") and entry.is_file()
    }
    return dict(sorted(found.items()))


def find_runbook(name_or_path: str | Path) -> Path | Traversable:
    """A runbook file: ``name_or_path`` if it names a file, else the shipped runbook of that id or stem."""
    text = str(name_or_path)
    path = Path(text)
    looks_like_path = isinstance(name_or_path, Path) or "/" in text or text.endswith(".toml") or path.exists()
    if looks_like_path:
        return path
    shipped = shipped_runbooks()
    if text in shipped:
        return shipped[text]
    for entry in shipped.values():  # a runbook whose id differs from its file stem
        try:
            header = tomllib.loads(entry.read_text(encoding="utf-8")).get("runbook", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        if isinstance(header, dict) and header.get("id") == text:
            return entry
    raise BadInput(f"no runbook file or shipped runbook named {text!r} (shipped: {', '.join(shipped) or 'none'})")


def load_runbook(path: str | Path | Traversable) -> LoadedRunbook:
    """Read, parse and check a runbook file; raise :class:`RunbookInvalid` or :class:`BadInput`."""
    if isinstance(path, str):
        path = Path(path)
    name = str(path) if isinstance(path, Path) else f"checklists/{path.name}"
    if isinstance(path, Path):
        if path.is_dir():
            raise BadInput(f"{name}: is a directory, expected a runbook TOML file")
        if not path.exists():
            raise BadInput(f"{name}: no such file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{name}: cannot read: {exc.strerror or exc}") from None
    return parse_runbook(data, name)


def load(name_or_path: str | Path = DEFAULT_RUNBOOK) -> LoadedRunbook:
    """:func:`find_runbook` then :func:`load_runbook`."""
    return load_runbook(find_runbook(name_or_path))


def parse_runbook(data: bytes, name: str) -> LoadedRunbook:
    """Check the bytes of a runbook file named ``name`` (used in problems)."""
    text = _decode(data, name)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RunbookInvalid([_syntax_problem(exc, name, text)]) from None
    index = KeyLines(text)
    dated = {loc for loc, value in _leaves(doc) if isinstance(value, (datetime.date, datetime.time))}
    # no runbook field is a date; JSON would quietly turn one into a string
    problems = [
        Problem(
            name, index.line(loc), format_loc(loc), "a TOML date/time is not a valid value here; quote it if it is text"
        )
        for loc in sorted(dated, key=index.line)
    ]
    try:
        # strict, from JSON: strings still name enum members, but "yes" is no boolean
        # and "5" no integer (lax Python-mode validation would coerce both)
        runbook = Runbook.model_validate_json(json.dumps(doc, default=str), strict=True)
    except ValidationError as exc:
        paths = {format_loc(loc) for loc in dated}
        problems += [p for p in _validation_problems(exc, doc, index, name) if p.field_path not in paths]
        raise RunbookInvalid(sorted(problems, key=lambda p: p.line)) from None
    if problems:
        raise RunbookInvalid(problems)
    problems = [Problem(name, index.line(loc), format_loc(loc), msg) for loc, msg in cross_check(runbook)]
    if problems:
        raise RunbookInvalid(sorted(problems, key=lambda p: p.line))
    return LoadedRunbook(runbook=runbook, path=name, sha256=hashlib.sha256(data).hexdigest(), text=text)


def _leaves(node: Any, loc: Loc = ()) -> Iterator[tuple[Loc, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*loc, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, (*loc, index))
    else:
        yield loc, node


def _decode(data: bytes, name: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RunbookInvalid(
            [
                Problem(
                    name,
                    line,
                    "",
                    f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column}; a runbook is a UTF-8 TOML file",
                )
            ]
        ) from None
    return text.removeprefix("\ufeff")


_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _syntax_problem(exc: tomllib.TOMLDecodeError, name: str, text: str) -> Problem:
    message = str(exc)
    match = _AT.search(message)
    if match:
        return Problem(
            name, int(match.group(1)), "", f"invalid TOML: {message[: match.start()]} (column {match.group(2)})"
        )
    end = re.search(r"\s*\(at end of document\)$", message)
    if end:
        # tomllib does not number the end of the document: report the last line
        last = text.count("\n") + (0 if text.endswith("\n") else 1)
        return Problem(name, max(last, 1), "", f"invalid TOML: {message[: end.start()]} at end of document")
    return Problem(name, 1, "", f"invalid TOML: {message}")


# ---------------------------------------------------------------------------
# key path -> line


class KeyLines:
    """Line of each key path of a (valid) TOML document, by scanning its text.

    Paths use the document's shape: ``("stages", 2, "steps", 0, "run")``, with the
    index of each array-of-tables entry (``[[stages]]``, ``[[stages.steps]]``) and of
    each element of an inline array. :meth:`line` falls back to the nearest parent.
    """

    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)
        self.i = 0
        self.lines: dict[Loc, int] = {}
        self._newlines = [m.start() for m in re.finditer("\n", text)]
        self._arrays: dict[Loc, int] = {}
        # a construct the scanner does not follow: keep the lines found so far;
        # problems then point at the nearest parent found, never crash the load
        with contextlib.suppress(IndexError, ValueError, AssertionError, tomllib.TOMLDecodeError):
            self._scan()

    def line(self, loc: Loc) -> int:
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return 1

    # scanning (the text already parsed with tomllib, so it is valid TOML)

    def _line_at(self, pos: int) -> int:
        from bisect import bisect_left

        return bisect_left(self._newlines, pos) + 1

    def _mark(self, loc: Loc, pos: int) -> None:
        self.lines.setdefault(loc, self._line_at(pos))

    def _skip_ws(self, newlines: bool) -> None:
        s = self.s
        while self.i < self.n:
            c = s[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.i += 1
            elif c == "#" and newlines:
                end = s.find("\n", self.i)
                self.i = self.n if end < 0 else end
            else:
                return

    def _scan(self) -> None:
        table: Loc = ()
        while True:
            self._skip_ws(newlines=True)
            if self.i >= self.n:
                return
            start = self.i
            if self.s.startswith("[[", self.i):
                self.i += 2
                keys = self._key()
                parent = self._resolve(keys[:-1])
                array = (*parent, keys[-1])
                index = self._arrays.get(array, 0)
                self._arrays[array] = index + 1
                self._mark(array, start)
                table = (*array, index)
                self._mark(table, start)
                self.i = self.s.index("]]", self.i) + 2
            elif self.s[self.i] == "[":
                self.i += 1
                keys = self._key()
                table = self._resolve(keys)
                self._mark(table, start)
                self.i = self.s.index("]", self.i) + 1
            else:
                self._keyval(table, start)
            self._skip_ws(newlines=False)
            if self.i < self.n and self.s[self.i] == "#":
                self._skip_ws(newlines=True)

    def _resolve(self, keys: list[str]) -> Loc:
        loc: Loc = ()
        for key in keys:
            loc = (*loc, key)
            if loc in self._arrays:  # a header below an array of tables names its last entry
                loc = (*loc, self._arrays[loc] - 1)
        return loc

    def _keyval(self, table: Loc, start: int) -> None:
        keys = self._key()
        for depth in range(1, len(keys) + 1):
            self._mark(table + tuple(keys[:depth]), start)
        self._skip_ws(newlines=False)
        self.i += 1  # '='
        self._skip_ws(newlines=False)
        self._value(table + tuple(keys))

    def _key(self) -> list[str]:
        keys: list[str] = []
        s = self.s
        while True:
            self._skip_ws(newlines=False)
            c = s[self.i]
            if c == '"':
                end = self._basic_string_end(self.i)
                keys.append(tomllib.loads(f"k = {s[self.i : end]}")["k"])
                self.i = end
            elif c == "'":
                end = s.index("'", self.i + 1) + 1
                keys.append(s[self.i + 1 : end - 1])
                self.i = end
            else:
                match = re.compile(r"[A-Za-z0-9_-]+").match(s, self.i)
                assert match is not None
                keys.append(match.group(0))
                self.i = match.end()
            self._skip_ws(newlines=False)
            if self.i < self.n and s[self.i] == ".":
                self.i += 1
                continue
            return keys

    def _basic_string_end(self, pos: int) -> int:
        j = pos + 1
        while self.s[j] != '"':
            j += 2 if self.s[j] == "\\" else 1
        return j + 1

    def _multiline_end(self, pos: int, quote: str) -> int:
        j = pos + 3
        while True:
            if quote == '"' and self.s[j] == "\\":
                j += 2
                continue
            if self.s.startswith(quote * 3, j):
                j += 3
                extra = 0
                while extra < 2 and j < self.n and self.s[j] == quote:  # up to two quotes may end the content
                    j += 1
                    extra += 1
                return j
            j += 1

    def _value(self, loc: Loc) -> None:
        s = self.s
        c = s[self.i]
        if s.startswith('"""', self.i) or s.startswith("'''", self.i):
            self.i = self._multiline_end(self.i, c)
        elif c == '"':
            self.i = self._basic_string_end(self.i)
        elif c == "'":
            self.i = s.index("'", self.i + 1) + 1
        elif c == "[":
            self.i += 1
            index = 0
            while True:
                self._skip_ws(newlines=True)
                if s[self.i] == "]":
                    self.i += 1
                    return
                self._mark((*loc, index), self.i)
                self._value((*loc, index))
                self._skip_ws(newlines=True)
                if s[self.i] == ",":
                    self.i += 1
                index += 1
        elif c == "{":
            self.i += 1
            while True:
                self._skip_ws(newlines=False)
                if s[self.i] == "}":
                    self.i += 1
                    return
                if s[self.i] == ",":
                    self.i += 1
                    continue
                self._keyval(loc, self.i)
        else:  # number, bool, date-time: up to the next delimiter
            match = re.compile(r"[^,\]}\n#]*").match(s, self.i)
            assert match is not None
            self.i = match.end()


# ---------------------------------------------------------------------------
# pydantic errors -> problems


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def format_loc(loc: Loc) -> str:
    """``("stages", 2, "steps", 0, "run")`` -> ``stages[2].steps[0].run``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part if _BARE.match(part) else '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out += f".{text}" if out else text
    return out


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


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
            f"got {_shown(error['input'])}"
        )
    message = str(error["msg"])
    message = re.sub(r"^Input should be ", "expected ", message)
    if (
        kind.endswith("_type")
        or kind.endswith("_parsing")
        or kind.startswith(("enum", "literal", "greater", "less", "too_", "int_", "string_"))
    ):
        message += f", got {_type_name(error['input'])} {_shown(error['input'])}"
    return message


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(value), type(value).__name__
    )


def _validation_problems(exc: ValidationError, doc: Any, index: KeyLines, name: str) -> list[Problem]:
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
                message = f"expected {' or '.join(members)}, got {_type_name(value)} {_shown(value)}"
        else:
            message = "; ".join(dict.fromkeys(_expected(e, path) for e, _ in errors))
        problems.append(Problem(name, index.line(path), format_loc(path), message))
    return sorted(problems, key=lambda p: p.line)


# ---------------------------------------------------------------------------
# cross-checks over a valid model

_INT_FIELDS = {"rest": 0, "max_parallel": 1, "failure_budget": 0}


def check_parameter_values(runbook: Runbook, values: typing.Mapping[str, object]) -> None:
    """Refuse ``--param`` values the runbook's own checks would refuse as defaults.

    The values stand in for the defaults and the cross-checks run again (wave sizes,
    ``max_parallel``, the failure budget, timeouts), so a window never starts with a
    setting ``cockpit check`` would call invalid. Raises :class:`BadInput` with the first.
    """
    parameters = {
        name: param.model_copy(update={"default": values[name]}) if name in values else param
        for name, param in runbook.parameters.items()
    }
    problems = cross_check(runbook.model_copy(update={"parameters": parameters}))
    if problems:
        loc, message = problems[0]
        text = message.replace(" defaults to ", " is ")
        raise BadInput(f"--param: {format_loc(loc)}: {text}")


def cross_check(runbook: Runbook) -> list[tuple[Loc, str]]:
    """Problems that span the document, as (key path, message); empty when it holds together."""
    return list(_cross_check(runbook))


def _duplicates(ids: list[str]) -> Iterator[tuple[int, str]]:
    seen: set[str] = set()
    for index, ident in enumerate(ids):
        if ident in seen:
            yield index, ident
        seen.add(ident)


def _int_ref(runbook: Runbook, loc: Loc, value: int | str, minimum: int) -> Iterator[tuple[Loc, str]]:
    if isinstance(value, int):
        if value < minimum:
            yield loc, f"expected an integer >= {minimum}, got {value}"
        return
    param = runbook.parameters.get(value)
    if param is None:
        yield (
            loc,
            f"names parameter {value!r}, which is not defined (expected an integer or the name of an int parameter)",
        )
    elif param.type is not ParamType.INT:
        yield loc, f"names parameter {value!r} of type {param.type}, expected an int parameter"
    elif isinstance(param.default, int) and not isinstance(param.default, bool) and param.default < minimum:
        yield loc, f"parameter {value!r} defaults to {param.default}, expected an integer >= {minimum}"


def _template(runbook: Runbook, loc: Loc, template: str) -> Iterator[tuple[Loc, str]]:
    for problem in template_problems(template):
        yield loc, problem
    known = set(runbook.parameters) | NODE_FACTS
    for name in placeholder_names(template):
        if name not in known:
            yield (
                loc,
                f"placeholder {{{name}}} names no parameter or node fact "
                f"(parameters: {', '.join(sorted(runbook.parameters)) or 'none'}; "
                f"node facts: {', '.join(sorted(NODE_FACTS))})",
            )


def _when(runbook: Runbook, loc: Loc, when: dict[str, str]) -> Iterator[tuple[Loc, str]]:
    for key, value in when.items():
        param = runbook.parameters.get(key)
        if param is None:
            yield (
                (*loc, "when", key),
                f"names no parameter (parameters: {', '.join(sorted(runbook.parameters)) or 'none'})",
            )
        elif param.type is ParamType.CHOICE and param.choices and value not in param.choices:
            yield (*loc, "when", key), f"expected one of {', '.join(param.choices)}, got {value!r}"


def _steps(runbook: Runbook, base: Loc, steps: list[Step]) -> Iterator[tuple[Loc, str]]:
    for index, ident in _duplicates([s.id for s in steps]):
        yield (*base, "steps", index, "id"), f"duplicate step id {ident!r} in this stage"
    for index, step in enumerate(steps):
        loc = (*base, "steps", index)
        if step.kind is StepKind.COMMAND and not step.run:
            yield loc, 'a command step needs run = "..."'
        if step.kind in (StepKind.PROBE, StepKind.RECORD) and step.run:
            yield (*loc, "run"), f"a {step.kind} step runs the built-in probe: remove run"
        if step.run:
            yield from _template(runbook, (*loc, "run"), step.run)
        yield from _int_ref(runbook, (*loc, "timeout_s"), step.timeout_s, 1)
        yield from _when(runbook, loc, step.when)


def _items(runbook: Runbook, base: Loc, items: list[Item], step_ids: set[str]) -> Iterator[tuple[Loc, str]]:
    for index, ident in _duplicates([i.id for i in items]):
        yield (*base, "items", index, "id"), f"duplicate item id {ident!r} in this stage"
    for index, item in enumerate(items):
        loc = (*base, "items", index)
        if item.verify is Verify.STEP:
            if not item.step:
                yield loc, 'verify = "step" needs step = "<id of a step of this stage>"'
            elif item.step not in step_ids:
                yield (*loc, "step"), f"names no step of this stage (steps: {', '.join(sorted(step_ids)) or 'none'})"
        elif item.step:
            yield (*loc, "step"), f'is used only with verify = "step" (verify is {item.verify!s})'
        if item.verify is Verify.CHECK:
            if not item.check:
                yield loc, 'verify = "check" needs check = "<built-in check>"'
            elif item.check not in CHECKS:
                yield (*loc, "check"), f"unknown check {item.check!r} (expected one of: {', '.join(CHECKS)})"
        elif item.check:
            yield (*loc, "check"), f'is used only with verify = "check" (verify is {item.verify!s})'
        if item.verify is Verify.COMMAND:
            if not item.command:
                yield loc, 'verify = "command" needs command = "..."'
            else:
                yield from _template(runbook, (*loc, "command"), item.command)
        else:
            if item.command:
                yield (*loc, "command"), f'is used only with verify = "command" (verify is {item.verify!s})'
            if item.expect is not None:
                yield (*loc, "expect"), f'is used only with verify = "command" (verify is {item.verify!s})'
        if item.expect is not None and item.expect.stdout_matches is not None:
            try:
                re.compile(item.expect.stdout_matches)
            except re.error as exc:
                yield (*loc, "expect", "stdout_matches"), f"not a valid regular expression: {exc}"
        yield from _when(runbook, loc, item.when)


def _parameters(runbook: Runbook) -> Iterator[tuple[Loc, str]]:
    for name, param in runbook.parameters.items():
        loc: Loc = ("parameters", name)
        if param.type is ParamType.CHOICE and not param.choices:
            yield loc, 'type = "choice" needs choices = [...]'
        if param.type is not ParamType.CHOICE and param.choices is not None:
            yield (*loc, "choices"), f'choices are used only with type = "choice" (type is {param.type!s})'
        if name in NODE_FACTS:
            yield loc, f"{name!r} is a node fact; a parameter cannot take its name"
        default = param.default
        if default is None:
            continue
        expected = {
            ParamType.STR: (str,),
            ParamType.CHOICE: (str,),
            ParamType.INT: (int,),
            ParamType.FLOAT: (int, float),
            ParamType.BOOL: (bool,),
        }[param.type]
        if (isinstance(default, bool) and param.type is not ParamType.BOOL) or not isinstance(default, expected):
            yield (
                (*loc, "default"),
                f"expected a default of type {param.type!s}, got {_type_name(default)} {_shown(default)}",
            )
        elif param.type is ParamType.CHOICE and param.choices and default not in param.choices:
            yield (*loc, "default"), f"expected one of {', '.join(param.choices)}, got {default!r}"
        elif isinstance(default, str) and (bad := control_character(default)) is not None:
            yield (*loc, "default"), f"control character {bad} not allowed in a value"


def _cross_check(runbook: Runbook) -> Iterator[tuple[Loc, str]]:
    yield from _parameters(runbook)

    waves = runbook.waves
    for field, minimum in _INT_FIELDS.items():
        value = getattr(waves, field)
        if field == "rest" and isinstance(value, str):
            minimum = 1  # a parameter that sizes the later waves must size them
        yield from _int_ref(runbook, ("waves", field), value, minimum)

    for index, ident in _duplicates([t.id for t in runbook.triggers]):
        yield ("triggers", index, "id"), f"duplicate trigger id {ident!r}"
    for index, trigger in enumerate(runbook.triggers):
        loc: Loc = ("triggers", index)
        if trigger.mode is TriggerMode.AUTO:
            if not trigger.evaluator:
                yield loc, 'an auto trigger needs evaluator = "<built-in evaluator>"'
            elif trigger.evaluator not in TRIGGER_EVALUATORS:
                yield (
                    (*loc, "evaluator"),
                    f"unknown evaluator {trigger.evaluator!r} (expected one of: {', '.join(TRIGGER_EVALUATORS)})",
                )
        elif trigger.evaluator is not None:
            yield (*loc, "evaluator"), "a manual trigger is raised by a person: remove evaluator"

    for index, ident in _duplicates([s.id for s in runbook.stages]):
        yield ("stages", index, "id"), f"duplicate stage id {ident!r}"

    first_destructive: int | None = None
    armed_at: int | None = None
    node_positions = [i for i, s in enumerate(runbook.stages) if s.scope is Scope.NODE]
    for index, stage in enumerate(runbook.stages):
        loc = ("stages", index)
        yield from _steps(runbook, loc, stage.steps)
        yield from _items(runbook, loc, stage.items, {s.id for s in stage.steps})
        for step_index, step in enumerate(stage.steps):
            if step.destructive:
                if stage.scope is not Scope.NODE:
                    yield (
                        (*loc, "steps", step_index, "destructive"),
                        "a destructive step belongs in a node stage or in [rollback]",
                    )
                if first_destructive is None:
                    first_destructive = index
        if stage.arms_triggers:
            if stage.scope is not Scope.WINDOW:
                yield (*loc, "arms_triggers"), "triggers are armed once per window: set it on a window stage"
            elif armed_at is None:
                armed_at = index

    if not node_positions:
        yield (
            ("stages",),
            'expected at least one stage with scope = "node" (drain, record, upgrade, reboot, smoke, expand)',
        )
    elif node_positions != list(range(node_positions[0], node_positions[-1] + 1)):
        gap = next(i for i in range(node_positions[0], node_positions[-1]) if i not in node_positions)
        yield ("stages", gap, "scope"), "node stages must be consecutive: window stages go before or after them"
    if first_destructive is not None:
        if armed_at is None or armed_at > first_destructive:
            yield (
                ("stages", first_destructive),
                "destructive step before the triggers are armed: "
                "add arms_triggers = true to a window stage listed before this one",
            )
        if not runbook.triggers:
            yield (
                ("stages", first_destructive),
                "destructive steps need rollback triggers written down: add [[triggers]]",
            )

    if runbook.rollback is not None:
        base: Loc = ("rollback",)
        yield from _steps(runbook, base, runbook.rollback.steps)
        yield from _items(runbook, base, runbook.rollback.items, {s.id for s in runbook.rollback.steps})
