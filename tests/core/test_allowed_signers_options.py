"""allowed_signers read as OpenSSH reads it: for each option (valid-before, valid-after,
cert-authority, namespaces), principal patterns and an option it does not know, the
cockpit accepts exactly the signatures the real ``ssh-keygen -Y verify`` accepts, over the
same file, bytes and signature (keys made by the real ssh-keygen)."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cockpit.changelog.sshsig import NAMESPACE, armor, check, parse_allowed_signers, signer_from_key_file

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")

MESSAGE = b'\n[events.000004]\nseq = 4\nactor = "bob"\nkind = "signoff"\n'

PAST = (datetime.now(UTC) - timedelta(days=400)).strftime("%Y%m%d")
FUTURE = (datetime.now(UTC) + timedelta(days=400)).strftime("%Y%m%d")

#: (case, the line's principals and options, before the key; the principal asked about)
LINES: list[tuple[str, str, str]] = [
    ("plain", "bob", "bob"),
    ("expired", f'bob valid-before="{PAST}"', "bob"),
    ("expired, UTC", f'bob valid-before="{PAST}0000Z"', "bob"),
    ("valid until later", f'bob valid-before="{FUTURE}"', "bob"),
    ("not yet valid", f'bob valid-after="{FUTURE}"', "bob"),
    ("valid since", f'bob valid-after="{PAST}1200Z"', "bob"),
    ("inside both", f'bob valid-after="{PAST}",valid-before="{FUTURE}"', "bob"),
    ("a certificate authority", "bob cert-authority", "bob"),
    ("a certificate authority, upper case", "bob CERT-AUTHORITY", "bob"),
    ("our namespace", f'bob namespaces="{NAMESPACE}"', "bob"),
    ("other namespaces", 'bob namespaces="git,file"', "bob"),
    ("a namespace pattern", 'bob namespaces="cockpit-*"', "bob"),
    ("our namespace negated", f'bob namespaces="!{NAMESPACE},*"', "bob"),
    ("a principal pattern", "b?b", "bob"),
    ("a principal list", "alice,bob", "bob"),
    ("a principal negated", "!bob,*", "bob"),
    ("another principal", "alice", "bob"),
    ("an unknown option", "bob no-touch-required", "bob"),
    ("an unreadable time", 'bob valid-before="tomorrow"', "bob"),
]


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, bytes, Path]:
    folder = tmp_path_factory.mktemp("opts")
    key = folder / "bob"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bob", "-f", str(key)], check=True)
    public = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    blob = signer_from_key_file(key, "bob").sign(MESSAGE)
    sig = folder / "message.sig"
    sig.write_text(armor(blob))
    return folder, public, blob, sig


@pytest.mark.parametrize(("case", "prefix", "principal"), LINES, ids=[c for c, _, _ in LINES])
def test_the_cockpit_accepts_what_ssh_keygen_accepts(
    signed: tuple[Path, str, bytes, Path], case: str, prefix: str, principal: str
) -> None:
    folder, public, blob, sig = signed
    allowed = folder / f"allowed-{abs(hash(case))}"
    allowed.write_text(f"{prefix} {public}\n")
    openssh = subprocess.run(
        ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", principal, "-n", NAMESPACE, "-s", str(sig)],
        input=MESSAGE,
        capture_output=True,
    )
    accepted, words = check(MESSAGE, blob, principal, parse_allowed_signers(allowed.read_text(), str(allowed)))
    assert (openssh.returncode == 0) == (accepted is not None), (case, openssh.stderr, words)
    if openssh.returncode != 0:
        assert accepted is None and words, case
    if b"expired" in openssh.stderr:
        assert "key has expired" in words  # the words ssh-keygen uses
    if b"not yet valid" in openssh.stderr:
        assert "not yet valid" in words


def test_every_case_is_decided_both_ways_somewhere(signed: tuple[Path, str, bytes, Path]) -> None:
    """The table is not all acceptances or all refusals: each option is seen to bite."""
    _folder, public, blob, _sig = signed
    verdicts = {}
    for case, prefix, principal in LINES:
        entries = parse_allowed_signers(f"{prefix} {public}\n", "t")
        verdicts[case] = check(MESSAGE, blob, principal, entries)[0] is not None
    assert verdicts["plain"] and verdicts["valid until later"] and verdicts["our namespace"]
    assert not verdicts["expired"] and not verdicts["not yet valid"] and not verdicts["a certificate authority"]
    assert not verdicts["other namespaces"] and not verdicts["a principal negated"]
