"""`cockpit pair` without starting anything: tmux missing, bad option mixes, the quoting of
the printed join commands, session names tmux would rewrite, and `cockpit review` refusals."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.errors import BadInput
from cockpit.session.pair import LOGIN_NAME, join_commands, operator_argv, session_name


def test_missing_tmux_is_one_line_saying_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no tmux anywhere
    assert main(["pair", "--demo", "--change-id", "X1", "--sessions", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tmux is not installed" in err and "apt-get install tmux" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--demo", "--hosts", "gpu01"], "leave out --hosts"),
        (["--nodes", "3"], "go with --demo"),
        ([], "--hosts is required"),
    ],
)
def test_option_mixes_are_refused_before_tmux_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    sock = tmp_path / "never.sock"
    code = main(
        ["pair", "--change-id", "X2", "--sessions", str(tmp_path), "--socket", str(sock), "--no-attach", *extra]
    )
    assert code == 2
    assert message in capsys.readouterr().err
    assert not sock.exists()


def test_printed_commands_quote_every_value(tmp_path: Path) -> None:
    odd = tmp_path / "change logs" / "it's here.toml"
    sock = tmp_path / "a sock" / "pair.sock"
    cmds = join_commands("/usr/bin/tmux", sock, "cockpit-CHG-1", odd)
    assert shlex.split(cmds.watch) == ["/usr/bin/tmux", "-S", str(sock), "attach", "-r", "-t", "cockpit-CHG-1"]
    # the reviewer's own server (-L, their private tmux folder), never a session on the operator's
    assert shlex.split(cmds.review) == [
        "/usr/bin/tmux",
        "-L",
        "cockpit-review-CHG-1",
        "new-session",
        "-A",
        "-s",
        "cockpit-CHG-1-review",
        "--",
        "cockpit",
        "review",
        str(odd),
        "--as",
        "$USER",
    ]
    assert str(sock) not in cmds.review
    assert cmds.review.endswith(f"--as {LOGIN_NAME}")  # double quotes: the joiner's shell expands it
    named = join_commands("tmux", sock, "cockpit-CHG-1", odd, reviewer="bob o'neil")
    assert shlex.split(named.review)[-2:] == ["--as", "bob o'neil"]
    assert "server-access -a -r" in cmds.access and "chmod g+rw" in cmds.access  # read-only is all they need


def test_session_names_and_operator_commands(tmp_path: Path) -> None:
    assert session_name("CHG-1042") == "cockpit-CHG-1042"
    assert session_name("CHG.1042") == "cockpit-CHG_1042"  # tmux would turn the dot into _
    with pytest.raises(BadInput):
        session_name("bad id; rm -rf /")
    argv = operator_argv(
        ["/venv/bin/cockpit"], demo=True, change_id="D1", sessions=tmp_path, resume=False, passthrough=["--nodes", "2"]
    )
    assert argv == ["/venv/bin/cockpit", "demo", "--change-id", "D1", "--sessions", str(tmp_path), "--nodes", "2"]
    again = operator_argv(
        ["/py", "-P", "-m", "cockpit"],
        demo=False,
        change_id="R1",
        sessions=tmp_path,
        resume=True,
        passthrough=["--operator", "alice"],
    )
    assert again == ["/py", "-P", "-m", "cockpit", "resume", str(tmp_path / "R1.toml"), "--operator", "alice"]


def test_review_cli_refuses_the_operators_own_name_and_missing_files(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[2] / "sessions" / "examples" / "demo-gpu-missing.toml"
    assert main(["review", str(example), "--as", "alice"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "alice is the operator" in err
    assert main(["review", "/nonexistent/session.toml", "--as", "bob"]) == 2
    assert "/nonexistent/session.toml: no such file" in capsys.readouterr().err
