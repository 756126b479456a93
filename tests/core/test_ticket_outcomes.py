"""A node's outcome in the ticket and its GPU count on the screen say where the node really
is: a step that failed and then succeeded on a retry (the ``flaky-link`` walk's
save-rollback) holds nothing, and an unreachable probe's ``gpu_count = 0`` counts no GPUs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from journals import minute_journal

from cockpit.changelog.events import EventKind as K
from cockpit.changelog.facts import BaselineFacts, ProbeFacts
from cockpit.changelog.journal import read_session
from cockpit.engine.state import NodeProgress
from cockpit.export import export_text, summarise
from cockpit.view.fleet import fleet_row

LOST = {"ok": False, "error": "gpu01: connection lost mid-command (Connection lost)", "error_kind": "transport"}
UNREACHABLE = {"reachable": False, "health": "unreachable", "gpu_count": 0, "error": "connection lost"}


def _window(tmp_path: Path, *, retried: bool, upgraded: bool = False) -> Path:
    """gpu01 drained and recorded; save-rollback lost its link (and, when ``retried``, succeeded
    on the next try); the link then drops, so the last probe found the node unreachable."""
    with minute_journal(tmp_path, "CHG-O") as j:
        j.append(K.SESSION_STARTED)
        j.append(K.WAVE_STARTED, wave=0, facts={"nodes": ["gpu01"]})
        j.append(K.PROBE, node="gpu01", actor="cockpit", facts={"reachable": True, "gpu_count": 8})
        for stage in ("drain", "record"):
            j.append(K.GATE_PASSED, stage=stage, node="gpu01")
        j.append(K.STEP_FINISHED, node="gpu01", stage="upgrade", step="save-rollback", facts=LOST)
        if retried:
            j.append(K.STEP_FINISHED, node="gpu01", stage="upgrade", step="save-rollback", facts={"ok": True})
            j.append(K.STEP_FINISHED, node="gpu01", stage="upgrade", step="install", facts={"ok": True})
        if upgraded:
            for stage in ("upgrade", "reboot", "smoke", "expand"):
                j.append(K.GATE_PASSED, stage=stage, node="gpu01")
        j.append(K.PROBE, node="gpu01", actor="cockpit", facts=UNREACHABLE)
    return j.path


def test_a_step_that_succeeded_on_a_retry_does_not_stop_the_node(tmp_path: Path) -> None:
    (node,) = summarise(read_session(_window(tmp_path, retried=True))).nodes
    assert node.outcome == "in progress"  # in the upgrade stage, nothing failed that still holds
    assert (node.gpus_before, node.gpus_after) == (None, 8)  # the unreachable probe counted nothing


def test_a_step_whose_latest_run_failed_still_stops_the_node(tmp_path: Path) -> None:
    (node,) = summarise(read_session(_window(tmp_path, retried=False))).nodes
    assert node.outcome == "stopped: upgrade/save-rollback failed"


def test_the_ticket_of_a_node_with_a_flaky_link(tmp_path: Path) -> None:
    """The GPU count is the last reachable probe's, and the failed try stays listed. (The log's
    header names no runbook this cockpit has (sha256 0...): its events are folded as written,
    judged by no other runbook's rules, and the ticket says so; a judged walk is
    test_export_renamed_stages'.)"""
    md = export_text(read_session(_window(tmp_path, retried=True, upgraded=True)), "markdown")
    row = next(line for line in md.splitlines() if line.startswith("| `gpu01`"))
    assert "upgraded" in row and "→ 8 |" in row and "→ 0" not in row, row
    assert "Not judged" in md and "none judged by its rules" in md
    assert "save-rollback on gpu01 failed" in md  # the failed try stays in the failed steps' list


def test_a_trigger_cleared_no_longer_stops_the_node(tmp_path: Path) -> None:
    with minute_journal(tmp_path, "CHG-C") as j:
        j.append(K.SESSION_STARTED)
        j.append(K.WAVE_STARTED, wave=0, facts={"nodes": ["gpu01"]})
        j.append(K.TRIGGER_FIRED, trigger="smoke-failed", node="gpu01", actor="cockpit", facts={"evidence": "exit 1"})
        j.append(K.TRIGGER_CLEARED, trigger="smoke-failed", reason="re-run passed, flaky fabric port replaced")
    (node,) = summarise(read_session(j.path)).nodes
    assert node.outcome == "in progress"


def test_the_fleet_row_of_a_node_last_probed_unreachable_does_not_count_zero_gpus() -> None:
    progress = NodeProgress(
        node="gpu01", wave=0, baseline=BaselineFacts(gpu_count=8), probe=ProbeFacts.model_validate(UNREACHABLE)
    )
    row = fleet_row(progress, None, datetime(2026, 8, 5, tzinfo=UTC))
    assert "0/8" not in row.cells and "N/A" in row.cells
