"""The runbook as a trust source (issue 28: who may sign and whether signatures are required
come from the site, ``--allowed-signers`` or the runbook, never from the log's header).

A runbook's ``[trust]`` table asks for signatures and names its allowed_signers (beside the
runbook file). It is merged with the site's settings: either can only add. A window run with
it must be signed; a real signed window (keys made by the real ssh-keygen, bob signs the
two-person arm gate) verifies; its operator's rewrites of the header (signatures turned off
and stripped, another allowed_signers file listing her second key as bob's) fail
``cockpit verify`` naming the runbook, with no site settings at all."""

from __future__ import annotations

import argparse
import asyncio
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from repo_paths import REPO
from ssh_keys import clock, keygen, public

from cockpit.changelog.events import Event
from cockpit.changelog.journal import Journal, SessionHeader, read_session
from cockpit.changelog.sshsig import Signer, signer_from_key_file
from cockpit.changelog.trust import SITE_TRUST_ENV, load_site_trust, trust_for
from cockpit.cli import main
from cockpit.errors import BadInput
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import LoadedRunbook, load
from cockpit.session.opening import Trust, reopen
from cockpit.session.operator import Session
from cockpit.session.review import ReviewerSession

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")

RUNBOOK_ID = "signed-driver-upgrade"


def runbook_with(folder: Path, trust: str) -> LoadedRunbook:
    """The shipped minimal runbook under another id, with ``trust`` as its ``[trust]`` table."""
    text = (REPO / "checklists" / "minimal-driver-upgrade.toml").read_text()
    text = text.replace('id = "minimal-driver-upgrade"', f'id = "{RUNBOOK_ID}"', 1)
    assert RUNBOOK_ID in text
    path = folder / f"{RUNBOOK_ID}.toml"
    path.write_text(text + f"\n[trust]\n{trust}\n")
    return load(str(path))


@dataclass(frozen=True)
class Window:
    path: Path
    runbook: LoadedRunbook
    allowed: Path  # the runbook's allowed_signers
    keys: dict[str, Path]
    signers: dict[str, Signer]
    tmp: Path


@pytest.fixture
def no_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site whose settings file says nothing: the runbook is the only trust source."""
    settings = tmp_path / "site-trust.toml"
    settings.write_text("# nothing said\n")
    monkeypatch.setenv(SITE_TRUST_ENV, str(settings))
    return settings


@pytest.fixture
def window(tmp_path: Path, no_site: Path) -> Window:
    keys = {name: keygen(tmp_path, name) for name in ("alice", "bob", "alice2")}
    books = tmp_path / "runbooks"
    books.mkdir()
    allowed = books / "allowed_signers"
    allowed.write_text(f"alice {public(keys['alice'])}\nbob {public(keys['bob'])}\n")
    loaded = runbook_with(books, 'require_signatures = true\nallowed_signers = "allowed_signers"')
    signers = {"alice": signer_from_key_file(keys["alice"], "alice"), "bob": signer_from_key_file(keys["bob"], "bob")}
    tick = clock()
    # the operator's window as `cockpit run` opens it: its signing setup from the runbook
    args = argparse.Namespace(require_signatures=True, allowed_signers=None, signing_key=str(keys["alice"]))
    from cockpit.commands.run import window_trust

    trust = window_trust(args, "alice", loaded)
    assert trust.allowed_signers == str(allowed)  # the runbook's file, none given on the command line
    session = Session.start(
        sessions_dir=tmp_path / "sessions",
        change_id="CHG-BOOK",
        loaded=loaded,
        params={},
        targets=[HostTarget(name="gpu01"), HostTarget(name="gpu02")],
        operator="alice",
        transport=None,
        clock=tick,
        trust=trust,
    )
    with ReviewerSession(session.path, "bob", clock=tick, signer=signers["bob"]) as review:
        review.sign_off("arm", "triggers-reviewed", note="read the triggers, they match the plan")
    session.arm_triggers()
    session.pass_gate("arm")
    session.start_wave(0)
    assert not session.state.refused and session.state.current_wave == 0
    asyncio.run(session.close())
    return Window(session.path, loaded, allowed, keys, signers, tmp_path)


def verify(capsys: pytest.CaptureFixture[str], w: Window, *extra: str) -> tuple[int, str]:
    status = main(["verify", str(w.path), *extra])
    out = capsys.readouterr()
    return status, out.out + out.err


def rewrite(
    w: Window,
    *,
    header: dict[str, Any] | None = None,
    signer_of: Callable[[Event], Signer | None],
) -> None:
    """The operator's rewrite of her own log with the cockpit's own journal: the header
    changed, every event re-chained and signed as ``signer_of`` says."""
    log = read_session(w.path)
    new_header: SessionHeader = log.header.model_copy(update=header or {})
    forge = w.tmp / "forge"
    stamps = iter(e.ts for e in log.events)
    with Journal.create(forge, new_header, clock=lambda: next(stamps)) as journal:
        for event in log.events:
            journal.signer = signer_of(event)
            fields = {
                k: getattr(event, k) for k in ("node", "stage", "step", "item", "trigger", "wave", "reason", "note")
            }
            journal.append(event.kind, actor=event.actor, facts=event.facts_as_written() or None, **fields)
    shutil.copyfile(forge / w.path.name, w.path)


def test_the_runbooks_trust_table_is_merged_with_the_site_and_can_only_add(tmp_path: Path, no_site: Path) -> None:
    loaded = runbook_with(tmp_path, 'require_signatures = true\nallowed_signers = "signers"')
    site = load_site_trust()
    assert not site.require_signatures and site.allowed_signers is None
    merged = site.with_runbook(loaded)
    assert merged.require_signatures and merged.allowed_signers == str(tmp_path / "signers")
    # the site says no signatures: the runbook's yes still holds; the site's own file wins
    no_site.write_text('require_signatures = false\nallowed_signers = "/srv/site_signers"\n')
    merged = load_site_trust().with_runbook(loaded)
    assert merged.require_signatures and merged.allowed_signers == "/srv/site_signers"
    assert merged.who_requires() == f"the runbook {RUNBOOK_ID}'s [trust]"
    # naming a file alone asks for signatures, as the site's settings do
    assert load_site_trust().with_runbook(runbook_with(tmp_path, 'allowed_signers = "x"')).require_signatures
    assert not load_site_trust().with_runbook(runbook_with(tmp_path, "require_signatures = false")).require_signatures


@pytest.mark.parametrize(
    ("table", "refusal"),
    [
        ("require_signatures = 1", r"trust\.require_signatures"),
        ('allowed_signers = ""', r"trust\.allowed_signers"),
        ("two_person = true", r"trust\.two_person"),
    ],
)
def test_a_bad_trust_table_is_refused_in_one_line(tmp_path: Path, table: str, refusal: str) -> None:
    with pytest.raises(BadInput, match=refusal):
        runbook_with(tmp_path, table)


def test_a_window_with_a_runbook_that_requires_signatures_cannot_be_unsigned(tmp_path: Path, no_site: Path) -> None:
    loaded = runbook_with(tmp_path, "require_signatures = true")
    from cockpit.commands.run import window_trust

    unsigned = argparse.Namespace(require_signatures=False, allowed_signers=None, signing_key=None)
    with pytest.raises(BadInput, match=rf"the runbook {RUNBOOK_ID}'s \[trust\] requires signatures: --no-require"):
        window_trust(unsigned, "alice", loaded)
    # and the session itself refuses it, whatever opened it
    with pytest.raises(BadInput, match=rf"runbook {RUNBOOK_ID} requires signatures \(\[trust\]\)"):
        Session.start(
            sessions_dir=tmp_path / "sessions",
            change_id="CHG-NOSIG",
            loaded=loaded,
            params={},
            targets=[HostTarget(name="gpu01")],
            operator="alice",
            transport=None,
            trust=Trust(require_signatures=False),
        )
    assert not (tmp_path / "sessions" / "CHG-NOSIG.toml").exists()


def test_the_signed_window_verifies_against_its_runbooks_trust(
    window: Window, capsys: pytest.CaptureFixture[str]
) -> None:
    log = read_session(window.path)
    assert log.header.require_signatures and log.header.allowed_signers == str(window.allowed)
    trust = trust_for(log.header, window.path)
    assert trust.require_signatures and trust.allowed_signers == str(window.allowed)
    status, out = verify(capsys, window)
    assert status == 0, out
    assert f"signatures: {log.last_seq} valid, 0 unsigned, 0 invalid" in out
    assert "trust: checked against" not in out  # not the header's word: the runbook's


def test_a_header_that_drops_the_runbooks_signatures_fails_verify(
    window: Window, capsys: pytest.CaptureFixture[str]
) -> None:
    rewrite(window, header={"require_signatures": False, "allowed_signers": None}, signer_of=lambda _e: None)
    status, out = verify(capsys, window)
    assert status == 1, out
    assert (
        "FAILED at seq 0: trust: the log's header says signatures are not required; "
        f"the runbook {RUNBOOK_ID}'s [trust] requires them"
    ) in out
    assert "unsigned event by alice (signatures are required)" in out
    # the fold every reader shares counts none of it: the runbook's requirement holds there too
    state = reopen(window.path, operator=None, runbook=None)[2].state
    assert state.current_wave is None and len(state.refused) == read_session(window.path).last_seq


def test_a_header_naming_her_own_signers_file_fails_verify(window: Window, capsys: pytest.CaptureFixture[str]) -> None:
    hers = window.tmp / "hers"
    hers.write_text(f"alice {public(window.keys['alice'])}\nbob {public(window.keys['alice2'])}\n")
    second = signer_from_key_file(window.keys["alice2"], "bob")
    rewrite(
        window,
        header={"allowed_signers": str(hers)},
        signer_of=lambda e: second if e.actor == "bob" else window.signers["alice"],
    )
    status, out = verify(capsys, window)
    assert status == 1, out
    assert f"the log's header names allowed_signers {hers}, which lists keys the runbook {RUNBOOK_ID}'s" in out
    assert "(for bob)" in out and "allowed_signers does not list" in out
    # the site's own --allowed-signers wins over the runbook's and is held to the same
    status, out = verify(capsys, window, "--allowed-signers", str(window.allowed))
    assert status == 1 and "which lists keys the site's" in out, out


def test_a_site_that_turns_signatures_off_cannot_undo_the_runbooks(
    window: Window, capsys: pytest.CaptureFixture[str], no_site: Path
) -> None:
    no_site.write_text("require_signatures = false\n")
    rewrite(window, header={"require_signatures": False}, signer_of=lambda _e: None)
    status, out = verify(capsys, window)
    assert status == 1 and f"the runbook {RUNBOOK_ID}'s [trust] requires them" in out, out


def test_cockpit_check_reads_the_trust_tables_signers_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad [trust] allowed_signers is said by ``cockpit check``, not at a window's first
    signature: missing, a look-alike principal (naming its line), a planted link."""
    loaded = runbook_with(tmp_path, 'allowed_signers = "allowed_signers"')
    status = main(["check", str(loaded.path)])
    err = capsys.readouterr().err
    assert status == 2 and f"trust.allowed_signers: {tmp_path / 'allowed_signers'}: no such file" in err, err
    alice = keygen(tmp_path, "alice")
    signers = tmp_path / "allowed_signers"
    signers.write_text(f"alice {public(alice)}\n\u0430lice {public(alice)}\n")
    status = main(["check", str(loaded.path)])
    err = capsys.readouterr().err
    assert status == 2 and "allowed_signers:2: principal '\u0430lice' mixes Cyrillic and Latin" in err, err
    signers.write_text(f"alice {public(alice)}\n")
    status = main(["check", str(loaded.path)])
    out = capsys.readouterr().out
    assert status == 0 and "trust: signatures required; allowed_signers allowed_signers" in out, out
    real = tmp_path / "elsewhere"
    signers.rename(real)
    signers.symlink_to(real)
    status = main(["check", str(loaded.path)])
    assert status == 2 and "is a symbolic link, refused as an allowed_signers file" in capsys.readouterr().err


def _unsigned_off_window(tmp_path: Path, trust: str) -> tuple[Path, dict[str, Signer], Callable[[], datetime]]:
    """alice's signed window under a runbook with ``trust``; bob has not signed the arm stage."""
    keys = {name: keygen(tmp_path, name) for name in ("alice", "bob")}
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"alice {public(keys['alice'])}\nbob {public(keys['bob'])}\n")
    loaded = runbook_with(tmp_path, f'require_signatures = true\nallowed_signers = "allowed_signers"\n{trust}')
    signers = {n: signer_from_key_file(k, n) for n, k in keys.items()}
    tick = clock()
    session = Session.start(
        sessions_dir=tmp_path / "sessions",
        change_id="CHG-GATE",
        loaded=loaded,
        params={},
        targets=[HostTarget(name="gpu01")],
        operator="alice",
        transport=None,
        clock=tick,
        trust=Trust(require_signatures=True, allowed_signers=str(allowed), signer=signers["alice"]),
    )
    session.pause("waiting for bob")
    asyncio.run(session.close())
    return session.path, signers, tick


def test_a_two_person_gate_is_not_opened_by_the_operators_override(
    tmp_path: Path, no_site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``two_person_gates = ["arm"]``: alice's override of the arm gate (bob has not signed)
    is refused live, and the same override written by hand and signed with her own key is
    refused by the fold every reader shares and fails verify."""
    from cockpit.changelog.events import EventKind
    from cockpit.engine.actions import ActionRefused

    path, signers, tick = _unsigned_off_window(tmp_path, 'two_person_gates = ["arm"]')
    session = Session.resume(path, signer=signers["alice"], clock=tick)
    try:
        with pytest.raises(ActionRefused, match=r"the runbook's \[trust\] makes 'arm' a two-person gate"):
            session.override("arm", reason="bob is on leave, I checked the triggers myself")
    finally:
        asyncio.run(session.close())
    with Journal.open_for_append(path, "alice", exclusive=False, clock=tick, signer=signers["alice"]) as journal:
        seq = journal.append(EventKind.OVERRIDE, stage="arm", reason="bob is on leave").seq
    state = reopen(path, operator=None, runbook=None)[2].state
    assert [(r.seq, r.kind) for r in state.refused] == [(seq, "override")]
    assert "two-person gate" in state.refused[0].why and state.window["arm"].status == "active"
    status = main(["verify", str(path)])
    said = capsys.readouterr()
    out = said.out + said.err
    assert status == 1 and f"FAILED at seq {seq}: refused (override by alice)" in out, out


def test_without_the_table_the_same_override_is_the_operators_to_make(tmp_path: Path, no_site: Path) -> None:
    """The control: the same runbook without ``two_person_gates`` lets alice override the arm
    gate with a reason (the rule above is what refuses it)."""
    path, signers, tick = _unsigned_off_window(tmp_path, "")
    session = Session.resume(path, signer=signers["alice"], clock=tick)
    try:
        session.override("arm", reason="bob is on leave, I checked the triggers myself")
        assert session.state.window["arm"].status != "active" and not session.state.refused
    finally:
        asyncio.run(session.close())


@pytest.mark.parametrize(
    ("gates", "refusal"),
    [
        ('["nope"]', "trust.two_person_gates[0]: no stage 'nope'"),
        ('["drain"]', "trust.two_person_gates[0]: stage 'drain' has no sign-off item"),
    ],
)
def test_a_two_person_gate_must_name_a_stage_with_a_sign_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gates: str, refusal: str
) -> None:
    path = tmp_path / "book.toml"
    text = (REPO / "checklists" / "minimal-driver-upgrade.toml").read_text()
    path.write_text(text + f"\n[trust]\ntwo_person_gates = {gates}\n")
    status = main(["check", str(path)])
    err = capsys.readouterr().err
    assert status == 2 and refusal in err, err
