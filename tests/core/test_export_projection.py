"""The ticket is a projection of the one folded state: :func:`~cockpit.export.summary.project`
reads no event, so folding a log with the engine's Folder (as the live session and replay
do, checkpoint copies included) and projecting that state gives the export, byte for byte;
and an event the fold refused is shown from the state, near the top, and nowhere else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from repo_paths import EXAMPLE

from cockpit.changelog.events import EventKind as K
from cockpit.changelog.journal import Journal, SessionHeader, read_session
from cockpit.changelog.verify import read_verified
from cockpit.engine.fold import Folder
from cockpit.export import document, export_text, render, summarise
from cockpit.export.summary import project
from cockpit.runbook.loader import load_runbook

GOLDEN = Path(__file__).resolve().parent / "golden"
RUNBOOK = GOLDEN / "driver-upgrade-r580.toml"  # the runbook the example was recorded with
START = datetime(2026, 8, 5, 22, 0, 0, tzinfo=UTC)


def test_the_export_of_a_log_is_the_projection_of_its_folded_state() -> None:
    log, verification = read_verified(EXAMPLE)
    runbook = load_runbook(RUNBOOK)
    header = log.header
    folder = Folder(
        runbook.runbook, header.window_parameters(), header.hosts, operator=header.operator, signatures=log.signatures
    )
    half = len(log.events) // 2
    for event in log.events[:half]:  # one event at a time, as the live session folds them
        folder.apply(event)
    checkpoint = folder.copy()  # as replay keeps checkpoints: the history goes with the state
    for event in log.events[half:]:
        checkpoint.apply(event)
        folder.apply(event)  # the original goes on too: the copy shares no list with it

    line = verification.summary()
    exported = export_text(log, "markdown", runbook, line)
    assert exported == (GOLDEN / "demo-gpu-missing.md").read_text()  # the ticket the goldens keep
    for state in (folder.state, checkpoint.state):
        summary = project(header, state, runbook.runbook, matched=True, torn=log.torn, integrity=line)
        assert summary == summarise(log, runbook, line)
        assert render.markdown(document.build(summary)) == exported
    # the lists come from the fold's history: what it kept is what the ticket lists
    history = folder.state.history
    assert [e.seq for e in summary.timeline] == [e.seq for e in history.timeline] != []
    assert [f.seq for f in summary.firings] == [f.seq for f in history.firings] != []
    assert summary.events == len(log.events) and summary.refused == []


def _refused_log(directory: Path) -> Path:
    """alice's window of the example's runbook: she passes the first gate with nothing done,
    starts a wave before the window's stages passed, and overrides a locked stage."""
    runbook = load_runbook(RUNBOOK)
    header = SessionHeader(
        change_id="CHG-REFUSED",
        runbook_id=runbook.runbook.id,
        runbook_sha256=runbook.sha256,
        runbook_path=str(RUNBOOK),
        operator="alice",
        hosts=["gpu01"],
        parameters={"target_branch": "580", "driver_package": "nvidia-driver-580", "scheduler": "kubernetes"},
        created_at=START,
    )
    ticks = iter(range(1000))
    j = Journal.create(directory, header, clock=lambda: START + timedelta(minutes=next(ticks)))
    j.append(K.SESSION_STARTED, facts={"operator": "alice"})
    j.append(K.GATE_PASSED, stage="freeze")
    j.append(K.WAVE_STARTED, wave=0, facts={"nodes": ["gpu01"]})
    j.append(K.OVERRIDE, stage="compat", reason="no time for it", facts={"blocked_by": ["compat/classified"]})
    j.append(K.NOTE, note="stopping here")
    j.close()
    return j.path


def test_a_refused_event_is_in_the_tickets_first_lines_from_the_state(tmp_path: Path) -> None:
    log = read_session(_refused_log(tmp_path))
    runbook = load_runbook(RUNBOOK)
    summary = summarise(log, runbook)
    assert summary.judged
    assert [(r.seq, r.kind) for r in summary.refused] == [(2, "gate-passed"), (3, "wave-started"), (4, "override")]
    assert "step 'host-smi' not run" in summary.refused[0].why

    md = export_text(log, "markdown", runbook)
    head = "\n".join(md.splitlines()[:12])
    assert "Refused: 3 event(s) in the log count for nothing" in head, head
    assert "seq 2 (gate-passed) by alice: " in head and "step 'host-smi' not run" in head, head
    assert "seq 4 (override) by alice: " in head, head
    # refused, they count for nothing else: no override passed a gate, no wave started, no node began
    assert summary.overrides == [] and "Overrides:" not in md
    assert summary.waves == [] and "Wave 1 started" not in md
    assert [n.outcome for n in summary.nodes] == ["not started"]
    assert [e.kind for e in summary.timeline] == ["session-started", "note"]


def test_a_log_of_another_runbook_is_shown_unjudged_and_says_so(tmp_path: Path) -> None:
    """Judged by a runbook it was not written under, every gate would be refused: the ticket
    of a runbook edited since shows the events as written, and says they are not judged."""
    changed = tmp_path / "driver-upgrade-r580.toml"
    changed.write_text(RUNBOOK.read_text() + "\n# edited after the window\n")
    log = read_session(_refused_log(tmp_path / "log"))
    summary = summarise(log, load_runbook(changed))
    assert not summary.judged and summary.refused == []
    assert [o.seq for o in summary.overrides] == [4]  # as written
    md = export_text(log, "markdown", load_runbook(changed))
    assert "Not judged" in "\n".join(md.splitlines()[:12]) and "Refused:" not in md
