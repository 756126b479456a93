"""Fixtures for the core tests: a real OpenSSH sshd on 127.0.0.1 (see tests/sshd_fixture.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

_HELPER = Path(__file__).resolve().parents[1] / "sshd_fixture.py"


def _load_helper() -> ModuleType:
    # pytest runs in importlib mode, so tests/ is not a package: load the helper by path
    name = "cockpit_tests_sshd_fixture"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _HELPER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


sshd_fixture = _load_helper()


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
