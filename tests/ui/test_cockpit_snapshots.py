"""Snapshots of the main screen's states (review the SVGs before ``--snapshot-update``).

Deterministic: an offline session (no transport) on a frozen clock, no poller, the
dark theme, and no focused text input (so no cursor blink).
"""

from __future__ import annotations

from screens.app import build_app


def test_snapshot_idle_80x24(offline, snap_compare) -> None:
    assert snap_compare(build_app(offline, refresh_s=0), terminal_size=(80, 24))


def test_snapshot_gate_blocked_120x40(offline, snap_compare) -> None:
    offline.tick("freeze", "vllm-source", note="vLLM 0.11.0 from the image label")
    offline.tick("freeze", "model-revision-launch", note="model rev a1b2c3, launch flags in INC-1")
    assert snap_compare(build_app(offline, refresh_s=0), terminal_size=(120, 40))


def test_snapshot_trigger_fired_80x24(offline, ui, snap_compare) -> None:
    ui.through_opening(offline)
    offline.override("drain", "gpu01", reason="drained by hand before the window")
    offline.raise_trigger("protected-workload-failed", "gpu01", note="inference pods crash-looping")
    assert snap_compare(build_app(offline, refresh_s=0), terminal_size=(80, 24))


def test_snapshot_wave_running_200x50(offline, ui, snap_compare) -> None:
    ui.through_opening(offline)
    offline.override("drain", "gpu01", reason="drained by hand before the window")
    assert snap_compare(build_app(offline, refresh_s=0), terminal_size=(200, 50))


def test_snapshot_help_80x24(offline, snap_compare) -> None:
    assert snap_compare(build_app(offline, refresh_s=0), terminal_size=(80, 24), press=["question_mark"])
