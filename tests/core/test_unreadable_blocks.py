"""A bad block never stops a window: a well-checksummed, well-chained block this cockpit
cannot read (a kind it does not know, a value nested past the parser's bound, a lone
surrogate, bytes that are not UTF-8, facts its kind refuses) is named with its seq and left
out of the fold; appends (its seq never reused), pause, resume, review, export, replay and
verify go on, in one line each and never a traceback. Real sessions, real files."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import pytest

from cockpit.changelog.events import EventKind, UnknownEvent
from cockpit.changelog.journal import Journal, JournalFollower, read_session
from cockpit.cli import main
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load
from cockpit.session.operator import Session
from cockpit.session.review import ReviewerSession

OPERATOR, REVIEWER = "alice", "bob"


def _block(seq: int, prev: str, tail: bytes, kind: str = "note", ts: str = "2026-08-05 23:00:00+00:00") -> bytes:
    body = (
        f'\n[events.{seq:06d}]\nseq = {seq}\nprev = "{prev}"\nts = {ts}\nactor = "{REVIEWER}"\nkind = "{kind}"\n'
    ).encode() + tail
    return body + b"# end of event %06d, crc32 %08x\n" % (seq, zlib.crc32(body))


#: (name, the hostile block's own lines, its kind, what the report says; None: it reads, as an unknown kind)
HOSTILE: list[tuple[str, bytes, str, str | None]] = [
    ("a kind this cockpit does not know", b'note = "from a newer cockpit"\n', "node-drained-v9", None),
    ("a lone surrogate escaped", b'note = "a\\ud800b"\n', "note", "not a TOML event table"),
    ("invalid UTF-8", b'note = "a\xed\xa0\x80b\xff"\n', "note", "not valid UTF-8"),
    ("nested 5,000 deep", b"[events.000004.facts]\nv = " + b"[" * 5000 + b"]" * 5000 + b"\n", "zz", "not a TOML"),
    ("nested tables 300 deep", b"[events.000004.facts]\nv = " + b"{a=" * 300 + b"1" + b"}" * 300 + b"\n", "zz", "TOML"),
    ("facts the kind refuses", b"[events.000004.facts]\nreachable = 'maybe'\n", "probe", "not a valid event"),
    ("no kind at all", b"", "", "kind: missing or not a string"),
    ("a table where the event should be", b"", "note", "its event table has no seq"),
    # times (issue 28): past what a date in UTC holds (an OverflowError took every reader down),
    # before 2000, after 2099, and none at all
    ("ts 9999-12-31T23:59:59-23:59", b'note = "x"\n', "note", "ts: Value error, timestamp outside what a date in UTC"),
    ("ts 0001-01-01T00:00:00+23:59", b'note = "x"\n', "note", "timestamp outside what a date in UTC can hold"),
    ("ts 1970-01-01T00:00:00Z", b'note = "x"\n', "note", "outside 2000..2099 (UTC)"),
    ("ts 2100-01-01T00:00:00Z", b'note = "x"\n', "note", "outside 2000..2099 (UTC)"),
    ("ts 2026-08-05T23:00:00", b'note = "x"\n', "note", "timestamp must carry a UTC offset"),
]


def a_session(tmp_path: Path, name: str, tail: bytes, kind: str) -> Path:
    """A real session (started, a note, paused) with the hostile block appended as seq 4."""
    session = Session.start(
        sessions_dir=tmp_path,
        change_id="CHG-BAD",
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01")],
        operator=OPERATOR,
        transport=None,
    )
    session.note("before the bad block")
    session.pause("lunch")
    path = session.path
    head = session.journal._head
    session.journal.close()
    if name == "no kind at all":
        block = _block(4, head, b"", kind="").replace(b'kind = ""\n', b"")
        block = _recrc(block)
    elif name == "a table where the event should be":
        block = _recrc(_block(4, head, b"").replace(b"[events.000004]", b"[events.000004.x]"))
    elif name.startswith("ts "):
        block = _block(4, head, tail, kind, ts=name.removeprefix("ts "))
    else:
        block = _block(4, head, tail, kind)
    with path.open("ab") as fh:
        fh.write(block)
    return path


def _recrc(block: bytes) -> bytes:
    at = block.rindex(b"# end of event ")
    body = block[:at]
    return body + b"# end of event 000004, crc32 %08x\n" % zlib.crc32(body)


@pytest.mark.parametrize(("name", "tail", "kind", "why"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_bad_block_is_named_and_the_window_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, tail: bytes, kind: str, why: str | None
) -> None:
    path = a_session(tmp_path, name, tail, kind)
    log = read_session(path)
    assert log.last_seq == 4 and log.chain.ok, name  # the chain went through it
    if why is None:
        assert isinstance(log.events[-1], UnknownEvent) and not log.unreadable
    else:
        assert [seq for seq, _ in log.unreadable] == [4] and why in log.unreadable[0][1], log.unreadable
    # the follower of a live log reports it the same way, and goes on
    follower = JournalFollower(path)
    assert [e.seq for e in follower.poll()] == [e.seq for e in log.events] and follower.last_seq == 4
    assert follower.unreadable == list(log.unreadable)

    # resume (its own read), a note and a pause: appended after it, seq 4 never used again
    session = Session.resume(path, operator=OPERATOR)
    try:
        resumed = session.state.last_seq
        assert resumed == 5
        session.note("after the bad block")
        session.pause("end of shift")
    finally:
        session.journal.close()
    # a reviewer reads, follows and appends
    review = ReviewerSession(path, REVIEWER)
    try:
        assert review.note("seen").seq == 8
    finally:
        review.close()
    again = read_session(path)
    assert [e.seq for e in again.events][-4:] == [5, 6, 7, 8] and 4 not in {e.seq for e in again.events} - {
        e.seq for e in log.events
    }
    assert again.chain.ok

    # export, replay: one line each naming the seq, never a traceback; verify fails at it
    assert main(["export", str(path), "-o", str(tmp_path / "ticket.md")]) == 0
    ticket = (tmp_path / "ticket.md").read_text()
    assert main(["replay", str(path), "--cast", str(tmp_path / "window.cast")]) == 0
    status = main(["verify", str(path)])
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    if log.unreadable:
        assert "unreadable event(s) left out, first seq 4" in ticket or "FAILED at seq 4" in ticket, ticket[:600]
        assert status == 1 and re.search(r"FAILED at seq 4: unreadable event", out.err), out.err
        # a person's repair moves the bad block (and what follows) aside; the log verifies after it
        assert main(["verify", str(path), "--repair", "--as", OPERATOR]) == 0
        assert main(["verify", str(path)]) == 0
        out = capsys.readouterr()
        assert "Traceback" not in out.err + out.out
    else:
        assert status == 0, out.err


def test_a_lone_surrogate_in_what_a_person_writes_is_recorded_as_the_replacement_character(tmp_path: Path) -> None:
    """Text UTF-8 cannot hold (what surrogateescape makes of bytes that are not UTF-8) must
    not make the append fail: it is written as U+FFFD, and the event returned is the one the
    file holds."""
    path = a_session(tmp_path, "a kind this cockpit does not know", b"", "zz")
    with Journal.open_for_append(path, OPERATOR) as journal:
        event = journal.append(EventKind.NOTE, note="output: \udcff\udcfe end", facts=None)
        probe = journal.append(EventKind.PROBE, actor="cockpit", node="gpu01", facts={"gpu_name": "H100\ud800"})
    assert event.note == "output: \ufffd\ufffd end"
    back = read_session(path)
    assert back.events[-2] == event and back.events[-1] == probe and not back.unreadable
    assert back.events[-1].facts.gpu_name == "H100\ufffd"  # type: ignore[union-attr]


def test_a_time_written_back_is_flagged_by_the_fold_and_the_ticket_shows_no_negative_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A well-chained note months before the window began (a skewed clock, a hand-written
    block): it reads, and the fold says which event went back and from which; the ticket,
    whose window would end before it began, says the window cannot be measured instead."""
    path = a_session(tmp_path, "a note from the past", b'note = "from the past"\n', "note")
    assert main(["export", str(path), "-o", str(tmp_path / "ticket.md")]) == 0
    ticket = (tmp_path / "ticket.md").read_text()
    assert "(not measurable: the log's clock went back (see its anomalies))" in ticket, ticket[:900]
    assert "The log's clock went back" in ticket and "seq 4 is " in ticket and " before seq 3." in ticket, ticket[:900]
    assert not re.search(r"\(-\d", ticket), ticket[:900]
    session = Session.resume(path, operator=OPERATOR)
    try:
        said = [a for a in session.state.anomalies if a.startswith("seq 4 ")]
        assert len(said) == 1 and "before seq 3's: a clock went back" in said[0], session.state.anomalies
        # the next event, at the real time again, goes forward: nothing more is flagged
        session.note("after it")
        assert not [a for a in session.state.anomalies if a.startswith("seq 6 ")], session.state.anomalies
    finally:
        session.journal.close()
    assert "Traceback" not in capsys.readouterr().err
