"""Shared test fixtures: paths to the repository and to the real captured outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: ../shared/fixtures beside the checkout (CI lays a copy of shared/ beside its clone)
FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"real captured outputs not found at {FIXTURES}")
    return FIXTURES
