"""Big logs stay usable: resume, review, replay and export read a log once (the scanner is
counted: it sees each byte of the file once, plus what is appended meanwhile), the chunked
reader reads exactly what the one-pass reader read, and the reviewer's append runs off the
UI thread (shown pending while another writer holds the file's lock)."""

from __future__ import annotations

import asyncio
import fcntl
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from offline_session import start_minimal

import cockpit.changelog.journal as journal_module
import cockpit.changelog.reader as reader_module
from cockpit.changelog.blocks import scan_blocks
from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.session.operator import Session
from cockpit.session.review import ReviewerSession

OPERATOR, REVIEWER = "alice", "bob"
EXAMPLE = Path(__file__).resolve().parents[2] / "sessions" / "examples" / "demo-gpu-missing.toml"


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Bytes each call of the block scanner was given (the real scanner runs)."""
    sizes: list[int] = []

    def counting(data: bytes, *args: Any, **kw: Any) -> Any:
        sizes.append(len(data))
        return scan_blocks(data, *args, **kw)

    monkeypatch.setattr(reader_module, "scan_blocks", counting)
    monkeypatch.setattr(journal_module, "scan_blocks", counting)
    yield sizes


def a_window(tmp_path: Path, notes: int = 300) -> Path:
    """A real session (started, then notes by the operator), paused: about 300 events."""
    session = start_minimal(tmp_path, "CHG-BIG", OPERATOR)
    for i in range(notes):
        session.note(f"note {i}: " + "x" * 200)
    path = session.path
    session.journal.close()
    return path


def body_bytes(path: Path) -> int:
    data = path.read_bytes()
    return len(data) - data.index(b"\n[events.")


def test_resume_reads_the_log_once(tmp_path: Path, scanned: list[int]) -> None:
    path = a_window(tmp_path)
    size, last = body_bytes(path), read_session(path).last_seq
    scanned.clear()
    session = Session.resume(path, operator=OPERATOR)
    session.recorder.absorb_foreign()  # the UI's first poll for others' appends
    appended = path.stat().st_size - size
    try:
        assert session.state.last_seq == last + 1  # the resumed event, on the full fold
        assert sum(scanned) <= size + appended, scanned  # every byte once (then only the new ones)
    finally:
        session.journal.close()


def test_replay_and_export_read_once(tmp_path: Path, scanned: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(EXAMPLE, tmp_path / EXAMPLE.name)
    shutil.copytree(EXAMPLE.parent / "checklists", tmp_path / "checklists")
    path = tmp_path / EXAMPLE.name
    size = body_bytes(path)
    scanned.clear()
    assert main(["export", str(path), "-o", str(tmp_path / "ticket.md")]) == 0
    assert sum(scanned) == size
    scanned.clear()
    assert main(["replay", str(path), "--cast", str(tmp_path / "window.cast")]) == 0
    assert sum(scanned) == size
    capsys.readouterr()


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_module, "SCAN_CHUNK_BYTES", 3_000)  # many chunks on a small log


def damage_block(path: Path, seq: int) -> None:
    data = bytearray(path.read_bytes())
    at = data.index(f'note = "note {seq - 2}: '.encode())  # seq 1 is session-started; note i is seq i + 2
    data[at + 6] ^= 0x01  # one flipped bit inside the block: its CRC no longer holds
    path.write_bytes(bytes(data))


# --- the reviewer's append off the UI thread


async def until(pilot: Any, condition: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)


async def test_the_reviewers_append_never_blocks_the_screen(tmp_path: Path) -> None:
    from rendered import rendered_text
    from textual.widgets import Input

    from screens.modals import TextPrompt
    from screens.review import ReviewApp

    path = a_window(tmp_path, notes=5)
    app = ReviewApp(ReviewerSession(path, REVIEWER), poll_s=0.1)
    holder = path.open("ab")
    try:
        async with app.run_test(size=(150, 44)) as pilot:
            screen = app.view
            fcntl.flock(holder, fcntl.LOCK_EX)  # another writer mid-append: the reviewer's write must wait
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, TextPrompt))
            field = app.screen.query_one(Input)
            field.value = "checked the canary"
            field.focus()
            await pilot.press("enter")
            bar = screen.query_one("#review-bar")
            await until(pilot, lambda: "writing: note added" in rendered_text(bar))
            # the screen still answers while the write waits: a second intent is told to wait
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, TextPrompt))
            app.screen.query_one(Input).value = "again"
            await pilot.press("enter")
            await until(pilot, lambda: any("still writing" in n.message for n in app._notifications))
            assert not any(e.kind is EventKind.NOTE and e.actor == REVIEWER for e in read_session(path).events)
            fcntl.flock(holder, fcntl.LOCK_UN)
            await until(pilot, lambda: "writing:" not in rendered_text(bar))
            notes = [e for e in read_session(path).events if e.kind is EventKind.NOTE and e.actor == REVIEWER]
            assert [e.note for e in notes] == ["checked the canary"]
            await pilot.press("q")
    finally:
        holder.close()
        app.review.close()
