"""The files around a change log, against someone who can write the sessions folder (issue
28): a planted link or a file of someone else's is refused in one line and never written
through; change logs are 0600 (0640 to a reviewers' group, a setting) whatever the umask;
a private key others can read does not sign, as ssh refuses it."""

from __future__ import annotations

import grp
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.changelog.journal import Journal
from cockpit.changelog.sshsig import signer_from_key_file
from cockpit.errors import BadInput
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load
from cockpit.session.operator import Session

OPERATOR = "alice"


def start(folder: Path, change_id: str = "CHG-F") -> Session:
    return Session.start(
        sessions_dir=folder,
        change_id=change_id,
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01")],
        operator=OPERATOR,
        transport=None,
    )


@pytest.fixture
def umask_022() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def test_a_planted_lock_symlink_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("the reviewer's own notes\n")
    (tmp_path / "CHG-F.lock").symlink_to(victim)
    with pytest.raises(BadInput, match=r"CHG-F\.lock: is a symbolic link, refused as the session's lock"):
        start(tmp_path)
    assert victim.read_text() == "the reviewer's own notes\n"
    assert not (tmp_path / "CHG-F.toml").exists()


def test_a_lock_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "CHG-F.lock")
    with pytest.raises(BadInput, match=r"not a regular file; refused as the session's lock"):
        start(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user's needs root")
def test_a_lock_someone_else_made_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / "CHG-F.lock"
    lock.write_text("")
    os.chown(lock, 4711, -1)
    with pytest.raises(BadInput, match=r"owned by uid 4711, not by you .*refused as the session's lock"):
        start(tmp_path)


def test_resume_refuses_a_log_swapped_for_a_link(tmp_path: Path) -> None:
    session = start(tmp_path)
    path = session.path
    session.pause("lunch")
    session.journal.close()
    real = tmp_path / "elsewhere.toml"
    path.rename(real)
    path.symlink_to(real)
    before = real.read_bytes()
    with pytest.raises(BadInput, match=r"CHG-F\.toml: is a symbolic link, refused as a session file"):
        Journal.open_for_append(path, OPERATOR)
    assert real.read_bytes() == before


def test_change_logs_are_private_whatever_the_umask(tmp_path: Path, umask_022: None) -> None:
    session = start(tmp_path)
    try:
        session.note("a note")
    finally:
        session.journal.close()
    assert stat.S_IMODE(session.path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "CHG-F.lock").stat().st_mode) == 0o600


def test_a_reviewers_group_setting_makes_them_0640_to_that_group(
    tmp_path: Path, umask_022: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = grp.getgrgid(os.getegid())
    monkeypatch.setenv("COCKPIT_LOG_GROUP", group.gr_name)
    session = start(tmp_path)
    session.journal.close()
    info = session.path.stat()
    assert stat.S_IMODE(info.st_mode) == 0o640 and info.st_gid == group.gr_gid
    monkeypatch.setenv("COCKPIT_LOG_GROUP", "no-such-group-here")
    with pytest.raises(BadInput, match=r"COCKPIT_LOG_GROUP='no-such-group-here': no such group"):
        start(tmp_path / "other")


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_private_key_others_can_read_does_not_sign(tmp_path: Path, mode: int) -> None:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", OPERATOR, "-f", str(key)], check=True)
    assert signer_from_key_file(key, OPERATOR).principal == OPERATOR  # 0600, as ssh-keygen made it
    key.chmod(mode)
    with pytest.raises(BadInput, match=rf"permissions 0{mode:o} are too open: a private key must not be accessible"):
        signer_from_key_file(key, OPERATOR)
    # the same answer as ssh itself: it will not use the key either
    said = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True, check=False)
    assert said.returncode != 0 and "UNPROTECTED PRIVATE KEY FILE" in said.stderr, said.stderr
