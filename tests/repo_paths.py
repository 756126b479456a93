"""Where the tests find the checkout's own files (no tests here)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the change log of the demo's gpu-missing story, committed as an example (replay, export, golden tests)
EXAMPLE = REPO / "sessions" / "examples" / "demo-gpu-missing.toml"
#: the runbook the example was recorded with (the shipped one has moved on since), where a
#: replay finds it: beside the log, at the log's recorded relative path
EXAMPLE_RUNBOOK = REPO / "sessions" / "examples" / "checklists" / "driver-upgrade-r580.toml"


def with_example_runbook(folder: Path) -> Path:
    """Put the example's runbook beside a copy of the example written into ``folder``."""
    target = folder / "checklists" / EXAMPLE_RUNBOOK.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(EXAMPLE_RUNBOOK.read_bytes())
    return target
