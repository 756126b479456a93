"""Regular expressions a runbook gives, judged before they ever run, and run in linear time
where the pattern allows it.

Python's ``re`` backtracks and has no time limit: a pattern with a quantifier inside
a quantified group (``(a+)+$``, ``(\\s*x?)*``), a quantified alternation whose branches
match the same text (``(a|a)*``, ``(a|aa)+``) or a chain of quantifiers over the same
characters (``\\d+\\s*\\d+\\s*\\d+x``) takes exponential or high polynomial time on a
short line that almost matches, and it would run on the event loop. ``cockpit check``
refuses those shapes (the classic ReDoS forms, OWASP "Regular expression Denial of
Service"), and every pattern is bounded in length. The cockpit then runs each output
check with RE2 (:func:`search`: linear in the text, whatever the pattern), so even one
that escaped the check cannot stall the loop; only what RE2 has no syntax for
(backreferences, lookarounds, atomic groups, possessive quantifiers: the shipped runbooks'
lockstep checks use ``\\1``) runs on Python's ``re``, guarded by the check alone.
"""

from __future__ import annotations

import functools
import re
from re import _compiler as sre_compile  # type: ignore[attr-defined]
from re import _constants as sre  # type: ignore[attr-defined]  # the parser's opcodes; stable since 3.11
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, Protocol

import re2

#: Longer than any honest output check; a longer one is refused.
MAX_PATTERN_CHARS = 1000
#: RE2's memory for one compiled pattern (its default is 8 MiB): a counted repeat such as
#: ``x{1000}{1000}`` is refused at compile time instead of taking memory
_RE2_MAX_MEM = 8 << 20

_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT}


class Found(Protocol):
    """What :func:`search` returns: the part of a match an output check reads."""

    def group(self, index: int, /) -> Any: ...  # str, or None for a group that took no part

    def groups(self) -> tuple[Any, ...]: ...


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the caller's one line, never RE2's stderr
    options.max_mem = _RE2_MAX_MEM
    return options


#: Python's ``\\Z`` (the very end of the text) is RE2's ``\\z``: an unescaped one is translated
_END_OF_TEXT = re.compile(r"(?<!\\)((?:\\\\)*)\\Z")


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    # (?m): an output check reads lines, as re.MULTILINE did before RE2
    return re2.compile("(?m)" + _END_OF_TEXT.sub(r"\1\\z", pattern), _options())


def search(pattern: str, text: str) -> Found | None:
    """The first match of ``pattern`` in ``text`` (``^``/``$`` at each line): by RE2, in linear
    time, when RE2 has the pattern's syntax; else by Python's ``re`` (a backreference or a
    lookaround, which :func:`pattern_problem` has judged). Raises ValueError for a pattern
    neither can compile."""
    try:
        compiled = _compiled(pattern)
    except re2.error:
        try:
            return re.search(pattern, text, re.MULTILINE)
        except re.error as exc:
            raise ValueError(str(exc)) from None
    found: Found | None = compiled.search(text)
    return found


def runs_in_linear_time(pattern: str) -> bool:
    """Whether :func:`search` runs ``pattern`` with RE2 (else with Python's backtracking ``re``)."""
    try:
        _compiled(pattern)
    except re2.error:
        return False
    return True


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` may not be used as an output check, or None."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"longer than {MAX_PATTERN_CHARS} characters"
    try:
        re.compile(pattern)
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"not a valid regular expression: {exc}"
    return _risk(list(parsed), inside_repeat=False) or _chained(parsed)


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
    """A group of alternatives, two of which are the same, or one of which starts with the
    whole of another (``a|aa``: each run of a's splits many ways), or may match nothing."""
    for op, av in items:
        if op is sre.SUBPATTERN:
            return _overlapping_branches(list(av[-1]))
        if op is sre.BRANCH:
            branches = [list(b) for b in av[1]]
            if any(not b for b in branches):
                return True
            seen = [repr(b) for b in branches]
            if len(seen) != len(set(seen)):
                return True
            return any(
                a is not b and len(a) < len(b) and repr(b[: len(a)]) == repr(a) for a in branches for b in branches
            )
    return False


#: the characters a quantifier is tried against when two are compared (ASCII, and a few beyond it)
_SAMPLE = (*(chr(c) for c in range(1, 128)), "\u00e9", "\u0660", "\u3000", "\u2028")
#: how many unbounded quantifiers over one character, with nothing between them that must
#: match something else, a pattern may chain: n of them are O(len ** n) on a near-miss
_MAX_CHAIN = 2


def _one_char(item: tuple[Any, Any], state: Any) -> frozenset[str] | None:
    """The sample characters a single-character item matches; None for anything longer."""
    op, _ = item
    if op not in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN, sre.CATEGORY):
        return None
    compiled = sre_compile.compile(sre_parse.SubPattern(state, [item]), state.flags)
    return frozenset(c for c in _SAMPLE if compiled.fullmatch(c))


def _chained(parsed: Any) -> str | None:
    """A sequence with more than :data:`_MAX_CHAIN` unbounded quantifiers that can take the
    same character, separated only by what may match nothing or that character too
    (``\\d+\\s*\\d+\\s*\\d+x``: each run of digits splits in O(n**2) ways, and more)."""
    state = parsed.state
    sequences = [list(parsed)]
    while sequences:
        items = sequences.pop()
        # each item as (the characters it takes, whether it is an unbounded repeat, may it be empty)
        shape: list[tuple[frozenset[str] | None, bool, bool]] = []
        for op, av in items:
            if op in _REPEATS:
                low, high, sub = av
                sub = list(sub)
                sequences.append(sub)
                chars = _one_char(sub[0], state) if len(sub) == 1 else None
                shape.append((chars, high == sre.MAXREPEAT, low == 0))
            elif op is sre.SUBPATTERN:
                sequences.append(list(av[-1]))
                shape.append((None, False, False))
            elif op is sre.BRANCH:
                sequences.extend(list(b) for b in av[1])
                shape.append((None, False, False))
            elif op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
                shape.append((frozenset(), False, True))  # matches no character
            else:
                shape.append((_one_char((op, av), state), False, False))
        for c in _SAMPLE:
            count = 0
            for chars, unbounded, empty in shape:
                if chars is not None and c in chars:
                    count += unbounded
                    if count > _MAX_CHAIN:
                        return (
                            f"{count} unbounded quantifiers in a row can take the same character {c!r}: the "
                            "match takes polynomial time on a long line that almost matches; make them "
                            "possessive or put something between them that they cannot take"
                        )
                elif not empty:
                    count = 0
    return None
