"""An ssh_config split into Host blocks once, so that each host parses only the lines that can apply."""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from pathlib import Path

from asyncssh.pattern import WildcardPatternList


class SshConfigIndex:
    """An ssh_config split into Host blocks once, so each host parses only what can apply.

    asyncssh parses the whole file for every host (as ssh does per invocation); with
    a generated config of one block per node that is most of a fleet's connect CPU.
    Each host gets the global lines plus the blocks whose Host patterns match it
    (asyncssh's own matcher), written once to a private temp dir. Files that use
    Match, Include or hostname canonicalisation are parsed whole, as before.
    """

    _FALLBACK = ("match", "include", "canonicalizehostname")

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.header: list[str] = []
        self.blocks: list[tuple[WildcardPatternList, list[str]]] = []
        #: blocks whose Host names are all plain (no wildcard, no negation), by name: a
        #: generated config of one block per node is looked up, not matched block by block
        #: (that was quadratic: 9 ms per host at 2,000 hosts)
        self._literal: dict[str, list[int]] = {}
        self._wild: list[int] = []  # the others, matched with asyncssh's own matcher
        self.simple = len(paths) == 1
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._written: dict[str, str] = {}
        if self.simple:
            self._index(Path(paths[0]).read_text(encoding="utf-8", errors="replace"))

    def _index(self, text: str) -> None:
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key = re.split(r"[\s=]", line, maxsplit=1)[0].lower()
            if key in self._FALLBACK:
                self.simple = False
                return
            if key == "host":
                patterns = shlex.split(line[4:].lstrip(" \t="))
                index = len(self.blocks)
                self.blocks.append((WildcardPatternList(",".join(patterns)), [line]))
                names = [n for p in patterns for n in p.split(",") if n]
                if names and not any(c in n for n in names for c in "*?[!"):
                    for name in dict.fromkeys(names):  # fnmatch without wildcards: equality, case kept
                        self._literal.setdefault(name, []).append(index)
                else:
                    self._wild.append(index)
            elif self.blocks:
                self.blocks[-1][1].append(line)
            else:
                self.header.append(line)

    def paths_for(self, host: str) -> list[str]:
        if not self.simple:
            return self.paths
        lines = [f"# the parts of {self.paths[0]} that can apply to {host}", *self.header]
        matching = [i for i in self._wild if self.blocks[i][0].matches(host)]
        for index in sorted([*self._literal.get(host, ()), *matching]):  # in file order, as ssh reads them
            lines.extend(self.blocks[index][1])
        text = "\n".join(lines) + "\n"
        path = self._written.get(text)
        if path is None:
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="cockpit-ssh-")
            path = os.path.join(self._dir.name, f"{len(self._written)}.conf")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            self._written[text] = path
        return [path]

    def cleanup(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
            self._written.clear()
