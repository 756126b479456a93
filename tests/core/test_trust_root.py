"""The trust root lives with the site, and the chain's head is anchored outside the log.

A real signed window (alice operates, bob signs the two-person arm gate through his own
review session; keys made by the real ssh-keygen) under a site settings file naming the
allowed signers and an anchor file on "another host" (a folder the log's writer does not
write). The operator then rewrites her log with the cockpit's own journal, as an attacker
with her key would: with a swapped allowed-signers file, with every signature stripped,
or with bob's sign-off deleted and her blocks renumbered and re-signed. Each rewrite is
chained and (where she has a key) signed; each fails ``cockpit verify`` against the site's
``--allowed-signers`` and the latest anchor. A cut on a block boundary fails too, with no
hand-kept ``--head``; the heads also reach a webhook the test serves itself."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from ssh_keys import clock, keygen, public

from cockpit.changelog.events import Event
from cockpit.changelog.journal import Journal, SessionHeader, read_session
from cockpit.changelog.sshsig import Signer, signer_from_key_file
from cockpit.changelog.trust import SITE_TRUST_ENV
from cockpit.cli import main
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load
from cockpit.session.opening import Trust
from cockpit.session.operator import Session
from cockpit.session.review import ReviewerSession

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")


@dataclass(frozen=True)
class Site:
    path: Path  # the window's log
    allowed: Path  # the site's allowed_signers
    anchors: Path  # the anchor file on "another host"
    keys: dict[str, Path]
    signers: dict[str, Signer]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    keys = {name: keygen(tmp_path, name) for name in ("alice", "bob", "alice2")}
    allowed = tmp_path / "site" / "allowed_signers"
    allowed.parent.mkdir()
    allowed.write_text(f"alice {public(keys['alice'])}\nbob {public(keys['bob'])}\n")
    anchors = tmp_path / "audit-host" / "anchors"
    anchors.parent.mkdir()
    settings = tmp_path / "site" / "trust.toml"
    settings.write_text(f'allowed_signers = "allowed_signers"\nanchor_file = "{anchors}"\n')
    monkeypatch.setenv(SITE_TRUST_ENV, str(settings))
    signers = {"alice": signer_from_key_file(keys["alice"], "alice"), "bob": signer_from_key_file(keys["bob"], "bob")}
    tick = clock()
    session = Session.start(
        sessions_dir=tmp_path / "sessions",
        change_id="CHG-ROOT",
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01"), HostTarget(name="gpu02")],
        operator="alice",
        transport=None,
        clock=tick,
        trust=Trust(require_signatures=True, allowed_signers=str(allowed), signer=signers["alice"]),
    )
    with ReviewerSession(session.path, "bob", clock=tick, signer=signers["bob"]) as review:
        review.sign_off("arm", "triggers-reviewed", note="read the triggers, they match the plan")
    session.arm_triggers()
    session.pass_gate("arm")
    session.start_wave(0)
    assert not session.state.refused and session.state.current_wave == 0
    asyncio.run(session.close())
    return Site(session.path, allowed, anchors, keys, signers)


def verify(capsys: pytest.CaptureFixture[str], site: Site, *extra: str) -> tuple[int, str]:
    status = main(["verify", str(site.path), "--allowed-signers", str(site.allowed), "--anchor", str(site.anchors)])
    out = capsys.readouterr()
    return status, out.out + out.err


def rewrite(
    site: Site,
    monkeypatch: pytest.MonkeyPatch,
    *,
    header: dict[str, Any] | None = None,
    keep: Callable[[Event], bool] = lambda _e: True,
    signer_of: Callable[[Event], Signer | None],
) -> None:
    """The operator's rewrite of her own log with the cockpit's journal: the header changed,
    some events left out, the rest renumbered, re-chained and signed as ``signer_of`` says.
    Done without the site's settings (her own process, writing no anchor)."""
    log = read_session(site.path)
    new_header: SessionHeader = log.header.model_copy(update=header or {})
    forge = site.path.parent.parent / "forge"
    with monkeypatch.context() as env:
        env.delenv(SITE_TRUST_ENV)
        stamps = iter(e.ts for e in log.events if keep(e))
        with Journal.create(forge, new_header, clock=lambda: next(stamps)) as journal:
            for event in (e for e in log.events if keep(e)):
                journal.signer = signer_of(event)
                fields = {
                    k: getattr(event, k) for k in ("node", "stage", "step", "item", "trigger", "wave", "reason", "note")
                }
                journal.append(event.kind, actor=event.actor, facts=event.facts_as_written() or None, **fields)
    shutil.copyfile(forge / site.path.name, site.path)


def test_the_untouched_window_verifies_against_the_site_and_its_anchors(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = site.anchors.read_text().splitlines()
    log = read_session(site.path)
    # the head went to the anchor file after every append: the last is the log's own head
    assert lines[-1].split()[:2] == ["CHG-ROOT", f"{log.last_seq}:{log.chain.head}"], lines[-3:]
    status, out = verify(capsys, site)
    assert status == 0, out
    assert f"signatures: {log.last_seq} valid, 0 unsigned, 0 invalid" in out and "rules: every event allowed" in out


def test_resigned_with_a_swapped_allowed_signers_file_fails(
    site: Site, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # her own file: her second key listed as bob's, named by the header
    hers = tmp_path / "hers"
    hers.write_text(f"alice {public(site.keys['alice'])}\nbob {public(site.keys['alice2'])}\n")
    second = signer_from_key_file(site.keys["alice2"], "bob")
    rewrite(
        site,
        monkeypatch,
        header={"allowed_signers": str(hers)},
        signer_of=lambda e: second if e.actor == "bob" else site.signers["alice"],
    )
    with monkeypatch.context() as env:  # by the header's own word it holds: that is what it was made for
        env.delenv(SITE_TRUST_ENV)
        assert main(["verify", str(site.path)]) == 0
    status, out = verify(capsys, site)
    assert status == 1, out
    assert "allowed_signers does not list" in out
    assert "the log's header names allowed_signers" in out and "(for bob)" in out
    assert "not the block the anchor names (rewritten after it was recorded)" in out


def test_signatures_stripped_and_not_required_by_the_header_fails(
    site: Site, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rewrite(site, monkeypatch, header={"require_signatures": False}, signer_of=lambda _e: None)
    status, out = verify(capsys, site)
    assert status == 1, out
    assert "FAILED at seq 0: trust: the log's header says signatures are not required; the site requires them" in out
    assert "unsigned event by alice (signatures are required)" in out
    assert "not the block the anchor names" in out
    # and the fold the readers share counts none of it: the window never opened its waves
    from cockpit.session.opening import reopen

    state = reopen(site.path, operator=None, runbook=None)[2].state
    assert state.current_wave is None and len(state.refused) == read_session(site.path).last_seq


def test_a_reviewers_event_deleted_and_her_blocks_renumbered_and_resigned_fails(
    site: Site, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rewrite(site, monkeypatch, keep=lambda e: e.actor != "bob", signer_of=lambda _e: site.signers["alice"])
    log = read_session(site.path)
    assert all(e.actor != "bob" for e in log.events)
    status, out = verify(capsys, site)
    assert status == 1, out
    assert "0 unsigned, 0 invalid" in out  # every signature holds
    assert "refused (triggers-armed by alice)" in out and "needs sign-off by a second person" in out
    assert "the anchor names" in out


def test_a_reviewers_manual_trigger_deleted_and_her_blocks_resigned_fails_on_the_anchor(
    site: Site, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with ReviewerSession(site.path, "bob", signer=site.signers["bob"]) as review:
        review.raise_trigger("protected-workload-failed", note="the training job on gpu01 died at the drain")
    assert verify(capsys, site)[0] == 0
    # the ticket as it stands: its first line carries the head
    ticket = tmp_path / "ticket.md"
    assert main(["export", str(site.path), "--format", "markdown", "--output", str(ticket)]) == 0
    rewrite(site, monkeypatch, keep=lambda e: e.actor != "bob", signer_of=lambda _e: site.signers["alice"])
    status, out = verify(capsys, site)
    assert status == 1 and "0 unsigned, 0 invalid" in out, out
    assert "not the block the anchor names" in out or "the anchor names" in out, out
    # the ticket alone is an anchor too
    status = main(["verify", str(site.path), "--allowed-signers", str(site.allowed), "--anchor", str(ticket)])
    said = capsys.readouterr()
    assert status == 1 and "the anchor names" in said.out + said.err


def test_a_cut_on_a_block_boundary_fails_without_a_hand_kept_head(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    data = site.path.read_bytes()
    last = [m.start() for m in re.finditer(rb"\n\[events\.\d{6}\]\n", data)][-1]
    site.path.write_bytes(data[:last])
    log = read_session(site.path)
    assert log.torn is None  # a clean cut: nothing in the file shows it
    status, out = verify(capsys, site)
    assert status == 1, out
    assert f"FAILED at seq {log.last_seq + 1}: the log ends at seq {log.last_seq}, before seq" in out
    # a head appended afterwards by the log's writer (the sink is append-only) hides nothing
    with site.anchors.open("a") as fh:
        fh.write(f"CHG-ROOT {log.last_seq}:{log.chain.head} 2026-08-06T00:00:00+00:00\n")
    assert verify(capsys, site)[0] == 1


class _Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:  # http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    _Hook.received = []
    # shutdown() waits for serve_forever's next poll: 10 ms, not the default half second
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/anchor"
    finally:
        server.shutdown()
        server.server_close()


def test_each_append_posts_the_head_to_the_sites_webhook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hook: str
) -> None:
    settings = tmp_path / "trust.toml"
    settings.write_text(f'require_signatures = false\nanchor_url = "{hook}"\n')
    monkeypatch.setenv(SITE_TRUST_ENV, str(settings))
    session = Session.start(
        sessions_dir=tmp_path / "sessions",
        change_id="CHG-HOOK",
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01")],
        operator="alice",
        transport=None,
    )
    session.journal.anchors.flush()
    asyncio.run(session.close())
    log = read_session(session.path)
    assert _Hook.received, "no head reached the webhook"
    last = _Hook.received[-1]
    assert (last["change_id"], last["seq"], last["head"]) == ("CHG-HOOK", log.last_seq, log.chain.head)


def test_a_site_that_requires_signatures_refuses_a_window_without_them(site: Site) -> None:
    import argparse

    from cockpit.commands.run import window_trust
    from cockpit.errors import BadInput

    without = argparse.Namespace(require_signatures=False, allowed_signers=None, signing_key=None)
    with pytest.raises(BadInput, match=r"this site requires signatures .*--no-require-signatures is not allowed"):
        window_trust(without, "alice")
    # asked for, with no --allowed-signers: the site's file is the one the window records
    key = str(site.keys["alice"])
    trust = window_trust(argparse.Namespace(require_signatures=True, allowed_signers=None, signing_key=key), "alice")
    assert trust.require_signatures and trust.allowed_signers == str(site.allowed.resolve())


@pytest.mark.parametrize(
    ("principals", "line", "refusal"),
    [
        (("alice", "bob", "\u0430lice"), 3, r"principal '\u0430lice' mixes Cyrillic and Latin letters"),
        (("alice", "b\u043eb"), 2, r"principal 'b\u043eb' mixes Latin and Cyrillic letters"),
        (
            ("alice", "bob", "\u0430\u04cf\u0456\u0441\u0435"),
            3,
            r"principal '\u0430\u04cf\u0456\u0441\u0435' looks like 'alice' on line 1 but is spelled",
        ),
        (("alice", "bob", "a1ice"), 3, r"principal 'a1ice' looks like 'alice' on line 1"),
        (("alice", "bob", "aIice"), 3, r"principal 'aIice' looks like 'alice' on line 1"),
        (("bob", "alice,\u0432\u043e\u0432"), 2, r"principal '\u0432\u043e\u0432' looks like 'bob' on line 1"),
        (("alice", "bob", "!\u0430lice,carol"), 3, r"principal '!\u0430lice' mixes Cyrillic and Latin"),
    ],
)
def test_a_look_alike_principal_in_allowed_signers_is_refused_naming_its_line(
    site: Site, capsys: pytest.CaptureFixture[str], principals: tuple[str, ...], line: int, refusal: str
) -> None:
    """The issue's homoglyph vector on the signers' side: ``аlice`` (Cyrillic ``а``) listed with
    a key of her own must never count as a second person. A mixed-script principal, or one
    whose UTS #39 skeleton is an earlier line's name spelled otherwise, makes the whole file
    refused, in one line naming that line: by ``cockpit verify`` and by every reader (review)."""
    forged = site.allowed.parent / "look-alike_signers"
    keys = [site.keys["alice"], site.keys["bob"], site.keys["alice2"]]
    forged.write_text("".join(f"{p} {public(keys[i % 3])}\n" for i, p in enumerate(principals)))
    status = main(["verify", str(site.path), "--allowed-signers", str(forged)])
    err = capsys.readouterr().err
    assert status == 2
    assert re.search(rf"^cockpit: {re.escape(str(forged))}:{line}: {refusal}", err), err
    assert len(err.strip().splitlines()) == 1, err
    # the same file as the site's settings names it: a reader refuses it too
    (site.allowed.parent / "trust.toml").write_text(f'allowed_signers = "{forged.name}"\n')
    status = main(["export", str(site.path)])
    err = capsys.readouterr().err
    assert status == 2 and f"{forged}:{line}: " in err and len(err.strip().splitlines()) == 1, err


def test_one_person_listed_twice_in_plain_spellings_is_not_a_look_alike(site: Site) -> None:
    """Two lines for one person (two keys, ``Alice`` and ``alice@corp``) stay allowed: the
    same letters, not look-alikes of them."""
    from cockpit.changelog.sshsig import read_allowed_signers

    both = site.allowed.parent / "two_keys"
    both.write_text(
        f"alice {public(site.keys['alice'])}\nAlice@corp {public(site.keys['alice2'])}\nbob {public(site.keys['bob'])}\n"
    )
    assert [e.principals for e in read_allowed_signers(both)] == [("alice",), ("Alice@corp",), ("bob",)]


@pytest.mark.parametrize("lost", [1, 2, 3])
@pytest.mark.parametrize("where", ["inside its header", "inside its fields", "before its crc line"])
def test_a_cut_inside_the_last_blocks_fails_on_the_anchor(
    site: Site, capsys: pytest.CaptureFixture[str], lost: int, where: str
) -> None:
    """Issue 28: cuts inside the last blocks lost 1-3 acknowledged events with nothing said.
    The log cut inside the ``lost``-th block from the end (every block after it gone): the
    torn tail is named, and verify fails on the anchor, which holds the head of the last
    acknowledged event, with no hand-kept ``--head``."""
    data = site.path.read_bytes()
    starts = [m.start() for m in re.finditer(rb"\n\[events\.\d{6}\]\n", data)]
    start = starts[-lost]
    end = starts[-lost + 1] if lost > 1 else len(data)
    block = data[start:end]
    offset = {
        "inside its header": 5,
        "inside its fields": block.index(b"\nactor") + 4,
        "before its crc line": block.index(b"# end of event"),
    }[where]
    site.path.write_bytes(data[: start + offset])
    log = read_session(site.path)
    assert log.last_seq == len(starts) - lost
    status, out = verify(capsys, site)
    assert status == 1, out
    assert f"the log ends at seq {log.last_seq}, before seq {len(starts)} the anchor names" in out, out
