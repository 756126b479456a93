"""A webhook receiver on 127.0.0.1 for the notification tests: it keeps every request and
checks each body against the shape its path's format takes (``/json``, ``/slack``,
``/teams``), answers with the statuses a test scripts (a receiver that fails, then
recovers), and can take its time (a slow receiver)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


def body_problem(fmt: str, body: Any) -> str | None:
    """Why ``body`` is not what a ``fmt`` receiver takes, or None."""
    if not isinstance(body, dict):
        return "not a JSON object"
    if fmt == "slack":
        # Slack's incoming webhook: "text" required as the notification and fallback; blocks optional
        if not isinstance(body.get("text"), str) or not body["text"]:
            return "slack: no text"
        for block in body.get("blocks", []):
            if block.get("type") not in ("header", "section", "context"):
                return f"slack: block type {block.get('type')!r}"
            if block["type"] == "header" and (
                block["text"]["type"] != "plain_text" or len(block["text"]["text"]) > 150
            ):
                return "slack: a header is plain_text of at most 150 characters"
        return None
    if fmt == "teams":
        # a Teams Workflows webhook: a message with one Adaptive Card attachment
        if body.get("type") != "message" or not isinstance(body.get("attachments"), list):
            return "teams: not a message with attachments"
        card = body["attachments"][0]
        if card.get("contentType") != "application/vnd.microsoft.card.adaptive":
            return "teams: the attachment is not an Adaptive Card"
        content = card.get("content", {})
        if content.get("type") != "AdaptiveCard" or not content.get("version") or not content.get("body"):
            return "teams: the card has no type, version or body"
        for block in content["body"]:
            # words from outside only as TextRuns, which Adaptive Cards never read as Markdown
            if block.get("type") != "RichTextBlock":
                return f"teams: a {block.get('type')} (Markdown) where plain words belong"
            if any(run.get("type") != "TextRun" or not isinstance(run.get("text"), str) for run in block["inlines"]):
                return "teams: an inline that is not a TextRun"
        return None
    for key in ("kind", "change_id", "subject", "title", "text", "at"):
        if not isinstance(body.get(key), str):
            return f"json: no {key}"
    return None


@dataclass
class Receiver:
    base: str = ""
    #: (path, body, headers) of every request, in order
    requests: list[tuple[str, Any, dict[str, str]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: statuses to answer with, per path, before answering 200
    script: dict[str, list[int]] = field(default_factory=dict)
    delay_s: dict[str, float] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def bodies(self, path: str) -> list[Any]:
        return [b for p, b, _ in self.requests if p == path]

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        fmt = path.strip("/").split("/")[0]
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.requests.append((path, body, dict(request.headers)))
        if request.headers.get("Content-Type") != "application/json":
            self.problems.append(f"{path}: content type {request.headers.get('Content-Type')}")
        if (problem := body_problem(fmt, body)) is not None:
            self.problems.append(f"{path}: {problem}")
            return web.Response(status=400, text=problem)
        if path in self.delay_s:
            await asyncio.sleep(self.delay_s[path])
        queued = self.script.get(path)
        if queued:
            return web.Response(status=queued.pop(0), text="busy")
        return web.Response(status=200, text="ok")


@asynccontextmanager
async def webhook_receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", receiver.handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)  # a slow handler is cut short
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # aiohttp keeps the bound socket here
    receiver.base = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        await runner.cleanup()
