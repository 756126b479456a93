"""A small POSIX-ish shell for the simulated nodes: just what probes and runbooks use.

Supports ``;``, ``&&``, ``||``, pipelines ``|``, ``!``, ``( ... )`` grouping,
``NAME=value`` prefixes, ``$?``, and the redirections ``>``, ``>>``, ``<``,
``2>&1``, ``>&2``, ``N>/dev/null``. Words come from :mod:`shlex`; commands are
async handlers looked up by name, so a node decides what exists (anything else is
``sh: 1: X: not found``, exit 127, as dash says it).
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

OPERATORS = ("&&", "||", ">>", ">&", "<&", ";", "&", "|", "(", ")", "<", ">")
PUNCT = "();<>|&"


class ShellSyntaxError(ValueError):
    pass


@dataclass
class Io:
    """What one simple command sees: its arguments' stdin and where output goes."""

    stdin: str
    out: Callable[[str], None]
    err: Callable[[str], None]
    env: dict[str, str] = field(default_factory=dict)
    #: the command runs as root (the node's login is root, or sudo let it); see cockpit.sim.privilege
    root: bool = True


Handler = Callable[[list[str], Io], Awaitable[int]]
#: How a command waits: simulated seconds, scaled by the fleet's speed.
Sleep = Callable[[float], Awaitable[None]]


Resolve = Callable[[str], "Handler | None"]
#: sudo's options that take a value (sudo(8)): the word after them is not the command
SUDO_VALUE_OPTIONS = frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"})


#: how a shell says a command does not exist: dash (Debian/Ubuntu's /bin/sh), bash 5.1+ (RHEL 9's
#: login shell, which runs an SSH command line as ``bash -c``: "bash: line 1: X: command not found")
DASH_NOT_FOUND = "sh: 1: {name}: not found\n"
BASH_NOT_FOUND = "bash: line 1: {name}: command not found\n"


async def run_argv(
    resolve: Resolve, argv: list[str], io: Io, *, via: str = "sh", not_found: str = DASH_NOT_FOUND
) -> int:
    """Run ``argv`` as a command of the host ``resolve`` serves, ``VAR=value`` words first
    skipped (as env and sh do); an unknown command fails as ``via`` (sh or sudo) says it."""
    while argv and "=" in argv[0] and argv[0].split("=", 1)[0].isidentifier():
        argv = argv[1:]
    if not argv:
        return 0
    handler = resolve(argv[0])
    if handler is None:
        if via == "sudo":
            io.err(f"sudo: {argv[0]}: command not found\n")
            return 1
        io.err(not_found.format(name=argv[0]))
        return 127
    return await handler(argv, io)


def strip_prefix(argv: list[str]) -> list[str]:
    """What ``sudo``/``env``/``nohup`` OPTIONS... COMMAND runs: the command and its arguments."""
    args = argv[1:]
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if argv[0] == "sudo" and opt in SUDO_VALUE_OPTIONS:
            args = args[1:]
    return args


def option_value(args: list[str], i: int, name: str) -> tuple[str, int] | None:
    """``args[i]`` as the option ``name`` and its value, the way getopt reads one: the next word
    (``-d X``, ``--destdir X``) or glued on (``-dX``, ``--destdir=X``), with the index of the
    last word it took; None where ``args[i]`` is not that option."""
    if args[i] == name:
        return args[i + 1], i + 1
    glued = name + "=" if name.startswith("--") else name
    return (args[i][len(glued) :], i) if args[i].startswith(glued) else None


def sleeper(sleep: Sleep) -> Handler:
    """``sleep N``: N seconds of the host's clock (the fleet scales them by its speed)."""

    async def run(argv: list[str], io: Io) -> int:
        try:
            seconds = float(argv[1].rstrip("s")) if len(argv) > 1 else 0.0
        except ValueError:
            io.err(f"sleep: invalid time interval '{argv[1]}'\n")
            return 1
        await sleep(seconds)
        return 0

    return run


async def stream(io: Io, lines: list[str], total_s: float, sleep: Sleep) -> None:
    """Print lines over ``total_s`` simulated seconds, as a long-running command (apt-get, docker pull) does."""
    step = total_s / max(1, len(lines))
    for line in lines:
        io.out(line + "\n")
        await sleep(step)


@dataclass
class Redirect:
    fd: int
    op: str  # ">", ">>", "<", ">&"
    target: str


@dataclass
class Simple:
    argv: list[str]
    redirects: list[Redirect]
    assigns: dict[str, str]


@dataclass
class Group:
    body: AndOrList
    redirects: list[Redirect]


Command = Simple | Group


@dataclass
class Pipeline:
    commands: list[Command]
    negate: bool = False


@dataclass
class AndOr:
    first: Pipeline
    rest: list[tuple[str, Pipeline]]  # ("&&" | "||", pipeline)


AndOrList = list[AndOr]


#: ``$?`` written inside single quotes: literal to sh, so kept from the expansion until the
#: command runs (``sh -c 'false; echo $?'`` must expand it in the inner shell, not this one)
QUOTED_STATUS = "\x00status\x00"


def _protect_quoted_status(line: str) -> str:
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote == "'" and line.startswith("$?", i):
            out.append(QUOTED_STATUS)
            i += 2
            continue
        if quote is None and ch == "\\" and i + 1 < len(line):
            out.append(line[i : i + 2])
            i += 2
            continue
        if quote is None and ch in "'\"":
            quote = ch
        elif quote == ch:
            quote = None
        out.append(ch)
        i += 1
    return "".join(out)


def tokenize(line: str) -> list[str]:
    lexer = shlex.shlex(_protect_quoted_status(line), posix=True, punctuation_chars=PUNCT)
    lexer.whitespace_split = True
    lexer.commenters = ""
    tokens: list[str] = []
    for tok in lexer:
        if tok and all(c in PUNCT for c in tok):
            tokens.extend(_split_operators(tok))
        else:
            tokens.append(tok)
    return tokens


def _split_operators(tok: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(tok):
        for op in OPERATORS:
            if tok.startswith(op, i):
                out.append(op)
                i += len(op)
                break
        else:  # pragma: no cover - every PUNCT char is an operator
            raise ShellSyntaxError(f"bad operator {tok!r}")
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.toks = tokens
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def parse_list(self, closing: str | None = None) -> AndOrList:
        items: AndOrList = []
        while True:
            while self.peek() in (";", "&"):
                self.take()
            tok = self.peek()
            if tok is None or tok == closing:
                return items
            items.append(self.parse_and_or())
            tok = self.peek()
            if tok in (";", "&"):
                continue
            if tok is None or tok == closing:
                return items
            raise ShellSyntaxError(f"syntax error near unexpected token `{tok}'")

    def parse_and_or(self) -> AndOr:
        first = self.parse_pipeline()
        rest: list[tuple[str, Pipeline]] = []
        while self.peek() in ("&&", "||"):
            op = self.take()
            rest.append((op, self.parse_pipeline()))
        return AndOr(first, rest)

    def parse_pipeline(self) -> Pipeline:
        negate = False
        if self.peek() == "!":
            self.take()
            negate = True
        commands = [self.parse_command()]
        while self.peek() == "|":
            self.take()
            commands.append(self.parse_command())
        return Pipeline(commands, negate)

    def parse_command(self) -> Command:
        tok = self.peek()
        if tok in ("(", "{"):
            self.take()
            closing = ")" if tok == "(" else "}"
            body = self.parse_list(closing)
            if self.peek() != closing:
                raise ShellSyntaxError(f"syntax error: `{closing}' expected")
            self.take()
            return Group(body, self.parse_redirects([]))
        argv: list[str] = []
        redirects: list[Redirect] = []
        assigns: dict[str, str] = {}
        while True:
            tok = self.peek()
            if tok is None or tok in (";", "&", "&&", "||", "|", ")") or (tok == "}" and not argv):
                break
            if tok in (">", ">>", "<", ">&", "<&"):
                self.parse_redirects(redirects)
                continue
            self.take()
            nxt = self.peek()
            if tok.isdigit() and nxt in (">", ">>", "<", ">&"):
                self.parse_redirects(redirects, fd=int(tok))
                continue
            if not argv and "=" in tok and tok.split("=", 1)[0].isidentifier():
                name, value = tok.split("=", 1)
                assigns[name] = value
                continue
            argv.append(tok)
        if not argv and not assigns and not redirects:
            raise ShellSyntaxError(f"syntax error near unexpected token `{tok or 'newline'}'")
        return Simple(argv, redirects, assigns)

    def parse_redirects(self, redirects: list[Redirect], fd: int | None = None) -> list[Redirect]:
        while self.peek() in (">", ">>", "<", ">&", "<&"):
            op = self.take()
            if self.peek() is None:
                raise ShellSyntaxError("syntax error near unexpected token `newline'")
            target = self.take()
            default_fd = 0 if op in ("<", "<&") else 1
            redirects.append(Redirect(default_fd if fd is None else fd, op, target))
            fd = None
            following = self.peek()
            if (
                following is not None
                and following.isdigit()
                and self.i + 1 < len(self.toks)
                and self.toks[self.i + 1] in (">", ">>", ">&", "<")
            ):
                fd = int(self.take())
        return redirects


@functools.lru_cache(maxsize=512)
def parse(line: str) -> AndOrList:
    """Parse a command line (cached: probes send the same line every round; never mutated)."""
    parser = _Parser(tokenize(line))
    items = parser.parse_list()
    if parser.peek() is not None:
        raise ShellSyntaxError(f"syntax error near unexpected token `{parser.peek()}'")
    return items


class Shell:
    """Runs command lines against a table of handlers and a tiny file store."""

    def __init__(
        self,
        resolve: Callable[[str], Handler | None],
        read_file: Callable[[str], str | None],
        write_file: Callable[[str, str, bool], None],
        not_found: str = DASH_NOT_FOUND,
        *,
        root: bool = True,
        may_write: Callable[[str], bool] | None = None,
    ) -> None:
        self.not_found = not_found
        self.resolve = resolve
        self.read_file = read_file
        self.write_file = write_file
        self.status = 0
        self.root = root  # what every command of this shell runs as
        self.may_write = may_write  # where a shell that is not root may create files

    async def run(self, line: str, out: Callable[[str], None], err: Callable[[str], None], stdin: str = "") -> int:
        try:
            items = parse(line)
        except (ShellSyntaxError, ValueError) as exc:
            err(f"sh: 1: {exc}\n")
            self.status = 2
            return 2
        return await self._run_list(items, out, err, stdin)

    async def _run_list(
        self, items: AndOrList, out: Callable[[str], None], err: Callable[[str], None], stdin: str
    ) -> int:
        status = self.status
        for item in items:
            status = await self._run_pipeline(item.first, out, err, stdin)
            for op, pipeline in item.rest:
                if (op == "&&" and status == 0) or (op == "||" and status != 0):
                    status = await self._run_pipeline(pipeline, out, err, stdin)
        return status

    async def _run_pipeline(
        self, pipeline: Pipeline, out: Callable[[str], None], err: Callable[[str], None], stdin: str
    ) -> int:
        data = stdin
        status = 0
        last = len(pipeline.commands) - 1
        for i, command in enumerate(pipeline.commands):
            if i == last:
                status = await self._run_command(command, out, err, data)
            else:
                buf: list[str] = []
                await self._run_command(command, buf.append, err, data)
                data = "".join(buf)
        if pipeline.negate:
            status = 0 if status else 1
        self.status = status
        return status

    async def _run_command(
        self, command: Command, out: Callable[[str], None], err: Callable[[str], None], stdin: str
    ) -> int:
        fds: dict[int, Callable[[str], None]] = {1: out, 2: err}
        pending: list[tuple[str, list[str], bool]] = []  # files written once the command ends
        for r in command.redirects:
            if r.op in ("<", "<&"):
                if r.target == "/dev/null":
                    stdin = ""
                else:
                    content = self.read_file(r.target)
                    if content is None:
                        err(f"sh: 1: cannot open {r.target}: No such file\n")
                        return 2
                    stdin = content
            elif r.op == ">&":
                if r.target in ("1", "2"):
                    fds[r.fd] = fds[int(r.target)]
                elif r.target == "-":
                    fds[r.fd] = _discard
            elif r.target == "/dev/null":
                fds[r.fd] = _discard
            elif not self.root and self.may_write is not None and not self.may_write(r.target):
                err(f"sh: 1: cannot create {r.target}: Permission denied\n")  # dash's words
                return 2
            else:
                buf: list[str] = []
                pending.append((r.target, buf, r.op == ">>"))
                fds[r.fd] = buf.append
        out, err = fds.get(1, out), fds.get(2, err)
        try:
            if isinstance(command, Group):
                status = await self._run_list(command.body, out, err, stdin)
            else:
                status = await self._run_simple(command, out, err, stdin)
        finally:
            for path, buf, append in pending:
                self.write_file(path, "".join(buf), append)
        return status

    async def _run_simple(
        self, command: Simple, out: Callable[[str], None], err: Callable[[str], None], stdin: str
    ) -> int:
        argv = [a.replace("$?", str(self.status)).replace(QUOTED_STATUS, "$?") for a in command.argv]
        if not argv:
            return 0
        handler = self.resolve(argv[0])
        if handler is None:
            err(self.not_found.format(name=argv[0]))
            return 127
        return await handler(argv, Io(stdin=stdin, out=out, err=err, env=dict(command.assigns), root=self.root))


def _discard(_: str) -> None:
    return None
