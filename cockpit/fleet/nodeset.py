"""Node sets, the compact host notation of ClusterShell and Slurm.

``gpu[01-16,20],login1`` names gpu01..gpu16, gpu20 and login1. Several bracket
groups in one name form a cartesian product, leftmost group outermost
(``rack[1-2]-gpu[01-02]`` -> rack1-gpu01, rack1-gpu02, rack2-gpu01, rack2-gpu02).
A range keeps the width of its first bound (``01-10`` -> 01, 02, ..., 10).

:func:`fold_nodeset` is the inverse, the compact form ``clush -b`` prints. Only
syntax lives here; whether a name is a valid host name is the inventory's call.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Iterable

from cockpit.errors import BadInput

#: refuse specs that would expand to more names than one cockpit drives or probes at once (a
#: typo such as gpu[01-99999] would otherwise sit connecting for minutes before printing anything)
MAX_NODES = 10_000
#: the most names every input of one command may expand to together (the node sets and
#: ``@FILE`` references of ``--hosts``, the inventory files, each range in them), counted before
#: anything is expanded: the per-set cap alone let 50 sets on ``--hosts`` make 500,000 targets
#: and an INI line ``n[0:9999]x[0:9999]`` 100 million. ``COCKPIT_MAX_NAMES`` sets another.
MAX_TOTAL_NAMES = 100_000
MAX_NAMES_ENV = "COCKPIT_MAX_NAMES"


def total_names_limit() -> int:
    """The cap on names across a command's inputs: ``COCKPIT_MAX_NAMES`` when set, else 100,000."""
    text = os.environ.get(MAX_NAMES_ENV, "").strip()
    if not text:
        return MAX_TOTAL_NAMES
    if not text.isdigit() or not 1 <= int(text) <= 10_000_000:
        raise BadInput(f"{MAX_NAMES_ENV}={text[:40]!r}: expected a whole number from 1 to 10,000,000")
    return int(text)


class NameBudget:
    """What is left of :func:`total_names_limit` for one command: each expansion takes its
    count from it before it expands, and the first to go over is refused, in one line."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = total_names_limit() if limit is None else limit
        self.used = 0

    def take(self, count: int, what: str) -> None:
        if count > self.limit - self.used:
            raise BadInput(
                f"{what}: {self.used + count:,} names in all, more than the {self.limit:,} the cockpit "
                f"takes across its inputs ({MAX_NAMES_ENV} sets another cap)"
            )
        self.used += count


_DIGITS = re.compile(r"(\d+)")


def split_nodeset(spec: str) -> list[str]:
    """Split on commas outside brackets (items unstripped); check brackets balance and do not nest."""
    items: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(spec):
        if ch == "[":
            if depth:
                raise BadInput(f"node set {spec!r}: nested '[' at position {i + 1}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise BadInput(f"node set {spec!r}: ']' without '[' at position {i + 1}")
            depth = 0
        elif ch == "," and not depth:
            items.append(spec[start:i])
            start = i + 1
    if depth:
        raise BadInput(f"node set {spec!r}: '[' is never closed")
    items.append(spec[start:])
    return items


def _expand_range(spec: str, group: str) -> list[str]:
    """``01-03,07`` -> ['01', '02', '03', '07']; width comes from each range's first bound.

    ``01-16/2`` is ClusterShell's stepped range (``a-b/c``: every c-th from a to b, its
    RangeSet syntax): 01, 03, ..., 15. A step needs a range and is at least 1.
    """
    values: list[str] = []
    for part in group.split(","):
        part = part.strip()
        if not part:
            raise BadInput(f"node set {spec!r}: empty range in [{group}]")
        bounds, slash, step_text = part.partition("/")
        lo, sep, hi = bounds.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()) or (slash and not (sep and step_text.isdigit())):
            raise BadInput(f"node set {spec!r}: bad range {part!r} in [{group}] (expected N, N-M or N-M/STEP)")
        if not sep:
            values.append(lo)
            continue
        first, last, step = int(lo), int(hi), int(step_text) if slash else 1
        if step < 1:
            raise BadInput(f"node set {spec!r}: range {part!r} has a step below 1")
        if last < first:
            raise BadInput(f"node set {spec!r}: range {part!r} goes backwards")
        if (last - first) // step >= MAX_NODES:
            raise BadInput(
                f"node set {spec!r}: range {part!r} is {(last - first) // step + 1} names, larger than the "
                f"{MAX_NODES} the cockpit takes at once; split the fleet"
            )
        values.extend(str(n).zfill(len(lo)) for n in range(first, last + 1, step))
    return values


def _expand_item(spec: str, item: str, budget: NameBudget | None) -> list[str]:
    # pieces alternate literal text and bracket contents: "rack", "1-2", "-gpu", "01-08", ""
    pieces = re.split(r"\[([^\]]*)\]", item)
    choices: list[list[str]] = []
    total = 1
    for index, piece in enumerate(pieces):
        if index % 2:
            values = _expand_range(spec, piece)
            total *= len(values)
            if total > MAX_NODES:
                raise BadInput(f"node set {spec!r} expands to more than {MAX_NODES} names")
            choices.append(values)
        else:
            choices.append([piece])
    if budget is not None:
        budget.take(math.prod(len(c) for c in choices), f"node set {spec!r}")
    return ["".join(combo) for combo in itertools.product(*choices)]


def expand_nodeset(spec: str, budget: NameBudget | None = None) -> list[str]:
    """All names of a node set, in the order written, duplicates dropped.

    Raises :class:`BadInput` (one line naming the problem) for an empty spec or
    item, unbalanced or nested brackets, a backwards range or a non-numeric range,
    and when ``budget`` (the command's cap on names across its inputs) would be passed.
    """
    if not spec or not spec.strip():
        raise BadInput("node set is empty")
    seen: dict[str, None] = {}
    for item in split_nodeset(spec):
        item = item.strip()
        if not item:
            raise BadInput(f"node set {spec!r}: empty name between commas")
        for name in _expand_item(spec, item, budget):
            seen.setdefault(name, None)
            if len(seen) > MAX_NODES:
                raise BadInput(f"node set {spec!r} expands to more than {MAX_NODES} names")
    return list(seen)


# --- folding ---------------------------------------------------------------------------


def _fold_numbers(numbers: Iterable[str]) -> str:
    """``{'01','02','03','05'}`` -> ``01-03,05``; widths are kept so the fold expands back."""
    values = set(numbers)
    padded_widths = {len(s) for s in values if len(s) > 1 and s.startswith("0")}

    def width(s: str) -> int:
        # "10" joins the 2-wide padded run when one exists ("01-10"), else it stands unpadded
        if (len(s) > 1 and s.startswith("0")) or len(s) in padded_widths:
            return len(s)
        return 0

    runs: list[tuple[int, int, int]] = []  # (first, last, width)
    by_width: dict[int, list[int]] = {}
    for s in values:
        by_width.setdefault(width(s), []).append(int(s))
    for w, ints in by_width.items():
        ints.sort()
        first = prev = ints[0]
        for n in ints[1:]:
            if n != prev + 1:
                runs.append((first, prev, w))
                first = n
            prev = n
        runs.append((first, prev, w))
    runs.sort(key=lambda r: (r[0], r[2]))
    parts = []
    for first, last, w in runs:
        lo, hi = str(first).zfill(w), str(last).zfill(w)
        parts.append(lo if first == last else f"{lo}-{hi}")
    return ",".join(parts)


def fold_nodeset(names: Iterable[str]) -> str:
    """The compact node set of ``names``: ``gpu01, gpu02, gpu03, gpu05, login1`` ->
    ``gpu[01-03,05],login1``. Several numeric fields fold too (``rack[1-2]-gpu[01-08]``).

    ``expand_nodeset(fold_nodeset(names))`` gives back the same set of names (sorted).
    """
    # one name -> its pieces: text, digits, text, digits, ..., text
    # a row holds, per numeric field, the set of digit strings it stands for
    shapes: dict[tuple[str, ...], list[list[frozenset[str]]]] = {}
    literals: list[str] = []
    for name in dict.fromkeys(names):
        if name.startswith("[") and name.endswith("]") and ":" in name and "," not in name:
            literals.append(name)  # an IPv6 literal ("[::1]"): kept whole, as --hosts reads it
            continue
        if not name or any(c in name for c in "[],") or name != name.strip():
            raise BadInput(f"cannot fold {name!r}: not a plain node name")
        pieces = _DIGITS.split(name)
        texts = tuple(pieces[0::2])
        shapes.setdefault(texts, []).append([frozenset([d]) for d in pieces[1::2]])

    out: list[tuple[tuple[str, ...], list[frozenset[str]]]] = []
    for texts, rows in shapes.items():
        ndims = len(texts) - 1
        # fold the last numeric field first, then the one before it, ClusterShell-style
        for dim in reversed(range(ndims)):
            merged: dict[tuple[frozenset[str], ...], set[str]] = {}
            for row in rows:
                key = tuple(row[:dim]) + tuple(row[dim + 1 :])
                merged.setdefault(key, set()).update(row[dim])
            rows = [[*list(key[:dim]), frozenset(vals), *list(key[dim:])] for key, vals in merged.items()]
        for row in rows:
            out.append((texts, row))

    def render(texts: tuple[str, ...], row: list[frozenset[str]]) -> str:
        parts = [texts[0]]
        for numbers, text in zip(row, texts[1:], strict=True):
            folded = _fold_numbers(numbers)
            parts.append(folded if len(numbers) == 1 else f"[{folded}]")
            parts.append(text)
        return "".join(parts)

    def sort_key(entry: tuple[tuple[str, ...], list[frozenset[str]]]) -> tuple[tuple[str, ...], tuple[int, ...]]:
        texts, row = entry
        firsts = tuple(min(int(n) for n in numbers) for numbers in row)
        return (texts, firsts)

    return ",".join([*(render(texts, row) for texts, row in sorted(out, key=sort_key)), *literals])
