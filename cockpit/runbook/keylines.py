"""The line of each key path of a runbook file, so every problem can say where it is."""

from __future__ import annotations

import contextlib
import re
import tomllib
from bisect import bisect_left

from cockpit.runbook.problems import Loc


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
