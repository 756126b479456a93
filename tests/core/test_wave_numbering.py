"""One wave convention: the change log stores the wave's index from 0 (its format is a
contract, and logs already written say ``wave = 0`` for the canary); every place a person
reads (the screen's header and fleet table, the Next line, event text, refusals, the
ticket) numbers waves from 1, through :func:`cockpit.changelog.events.wave_number`."""

from __future__ import annotations

import json
import tomllib

from repo_paths import EXAMPLE

from cockpit.changelog.events import EventKind, wave_number
from cockpit.changelog.journal import read_session
from cockpit.engine import actions
from cockpit.engine.actions import describe
from cockpit.engine.rules import check_action
from cockpit.export import export_text, summarise
from cockpit.session.review import session_runbook
from cockpit.view.fleet import fleet_row
from cockpit.view.model import wave_text
from cockpit.view.replay import Replay
from cockpit.view.words import Form, event_text


def test_the_stored_value_stays_an_index_from_0() -> None:
    stored = tomllib.loads(EXAMPLE.read_text())["events"]
    waves = [e["wave"] for e in stored.values() if e["kind"] == "wave-started"]
    assert waves == [0, 1]  # the committed example, as written: read as it always was
    log = read_session(EXAMPLE)
    assert [e.wave for e in log.events if e.kind is EventKind.WAVE_STARTED] == [0, 1]
    assert [w.wave for w in summarise(log).waves] == [0, 1]  # the summary keeps the log's values
    assert wave_number(0) == 1


def test_every_place_a_person_reads_counts_from_1() -> None:
    log = read_session(EXAMPLE)
    runbook = session_runbook(log.header, EXAMPLE).runbook
    replay = Replay.for_session(log, runbook)
    first, second = (e for e in log.events if e.kind is EventKind.WAVE_STARTED)
    canary = (first.facts.nodes or [])[0]

    assert event_text(first) == f"Wave 1 started: {canary}"
    assert event_text(second, Form.SHORT) == "wave 2 started"
    assert describe(actions.StartWave(wave=0)) == "start wave 1"  # the Next line's words

    before, during = replay.state_at(first.seq - 1), replay.state_at(first.seq)
    assert wave_text(before) == f"wave -/{len(before.waves)}"
    assert wave_text(during) == f"wave 1/{len(during.waves)}"
    row = fleet_row(during.nodes[canary], None, first.ts)
    assert row.cells[1] == "1"

    # a refusal names the waves as the screen does: the next one is the canary's, wave 1
    verdict = check_action(
        before, runbook, actions.StartWave(wave=1), log.header.operator, operator=log.header.operator
    )
    assert "the next wave is 1, not 2" in verdict.reasons

    md = export_text(log, "markdown")
    assert "**Wave 1** started" in md and "**Wave 2** started" in md and "Wave 0" not in md
    assert f"| `{canary}` | 1 |" in md
    notes = json.loads(export_text(log, "servicenow"))["change_request"]
    assert "Wave 1 (" in json.dumps(notes) and "Wave 0" not in json.dumps(notes)
