"""``cockpit watch``: after the window closed, the runbook's triggers stay armed on the nodes
it changed. On the simulated fleet over real SSH, with the watch's clock simulated (an hour
passes in no time): the fabric manager killed on one node an hour after the window is found,
recorded in the same change log and told to a local webhook receiver; the watch stopped
halfway and started again loses nothing and repeats nothing; a node away for a while is asked
less and less often and picked up again when it is back."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from repo_paths import REPO
from webhook_server import webhook_receiver

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.changelog.sshsig import read_allowed_signers, signer_from_key_file
from cockpit.changelog.verify import verify_file
from cockpit.engine.state import CockpitState
from cockpit.errors import BadInput
from cockpit.export import FORMATS, export_text
from cockpit.fleet.transport import Transport
from cockpit.notify.delivery import Notifier
from cockpit.notify.settings import Sink, WebhookSettings
from cockpit.runbook.loader import DEFAULT_RUNBOOK, load
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session
from cockpit.session.watch import Watch
from cockpit.sim import SimFleet
from cockpit.view.cast import write_cast
from cockpit.view.replay import Replay

pytestmark = pytest.mark.slow


class Crash(Exception):
    """The watch's process dying halfway."""


class SimClock:
    """The watch's clock: its sleeps pass simulated time at once; ``at`` runs a test's
    action when the clock passes a moment (the fault an hour later)."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self.start = start
        self.actions: list[tuple[timedelta, Callable[[], object]]] = []

    def __call__(self) -> datetime:
        return self.now

    def at(self, offset: timedelta, action: Callable[[], object]) -> None:
        self.actions.append((offset, action))
        self.actions.sort(key=lambda a: a[0])

    async def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        while self.actions and self.now - self.start >= self.actions[0][0]:
            _, action = self.actions.pop(0)
            done = action()
            if asyncio.iscoroutine(done):
                await done
        await asyncio.sleep(0)


def _sink(url: str, **settings: object) -> Sink:
    return Sink(WebhookSettings.model_validate({"name": "oncall", **settings}), url)


def _transport(fleet: SimFleet, tmp_path: Path) -> Callable[[list[str]], Transport]:
    files = fleet.write_client_files(tmp_path / "watch-client")
    # one connect try per probe: a node away answers at once, and the watch's own backoff paces it
    return lambda _hosts: Transport(fleet.targets(), fleet.transport_options(files, connect_attempts=1))


async def test_a_fabric_manager_killed_an_hour_later_is_found_told_and_never_lost_or_repeated(tmp_path: Path) -> None:
    async with (
        webhook_receiver() as receiver,
        demo_session(nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-WATCH", speed=40.0) as (
            session,
            fleet,
        ),
    ):
        result = await drive(session)
        assert session.state.ended_at is not None, result.stuck_on
        path = session.path
        await session.close()
        window_end = read_session(path).last_seq
        assert session.state.nodes["gpu02"].baseline.fabric_manager == "active"

        clock = SimClock(session.state.ended_at + timedelta(minutes=1))
        clock.at(timedelta(hours=1), fleet.nodes["gpu02"].services.kill_fabric_manager)

        def crash() -> None:
            raise Crash

        clock.at(timedelta(minutes=90), crash)
        # the receiver is down when the finding is told: the retry waits longer than the watch lives
        receiver.script["/json"] = [503]
        first = Watch(
            path,
            transport_factory=_transport(fleet, tmp_path),
            duration=timedelta(hours=3),
            period_s=600,
            clock=clock,
            sleep=clock.sleep,
            notifier=Notifier([_sink(receiver.url("/json"), backoff_s=120)]),
            notify_drain_s=0.5,
        )
        assert first.nodes == ["gpu01", "gpu02"] and "fabric-manager-down" in first.triggers
        with pytest.raises(Crash):
            await first.run()

        log = read_session(path)
        after = [e for e in log.events if e.seq > window_end]
        (finding,) = [e for e in after if e.kind is EventKind.WATCH_FINDING]
        assert (finding.trigger, finding.node, finding.actor) == ("fabric-manager-down", "gpu02", "demo-operator")
        assert "fabric manager failed, active before the change" in (finding.facts.evidence or "")
        # found at the first probe after the kill (probes every 10 simulated minutes)
        assert timedelta(hours=1) <= finding.ts - clock.start <= timedelta(hours=1, minutes=10)
        (told,) = [e for e in after if e.kind is EventKind.NOTIFICATION_SENT]
        assert told.facts.abandoned and told.facts.subject == f"watch-finding:{finding.seq}"
        assert [b["subject"] for b in receiver.bodies("/json")] == [f"watch-finding:{finding.seq}"]
        assert not any(e.kind is EventKind.WATCH_ENDED for e in after)

        # started again (as systemd's Restart= does): the same watch, taken up where the log says
        second = Watch(
            path,
            transport_factory=_transport(fleet, tmp_path),
            duration=timedelta(hours=72),  # ignored: the recorded watch's end holds
            period_s=600,
            clock=clock,
            sleep=clock.sleep,
            notifier=Notifier([_sink(receiver.url("/json"), backoff_s=0.05)]),
        )
        assert second.until == first.until
        done = await second.run()
        assert done.ended and done.findings == []  # nothing found again
        # started once more after its time ran out (a service manager's restart): nothing done
        last = read_session(path).last_seq
        third = Watch(path, transport_factory=_transport(fleet, tmp_path), clock=clock, sleep=clock.sleep)
        assert third.finished
        again = await third.run()
        assert again.ended and again.probes == 0 and read_session(path).last_seq == last

    log = read_session(path)
    after = [e for e in log.events if e.seq > window_end]
    assert [e.seq for e in after if e.kind is EventKind.WATCH_FINDING] == [finding.seq]
    started = [e for e in after if e.kind is EventKind.WATCH_STARTED]
    assert [bool(e.facts.resumed) for e in started] == [False, True]
    assert started[0].facts.until == started[1].facts.until
    (ended,) = [e for e in after if e.kind is EventKind.WATCH_ENDED]
    assert ended.facts.findings == 1 and ended.ts >= first.until
    delivered = [e for e in after if e.kind is EventKind.NOTIFICATION_SENT and e.facts.ok]
    assert [(e.facts.subject, e.facts.sink) for e in delivered] == [(f"watch-finding:{finding.seq}", "oncall")]
    bodies = receiver.bodies("/json")
    assert len(bodies) == 2 and bodies[1]["kind"] == "watch-finding" and bodies[1]["node"] == "gpu02"
    assert bodies[1]["seq"] == finding.seq and "fabric manager failed" in bodies[1]["text"]
    assert not receiver.problems
    # one chain from the window's first event to the watch's last
    assert log.chain.ok and log.torn is None and not log.unreadable
    assert log.events[-1].kind is EventKind.WATCH_ENDED
    # the fold reads it back: the window's trigger fired after the window, one finding
    assert [f.seq for f in read_session_state(path).watch_findings] == [finding.seq]
    # and the ticket shows it: first among what needs a person, and in its own section
    for fmt in FORMATS:
        ticket = export_text(log, fmt, load(DEFAULT_RUNBOOK))
        assert "Found after the window: 1" in ticket and "after the window" in ticket.replace(
            "AFTER THE", "after the"
        ), fmt
    markdown = export_text(log, "markdown", load(DEFAULT_RUNBOOK))
    assert markdown.index("Found after the window: 1") < markdown.index("## Summary")
    section = markdown.split("## After the window")[1].split("\n## ")[0]
    assert "Watched 2 node(s)" in section and "2 runs" in section and "; ended " in section
    assert "`fabric-manager-down`" in section and "| gpu02 |" in section and f"(seq {finding.seq})" in section
    assert "| oncall |" in section
    # replay and the cast read the watch's events as any others
    runbook = load(DEFAULT_RUNBOOK).runbook
    replayed = Replay.for_session(log, runbook, every=64).state_at(log.last_seq)
    assert [f.seq for f in replayed.watch_findings] == [finding.seq]
    write_cast(log, runbook, tmp_path / "window.cast")
    assert "Watch: trigger fabric-manager-down FIRED on gpu02" in (tmp_path / "window.cast").read_text()


def read_session_state(path: Path) -> CockpitState:
    from cockpit.session.opening import reopen

    return reopen(path, operator=None, runbook=None)[2].state


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
async def test_a_node_away_for_a_while_is_asked_less_often_and_picked_up_again(tmp_path: Path) -> None:
    async with demo_session(nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-AWAY", speed=40.0) as (
        session,
        fleet,
    ):
        result = await drive(session)
        assert session.state.ended_at is not None, result.stuck_on
        path = session.path
        await session.close()
        # the watcher signs its events with the operator's key, as the window's own are signed
        key = tmp_path / "operator-key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        allowed = tmp_path / "allowed_signers"
        allowed.write_text("demo-operator " + " ".join(key.with_suffix(".pub").read_text().split()[:2]) + "\n")
        clock = SimClock(session.state.ended_at)
        clock.at(timedelta(minutes=30), lambda: fleet.cut_off("gpu01"))
        clock.at(timedelta(hours=4), lambda: fleet.reconnect("gpu01"))
        watch = Watch(
            path,
            transport_factory=_transport(fleet, tmp_path),
            duration=timedelta(hours=6),
            period_s=300,
            max_backoff_s=3600,
            clock=clock,
            sleep=clock.sleep,
            signer=signer_from_key_file(key, "demo-operator"),
        )
        done = await watch.run()
    assert done.ended and done.findings == []  # away is not a fault of the fabric manager
    # 6 h at 5 min: 73 probes of the node that stayed; the one away for 3.5 h was asked far less
    assert watch.probes["gpu02"] >= 70
    assert watch.probes["gpu01"] < watch.probes["gpu02"] - 25
    assert watch.pace["gpu01"].misses == 0  # answering again at the end
    probes = [e for e in read_session(path).events if e.kind is EventKind.PROBE and e.node == "gpu01"]
    reach = [e.facts.reachable for e in probes if e.ts >= clock.start]
    assert reach[-2:] == [False, True]
    verification, _, _ = verify_file(path, read_allowed_signers(allowed))
    assert verification.chain is not None and verification.chain.chained and not verification.invalid
    events = read_session(path).events
    watch_seqs = [e.seq for e in events if e.kind in (EventKind.WATCH_STARTED, EventKind.WATCH_ENDED)]
    assert len(watch_seqs) == 2 and all(verification.signed.get(seq) == "demo-operator" for seq in watch_seqs)


async def test_a_window_not_ended_is_not_watched(tmp_path: Path) -> None:
    async with demo_session(nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-OPEN", speed=40.0) as (
        session,
        _fleet,
    ):
        session.pause()
        await session.close()
        with pytest.raises(BadInput, match="has not ended"):
            Watch(session.path, transport_factory=lambda _h: None)


async def test_the_command_watches_tells_the_webhook_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    async with (
        webhook_receiver() as receiver,
        demo_session(
            nodes=2, scenario="happy", sessions_dir=tmp_path, change_id="CHG-CLI", speed=40.0, operator="alice"
        ) as (session, fleet),
    ):
        result = await drive(session)
        assert session.state.ended_at is not None, result.stuck_on
        path = session.path
        await session.close()
        files = fleet.write_client_files(tmp_path / "client")
        settings = tmp_path / "settings.toml"
        settings.write_text('[[notify.webhook]]\nname = "chat"\nformat = "slack"\nurl_env = "WATCH_HOOK"\n')
        fleet.nodes["gpu01"].services.kill_fabric_manager()  # found at the watch's first probe
        env = {**os.environ, "PYTHONPATH": str(REPO), "WATCH_HOOK": receiver.url("/slack")}
        env.pop("COCKPIT_SETTINGS", None)
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "cockpit", "watch", str(path), "--for", "2h", "--period", "30m"),
            *("--ssh-config", str(files.ssh_config), "--known-hosts", str(files.known_hosts)),
            *("--settings", str(settings)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None and proc.stderr is not None
        try:
            async with asyncio.timeout(90):  # the finding told and its delivery recorded
                while not any(e.kind is EventKind.NOTIFICATION_SENT for e in read_session(path).events):
                    assert proc.returncode is None, (await proc.stderr.read()).decode()
                    await asyncio.sleep(0.2)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        out, err = await proc.communicate()
    said = out.decode()
    assert proc.returncode == 0, said + err.decode()
    assert "watching CHG-CLI: 2 node(s)" in said and "FINDING seq" in said and "stopped (SIGTERM)" in said
    (body,) = receiver.bodies("/slack")
    assert body["text"].startswith("CHG-CLI: after the window, trigger fabric-manager-down fired on gpu01")
    log = read_session(path)
    kinds = [e.kind for e in log.events]
    assert EventKind.WATCH_STARTED in kinds and EventKind.WATCH_FINDING in kinds
    assert EventKind.WATCH_ENDED not in kinds  # stopped, not ended: the next start goes on
    (sent,) = [e for e in log.events if e.kind is EventKind.NOTIFICATION_SENT]
    assert (sent.facts.sink, sent.facts.format, sent.facts.ok, sent.facts.status) == ("chat", "slack", True, "HTTP 200")
    assert receiver.url("/slack").encode() not in path.read_bytes()
    assert not any(path.parent.glob("*.lock"))
