"""A real change log damaged as an auditor may find it: an event deleted, two swapped, one
edited (tests/core/test_damaged_log_export.py, tests/core/test_ticket_api.py)."""

from __future__ import annotations

import re
from pathlib import Path

from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load
from cockpit.session.operator import Session

_BLOCK = re.compile(rb"\n\[events\.(\d+)\].*?# end of event \d+, crc32 [0-9a-f]{8}\n", re.DOTALL)


def a_window(tmp_path: Path) -> Path:
    """A real session of alice's: ten notes between its start and its pause (seq 1-12)."""
    session = Session.start(
        sessions_dir=tmp_path,
        change_id="CHG-DAMAGED",
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01")],
        operator="alice",
        transport=None,
    )
    for n in range(2, 12):
        session.note(f"note number {n} of the window")
    session.pause("end of shift")
    session.journal.close()
    return session.path


def damage(path: Path, *, deleted: int, swapped: tuple[int, int], edited: int) -> None:
    """Delete one block, swap two neighbours and edit one's text (its checksum left as it was)."""
    data = path.read_bytes()
    blocks = list(_BLOCK.finditer(data))
    head, body = data[: blocks[0].start()], {int(m.group(1)): m.group(0) for m in blocks}
    assert data.endswith(blocks[-1].group(0))
    body[edited] = body[edited].replace(b"of the window", b"of the WINDOW")
    order = [seq for seq in sorted(body) if seq != deleted]
    a, b = order.index(swapped[0]), order.index(swapped[1])
    order[a], order[b] = order[b], order[a]
    path.write_bytes(head + b"".join(body[seq] for seq in order))
