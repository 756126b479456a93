"""A planted symlink is never read through (issue 28, "Files"): someone who can write the
sessions folder (a reviewer) or a folder the site's trust files sit in can swap a change log,
a lock, an anchor file, allowed_signers or the trust settings for a link to a file of their
choosing (a log of another window, a signers file listing their own key). Every command that
reads one refuses the link in one line (``O_NOFOLLOW``, then ``fstat`` of what was opened);
the trust files must also be owned by the user or root and writable by nobody else.

A real signed window (keys made by the real ssh-keygen, bob signs the two-person gate) under
a site settings file naming the allowed signers and an anchor file."""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from ssh_keys import clock, keygen, public

from cockpit.changelog.journal import Journal
from cockpit.changelog.sshsig import signer_from_key_file
from cockpit.changelog.trust import SITE_TRUST_ENV
from cockpit.cli import main
from cockpit.errors import BadInput
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load
from cockpit.session.opening import Trust
from cockpit.session.operator import Session
from cockpit.session.review import ReviewerSession

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")

LINK = "is a symbolic link, refused as"


@dataclass(frozen=True)
class Site:
    path: Path  # the window's log (paused, not ended: resume and review may open it)
    settings: Path
    allowed: Path
    anchors: Path
    keys: dict[str, Path]
    tmp: Path


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    keys = {name: keygen(tmp_path, name) for name in ("alice", "bob", "mallory")}
    folder = tmp_path / "site"
    folder.mkdir()
    allowed = folder / "allowed_signers"
    allowed.write_text(f"alice {public(keys['alice'])}\nbob {public(keys['bob'])}\n")
    anchors = tmp_path / "audit-host" / "anchors"
    anchors.parent.mkdir()
    settings = folder / "trust.toml"
    settings.write_text(f'allowed_signers = "allowed_signers"\nanchor_file = "{anchors}"\n')
    monkeypatch.setenv(SITE_TRUST_ENV, str(settings))
    alice = signer_from_key_file(keys["alice"], "alice")
    tick = clock()
    session = Session.start(
        sessions_dir=tmp_path / "sessions",
        change_id="CHG-LINK",
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01")],
        operator="alice",
        transport=None,
        clock=tick,
        trust=Trust(require_signatures=True, allowed_signers=str(allowed), signer=alice),
    )
    with ReviewerSession(session.path, "bob", clock=tick, signer=signer_from_key_file(keys["bob"], "bob")) as review:
        review.sign_off("arm", "triggers-reviewed", note="read the triggers, they match the plan")
    session.pause("lunch")
    session.journal.close()
    return Site(session.path, settings, allowed, anchors, keys, tmp_path)


def one_line_refusal(capsys: pytest.CaptureFixture[str], argv: list[str], *expected: str) -> str:
    status = main(argv)
    err = capsys.readouterr().err.strip()
    assert status == 2, (argv, status, err)
    assert len(err.splitlines()) == 1, err
    for text in expected:
        assert text in err, err
    return err


def swap_for_link(path: Path, target: Path) -> None:
    """What the attacker does: the file moved aside (or left alone) and a link in its place."""
    path.unlink()
    path.symlink_to(target)


def readers(site: Site) -> dict[str, list[str]]:
    """Each command that reads a change log, as a person runs it on ``site``'s window."""
    log = str(site.path)
    return {
        "resume": ["resume", log],
        "review": ["review", "--as", "bob", "--signing-key", str(site.keys["bob"]), log],
        "export": ["export", log],
        "replay": ["replay", log],
        "verify": ["verify", log],
        "watch": ["watch", log],
        "pair": [
            "pair",
            "--change-id",
            "CHG-LINK",
            "--sessions",
            str(site.path.parent),
            "--no-attach",
            "--signing-key",
            str(site.keys["alice"]),
            "--socket",
            str(site.tmp / "tmux" / "pair.sock"),
        ],
    }


COMMANDS = ("resume", "review", "export", "replay", "verify", "watch", "pair")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_change_log_swapped_for_a_link_is_refused_by_every_reader(
    site: Site, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The log replaced by a link to a copy of it (same bytes, so nothing but the link is
    wrong): each reader refuses it before reading a byte through it."""
    if command == "pair" and shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    elsewhere = site.tmp / "elsewhere.toml"
    shutil.copyfile(site.path, elsewhere)
    swap_for_link(site.path, elsewhere)
    one_line_refusal(capsys, readers(site)[command], f"{site.path}: {LINK} a session file")
    assert not (site.tmp / "tmux" / "pair.sock").exists()  # pair started no tmux server


def test_a_followed_log_swapped_for_a_link_midway_is_refused(site: Site) -> None:
    """The reviewer's follower reads the log again at every poll: a link put in its place
    after the session was opened is refused at the next poll, not read."""
    from cockpit.changelog.reader import JournalFollower

    follower = JournalFollower(site.path)
    assert follower.poll(), "the follower read nothing of the real log"
    elsewhere = site.tmp / "elsewhere.toml"
    shutil.copyfile(site.path, elsewhere)
    with elsewhere.open("ab") as fh:
        fh.write(b"\n")  # grown, so the follower reads again
    swap_for_link(site.path, elsewhere)
    with pytest.raises(BadInput, match=rf"{LINK} a session file"):
        follower.poll()


def test_a_planted_lock_link_is_refused_by_resume_and_watch_and_its_target_untouched(site: Site) -> None:
    """``sessions/ID.lock`` as a link: resume (the operator's process) and the watch (which
    holds the same lock over an ended window) refuse it; the file it points to is unchanged."""
    victim = site.tmp / "victim.txt"
    victim.write_text("the reviewer's own notes\n")
    lock = site.path.with_suffix(".lock")
    lock.unlink(missing_ok=True)
    lock.symlink_to(victim)
    alice = signer_from_key_file(site.keys["alice"], "alice")
    with pytest.raises(BadInput, match=rf"CHG-LINK\.lock: {LINK} the session's lock"):
        Session.resume(site.path, operator="alice", signer=alice)
    # the watch's open: the same exclusive open of the same log (cockpit/session/watch.py)
    with pytest.raises(BadInput, match=rf"CHG-LINK\.lock: {LINK} the session's lock"):
        Journal.open_for_append(site.path, "cockpit-watch", signer=alice)
    assert victim.read_text() == "the reviewer's own notes\n"
    assert lock.is_symlink()


def test_an_anchor_file_swapped_for_a_link_is_refused_by_verify(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    """The anchor file as a link to one holding the heads of a rewrite: refused, not read."""
    assert main(["verify", str(site.path), "--anchor", str(site.anchors)]) == 0, capsys.readouterr()
    capsys.readouterr()
    forged = site.tmp / "forged-anchors"
    shutil.copyfile(site.anchors, forged)
    swap_for_link(site.anchors, forged)
    one_line_refusal(capsys, ["verify", str(site.path), "--anchor", str(site.anchors)], f"{LINK} an anchor file")


def test_the_sites_anchor_sink_as_a_link_is_never_written_through(site: Site) -> None:
    """A link in place of the site's anchor file: an append writes nothing through it (the
    failure is kept on the sinks, the append stands)."""
    victim = site.tmp / "victim.txt"
    victim.write_text("untouched\n")
    swap_for_link(site.anchors, victim)
    session = Session.resume(site.path, operator="alice", signer=signer_from_key_file(site.keys["alice"], "alice"))
    session.note("back from lunch")
    failure = session.journal.anchors.failure
    assert failure is not None and "symbolic links" in failure, failure
    asyncio.run(session.close())
    assert victim.read_text() == "untouched\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_allowed_signers_swapped_for_a_link_is_refused_by_every_reader(
    site: Site, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The site's allowed_signers as a link to a file also listing mallory's key as bob's:
    every reader refuses it (the site's settings name it), verify's ``--allowed-signers`` too."""
    if command == "pair" and shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    forged = site.tmp / "forged_signers"
    forged.write_text(site.allowed.read_text() + f"bob {public(site.keys['mallory'])}\n")
    swap_for_link(site.allowed, forged)
    one_line_refusal(capsys, readers(site)[command], f"{site.allowed}: {LINK} an allowed_signers file")
    if command == "verify":
        one_line_refusal(
            capsys,
            ["verify", str(site.path), "--allowed-signers", str(site.allowed)],
            f"{LINK} an allowed_signers file",
        )


@pytest.mark.parametrize("command", COMMANDS)
def test_the_trust_settings_swapped_for_a_link_are_refused_by_every_reader(
    site: Site, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The settings file as a link to one that requires no signatures: refused by each reader."""
    if command == "pair" and shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    forged = site.tmp / "forged-trust.toml"
    forged.write_text("require_signatures = false\n")
    swap_for_link(site.settings, forged)
    one_line_refusal(capsys, readers(site)[command], f"{site.settings}: {LINK} the site's trust settings")


@pytest.mark.parametrize("which", ["settings", "allowed"])
@pytest.mark.parametrize("mode", [0o646, 0o666, 0o602])
def test_a_trust_file_others_may_rewrite_is_refused(
    site: Site, capsys: pytest.CaptureFixture[str], which: str, mode: int
) -> None:
    """As sshd's StrictModes holds authorized_keys: a trust file others may write is no trust
    root (anyone could add a key or turn signatures off). Group-writable with the user's own
    group (umask 002, user-private groups) is the user's alone and passes."""
    target: Path = getattr(site, which)
    target.chmod(0o664)
    assert main(["export", str(site.path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    target.chmod(mode)
    one_line_refusal(capsys, ["export", str(site.path)], f"permissions {mode:04o} let others rewrite it")
    target.chmod(0o644)
    assert main(["export", str(site.path)]) == 0, capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user's needs root")
def test_a_trust_file_of_another_user_or_writable_by_another_group_is_refused(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    os.chown(site.allowed, 4711, -1)
    one_line_refusal(capsys, ["export", str(site.path)], "owned by uid 4711, neither you")
    os.chown(site.allowed, 0, 4711)
    site.allowed.chmod(0o664)
    one_line_refusal(capsys, ["export", str(site.path)], "permissions 0664 let others rewrite it")
    site.allowed.chmod(0o644)  # the other group may read it: fine
    assert main(["export", str(site.path)]) == 0, capsys.readouterr().err
