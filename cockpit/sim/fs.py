"""The node's directories as ``mkdir``, ``find`` and ``ls`` see them, over the files commands wrote.

Only what the runbooks need: a directory to save packages into (``mkdir -p``), and the
saved files listed (``ls -l``) or named by path (``find DIR -name '*.deb'``), as GNU
coreutils and findutils print them.
"""

from __future__ import annotations

import fnmatch

from cockpit.sim.shell import Io


class FileSystem:
    def __init__(self, files: dict[str, str], dirs: set[str]) -> None:
        self.files = files
        self.dirs = dirs

    def is_dir(self, path: str) -> bool:
        path = path.rstrip("/") or "/"
        return path in self.dirs or any(f.startswith(path + "/") for f in self.files)

    async def mkdir(self, argv: list[str], io: Io) -> int:
        parents = any(a in ("-p", "--parents") for a in argv[1:])
        for path in (a for a in argv[1:] if not a.startswith("-")):
            path = path.rstrip("/")
            parent = path.rsplit("/", 1)[0]
            if self.is_dir(path):
                if not parents:
                    io.err(f"mkdir: cannot create directory '{path}': File exists\n")
                    return 1
                continue
            if not parents and parent and not self.is_dir(parent) and parent.count("/") > 2:
                io.err(f"mkdir: cannot create directory '{path}': No such file or directory\n")
                return 1
            parts = path.split("/")
            self.dirs.update("/".join(parts[:i]) for i in range(2, len(parts) + 1))
        return 0

    def _entries(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = {f[len(prefix) :].split("/", 1)[0] for f in self.files if f.startswith(prefix)}
        names |= {d[len(prefix) :].split("/", 1)[0] for d in self.dirs if d.startswith(prefix)}
        return sorted(names)

    async def ls(self, argv: list[str], io: Io) -> int:
        long = any(a.startswith("-") and "l" in a for a in argv[1:])
        status = 0
        for path in [a for a in argv[1:] if not a.startswith("-")] or ["/root"]:
            if path in self.files:
                io.out(path + "\n")
                continue
            if not self.is_dir(path):
                io.err(f"ls: cannot access '{path}': No such file or directory\n")
                status = 2
                continue
            entries = self._entries(path)
            if long:
                io.out(f"total {4 * len(entries)}\n")
            for name in entries:
                full = path.rstrip("/") + "/" + name
                if not long:
                    io.out(name + "\n")
                elif full in self.files:
                    io.out(f"-rw-r--r-- 1 root root {len(self.files[full]) * 1024:>9} Dec  2 01:10 {name}\n")
                else:
                    io.out(f"drwxr-xr-x 2 root root      4096 Dec  2 01:10 {name}\n")
        return status

    async def find(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        roots = []
        while args and not args[0].startswith("-"):
            roots.append(args.pop(0))
        pattern = "*"
        maxdepth = 1 << 30
        while args:
            opt = args.pop(0)
            value = args.pop(0) if args else ""
            if opt == "-name":
                pattern = value
            elif opt == "-maxdepth":
                maxdepth = int(value)
            elif opt == "-type" and value != "f":
                return 0
        status = 0
        for root in roots or ["."]:
            if not self.is_dir(root):
                io.err(f"find: '{root}': No such file or directory\n")
                status = 1
                continue
            prefix = root.rstrip("/") + "/"
            for f in sorted(self.files):
                rest = f[len(prefix) :] if f.startswith(prefix) else None
                if rest and rest.count("/") < maxdepth and fnmatch.fnmatchcase(rest.rsplit("/", 1)[-1], pattern):
                    io.out(f + "\n")
        return status
