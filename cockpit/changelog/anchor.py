"""Anchors: the chain's head (seq and hash), written as the window goes to places the log's
writer cannot rewrite alone, so a cut tail or a rewritten history is caught without a
head someone kept by hand.

Whoever can write the sessions folder can cut the log on a block boundary or rewrite it
and recompute every link and (with her own key) every signature; nothing inside the file
can show that. A head held elsewhere can: each process that appends (the operator's, a
reviewer's) writes the head after each of its appends to the site's anchor sinks (a file
opened append-only, on another host or another person's account, and a webhook the head
is POSTed to), a reviewer's process writes the head it has followed to its own copy, and
every ticket prints it. ``cockpit verify --anchor FILE`` checks the log against the
latest head ``FILE`` holds for it (an anchor file's lines, or a ticket's ``head`` line).

An anchor line: ``CHANGE-ID SEQ:sha256:HEX TIMESTAMP``.
"""

from __future__ import annotations

import json
import os
import queue
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from cockpit.errors import BadInput, read_user_file

_HEAD = re.compile(r"(?<![\w:])(\d{1,12}):(sha256:[0-9a-f]{64})\b")
#: how long a webhook may take to answer before the head is left for the next one
WEBHOOK_TIMEOUT_S = 5.0


def anchor_line(change_id: str, seq: int, head: str, at: datetime | None = None) -> str:
    return f"{change_id} {seq}:{head} {(at or datetime.now(UTC)).isoformat(timespec='seconds')}\n"


def anchors_in(text: str, change_id: str) -> list[tuple[int, str]]:
    """Every head ``text`` holds for ``change_id``, in order (the last is the latest): from
    anchor lines (those naming another change are skipped), or from anything else that
    prints ``SEQ:sha256:HEX`` (a ticket's first line)."""
    found: list[tuple[int, str]] = []
    for line in text.splitlines():
        tokens = line.split()
        if len(tokens) >= 2 and _HEAD.fullmatch(tokens[1]) and tokens[0] not in (change_id, "head"):
            continue  # another window's anchor line
        found += [(int(m.group(1)), m.group(2)) for m in _HEAD.finditer(line)]
    return found


def read_anchors(path: str | os.PathLike[str], change_id: str) -> list[tuple[int, str]]:
    """``--anchor FILE``: the heads the file holds for ``change_id`` (at least one), oldest first.

    All of them are checked, not only the latest: a sink the log's writer can append to
    (an append-only file) may end with a head of her rewritten log, but cannot lose the
    ones written before it."""
    data = read_user_file(Path(path), "an anchor file", max_bytes=64 * 1024 * 1024, no_links=True)
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise BadInput(f"--anchor {path}: not text") from None
    found = anchors_in(text, change_id)
    if not found:
        raise BadInput(f"--anchor {path}: holds no head (SEQ:sha256:HEX) for {change_id}")
    return found


@dataclass
class AnchorSinks:
    """Where this process writes the head after each append: an append-only file and/or a
    webhook (POSTed from a thread, the latest head only, so a slow hook never holds an append)."""

    file: str | None = None
    url: str | None = None
    #: the last webhook failure, in words (None while it answers)
    failure: str | None = field(default=None, init=False)
    _queue: queue.Queue[dict[str, object]] | None = field(default=None, init=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.file or self.url)

    def record(self, change_id: str, seq: int, head: str) -> None:
        now = datetime.now(UTC)
        if self.file:
            self._append(anchor_line(change_id, seq, head, now))
        if self.url:
            self._post({"change_id": change_id, "seq": seq, "head": head, "at": now.isoformat(timespec="seconds")})

    def _append(self, line: str) -> None:
        assert self.file is not None
        # O_APPEND: whatever this process's writer could do to the file, it only adds a line
        fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def _post(self, body: dict[str, object]) -> None:
        if self._queue is None:
            self._queue = queue.Queue()
            threading.Thread(target=self._sender, name="cockpit-anchor", daemon=True).start()
        self._queue.put(body)

    def _sender(self) -> None:
        import urllib.request  # here: every reader of a log imports this module, few post to a webhook

        assert self._queue is not None and self.url is not None
        while True:
            body = self._queue.get()
            while not self._queue.empty():  # only the latest head matters
                body = self._queue.get_nowait()
            request = urllib.request.Request(
                self.url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as reply:  # the site's URL
                    reply.read()
                self.failure = None
            except OSError as exc:
                self.failure = f"anchor webhook {self.url}: {exc}"
            finally:
                self._queue.task_done()

    def flush(self, timeout: float = WEBHOOK_TIMEOUT_S) -> None:
        """Wait (at most ``timeout``) for the heads queued for the webhook to be sent."""
        if self._queue is None:
            return
        done = threading.Event()
        pending = self._queue

        def wait() -> None:
            pending.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        done.wait(timeout)
