"""`cockpit pair` without starting anything: tmux missing, bad option mixes, the quoting of
the printed join commands, session names tmux would rewrite, and `cockpit review` refusals."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.commands import pair as pair_command
from cockpit.commands import resume as resume_command
from cockpit.commands import run as run_command
from cockpit.errors import BadInput
from cockpit.session.pair import LOGIN_NAME, join_commands, operator_argv, session_name


def test_missing_tmux_is_one_line_saying_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no tmux anywhere
    assert main(["pair", "--demo", "--change-id", "X1", "--sessions", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tmux is not installed" in err and "apt-get install tmux" in err


def pair_without_tmux(tmp_path: Path, change_id: str, extra: list[str]) -> tuple[int, Path]:
    """``cockpit pair`` with ``extra``, told a tmux socket under ``tmp_path`` (``--no-attach``):
    its exit status, and the socket (which a refusal must never have made)."""
    sock = tmp_path / "never.sock"
    code = main(
        ["pair", "--change-id", change_id, "--sessions", str(tmp_path), "--socket", str(sock), "--no-attach", *extra]
    )
    return code, sock


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
    code, sock = pair_without_tmux(tmp_path, "X2", extra)
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
        "--pause-on-error",  # its own tmux session: an error would close it, unread
        "--as",
        "$USER",
    ]
    assert str(sock) not in cmds.review
    assert cmds.review.endswith(f"--as {LOGIN_NAME}")  # double quotes: the joiner's shell expands it
    named = join_commands("tmux", sock, "cockpit-CHG-1", odd, reviewer="bob o'neil")
    assert shlex.split(named.review)[-2:] == ["--as", "bob o'neil"]
    assert "server-access -a -r" in cmds.access and "chmod g+rw" in cmds.access  # read-only is all they need
    # a log that requires signatures: the review names the joiner's key, or it will not start
    signed = join_commands("tmux", sock, "cockpit-CHG-1", odd, signatures=True)
    assert shlex.split(signed.review)[-4:] == ["--as", "$USER", "--signing-key", "$HOME/.ssh/id_ed25519"]
    assert signed.review.endswith('--signing-key "$HOME/.ssh/id_ed25519"')  # expanded by the joiner's shell


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


def _pair_args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    pair_command.configure(parser)
    return parser.parse_args(["--change-id", "S1", "--sessions", str(tmp_path), *extra])


def test_pair_passes_the_signing_flags_to_the_cockpit_it_starts(tmp_path: Path) -> None:
    allowed, key = tmp_path / "allowed_signers", tmp_path / "id_ed25519"
    allowed.write_text("")
    key.write_text("")
    args = _pair_args(
        tmp_path, "--hosts", "gpu01", "--allowed-signers", str(allowed), "--signing-key", str(key), "--operator", "al"
    )
    run_argv = pair_command._passthrough(args, demo=False, resume=False)
    assert run_argv[run_argv.index("--allowed-signers") + 1] == str(allowed.resolve())
    assert run_argv[run_argv.index("--signing-key") + 1] == str(key.resolve())
    assert "--require-signatures" not in run_argv and "--no-require-signatures" not in run_argv  # run's default
    # what run's own parser makes of them: the flags arrive as given
    run_parser = argparse.ArgumentParser()
    run_command.configure(run_parser)
    parsed = run_parser.parse_args(["--change-id", "S1", *run_argv])
    assert parsed.allowed_signers == str(allowed.resolve()) and parsed.signing_key == str(key.resolve())
    assert parsed.require_signatures is True
    off = _pair_args(tmp_path, "--hosts", "gpu01", "--no-require-signatures")
    off_argv = pair_command._passthrough(off, demo=False, resume=False)
    assert "--no-require-signatures" in off_argv
    assert run_parser.parse_args(["--change-id", "S1", *off_argv]).require_signatures is False
    # a resume signs with the key given; its signers are the ones its header recorded
    resumed = pair_command._passthrough(_pair_args(tmp_path, "--signing-key", str(key)), demo=False, resume=True)
    assert resumed[:2] == ["--signing-key", str(key.resolve())] and "--allowed-signers" not in resumed
    resume_parser = argparse.ArgumentParser()
    resume_command.configure(resume_parser)
    assert resume_parser.parse_args(["x.toml", *resumed]).signing_key == str(key.resolve())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--hosts", "gpu01"], "give --allowed-signers FILE"),
        (["--hosts", "gpu01", "--allowed-signers", "/nonexistent/allowed"], "/nonexistent/allowed: no such file"),
        (["--hosts", "gpu01", "--no-require-signatures", "--signing-key", "/nonexistent/key"], "no such file"),
        (["--demo", "--signing-key", "/etc/hostname"], "a demo is unsigned"),
    ],
)
def test_pair_refuses_what_run_would_refuse_about_signing_before_tmux_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, sock = pair_without_tmux(tmp_path, "S2", extra)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not sock.exists()


def test_pair_on_an_existing_session_refuses_new_signers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "S3.toml").write_text("")  # exists: pair would resume it
    allowed = tmp_path / "allowed_signers"
    allowed.write_text("")
    sock = tmp_path / "never.sock"
    signers = ["--allowed-signers", str(allowed)]
    code = main(
        ["pair", "--change-id", "S3", "--sessions", str(tmp_path), "--socket", str(sock), "--no-attach", *signers]
    )
    err = capsys.readouterr().err
    assert code == 2 and "resumes with the signers its header recorded" in err, err
