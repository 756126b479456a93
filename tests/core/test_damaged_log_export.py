"""A damaged change log stays readable: `cockpit export` and `cockpit replay` of a log with
an event deleted, two swapped and one edited show all the fold can still read, the
verification and every damaged seq in their first lines, and export exits 1 so a script
notices; `cockpit verify` still refuses it. Real sessions, real files, the real CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from damaged_logs import a_window, damage

from cockpit.changelog.journal import read_session
from cockpit.changelog.verify import read_verified
from cockpit.cli import main


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    path = a_window(tmp_path)
    assert read_session(path).last_seq == 12
    damage(path, deleted=4, swapped=(6, 7), edited=9)
    return path


def test_export_writes_what_can_be_read_with_the_damage_first_and_exits_1(
    damaged: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for fmt in ("markdown", "jira", "servicenow"):
        out = tmp_path / f"ticket.{fmt}"
        assert main(["export", str(damaged), "--format", fmt, "-o", str(out)]) == 1, fmt
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert "damaged change log (seq 4, 5, 6, 7, 9)" in err, err  # the deleted one's successor breaks the chain
        ticket = out.read_text()
        first = next(line for line in ticket.splitlines() if "chain:" in line)
        assert ticket.index(first) < 400, ticket[:600]  # the verification opens the ticket
        assert "chain: BROKEN at seq 5" in first
        for seq, why in (
            (4, "missing: no block holds it (deleted)"),
            (6, "out of place: found after seq 7"),
            (7, "out of place: found before seq 6"),
            (9, "its checksum does not match (edited after it was written): left out"),
        ):
            assert f"seq {seq} {why}" in first, (seq, first)
        # everything else the fold reads is there, in seq order; the edited text never is
        for seq in range(2, 12):  # note n is seq n (seq 1 is the start)
            assert (f"note number {seq} of the window" in ticket) == (seq not in (4, 9)), (seq, fmt)
        assert "WINDOW" not in ticket
        assert ticket.index("note number 5") < ticket.index("note number 6") < ticket.index("note number 7")


def test_the_salvaged_reading_folds_the_events_in_seq_order(damaged: Path) -> None:
    log, verification = read_verified(damaged)
    assert [e.seq for e in log.events] == [1, 2, 3, 5, 6, 7, 8, 10, 11, 12]
    assert [seq for seq, _ in log.damaged] == [4, 6, 7, 9]
    assert not verification.ok and verification.first_failure is not None
    assert verification.first_failure[0] == 4  # the deleted one comes first
    assert log.last_seq == 12


def test_replay_of_a_damaged_log_opens_with_the_damage(
    damaged: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cast = tmp_path / "window.cast"
    assert main(["replay", str(damaged), "--cast", str(cast)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("change log: chain: BROKEN at seq 5"), out[0]
    for seq in (4, 6, 7, 9):
        assert f"seq {seq} " in out[0].split("DAMAGED, read past:")[1]
    frames = [json.loads(line) for line in cast.read_text().splitlines()[1:]]
    shown = "".join(str(frame[2]) for frame in frames)
    # the replay played every event it could read, and none it could not
    assert sorted({int(n) for n in re.findall(r"note number (\d+)", shown)}) == [2, 3, 5, 6, 7, 8, 10, 11]


def test_verify_still_refuses_the_damaged_log(damaged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(damaged)]) == 1
    assert "out of order" in capsys.readouterr().err


def test_an_edit_that_kept_its_checksum_is_named_by_the_chain_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import zlib

    path = a_window(tmp_path)
    data = path.read_bytes()
    at = data.index(b"note number 5 of the window")
    start = data.rindex(b"\n[events.", 0, at)
    trailer = data.index(b"# end of event ", at)
    end = data.index(b"\n", trailer) + 1
    body = data[start:trailer].replace(b"note number 5", b"note number 0")
    block = body + b"# end of event %06d, crc32 %08x\n" % (5, zlib.crc32(body))  # the checksum made to hold
    path.write_bytes(data[:start] + block + data[end:])
    out = tmp_path / "ticket.md"
    assert main(["export", str(path), "-o", str(out)]) == 1
    assert "damaged change log (seq 6)" in capsys.readouterr().err  # the block after the edited one no longer links
    first = next(line for line in out.read_text().splitlines() if "chain:" in line)
    assert "chain: BROKEN at seq 6" in first
