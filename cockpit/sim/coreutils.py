"""The few text utilities the probes and runbooks pipe through, for the simulated hosts."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from cockpit.sim.shell import Handler, Io, option_value


async def _true(argv: list[str], io: Io) -> int:
    return 0


async def _false(argv: list[str], io: Io) -> int:
    return 1


async def _echo(argv: list[str], io: Io) -> int:
    args = argv[1:]
    newline = True
    while args and args[0] in ("-n", "-e", "-ne", "-en"):
        if "n" in args[0]:
            newline = False
        args = args[1:]
    io.out(" ".join(args) + ("\n" if newline else ""))
    return 0


async def _printf(argv: list[str], io: Io) -> int:
    if len(argv) < 2:
        io.err("printf: usage: printf format [arguments]\n")
        return 2
    fmt = argv[1].replace("\\n", "\n").replace("\\t", "\t")
    args = argv[2:]
    out = []
    # as printf(1) does, the format is reused until the arguments run out
    while True:
        text, used = _format_once(fmt, args)
        out.append(text)
        args = args[used:]
        if not args or not used:
            break
    io.out("".join(out))
    return 0


def _format_once(fmt: str, args: list[str]) -> tuple[str, int]:
    """One pass of ``fmt`` over ``args``: the text, and how many arguments it consumed (missing ones are empty)."""
    used = 0

    def conversion(m: re.Match[str]) -> str:
        nonlocal used
        if m.group(0) == "%%":
            return "%"
        value = args[used] if used < len(args) else ""
        used += 1
        return value

    return re.sub(r"%%|%[-0-9.]*[sdi]", conversion, fmt), used


def grep_operands(args: list[str]) -> tuple[list[str], list[str]]:
    """grep's options (with their patterns, ``-e P`` or the first operand) and its FILE operands."""
    options: list[str] = []
    rest = list(args)
    has_pattern = False
    while rest and rest[0].startswith("-") and len(rest[0]) > 1:
        opt = rest.pop(0)
        options.append(opt)
        if opt in ("-e", "--regexp") and rest:
            options.append(rest.pop(0))
            has_pattern = True
    if not has_pattern and rest:
        options.append(rest.pop(0))
    return options, rest


async def _grep(argv: list[str], io: Io) -> int:
    args = argv[1:]
    flags = ""
    patterns: list[str] = []
    while args and args[0].startswith("-") and len(args[0]) > 1:
        opt = args.pop(0)
        if opt in ("-e", "--regexp"):
            patterns.append(args.pop(0))
        elif opt.startswith("--"):
            flags += {
                "--ignore-case": "i",
                "--count": "c",
                "--quiet": "q",
                "--invert-match": "v",
                "--fixed-strings": "F",
                "--line-regexp": "x",
            }.get(opt, "")
        else:
            flags += opt[1:]
    if not patterns:
        if not args:
            io.err("Usage: grep [OPTION]... PATTERNS [FILE]...\n")
            return 2
        patterns.append(args.pop(0))
    regexes = [
        re.compile(
            re.escape(p) if "F" in flags else _posix_to_py(p, "E" in flags), re.IGNORECASE if "i" in flags else 0
        )
        for p in patterns
    ]
    lines = io.stdin.splitlines()
    whole = "x" in flags  # -x: the pattern must match the whole line (GNU grep)
    hits = [ln for ln in lines if any((r.fullmatch if whole else r.search)(ln) for r in regexes) != ("v" in flags)]
    if "q" in flags:
        return 0 if hits else 1
    if "c" in flags:
        io.out(f"{len(hits)}\n")
    elif "o" in flags:
        for ln in hits:
            for r in regexes:
                for m in r.finditer(ln):
                    io.out(m.group(0) + "\n")
    else:
        io.out("".join(ln + "\n" for ln in hits))
    return 0 if hits else 1


def _posix_to_py(pattern: str, extended: bool) -> str:
    if extended:
        return pattern
    # basic regex: \| \( \) \+ are the operators, bare ones are literals
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "|()+?{}":
            out.append(pattern[i + 1])
            i += 2
            continue
        out.append("\\" + c if c in "|()+?{}" else c)
        i += 1
    return "".join(out)


def _count_arg(args: list[str], default: int = 10) -> tuple[int, list[str]]:
    n = default
    rest = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-n" and i + 1 < len(args):
            n = int(args[i + 1].lstrip("+-") or default)
            i += 2
            continue
        if re.fullmatch(r"-n?\d+", a):
            n = int(a.lstrip("-n"))
        elif a.startswith("-n"):
            n = int(a[2:])
        else:
            rest.append(a)
        i += 1
    return n, rest


async def _head(argv: list[str], io: Io) -> int:
    n, _ = _count_arg(argv[1:])
    io.out("".join(ln + "\n" for ln in io.stdin.splitlines()[:n]))
    return 0


async def _tail(argv: list[str], io: Io) -> int:
    n, _ = _count_arg(argv[1:])
    lines = io.stdin.splitlines()
    io.out("".join(ln + "\n" for ln in (lines[-n:] if n else [])))
    return 0


async def _wc(argv: list[str], io: Io) -> int:
    if "-l" in argv:
        io.out(f"{io.stdin.count(chr(10))}\n")
    elif "-w" in argv:
        io.out(f"{len(io.stdin.split())}\n")
    else:
        io.out(f"{io.stdin.count(chr(10))} {len(io.stdin.split())} {len(io.stdin.encode())}\n")
    return 0


async def _sort(argv: list[str], io: Io) -> int:
    lines = sorted(set(io.stdin.splitlines()) if "-u" in argv else io.stdin.splitlines(), reverse="-r" in argv)
    io.out("".join(ln + "\n" for ln in lines))
    return 0


async def _uniq(argv: list[str], io: Io) -> int:
    out: list[str] = []
    for ln in io.stdin.splitlines():
        if not out or out[-1] != ln:
            out.append(ln)
    io.out("".join(ln + "\n" for ln in out))
    return 0


async def _cut(argv: list[str], io: Io) -> int:
    delim, fields = "\t", "1"
    args = argv[1:]
    i = 0
    while i < len(args):
        if (given := option_value(args, i, "-d")) is not None:
            delim, i = given
        elif (given := option_value(args, i, "-f")) is not None:
            fields, i = given
        i += 1
    wanted = [int(f) - 1 for f in fields.split(",") if f.isdigit()]
    for ln in io.stdin.splitlines():
        parts = ln.split(delim)
        io.out(delim.join(parts[f] for f in wanted if f < len(parts)) + "\n")
    return 0


async def _awk(argv: list[str], io: Io) -> int:
    """Only ``awk [-F SEP] '{print $N[, $M]}'``: enough to pick a column."""
    args = argv[1:]
    sep: str | None = None
    if args and args[0].startswith("-F"):
        sep = args[0][2:] or args[1]
        args = args[1:] if args[0][2:] else args[2:]
    prog = args[0] if args else ""
    m = re.fullmatch(r"\s*\{\s*print\s+([$\d,\s]+)\}\s*", prog)
    if not m:
        io.err(f"awk: unsupported program in the simulator: {prog}\n")
        return 2
    cols = [int(c.strip().lstrip("$")) for c in m.group(1).split(",") if c.strip()]
    for ln in io.stdin.splitlines():
        parts = ln.split(sep) if sep else ln.split()
        io.out(" ".join((ln if c == 0 else parts[c - 1] if c - 1 < len(parts) else "") for c in cols) + "\n")
    return 0


def _tr_set(text: str) -> str:
    text = text.replace("\\n", "\n")
    return re.sub(r"(.)-(.)", lambda m: "".join(chr(c) for c in range(ord(m.group(1)), ord(m.group(2)) + 1)), text)


async def _tr(argv: list[str], io: Io) -> int:
    args = [_tr_set(a) for a in argv[1:] if not a.startswith("-")]
    if "-d" in argv and args:
        io.out("".join(c for c in io.stdin if c not in args[0]))
        return 0
    if len(args) == 2:
        src, dst = args[0], args[1]
        io.out(io.stdin.translate(str.maketrans(src, dst[: len(src)].ljust(len(src), dst[-1:] or " "))))
        return 0
    io.out(io.stdin)
    return 0


async def _test(argv: list[str], io: Io) -> int:
    args = argv[1:]
    if argv[0] == "[":
        if not args or args[-1] != "]":
            io.err("[: missing ]\n")
            return 2
        args = args[:-1]
    negate = bool(args) and args[0] == "!"
    if negate:
        args = args[1:]
    if len(args) == 1:
        ok = bool(args[0])
    elif len(args) == 2:
        ok = {"-n": bool(args[1]), "-z": not args[1]}.get(args[0], False)
    elif len(args) == 3:
        a, op, b = args
        try:
            ok = {
                "=": a == b,
                "==": a == b,
                "!=": a != b,
                "-eq": int(a) == int(b) if op == "-eq" else False,
                "-ne": int(a) != int(b) if op == "-ne" else False,
                "-lt": int(a) < int(b) if op == "-lt" else False,
                "-gt": int(a) > int(b) if op == "-gt" else False,
                "-le": int(a) <= int(b) if op == "-le" else False,
                "-ge": int(a) >= int(b) if op == "-ge" else False,
            }.get(op, False)
        except ValueError:
            io.err(f"{argv[0]}: integer expression expected\n")
            return 2
    else:
        ok = False
    return 0 if ok != negate else 1


async def _date(argv: list[str], io: Io) -> int:
    now = datetime.now(UTC)
    fmt = next((a[1:] for a in argv[1:] if a.startswith("+")), None)
    io.out((now.strftime(fmt) if fmt else now.strftime("%a %b %e %H:%M:%S UTC %Y")) + "\n")
    return 0


async def _id(argv: list[str], io: Io) -> int:
    io.out(
        "operator\n"
        if "-un" in argv or ("-u" in argv and "-n" in argv)
        else "uid=1000(operator) gid=1000(operator) groups=1000(operator),4(adm),27(sudo),999(docker)\n"
    )
    return 0


async def _whoami(argv: list[str], io: Io) -> int:
    io.out("operator\n")
    return 0


async def _nproc(argv: list[str], io: Io) -> int:
    io.out("224\n")
    return 0


async def _tee(argv: list[str], io: Io) -> int:
    io.out(io.stdin)
    return 0


async def _xargs(argv: list[str], io: Io) -> int:
    io.out(" ".join(io.stdin.split()) + ("\n" if io.stdin.strip() else ""))
    return 0


COMMANDS: dict[str, Handler] = {
    "true": _true,
    ":": _true,
    "false": _false,
    "echo": _echo,
    "printf": _printf,
    "grep": _grep,
    "egrep": _grep,
    "head": _head,
    "tail": _tail,
    "wc": _wc,
    "sort": _sort,
    "uniq": _uniq,
    "cut": _cut,
    "awk": _awk,
    "tr": _tr,
    "test": _test,
    "[": _test,
    "date": _date,
    "id": _id,
    "whoami": _whoami,
    "nproc": _nproc,
    "tee": _tee,
    "xargs": _xargs,
}
