"""After an event that moves one node, the triggers judge that node's changes alone
(``evaluate(changed=...)``): at every such event of real walks, where triggers fire and
where they do not, that finds exactly what judging the whole fleet finds.

Real parts: the simulated fleet in process, the session engine, Next alone driving it; the
change log it wrote is folded again event by event and both evaluations are asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from walk_expectations import IN_PROCESS_WALK_PARAMS, IN_PROCESS_WALK_SPEED, walk_cases

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.commands.demo import drive_and_report
from cockpit.engine.fold import Folder
from cockpit.engine.triggers import evaluate
from cockpit.session.demo import demo_session
from cockpit.session.recording import NODE_LOCAL_KINDS

#: walks where a per-node trigger fires (GPU missing, no return, XID, mismatch), one where
#: a step fails and is retried, and a clean one
SCENARIOS = ("gpu-missing", "no-return", "xid", "mismatch", "flaky-link", "happy")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scenario", walk_cases(SCENARIOS))
async def test_judging_one_nodes_changes_finds_what_judging_the_fleet_finds(
    scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with demo_session(
        in_process=True,
        nodes=4,
        scenario=scenario,
        sessions_dir=tmp_path,
        speed=IN_PROCESS_WALK_SPEED,
        params=IN_PROCESS_WALK_PARAMS,
    ) as (session, _fleet):
        await drive_and_report(session, scenario)
        runbook, params = session.runbook, dict(session.recorder.params)
        start_params, hosts, operator = dict(session.state.params), list(session.state.nodes), session.operator
    capsys.readouterr()
    log = read_session(session.path)
    folder = Folder(runbook, start_params, hosts, operator=operator)
    compared = found = 0
    for event in log.events:
        folder.apply(event)
        if event.node is None or event.kind not in NODE_LOCAL_KINDS:
            continue
        whole = evaluate(runbook, folder.state, params, event.ts)
        scoped = evaluate(runbook, folder.state, params, event.ts, changed=(event.node,))
        assert scoped == whole, (scenario, event.seq, event.kind, event.node)
        compared += 1
        found += bool(whole)
    assert compared > 40, compared
    fired = [e for e in log.events if e.kind is EventKind.TRIGGER_FIRED]
    firing = scenario not in ("happy", "flaky-link")
    assert bool(fired) == firing, [e.trigger for e in fired]
    # where triggers fired, some compared evaluations were the ones that found them
    assert bool(found) == firing, found


def test_every_judge_that_reads_the_clock_still_judges_the_whole_fleet() -> None:
    # a judge whose verdict moves with time alone (a reboot's timeout) must see every node
    # after each event, or a node nobody touches would never time out until the next round
    import inspect

    from cockpit.engine import triggers

    reads_clock = {
        name
        for name, fn in triggers.EVALUATORS.items()
        if fn in triggers._JUDGES and ".now" in inspect.getsource(triggers._JUDGES[fn])
    }
    assert reads_clock == {"reboot_timeout"}
    assert reads_clock <= triggers._CLOCK_JUDGED
