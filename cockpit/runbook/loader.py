"""Load a runbook file and refuse an invalid one with every problem, each with its line.

Three passes, each reporting all it finds: the bytes must be UTF-8 TOML (tomllib's
line and column), the document must fit the :class:`~cockpit.runbook.model.Runbook` model
(pydantic errors, mapped back to the TOML line of the offending key), and the model
must hold together (unique ids, references, placeholders, gating order). The third
pass needs a model, so it runs only when the second found nothing.

The passes live in their own modules: :mod:`~cockpit.runbook.keylines` (key path -> line),
:mod:`~cockpit.runbook.validation` (pydantic errors -> problems) and
:mod:`~cockpit.runbook.crosscheck` (the model as a whole); :mod:`~cockpit.runbook.problems`
holds what they report. A problem reads ``FILE:LINE: field.path: what was expected``.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cockpit.errors import BadInput, read_user_file
from cockpit.runbook.crosscheck import check_parameter_values, cross_check
from cockpit.runbook.keylines import KeyLines
from cockpit.runbook.model import Runbook
from cockpit.runbook.problems import Loc, Problem, RunbookInvalid, format_loc
from cockpit.runbook.validation import validation_problems

# the names callers have always imported from here, wherever they now live
__all__ = [
    "DEFAULT_RUNBOOK",
    "KeyLines",
    "LoadedRunbook",
    "Problem",
    "RunbookInvalid",
    "check_parameter_values",
    "cross_check",
    "find_runbook",
    "format_loc",
    "load",
    "load_runbook",
    "parse_runbook",
    "shipped_runbooks",
]

#: The runbook ``cockpit run`` and ``cockpit demo`` use when none is given.
DEFAULT_RUNBOOK = "driver-upgrade-r580"


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


#: A runbook is a page of TOML; anything this big is not one (and would be slow to check).
RUNBOOK_MAX_BYTES = 4 * 1024 * 1024


def load_runbook(path: str | Path | Traversable) -> LoadedRunbook:
    """Read, parse and check a runbook file; raise :class:`RunbookInvalid` or :class:`BadInput`."""
    if isinstance(path, str):
        path = Path(path)
    name = str(path) if isinstance(path, Path) else f"checklists/{path.name}"
    if isinstance(path, Path):
        return parse_runbook(read_user_file(path, "a runbook TOML file", max_bytes=RUNBOOK_MAX_BYTES), name)
    return parse_runbook(path.read_bytes(), name)  # a shipped runbook, inside the package


def load(name_or_path: str | Path = DEFAULT_RUNBOOK) -> LoadedRunbook:
    """:func:`find_runbook` then :func:`load_runbook`."""
    return load_runbook(find_runbook(name_or_path))


def parse_runbook(data: bytes, name: str) -> LoadedRunbook:
    """Check the bytes of a runbook file named ``name`` (used in problems).

    The same bytes under the same name give the same result, kept (a frozen model): a
    window's runbook is read by each of its readers (the session, its trust root, replay,
    the export), and checking it costs tens of milliseconds. A problem is found again
    each time (nothing is kept of a runbook that does not load)."""
    return _parse_runbook(bytes(data), name)


@functools.lru_cache(maxsize=16)
def _parse_runbook(data: bytes, name: str) -> LoadedRunbook:
    text = _decode(data, name)
    deep = _DEEP_DOTTED_KEY.search(text)
    if deep is not None:  # tomllib takes seconds over a 20,000-part key (quadratic): refused before it
        line = text.count("\n", 0, deep.start()) + 1
        raise BadInput(
            f"{name} line {line}: a dotted key of more than {RUNBOOK_MAX_DEPTH} parts: too deep to be a runbook"
        )
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RunbookInvalid([_syntax_problem(exc, name, text)]) from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise BadInput(f"{name}: values nested too deeply to be a runbook") from None
    # the text is scanned for lines only when a problem needs one (~8 ms; the demo loads before its first frame)
    index = functools.cache(functools.partial(KeyLines, text))
    dated = {loc for loc, value in _leaves(doc, name) if isinstance(value, (datetime.date, datetime.time))}
    # no runbook field is a date; JSON would quietly turn one into a string
    not_a_date = "a TOML date/time is not a valid value here; quote it if it is text"
    problems = [
        Problem(name, index().line(loc), format_loc(loc), not_a_date)
        for loc in sorted(dated, key=lambda loc: index().line(loc))
    ]
    try:
        # strict, from JSON: strings still name enum members, but "yes" is no boolean
        # and "5" no integer (lax Python-mode validation would coerce both)
        runbook = Runbook.model_validate_json(json.dumps(doc, default=str), strict=True)
    except ValidationError as exc:
        paths = {format_loc(loc) for loc in dated}
        problems += [p for p in validation_problems(exc, doc, index(), name) if p.field_path not in paths]
        raise RunbookInvalid(sorted(problems, key=lambda p: p.line)) from None
    if problems:
        raise RunbookInvalid(problems)
    problems = [Problem(name, index().line(loc), format_loc(loc), msg) for loc, msg in cross_check(runbook)]
    if problems:
        raise RunbookInvalid(sorted(problems, key=lambda p: p.line))
    return LoadedRunbook(runbook=runbook, path=name, sha256=hashlib.sha256(data).hexdigest(), text=text)


#: deeper than any runbook's shape (``stages.N.steps.N.ansible.args.KEY`` is 7): a dotted key of
#: 20,000 parts (``a.a.a...a = 1``, which tomllib reads without recursing) made the checks after
#: it recurse past Python's limit
RUNBOOK_MAX_DEPTH = 32


#: a key of more than RUNBOOK_MAX_DEPTH dotted parts (bare or quoted), anywhere: linear, as it
#: starts only where a part can start and gives nothing back once a part is read (possessive)
_DEEP_DOTTED_KEY = re.compile(
    r"(?<![A-Za-z0-9_.-])(?:(?:[A-Za-z0-9_-]++|\"[^\"\\\n]*+\"|'[^'\n]*+')[ \t]*+\.[ \t]*+)"
    + f"{{{RUNBOOK_MAX_DEPTH},}}"
)


def _leaves(doc: Any, name: str = "runbook") -> Iterator[tuple[Loc, Any]]:
    """Every value of ``doc`` that is no table or array, with its key path; iterative, and
    BadInput past :data:`RUNBOOK_MAX_DEPTH` (before anything recursive sees the document)."""
    stack: list[tuple[Loc, Any]] = [((), doc)]
    while stack:
        loc, node = stack.pop()
        if len(loc) > RUNBOOK_MAX_DEPTH:
            raise BadInput(f"{name}: keys nested more than {RUNBOOK_MAX_DEPTH} deep: too deep to be a runbook")
        if isinstance(node, dict):
            stack.extend(((*loc, key), value) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend(((*loc, index), value) for index, value in enumerate(node))
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
