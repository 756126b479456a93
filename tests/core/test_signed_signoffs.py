"""With signatures required, the two-person gate counts a sign-off only when a second
person's allowed key signed it: not the operator under any spelling or key, not a
reviewer without a valid key (keys made by the real ssh-keygen)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from journals import gpu01_header
from repo_paths import REPO
from ssh_keys import keygen, public

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import Journal, JournalFollower, read_session
from cockpit.changelog.sshsig import Signer, signer_from_key_file
from cockpit.engine.fold import fold
from cockpit.engine.state import CockpitState
from cockpit.runbook.loader import load_runbook

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")

RUNBOOK = load_runbook(REPO / "checklists" / "driver-upgrade-r580.toml").runbook


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Signer]:
    made = {name: keygen(tmp_path, name) for name in ("alice", "bob", "mallory")}
    # alice's key is also listed as "carol": a key listed for the operator stays the operator's
    (tmp_path / "allowed_signers").write_text(
        f"alice {public(made['alice'])}\nbob {public(made['bob'])}\ncarol {public(made['alice'])}\n"
    )
    return {name: signer_from_key_file(key, name) for name, key in made.items()}


def window(tmp_path: Path, *, require: bool) -> Path:
    header = gpu01_header("CHG-SIGNED", require_signatures=require, allowed_signers=str(tmp_path / "allowed_signers"))
    Journal.create(tmp_path / "sessions", header).close()
    return tmp_path / "sessions" / "CHG-SIGNED.toml"


def sign_off(path: Path, actor: str, signer: Signer | None) -> int:
    with Journal.open_for_append(path, actor, exclusive=False, signer=signer) as journal:
        return journal.append(EventKind.SIGNOFF, stage="compat", item="classified", note="checked").seq


def folded(path: Path, *, judge: bool = True) -> CockpitState:
    log = read_session(path)
    h = log.header
    return fold(
        RUNBOOK, RUNBOOK.defaults(), h.hosts, log.events, operator=h.operator, signatures=log.signatures, judge=judge
    )


def item_status(state: CockpitState) -> str:
    return state.window["compat"].items["classified"].status


@pytest.mark.parametrize(
    ("actor", "key", "why"),
    [
        ("bob", None, "no valid signature"),
        ("bob", "mallory", "no valid signature"),  # a key allowed_signers does not list
        ("bob", "alice", "the operator's own key"),  # the operator's key, claiming to be bob
        ("carol", "alice", "the operator's own key"),  # the operator's key listed under another name
    ],
)
def test_a_sign_off_without_a_second_persons_valid_signature_does_not_count(
    tmp_path: Path, keys: dict[str, Signer], actor: str, key: str | None, why: str
) -> None:
    path = window(tmp_path, require=True)
    seq = sign_off(path, actor, keys[key] if key else None)
    state = folded(path)
    assert item_status(state) == "needs-signoff"
    assert [s.counted for s in state.signoffs] == [False]
    assert any(f"seq {seq} (signoff)" in a and why in a for a in state.anomalies), state.anomalies


def test_a_second_persons_signed_sign_off_counts_live_and_on_reading(tmp_path: Path, keys: dict[str, Signer]) -> None:
    path = window(tmp_path, require=True)
    follower = JournalFollower(path)
    follower.poll()
    sign_off(path, "bob", keys["bob"])
    (event,) = follower.poll()
    assert follower.signatures == {event.seq: "bob"} and follower.chain_words() == "chain: ok"
    # the signature is this test's question: the stage's order is not (judged, compat is locked yet)
    assert item_status(folded(path, judge=False)) == "done"
    judged = folded(path)
    assert item_status(judged) == "needs-signoff" and [r.seq for r in judged.refused] == [event.seq]


def test_without_the_requirement_an_unsigned_sign_off_counts_as_before(tmp_path: Path) -> None:
    path = window(tmp_path, require=False)
    seq = sign_off(path, "bob", None)
    assert read_session(path).signatures is None
    # the signature is this test's question: the stage's order is not (compat is locked yet)
    assert item_status(folded(path, judge=False)) == "done"
    judged = folded(path)  # unsigned or not, the rules judge it
    assert [(r.seq, "is locked" in r.why) for r in judged.refused] == [(seq, True)]


def test_a_missing_allowed_signers_file_makes_no_key_acceptable(tmp_path: Path, keys: dict[str, Signer]) -> None:
    path = window(tmp_path, require=True)
    sign_off(path, "bob", keys["bob"])
    (tmp_path / "allowed_signers").unlink()
    assert read_session(path).signatures == {}
    assert item_status(folded(path)) == "needs-signoff"
