"""Fixtures for the core tests: a real OpenSSH sshd on 127.0.0.1 (see tests/sshd_fixture.py), the
client files for a test module's simulated ``fleet``, and the sessions a command would drive."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sshd_fixture  # tests/sshd_fixture.py, on the path through pyproject's pythonpath

from cockpit.session.operator import Session
from cockpit.sim import SimClientFiles, SimFleet


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path) -> Iterator[object]:
    """A real sshd serving the current user with key auth and stub GPU tools.

    Missing sshd: the test fails in CI (``CI=true``, where .ci/run installs it), skips locally.
    """
    if sshd_fixture.find_sshd() is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("sshd is not installed but CI=true: .ci/run should have installed openssh-server")
        pytest.skip("sshd not installed (package openssh-server)")
    server = sshd_fixture.start_sshd(tmp_path_factory.mktemp("sshd"), fixtures_dir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def files(fleet: SimFleet, tmp_path: Path) -> SimClientFiles:
    """ssh_config, known_hosts and key for the ``fleet`` fixture the test module defines."""
    return fleet.write_client_files(tmp_path / "sim")


@pytest.fixture
def driven(monkeypatch: pytest.MonkeyPatch) -> list[Session]:
    """The sessions ``cockpit run`` and ``resume`` (through ``main()``) would drive, caught
    with their log closed before any screen opens (no terminal needed)."""
    caught: list[Session] = []

    async def drive(session: Session, refresh: float) -> int:
        caught.append(session)
        session.journal.close()
        return 0

    monkeypatch.setattr("cockpit.commands.run.drive_window", drive)
    monkeypatch.setattr("cockpit.commands.terminal.require_terminal", lambda *a, **k: None)
    return caught
