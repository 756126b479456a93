"""Where the tests find the checkout's own files (no tests here)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the change log of the demo's gpu-missing story, committed as an example (replay, export, golden tests)
EXAMPLE = REPO / "sessions" / "examples" / "demo-gpu-missing.toml"
#: the runbook the example was recorded with (its header's sha256), kept beside it as
#: checklists/driver-upgrade-r580.toml so the example loads after the shipped runbook changes
EXAMPLE_RUNBOOK = EXAMPLE.parent / "checklists" / "driver-upgrade-r580.toml"


def beside(folder: Path) -> None:
    """Put the example's runbook beside a copy of the example in ``folder``, where a session looks first."""
    (folder / "checklists").mkdir(exist_ok=True)
    (folder / "checklists" / EXAMPLE_RUNBOOK.name).write_bytes(EXAMPLE_RUNBOOK.read_bytes())
