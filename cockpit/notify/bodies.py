"""A notice, and the body each kind of webhook takes for it (pure).

- ``json``: the notice's own fields, for a receiver of one's own.
- ``slack``: a Slack incoming webhook's message, ``{"text": ...}`` with ``blocks``
  (Slack shows ``text`` in the notification and as the fallback when blocks are given;
  ``&``, ``<`` and ``>`` are escaped as Slack's mrkdwn requires).
- ``teams``: a Microsoft Teams Workflows webhook ("When a Teams webhook request is
  received" / "Post to a channel when a webhook request is received"), the successor of
  the retired Office 365 connectors: a ``message`` with one Adaptive Card attachment
  (``application/vnd.microsoft.card.adaptive``, card version 1.4), as in
  MicrosoftDocs/msteams-docs, webhooks-and-connectors/how-to/add-incoming-webhook.md
  ("Send Adaptive Cards using an Incoming Webhook"). Every word is a ``TextRun`` in a
  ``RichTextBlock`` (card schema 1.2 on): its text is never read as Markdown ("Markdown is
  not supported", the TextRun schema), so outside words stay words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

#: The body formats a sink may take.
BodyFormat = Literal["json", "slack", "teams"]
FORMATS: tuple[BodyFormat, ...] = ("json", "slack", "teams")

#: Slack's limit on a header block's text, and on a section's (characters).
_SLACK_HEADER_MAX = 150
_SLACK_SECTION_MAX = 3000


class NoticeKind(StrEnum):
    """What a notice is about (the names a sink's ``events`` lists)."""

    TRIGGER_FIRED = "trigger-fired"
    SIGNOFF_WAITING = "signoff-waiting"  # a gate waits for a second person's sign-off
    STEP_FAILED = "step-failed"
    WAVE_DONE = "wave-done"
    WINDOW_ENDED = "window-ended"
    WATCH_FINDING = "watch-finding"  # a trigger fired while ``cockpit watch`` kept it armed


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing to tell people. ``subject`` names it uniquely within its window (what a
    recorded delivery is matched on, so a restart sends nothing twice); ``seq`` is the event
    it is about. The words are already inert (the session made them so)."""

    kind: NoticeKind
    change_id: str
    subject: str
    title: str
    text: str
    at: datetime
    seq: int | None = None
    node: str | None = None
    fields: dict[str, str] = field(default_factory=dict)


def body(notice: Notice, fmt: BodyFormat) -> dict[str, Any]:
    """The JSON body ``fmt`` takes for ``notice``."""
    if fmt == "slack":
        return _slack(notice)
    if fmt == "teams":
        return _teams(notice)
    return _generic(notice)


def _generic(notice: Notice) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": str(notice.kind),
        "change_id": notice.change_id,
        "subject": notice.subject,
        "title": notice.title,
        "text": notice.text,
        "at": notice.at.isoformat(),
    }
    if notice.seq is not None:
        out["seq"] = notice.seq
    if notice.node is not None:
        out["node"] = notice.node
    if notice.fields:
        out["fields"] = dict(notice.fields)
    return out


def slack_escape(text: str) -> str:
    """Text for Slack's mrkdwn: its three control characters escaped, nothing else."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _context(notice: Notice) -> str:
    where = f" · node {notice.node}" if notice.node else ""
    seq = f" · seq {notice.seq}" if notice.seq is not None else ""
    return f"{notice.change_id}{where}{seq} · {notice.at.strftime('%Y-%m-%d %H:%M:%S UTC')}"


def _slack(notice: Notice) -> dict[str, Any]:
    title, text = slack_escape(notice.title), slack_escape(notice.text)
    facts = "\n".join(f"*{slack_escape(k)}:* {slack_escape(v)}" for k, v in notice.fields.items())
    section = "\n".join(part for part in (text, facts) if part)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(notice.title, _SLACK_HEADER_MAX)}},
    ]
    if section:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut(section, _SLACK_SECTION_MAX)}})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": slack_escape(_context(notice))}]})
    return {"text": f"{title}: {text}" if text else title, "blocks": blocks}


def _run(text: str, **style: object) -> dict[str, Any]:
    """One block of plain words: a RichTextBlock of one TextRun, whose text Adaptive Cards never
    read as Markdown (a TextBlock would turn an outside ``[x](url)`` into a link)."""
    return {"type": "RichTextBlock", "inlines": [{"type": "TextRun", "text": text, **style}]}


def _teams(notice: Notice) -> dict[str, Any]:
    card_body: list[dict[str, Any]] = [_run(notice.title, weight="Bolder", size="Medium")]
    if notice.text:
        card_body.append(_run(notice.text))
    card_body.extend(_run(f"{k}: {v}") for k, v in notice.fields.items())
    card_body.append(_run(_context(notice), isSubtle=True, size="Small"))
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "body": card_body,
                },
            }
        ],
    }


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
