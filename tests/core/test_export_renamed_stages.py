"""The ticket of a runbook whose node stages are named otherwise: its outcomes come from the
one folded state over that runbook's stages, not from stage ids the export knows by name.

Real parts: a copy of the shipped minimal runbook with every node stage renamed, walked by
the autopilot on the simulated fleet behind real SSH (the gpu-missing scenario: the canary
goes through, the second node loses a GPU and its rollback cannot bring it back), then the
change log exported as ``cockpit export`` does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from walk_expectations import IN_PROCESS_WALK_SPEED, WALK_NODES, WALK_PARAMS

from cockpit.changelog.journal import read_session
from cockpit.commands.demo import drive_and_report
from cockpit.export import export_text, summarise
from cockpit.export.summary import NOT_JUDGED
from cockpit.runbook.loader import load_runbook, shipped_runbooks
from cockpit.session.demo import demo_session

#: The shipped minimal runbook's node stages, renamed (none keeps an id the old export knew).
RENAMED = {
    "drain": "cordon",
    "record": "prepare",
    "upgrade": "install",
    "reboot": "restart",
    "smoke": "verify",
    "expand": "return-to-service",
}


def renamed_runbook(directory: Path) -> Path:
    """The minimal runbook with each node stage's id renamed (its steps and items keep theirs)."""
    text = shipped_runbooks()["minimal-driver-upgrade"].read_text(encoding="utf-8")

    def rename(match: re.Match[str]) -> str:
        return f'[[stages]]\nid = "{RENAMED.get(match[1], match[1])}"'

    text, count = re.subn(r'\[\[stages\]\]\nid = "([a-z-]+)"', rename, text)
    assert count == 7  # the window stage that arms the triggers, and the six node stages
    path = directory / "renamed-driver-upgrade.toml"
    path.write_text(text.replace('id = "minimal-driver-upgrade"', 'id = "renamed-driver-upgrade"'), encoding="utf-8")
    loaded = load_runbook(path)
    assert [s.id for s in loaded.runbook.node_stages] == list(RENAMED.values())
    return path


@pytest.mark.timeout(120)
async def test_the_ticket_of_a_runbook_with_other_stage_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runbook = renamed_runbook(tmp_path)
    async with demo_session(
        in_process=True,  # the subject is the export of the log, not SSH: called in process
        nodes=WALK_NODES,
        scenario="gpu-missing",
        sessions_dir=tmp_path / "sessions",
        speed=IN_PROCESS_WALK_SPEED,
        params=WALK_PARAMS,
        runbook=str(runbook),
    ) as (session, _fleet):
        await drive_and_report(session, "gpu-missing")  # it stops there: a person must take gpu02
        said = capsys.readouterr().out
        assert "outcome: roll-back" in said, said[-3000:]
        assert {n: p.current for n, p in session.state.nodes.items()} == {
            "gpu01": "done",
            "gpu02": "rollback-failed",
        }, said[-3000:]
        path = session.path

    log = read_session(path)
    summary = summarise(log, load_runbook(runbook))
    assert summary.runbook_matched
    by_node = {n.node: n for n in summary.nodes}
    # the canary passed every node stage of this runbook: upgraded, its last stage the runbook's last
    assert by_node["gpu01"].outcome == "upgraded"
    assert by_node["gpu01"].last_stage == "return-to-service"
    # the second node stopped before the end and its rollback failed, saying why
    assert by_node["gpu02"].outcome == "rollback FAILED"
    assert by_node["gpu02"].last_stage in list(RENAMED.values())[:-1]
    assert by_node["gpu02"].rollback_why and "still missing" in by_node["gpu02"].rollback_why
    assert by_node["gpu01"].driver_after != by_node["gpu01"].driver_before

    ticket = export_text(log, "markdown", load_runbook(runbook))
    rows = {line.split("`")[1]: line for line in ticket.splitlines() if line.startswith("| `gpu0")}
    assert "upgraded" in rows["gpu01"] and "rollback FAILED" in rows["gpu02"], ticket
    assert "return-to-service" in rows["gpu01"], rows["gpu01"]

    # without the runbook (not given, none shipped of its id) no stage is known and no event can
    # be judged by its rules: the ticket does not guess from stage ids of other runbooks
    unknown = {n.node: n for n in summarise(log).nodes}
    assert unknown["gpu01"].outcome == NOT_JUDGED and unknown["gpu01"].last_stage is None
    assert unknown["gpu02"].outcome == NOT_JUDGED
