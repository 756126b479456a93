"""A 10 MB note in the change log (issue 28: `cockpit review` took 14 s and 1.3 GB to draw
it): the reviewer's screen shows its start and says the rest is in the log; a note typed
that long is kept aside as an artifact, its event holding the start and the end."""

from __future__ import annotations

import hashlib
from pathlib import Path

from offline_session import start_minimal
from rendered import rendered_text

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.engine import actions
from cockpit.session.notes import NOTE_MAX_CHARS
from cockpit.session.review import ReviewerSession
from screens.review import ReviewApp

BIG = "0123456789" * 1_000_000  # 10 MB


async def test_a_ten_megabyte_note_in_the_log_is_cut_where_it_is_shown(tmp_path: Path) -> None:
    session = start_minimal(tmp_path, "CHG-BIG")
    # as a hand-writer or an older cockpit leaves it: the whole 10 MB in the event
    session.recorder.record_action(EventKind.NOTE, actions.Note(node=None, text=BIG), "alice", note=BIG)
    app = ReviewApp(ReviewerSession(session.path, "bob"), poll_s=0.1)
    try:
        async with app.run_test(size=(150, 44)) as pilot:
            await pilot.pause()
            recent = rendered_text(app.view.query_one("#recent"))
            assert "more characters in the change log" in recent, recent[-400:]
            assert len(recent) < 20_000
    finally:
        session.journal.close()


def test_a_note_typed_that_long_is_kept_aside_whole(tmp_path: Path) -> None:
    session = start_minimal(tmp_path, "CHG-BIG2")
    try:
        event = session.note(BIG)
    finally:
        session.journal.close()
    assert event.note is not None and len(event.note) <= NOTE_MAX_CHARS
    digest = hashlib.sha256(BIG.encode()).hexdigest()
    assert f"10,000,000 characters: the whole note is artifact {digest}" in event.note
    assert (tmp_path / "CHG-BIG2" / "artifacts" / digest).read_text() == BIG
    assert read_session(session.path).events[-1].note == event.note
