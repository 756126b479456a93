"""What is wrong with a runbook file: a problem with its line, and how key paths and values are shown.

Shared by the loader's three passes (:mod:`cockpit.runbook.loader`,
:mod:`cockpit.runbook.validation`, :mod:`cockpit.runbook.crosscheck`) and by the
line index (:mod:`cockpit.runbook.keylines`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cockpit.errors import BadInput

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


def shown_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(value), type(value).__name__
    )
