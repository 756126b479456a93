"""Text from outside, made inert before it reaches a terminal, a cast or a ticket.

Notes, names, command output, GPU names and hosts' errors are written by people
and machines the cockpit does not control. Raw, an ``ESC c`` in a note would wipe
the reader's terminal, an OSC sequence retitle the tmux pane, a BIDI override make
a line read backwards. :func:`inert` shows every such character as a visible
stand-in instead (the Unicode "control pictures", ``␛`` for ESC), so a reader
sees that something odd was there; the change log keeps the original bytes.
Every renderer passes outside text through here, and never as Rich markup.
"""

from __future__ import annotations

import re

#: C0 controls (but tab and newline), DEL, C1 controls, and the invisible format
#: characters that reorder or hide text: BIDI embeddings, overrides and isolates,
#: line and paragraph separators, zero-width joiners and the BOM.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_UNSAFE_LINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _picture(match: re.Match[str]) -> str:
    ch = match.group(0)
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ .. ␟: ESC shows as ␛
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def inert(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control or invisible format character shown, not obeyed.

    A tab stays; a newline stays only where the place holds several lines
    (``newlines=True``: a code block, a multi-line note), else it shows as ``␊``.
    """
    pattern = _UNSAFE if newlines else _UNSAFE_LINE
    if newlines and "\r\n" in text:
        text = text.replace("\r\n", "\n")  # a line end, not an overwrite
    if pattern.search(text) is None:  # the common case costs one scan
        return text
    return pattern.sub(_picture, text)
