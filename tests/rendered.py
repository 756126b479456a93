"""What a Textual widget shows, as plain text, for the screen tests to assert on."""

from __future__ import annotations

from textual.widget import Widget


def rendered_text(widget: Widget) -> str:
    """What ``widget`` renders now, as plain text (no styles)."""
    return str(widget.render())
