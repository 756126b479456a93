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
from cockpit.changelog.journal import JournalDamaged, read_session
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


def test_cockpit_resume_and_the_reviewer_read_the_log_once(
    tmp_path: Path, scanned: list[int], driven: list[Session], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cockpit resume` hands what it read to the session (it used to read the log twice), and
    the reviewer's first append starts where its read ended (it used to reread the file)."""
    path = a_window(tmp_path)
    last = read_session(path).last_seq
    scanned.clear()
    assert main(["resume", str(path), "--operator", OPERATOR]) == 0, capsys.readouterr().err
    assert driven and driven[0].state.last_seq == last + 1
    assert sum(scanned) <= body_bytes(path), scanned  # each byte once (the resumed block was written, not read)
    assert len([n for n in scanned if n > 10_000]) == 1, scanned  # one read of the body, never two
    scanned.clear()
    review = ReviewerSession(path, REVIEWER)
    try:
        assert review.state.last_seq == last + 1
        before = sum(scanned)
        assert before == body_bytes(path)
        review.note("looked at it")
        assert sum(scanned) - before < 2_000  # the new block only, never the whole file again
        assert list(review.events)[-1].kind is EventKind.NOTE and review.state.last_seq == review.follower.last_seq
    finally:
        review.close()


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_module, "SCAN_CHUNK_BYTES", 3_000)  # many chunks on a small log


def test_the_chunked_reader_reads_what_one_pass_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read 3 kB at a time, the chain's head, every block record, the signatures and the
    events are those of one pass over the whole file (the chain is carried across chunks)."""
    path = a_window(tmp_path, notes=60)
    whole = read_session(path)
    monkeypatch.setattr(reader_module, "SCAN_CHUNK_BYTES", 3_000)
    chunked = read_session(path)
    assert chunked.events == whole.events and chunked.end_offset == whole.end_offset and chunked.torn is None
    assert chunked.chain == whole.chain and chunked.chain.ok and chunked.blocks == whole.blocks
    kept: list[int] = []
    folded = reader_module.read_session_folding(path, lambda _h, events: kept.extend(e.seq for e in events))
    assert kept == [e.seq for e in whole.events] and folded.last_seq == whole.last_seq
    assert folded.chain == whole.chain and len(folded.events) == 1 and len(folded.blocks) == 1
    # a broken link in a later chunk is named there, as by one pass
    data = bytearray(path.read_bytes())
    at = data.index(b'prev = "sha256:', data.index(b"[events.000050]"))
    data[at + 20] ^= 0x01
    body_end = data.index(b"# end of event 000050")
    block_start = data.rindex(b"\n[events.000050]", 0, body_end)
    import zlib

    crc = b"%08x" % zlib.crc32(bytes(data[block_start:body_end]))
    data[body_end + len("# end of event 000050, crc32 ") : body_end + len("# end of event 000050, crc32 ") + 8] = crc
    path.write_bytes(bytes(data))
    broken = read_session(path)
    assert broken.chain.broken_at == 50 and broken.last_seq == whole.last_seq
    # a torn tail in the last chunk is still a torn tail
    with path.open("ab") as fh:
        fh.write(b"\n[events.99999]\nseq = 99999\n")
    torn = read_session(path)
    assert torn.torn is not None and torn.last_seq == whole.last_seq


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("seq", [5, 20, 40])
def test_damage_before_good_blocks_is_caught_in_any_chunk(tmp_path: Path, seq: int) -> None:
    path = a_window(tmp_path, notes=60)
    damage_block(path, seq)
    with pytest.raises(JournalDamaged, match=f"event {seq}"):
        read_session(path)


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
