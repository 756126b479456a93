"""Shared test fixtures: paths to the repository and to the real captured outputs."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Real tool outputs captured on real machines, with their provenance in README.md there.
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME and no SSH agent: the developer's own ~/.ssh and keys never leak in."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home


def pytest_configure(config: pytest.Config) -> None:
    """Temporary folders (every test's change log, the simulator's client files) on the RAM
    disk where there is one, unless TMPDIR names a place: the journal fsyncs every event,
    which costs milliseconds on an idle disk and tens of them on a busy one. The fsync still
    runs; and a writer killed by SIGKILL (the crash tests) loses nothing the page cache
    holds, on either kind of disk."""
    shm = Path("/dev/shm")
    if "TMPDIR" not in os.environ and shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        os.environ["TMPDIR"] = str(shm)  # also for the subprocesses (cockpit sim, the tmux binary)
        tempfile.tempdir = None  # gettempdir() looks again


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: two workers a core this process may run on, at most 16 (each worker starts
    its own sshd and Slurm fixtures). Much of the suite waits (on sshd, slurmd, tmux, a child
    being killed, a simulated reboot), so a worker a core left the cores a third idle: on 2
    cores, 4 workers took the suite from 5:13 to 4:19 wall. PYTEST_XDIST_AUTO_NUM_WORKERS, set,
    is xdist's own answer, and ``-n logical`` keeps its meaning."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.option.numprocesses == "logical":
        return None  # xdist's own hook decides
    return min(16, 2 * len(os.sched_getaffinity(0)))


#: Marks that keep a test out of the inner loop (``-m "not slow"``): it drives a real daemon
#: or binary (OpenSSH's sshd, tmux, a real Slurm, the Kubernetes API emulator, the cockpit
#: binary as a process) or the simulator's SSH server, whose starts, imports, handshakes and
#: real-time polls cost seconds. Those tests are the transport's and the backends' own (the
#: core's logic runs on the in-process transport, cockpit/sim/inprocess.py); the full suite
#: runs them all.
SLOW_MARKS = ("sshd", "tmux", "slurm", "kubernetes", "ssh", "binary")
#: Folders whose every test is slow: the Textual app driven through the pilot (its subject is
#: the UI, and a pilot run opens dozens of screens).
SLOW_FOLDERS = ("tests/ui/",)


def pytest_itemcollected(item: pytest.Item) -> None:
    """The ``slow`` mark follows from what a test drives (see SLOW_MARKS, SLOW_FOLDERS): a
    test needing a real sshd, tmux, Slurm or Kubernetes API, SSH, the binary or the pilot is
    slow without saying so again."""
    where = item.path.relative_to(REPO).as_posix() if item.path.is_relative_to(REPO) else ""
    fixtures = getattr(item, "fixturenames", ())
    if (
        any(item.get_closest_marker(name) is not None for name in SLOW_MARKS)
        or "sshd" in fixtures
        or where.startswith(SLOW_FOLDERS)
    ):
        item.add_marker(pytest.mark.slow)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run first: started last, one of them would leave a single
    worker busy for a minute after the others have finished. (The sort is stable, so
    the rest keep pytest's order; every xdist worker sorts the same way.)"""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
