"""Notes a person writes, held to a size a screen and a ticket can show.

A 10 MB note (pasted output, a runaway script) made ``cockpit review`` take 14 s and
1.3 GB to draw. What the log's event keeps is the note's start and end, with the whole
of it kept aside as an artifact (content-addressed, beside the log, as a long output
is); a note written by hand past this is cut where it is shown (:mod:`cockpit.view.words`).
"""

from __future__ import annotations

from collections.abc import Callable

#: the most characters of a note an event holds; the rest is in its artifact
NOTE_MAX_CHARS = 16_000
_HEAD, _TAIL = 12_000, 2_000


def kept_note(text: str, store: Callable[[str], str]) -> str:
    """``text`` as the event records it: whole when short; else its start, a line naming the
    artifact ``store`` keeps the whole note in (it returns the sha256), and its end."""
    if len(text) <= NOTE_MAX_CHARS:
        return text
    digest = store(text)
    return f"{text[:_HEAD]}\n[... {len(text):,} characters: the whole note is artifact {digest} ...]\n{text[-_TAIL:]}"
