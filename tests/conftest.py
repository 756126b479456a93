"""Shared test fixtures: paths to the repository and to the real captured outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Real tool outputs captured on real machines, with their provenance in README.md there.
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES
