"""Notifications: the settings file and its secrets, the bodies a generic, Slack and Teams
webhook take, delivery in the background with retries, and a window telling a local
receiver what happens, recorded in its change log without the secret URL."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from webhook_server import body_problem, webhook_receiver

from cockpit.changelog.events import Event, EventKind, parse_event
from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.errors import BadInput
from cockpit.notify.bodies import FORMATS, Notice, NoticeKind, body
from cockpit.notify.delivery import Delivery, Notifier
from cockpit.notify.settings import Settings, Sink, WebhookSettings, load_settings, resolve_sinks, sinks_from
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session
from cockpit.session.notices import event_notice

T0 = datetime(2026, 8, 5, 22, 0, tzinfo=UTC)
NOTICE = Notice(
    kind=NoticeKind.TRIGGER_FIRED,
    change_id="CHG-1",
    subject="trigger-fired:12",
    title="CHG-1: trigger gpu-lost fired on gpu02",
    text="Trigger gpu-lost FIRED on gpu02: 7 GPUs, baseline 8 <b>&",
    at=T0,
    seq=12,
    node="gpu02",
)


def _sink(url: str, fmt: str = "json", **settings: object) -> Sink:
    return Sink(WebhookSettings.model_validate({"name": f"hook-{fmt}", "format": fmt, **settings}), url)


def test_each_format_builds_the_body_its_receiver_takes() -> None:
    for fmt in FORMATS:
        assert body_problem(fmt, body(NOTICE, fmt)) is None, fmt
    slack = body(NOTICE, "slack")
    # Slack's mrkdwn: the three characters it reads escaped, the rest as written
    assert slack["text"].endswith("baseline 8 &lt;b&gt;&amp;")
    assert slack["blocks"][0] == {"type": "header", "text": {"type": "plain_text", "text": NOTICE.title}}
    teams = body(NOTICE, "teams")
    card = teams["attachments"][0]["content"]
    assert card["type"] == "AdaptiveCard" and card["body"][1]["inlines"] == [{"type": "TextRun", "text": NOTICE.text}]
    generic = body(NOTICE, "json")
    assert generic["kind"] == "trigger-fired" and generic["seq"] == 12 and generic["node"] == "gpu02"


def test_settings_take_secrets_from_the_environment_or_a_file(tmp_path: Path) -> None:
    url_file = tmp_path / "teams-url"
    url_file.write_text("https://example.invalid/workflows/secret-path\n")
    settings = tmp_path / "settings.toml"
    settings.write_text(
        '[[notify.webhook]]\nname = "ops"\nformat = "slack"\nurl_env = "OPS_URL"\ntoken_env = "OPS_TOKEN"\n'
        f'[[notify.webhook]]\nname = "teams"\nformat = "teams"\nurl_file = "{url_file}"\nevents = ["window-ended"]\n'
    )
    env = {"OPS_URL": "http://127.0.0.1:9/hook", "OPS_TOKEN": "t0ken", "COCKPIT_SETTINGS": str(settings)}
    ops, teams = sinks_from(None, env)
    assert (ops.url, ops.token, teams.url) == (env["OPS_URL"], "t0ken", "https://example.invalid/workflows/secret-path")
    assert "secret" not in repr(teams) and "t0ken" not in repr(ops)
    assert teams.settings.wants(NoticeKind.WINDOW_ENDED) and not teams.settings.wants(NoticeKind.STEP_FAILED)
    assert sinks_from(None, {}) == []  # no settings file: no sinks

    with pytest.raises(BadInput, match="environment variable OPS_URL is not set"):
        resolve_sinks(load_settings(settings), {})
    bad_url = {**env, "OPS_URL": "ftp://secret.example/x"}
    with pytest.raises(BadInput, match="not an http") as refused:
        resolve_sinks(load_settings(settings), bad_url)
    assert "secret" not in str(refused.value)  # a refused URL is never echoed
    typo = tmp_path / "typo.toml"
    typo.write_text('[[notify.webhooks]]\nname = "x"\n')
    with pytest.raises(BadInput, match=r"notify\.webhooks: Extra inputs"):
        load_settings(typo)
    inline = tmp_path / "inline.toml"
    inline.write_text('[[notify.webhook]]\nname = "x"\nurl = "https://hooks.example/secret"\n')
    with pytest.raises(BadInput, match=r"notify\.webhook\.0\.url: Extra inputs"):  # never a URL in the file itself
        load_settings(inline)
    assert Settings().notify.webhook == []


async def test_a_failing_receiver_is_retried_until_it_recovers() -> None:
    results: list[Delivery] = []
    async with webhook_receiver() as receiver:
        receiver.script["/slack"] = [503, 500, 429]
        receiver.script["/json"] = [404]  # a refusal: trying again cannot change it
        notifier = Notifier(
            [_sink(receiver.url("/slack"), "slack", backoff_s=0.05), _sink(receiver.url("/json"), backoff_s=0.05)],
            results.append,
        )
        assert notifier.send(NOTICE) == 2
        assert notifier.send(NOTICE) == 0  # the same subject is never sent twice
        await notifier.close(timeout=10)
    by_sink = {d.sink: d for d in results}
    assert (by_sink["hook-slack"].ok, by_sink["hook-slack"].attempts, by_sink["hook-slack"].status) == (
        True,
        4,
        "HTTP 200",
    )
    assert (by_sink["hook-json"].ok, by_sink["hook-json"].attempts, by_sink["hook-json"].status) == (
        False,
        1,
        "HTTP 404",
    )
    assert len(receiver.bodies("/slack")) == 4 and not receiver.problems


async def test_an_unreachable_receiver_gives_up_after_its_tries_without_naming_the_url() -> None:
    results: list[Delivery] = []
    async with webhook_receiver() as receiver:
        dead = receiver.url("/json")
    # the receiver is gone: nothing listens on its port any more
    notifier = Notifier([_sink(dead + "?token=secret", max_attempts=3, backoff_s=0.01)], results.append)
    notifier.send(NOTICE)
    await notifier.close(timeout=10)
    (only,) = results
    assert not only.ok and only.attempts == 3 and only.status.startswith("connection failed (")
    assert "secret" not in only.status and "127.0.0.1" not in only.status


def test_events_people_are_told_of() -> None:
    def event(**fields: object) -> Event:
        return parse_event({"seq": 7, "ts": T0, "actor": "cockpit", **fields})

    failed = event_notice(
        event(
            kind="step-finished", stage="upgrade", step="install", node="gpu01", facts={"ok": False, "exit_status": 100}
        ),
        "CHG-1",
    )
    assert failed is not None and failed.kind is NoticeKind.STEP_FAILED and failed.subject == "step-failed:7"
    assert "exit 100" in failed.text and failed.node == "gpu01"
    assert event_notice(event(kind="step-finished", stage="u", step="s", facts={"ok": True}), "CHG-1") is None
    cancelled = event(kind="step-finished", stage="u", step="s", facts={"ok": False, "error_kind": "cancelled"})
    assert event_notice(cancelled, "CHG-1") is None
    ended = event_notice(event(kind="session-ended", facts={"outcome": "keep the upgrade"}), "CHG-1")
    assert ended is not None and ended.title == "CHG-1: the change window ended (keep the upgrade)"
    assert event_notice(event(kind="note", note="\x1b[2Jhi"), "CHG-1") is None


@pytest.mark.slow
async def test_a_window_tells_a_local_receiver_and_records_what_it_sent(tmp_path: Path) -> None:
    async with webhook_receiver() as receiver:
        # the Teams receiver is slow: the window must not wait for it
        receiver.delay_s["/teams"] = 3.0
        receiver.script["/slack"] = [502]  # fails once, then recovers
        sinks = [
            _sink(receiver.url("/json") + "/s3cret-path"),
            _sink(receiver.url("/slack"), "slack", backoff_s=0.05),
            _sink(receiver.url("/teams"), "teams", events=["trigger-fired"], timeout_s=30),
        ]
        async with demo_session(
            in_process=True, nodes=2, scenario="gpu-missing", sessions_dir=tmp_path, change_id="CHG-NOTIFY", speed=40.0
        ) as (session, _fleet):
            session.notify_with(Notifier(sinks))
            result = await drive(session)
            assert session.state.ended_at is not None, result.stuck_on
            fired_at = next(e for e in read_session(session.path).events if e.kind is EventKind.TRIGGER_FIRED)
            path = session.path
            session.notify_drain_s = 10
    log = read_session(path)
    sent = [e for e in log.events if e.kind is EventKind.NOTIFICATION_SENT]
    told = {(e.facts.sink, e.facts.notice) for e in sent if e.facts.ok}
    for kind in ("trigger-fired", "signoff-waiting", "wave-done", "window-ended"):
        assert ("hook-json", kind) in told and ("hook-slack", kind) in told, kind
    assert {n for s, n in told if s == "hook-teams"} == {"trigger-fired"}
    # every delivery recorded once, with its tries; the slow Teams receiver's too
    subjects = [(e.facts.sink, e.facts.subject) for e in sent]
    assert len(subjects) == len(set(subjects))
    assert any(e.facts.sink == "hook-slack" and e.facts.attempts == 2 for e in sent)
    bodies = receiver.bodies("/json/s3cret-path")
    trigger_body = next(b for b in bodies if b["kind"] == "trigger-fired")
    assert trigger_body["seq"] == fired_at.seq and trigger_body["change_id"] == "CHG-NOTIFY"
    assert not receiver.problems
    # the secret URL is nowhere in the change log
    # (nor the receiver's address: the runbook's own serve checks name 127.0.0.1 ports of the node)
    receiver_address = receiver.url("/").rsplit("/", 1)[0].encode()
    assert b"s3cret" not in path.read_bytes() and receiver_address not in path.read_bytes()


@pytest.mark.slow
async def test_a_slow_receiver_never_holds_up_a_step(tmp_path: Path) -> None:
    delay = 30.0
    async with webhook_receiver() as receiver:
        receiver.delay_s["/json"] = delay  # each notice answered only after half a minute
        async with demo_session(
            in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-SLOW", speed=40.0
        ) as (
            session,
            _fleet,
        ):
            notifier = Notifier([_sink(receiver.url("/json"), timeout_s=120)])
            session.notify_with(notifier)
            session.notify_drain_s = 0.5
            started = time.monotonic()
            result = await drive(session)  # every step, check, gate and wave of the window
            took = time.monotonic() - started
            assert session.state.ended_at is not None, result.stuck_on
            assert notifier.pending >= 2  # wave-done and window-ended, still waiting on the receiver
            path = session.path
    assert took < delay, took
    sent = [e for e in read_session(path).events if e.kind is EventKind.NOTIFICATION_SENT]
    assert sent and all(
        not e.facts.ok and e.facts.status == "abandoned when the cockpit stopped (no answer)" for e in sent
    )
    assert {e.facts.notice for e in sent} >= {"wave-done", "window-ended"}


async def test_cockpit_end_tells_the_settings_webhooks_the_window_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with webhook_receiver() as receiver:
        receiver.script["/teams"] = [500]  # one failure: the command waits for the retry
        async with demo_session(
            in_process=True,
            nodes=2,
            scenario="happy",
            sessions_dir=tmp_path,
            change_id="CHG-END",
            speed=40.0,
            operator="alice",
        ) as (session, _fleet):
            await session.refresh()
            session.pause()
            path = session.path
        settings = tmp_path / "settings.toml"
        settings.write_text(
            '[[notify.webhook]]\nname = "board"\nformat = "teams"\nurl_env = "END_HOOK"\nbackoff_s = 0.1\n'
            'events = ["window-ended"]\n'
        )
        monkeypatch.setenv("END_HOOK", receiver.url("/teams"))
        status = await asyncio.to_thread(
            main, ["end", str(path), "--outcome", "roll-back", "--settings", str(settings)]
        )
        assert status == 0
    bodies = receiver.bodies("/teams")
    assert len(bodies) == 2 and bodies[0] == bodies[1]  # the same card, tried again
    card = bodies[1]["attachments"][0]["content"]
    assert card["body"][0]["inlines"][0]["text"] == "CHG-END: the change window ended (roll-back)"
    (sent,) = [e for e in read_session(path).events if e.kind is EventKind.NOTIFICATION_SENT]
    assert (sent.facts.notice, sent.facts.ok, sent.facts.attempts, sent.facts.format) == (
        "window-ended",
        True,
        2,
        "teams",
    )
