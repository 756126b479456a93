"""A runbook parameter marked secret (issue 28): given only in the environment, never
written to the change log (header and events hold ***), so the ticket, the cast and the
log each lack it; refused on the command line and as a runbook default."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_paths import REPO

from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.errors import BadInput
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load_runbook
from cockpit.runbook.placeholders import resolve_parameters
from cockpit.session.operator import Session

SECRET = "Bmc-" + "pa55-Zq9x"
SECRET_PARAM = """
[parameters.bmc_password]
type = "str"
secret = true
required = true
description = "The BMC's password, for the power checks."
"""


def secret_runbook(tmp_path: Path, extra: str = SECRET_PARAM) -> Path:
    text = (REPO / "checklists" / "minimal-driver-upgrade.toml").read_text()
    at = text.index("[parameters.target_branch]")
    path = tmp_path / "secret.toml"
    path.write_text(text[:at] + extra.lstrip() + "\n" + text[at:])
    return path


def test_a_secret_parameter_never_reaches_the_log_the_ticket_or_the_cast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded = load_runbook(secret_runbook(tmp_path))
    monkeypatch.setenv("COCKPIT_SECRET_BMC_PASSWORD", SECRET)
    params = resolve_parameters(loaded.runbook, {}, {"COCKPIT_SECRET_BMC_PASSWORD": SECRET})
    assert params["bmc_password"] == SECRET
    sessions = tmp_path / "sessions"
    session = Session.start(
        sessions_dir=sessions, change_id="CHG-SECRET", loaded=loaded, params=params,
        targets=[HostTarget(name="gpu01")], operator="alice", transport=None,
    )  # fmt: skip
    try:
        assert session.params["bmc_password"] == SECRET  # the commands are filled with it
        # a person pasting it, a command echoing it: written as ***
        event = session.note(f"BMC login worked with {SECRET}, checked twice ({SECRET})")
        assert event.note == "BMC login worked with ***, checked twice (***)"
        # a note long enough to be kept aside: the artifact holds no secret either
        session.note(("x" * 99 + f" {SECRET}\n") * 300)
        session.pause("lunch")
    finally:
        session.journal.close()
    path = session.path
    assert SECRET.encode() not in path.read_bytes()
    assert read_session(path).header.parameters["bmc_password"] == "***"
    artifacts = list((sessions / "CHG-SECRET" / "artifacts").iterdir())
    assert artifacts and all(SECRET.encode() not in a.read_bytes() for a in artifacts)

    # resumed: the value comes from the environment again, never from the log
    monkeypatch.delenv("COCKPIT_SECRET_BMC_PASSWORD")
    with pytest.raises(BadInput, match=r"bmc_password is secret and required: set COCKPIT_SECRET_BMC_PASSWORD"):
        Session.resume(path, operator="alice")
    monkeypatch.setenv("COCKPIT_SECRET_BMC_PASSWORD", SECRET)
    again = Session.resume(path, operator="alice")
    try:
        assert again.params["bmc_password"] == SECRET
        again.note(f"still {SECRET}")
    finally:
        again.journal.close()
    assert SECRET.encode() not in path.read_bytes()

    assert main(["export", str(path), "-o", str(tmp_path / "ticket.md")]) == 0
    ticket = (tmp_path / "ticket.md").read_text()
    assert SECRET not in ticket and "***" in ticket
    assert main(["replay", str(path), "--cast", str(tmp_path / "w.cast")]) == 0
    assert SECRET not in (tmp_path / "w.cast").read_text()
    assert SECRET not in capsys.readouterr().out


def test_a_secret_on_the_command_line_is_refused_without_echoing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runbook = secret_runbook(tmp_path)
    status = main(
        ["run", "--change-id", "CHG-S", "--hosts", "gpu01", "--runbook", str(runbook),
         "--param", f"bmc_password={SECRET}", "--dry-run"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and "is secret: give it as COCKPIT_SECRET_BMC_PASSWORD in the environment" in err, err
    assert SECRET not in err


@pytest.mark.parametrize(
    ("env", "said"),
    [({}, "set COCKPIT_SECRET_BMC_PASSWORD"), ({"COCKPIT_SECRET_BMC_PASSWORD": "abc"}, "fewer than 6 characters")],
)
def test_a_missing_or_short_secret_is_refused_naming_the_variable(
    tmp_path: Path, env: dict[str, str], said: str
) -> None:
    loaded = load_runbook(secret_runbook(tmp_path))
    with pytest.raises(BadInput, match=said):
        resolve_parameters(loaded.runbook, {}, env)


def test_a_secret_with_a_default_in_the_runbook_fails_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = secret_runbook(tmp_path, SECRET_PARAM.replace("required = true", f'default = "{SECRET}"'))
    assert main(["check", str(path)]) != 0
    out = capsys.readouterr()
    assert "a secret parameter has no default" in out.out + out.err


async def test_a_running_commands_live_output_shows_the_secret_as_stars() -> None:
    """What the step pane streams and the outcome the screen shows: *** in the secret's place."""
    from cockpit.fleet.executor import Executor
    from cockpit.runbook.model import Step, Where

    seen: list[str] = []
    executor = Executor(transport=None, params={"bmc_password": SECRET}, secrets=(SECRET,))
    step = Step(id="s", title="t", run="echo login {bmc_password}; echo {bmc_password} >&2", where=Where.LOCAL)
    outcome = await executor.execute_step(step, None, on_output=lambda _stream, text: seen.append(text))
    assert outcome.ok, outcome
    assert outcome.command is not None and SECRET not in outcome.command and "***" in outcome.command
    assert outcome.stdout == "login ***\n" and outcome.stderr == "***\n"
    assert seen and SECRET not in "".join(seen) and "login ***" in "".join(seen)
