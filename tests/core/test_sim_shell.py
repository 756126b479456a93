"""The simulator's small shell: operators, pipes, redirections, $? and quoting."""

from __future__ import annotations

import pytest

from cockpit.sim import coreutils
from cockpit.sim.shell import Io, Shell, ShellSyntaxError, parse, tokenize


def make_shell(files: dict[str, str] | None = None) -> Shell:
    store = dict(files or {})

    def write(path: str, data: str, append: bool) -> None:
        store[path] = (store.get(path, "") + data) if append else data

    shell = Shell(coreutils.COMMANDS.get, store.get, write)
    shell.store = store  # type: ignore[attr-defined]  # the test's file store, kept with the shell it backs
    return shell


async def run(line: str, files: dict[str, str] | None = None) -> tuple[int, str, str, Shell]:
    shell = make_shell(files)
    out: list[str] = []
    err: list[str] = []
    status = await shell.run(line, out.append, err.append)
    return status, "".join(out), "".join(err), shell


def test_tokenize_splits_operators_but_keeps_quoted_text() -> None:
    assert tokenize("echo 'a; b' && echo c||echo d") == ["echo", "a; b", "&&", "echo", "c", "||", "echo", "d"]
    assert tokenize("cmd 2>&1 >/dev/null") == ["cmd", "2", ">&", "1", ">", "/dev/null"]


@pytest.mark.parametrize(
    ("line", "status", "stdout"),
    [
        ("echo a; echo b", 0, "a\nb\n"),
        ("false && echo no || echo yes", 0, "yes\n"),
        ("true || echo never", 0, ""),
        ("false; echo rc=$?", 0, "rc=1\n"),
        ("printf '%s-%s\\n' x y | grep -c x-y", 0, "1\n"),
        ("echo hidden >/dev/null; echo shown", 0, "shown\n"),
        ("! false", 0, ""),
        ("(false || echo grouped) | tr a-z A-Z", 0, "GROUPED\n"),
        ("echo one two three | awk '{print $2}'", 0, "two\n"),
        ("[ 3 -gt 2 ] && echo bigger", 0, "bigger\n"),
        ("echo 'a b c' | cut -d ' ' -f 2", 0, "b\n"),  # cut's options as separate words...
        ("echo a,b,c | cut -d, -f1,3", 0, "a,c\n"),  # ...or glued on
    ],
)
async def test_lists_pipes_and_status(line: str, status: int, stdout: str) -> None:
    got_status, out, _, _ = await run(line)
    assert (got_status, out) == (status, stdout)


async def test_redirections_route_streams_and_write_files() -> None:
    status, out, err, shell = await run("echo to-err >&2; frob 2>&1; echo saved > /tmp/f; echo more >> /tmp/f")
    assert status == 0
    assert err == "to-err\n"
    assert out == "sh: 1: frob: not found\n"
    assert shell.store["/tmp/f"] == "saved\nmore\n"  # type: ignore[attr-defined]  # set by the fixture above


async def test_unknown_command_is_127_like_dash() -> None:
    status, _, err, _ = await run("nosuchtool --flag")
    assert status == 127 and err == "sh: 1: nosuchtool: not found\n"


async def test_syntax_errors_are_reported_not_raised() -> None:
    status, _, err, _ = await run("echo a &&")
    assert status == 2 and "syntax error" in err
    with pytest.raises(ShellSyntaxError):
        parse("| grep x")


async def test_hostile_argument_stays_one_literal_word() -> None:
    status, out, _, _ = await run("echo 'gpu01; reboot' '$(id)'")
    assert status == 0 and out == "gpu01; reboot $(id)\n"


async def test_io_env_assignment_prefix_is_accepted() -> None:
    seen: list[dict[str, str]] = []

    async def env_probe(argv: list[str], io: Io) -> int:
        seen.append(io.env)
        return 0

    shell = Shell({"probe": env_probe}.get, lambda p: None, lambda p, d, a: None)
    assert await shell.run("LC_ALL=C probe", lambda s: None, lambda s: None) == 0
    assert seen == [{"LC_ALL": "C"}]
