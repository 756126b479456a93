"""Regular expressions a runbook gives, judged before they ever run.

Python's ``re`` backtracks and has no time limit: a pattern with a quantifier inside
a quantified group (``(a+)+$``, ``(\\s*x?)*``) or a quantified alternation whose
branches match the same text (``(a|a)*``) takes exponential time on a short line
that almost matches, and it would run on the event loop. ``cockpit check`` refuses
those shapes (the classic ReDoS forms, OWASP "Regular expression Denial of Service"),
and every pattern is bounded in length. Atomic groups and possessive quantifiers
(``(?>...)``, ``a++``) do not backtrack and are accepted.
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]  # the parser's opcodes; stable since 3.11
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

#: Longer than any honest output check; a longer one is refused.
MAX_PATTERN_CHARS = 1000

_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT}


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` may not be used as an output check, or None."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"longer than {MAX_PATTERN_CHARS} characters"
    try:
        re.compile(pattern)
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"not a valid regular expression: {exc}"
    return _risk(list(parsed), inside_repeat=False)


def _risk(items: list[tuple[Any, Any]], *, inside_repeat: bool) -> str | None:
    for op, av in items:
        if op in _REPEATS:
            _, high, sub = av
            repeats = high == sre.MAXREPEAT or high > 1
            if repeats and inside_repeat:
                return _NESTED
            found = _risk(list(sub), inside_repeat=inside_repeat or repeats)
            if found:
                return found
            if repeats and _overlapping_branches(list(sub)):
                return "a repeated alternation whose branches match the same text can take exponential time"
        elif op is sre.SUBPATTERN:
            found = _risk(list(av[-1]), inside_repeat=inside_repeat)
            if found:
                return found
        elif op is sre.BRANCH:
            for branch in av[1]:
                found = _risk(list(branch), inside_repeat=inside_repeat)
                if found:
                    return found
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            found = _risk(list(av[1]), inside_repeat=inside_repeat)
            if found:
                return found
        # ATOMIC_GROUP and POSSESSIVE_REPEAT never backtrack into themselves: not descended
    return None


_NESTED = (
    "a quantifier inside a repeated group (like (a+)+) can take exponential time on a line that almost "
    "matches; write it without the nesting, or make it possessive ((?>...) or a++)"
)


def _overlapping_branches(items: list[tuple[Any, Any]]) -> bool:
    """A group of alternatives, two of which are the same (the simplest overlap to prove)."""
    for op, av in items:
        if op is sre.SUBPATTERN:
            return _overlapping_branches(list(av[-1]))
        if op is sre.BRANCH:
            seen = [repr(list(b)) for b in av[1]]
            return len(seen) != len(set(seen))
    return False
