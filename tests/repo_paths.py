"""Where the tests find the checkout's own files (no tests here)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the change log of the demo's gpu-missing story, committed as an example (replay, export, golden tests)
EXAMPLE = REPO / "sessions" / "examples" / "demo-gpu-missing.toml"
