"""`cockpit verify` over a real change log written by the journal (signed by keys made with
the real ssh-keygen), tampered with in many ways: each is caught at the seq it names, the
untouched log passes, and ssh-keygen itself accepts a signature the cockpit wrote."""

from __future__ import annotations

import base64
import functools
import re
import shutil
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from journals import gpu01_header
from ssh_keys import clock, keygen

from cockpit.changelog.events import Event, EventKind
from cockpit.changelog.journal import Journal, JournalDamaged, read_session
from cockpit.changelog.sshsig import Signer, signer_from_key_file
from cockpit.cli import main

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")

_TRAILER = re.compile(rb"# end of event (\d+), crc32 [0-9a-f]{8}\n")


@pytest.fixture(scope="module")
def signed_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Signer]]:
    """A signed log of 9 events: alice operates, bob signs off and notes, the cockpit probes."""
    folder = tmp_path_factory.mktemp("signed")
    keys = {name: keygen(folder, name) for name in ("alice", "bob", "mallory")}
    allowed = folder / "allowed_signers"
    allowed.write_text(
        "".join(
            f"{name} {' '.join((keys[name].with_suffix('.pub')).read_text().split()[:2])}\n"
            for name in ("alice", "bob")
        )
    )
    signers = {name: signer_from_key_file(keys[name], name) for name in keys}
    header = gpu01_header("CHG-TAMPER", require_signatures=True, allowed_signers=str(allowed))
    tick = clock()
    with Journal.create(folder / "sessions", header, clock=tick, signer=signers["alice"]) as op:
        op.append(EventKind.SESSION_STARTED)  # 1
        op.append(
            EventKind.PROBE, actor="cockpit", node="gpu01", facts={"reachable": True, "driver_version": "570"}
        )  # 2
        op.append(EventKind.NOTE, note="starting the window")  # 3
        with Journal.open_for_append(op.path, "bob", exclusive=False, clock=tick, signer=signers["bob"]) as rev:
            rev.append(EventKind.SIGNOFF, stage="preflight", note="looks right")  # 4
            rev.append(EventKind.NOTE, note="watching gpu01")  # 5
        op.append(
            EventKind.PROBE, actor="cockpit", node="gpu01", facts={"reachable": True, "driver_version": "580"}
        )  # 6
        op.append(EventKind.NOTE, note="driver 580 in")  # 7
        with Journal.open_for_append(op.path, "bob", exclusive=False, clock=tick, signer=signers["bob"]) as rev:
            rev.append(EventKind.NOTE, note="confirmed")  # 8
        op.append(EventKind.SESSION_ENDED)  # 9
    return op.path, allowed, signers


def verify(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    status = main(["verify", str(path), *extra])
    out = capsys.readouterr()
    return status, out.out + out.err


def blocks(data: bytes) -> tuple[bytes, list[bytes]]:
    """(header, [block of seq 1, 2, ...]) of a log's bytes."""
    end = data.index(b"# end of session header\n") + len(b"# end of session header\n")
    out, pos = [], end
    for match in _TRAILER.finditer(data, end):
        out.append(data[pos : match.end()])
        pos = match.end()
    return data[:end], out


def recrc(block: bytes) -> bytes:
    """The block with its trailer's CRC made to match again (what an attacker would do)."""
    at = block.rindex(b"# end of event ")
    body = block[:at]
    seq = re.match(rb"# end of event (\d+)", block[at:])
    assert seq is not None
    return body + b"# end of event %s, crc32 %08x\n" % (seq.group(1), zlib.crc32(body))


def edit(block: bytes, old: bytes, new: bytes, *, crc: bool = True) -> bytes:
    assert old in block, (old, block)
    changed = block.replace(old, new, 1)
    return recrc(changed) if crc else changed


def resign(block: bytes, signer: Signer) -> bytes:
    """Sign the block's bytes again with ``signer`` (replacing its signature)."""
    at = block.index(b"\n[events.", 1)
    signed = block[:at]
    blob = base64.b64encode(signer.sign(signed)).decode()
    sig_line = re.sub(rb'sshsig = "[^"]*"', f'sshsig = "{blob}"'.encode(), block[at:])
    return recrc(signed + sig_line)


def strip_sig(block: bytes) -> bytes:
    at = block.index(b"\n[events.", 1)
    trailer = block.rindex(b"# end of event ")
    return recrc(block[:at] + block[trailer:])


def move_sig(source: bytes, target: bytes) -> bytes:
    """``target`` carrying ``source``'s signature (a valid signature, of other bytes)."""
    theirs, mine = (re.search(rb'sshsig = "[^"]*"', x) for x in (source, target))
    assert theirs is not None and mine is not None
    return recrc(target.replace(mine.group(0), theirs.group(0)))


def forged(seq: int, prev: bytes, actor: str = "bob", kind: str = "signoff") -> bytes:
    body = (
        f'\n[events.{seq:06d}]\nseq = {seq}\nprev = "{prev.decode()}"\nts = 2026-08-05 23:00:00+00:00\n'
        f'actor = "{actor}"\nkind = "{kind}"\nstage = "preflight"\n'
    ).encode()
    return body + b"# end of event %06d, crc32 %08x\n" % (seq, zlib.crc32(body))


def hostile(seq: int, prev: bytes, extra: bytes) -> bytes:
    """A well-checksummed, well-chained block by bob whose content this cockpit cannot read."""
    body = (
        f'\n[events.{seq:06d}]\nseq = {seq}\nprev = "{prev.decode()}"\nts = 2026-08-05 23:00:00+00:00\n'
        f'actor = "bob"\nkind = "note"\n'
    ).encode() + extra
    return body + b"# end of event %06d, crc32 %08x\n" % (seq, zlib.crc32(body))


def prev_of(block: bytes) -> bytes:
    match = re.search(rb'prev = "([^"]+)"', block)
    assert match is not None
    return match.group(1)


def sha(data: bytes) -> bytes:
    import hashlib

    return b"sha256:" + hashlib.sha256(data).hexdigest().encode()


#: the order of Ed25519's group (RFC 8032): S and S + L satisfy the same equation
_L = 2**252 + 27742317777372353535851937790883648493


def malleate(block: bytes, how: str) -> bytes:
    """The block with its Ed25519 signature's raw bytes changed in a way some verifiers let
    through: ``S+L`` (S not reduced, which ZIP-215 and OpenSSH's own check do not refuse
    outright) or ``R=identity`` (a small-order R)."""
    match = re.search(rb'sshsig = "([^"]*)"', block)
    assert match is not None
    blob = base64.b64decode(match.group(1))
    r, s = blob[-64:-32], int.from_bytes(blob[-32:], "little")
    if how == "S+L":
        assert s + _L < 2**255
        raw = r + (s + _L).to_bytes(32, "little")
    else:
        raw = (1).to_bytes(32, "little") + blob[-32:]
    new = base64.b64encode(blob[:-64] + raw)
    return recrc(block[: match.start(1)] + new + block[match.end(1) :])


Tamper = Callable[[bytes, list[bytes], dict[str, Signer]], tuple[bytes, list[bytes]]]


def write_tampered(path: Path, tamper: Tamper, signers: dict[str, Signer], folder: Path) -> Path:
    """A copy of the log at ``path`` with ``tamper`` applied, written into ``folder``."""
    header, original = blocks(path.read_bytes())
    new_header, new_blocks = tamper(header, list(original), signers)
    target = folder / path.name
    target.write_bytes(new_header + b"".join(new_blocks))
    return target


def resigned_by_mallory(h: bytes, b: list[bytes], s: dict[str, Signer]) -> tuple[bytes, list[bytes]]:
    """Event 4 signed again with mallory's key, which the allowed signers do not list."""
    return h, [*b[:3], resign(b[3], s["mallory"]), *b[4:]]


def _set(i: int, new: Callable[[bytes], bytes]) -> Tamper:
    def tamper(h: bytes, b: list[bytes], _s: dict[str, Signer]) -> tuple[bytes, list[bytes]]:
        return h, [new(x) if n == i else x for n, x in enumerate(b, 1)]

    return tamper


#: (name, tamper, the seq verify must name, words its reason must hold)
TAMPERS: list[tuple[str, Tamper, int, str]] = [
    ("note edited, crc left", _set(3, lambda x: edit(x, b"starting", b"STARTING", crc=False)), 3, "checksum"),
    ("note edited, crc fixed", _set(3, lambda x: edit(x, b"starting", b"STARTING")), 3, "does not match the bytes"),
    # the cockpit's own events are signed too (with the operator's key): caught at the probe itself
    (
        "system probe's facts edited",
        _set(2, lambda x: edit(x, b'"570"', b'"580"')),
        2,
        "does not match the bytes",
    ),
    (
        "actor rewritten",
        _set(4, lambda x: edit(x, b'actor = "bob"', b'actor = "carol"')),
        4,
        "does not match the bytes",
    ),
    (
        "actor made the operator",
        _set(4, lambda x: edit(x, b'actor = "bob"', b'actor = "alice"')),
        4,
        "does not match the bytes",
    ),
    ("timestamp moved", _set(7, lambda x: edit(x, b"22:00:07", b"21:00:07")), 7, "does not match the bytes"),
    ("signature's S not reduced (S + L)", _set(7, lambda x: malleate(x, "S+L")), 7, "does not match the bytes"),
    ("signature's R of small order", _set(8, lambda x: malleate(x, "R=identity")), 8, "does not match the bytes"),
    ("a kind changed", _set(5, lambda x: edit(x, b'kind = "note"', b'kind = "signoff"')), 5, "does not match"),
    (
        "the header's operator",
        lambda h, b, _s: (h.replace(b'operator = "alice"', b'operator = "bob"'), b),
        1,
        "the header is not the block",
    ),
    (
        "signatures no longer required",
        lambda h, b, _s: (h.replace(b"require_signatures = true", b"require_signatures = false"), b),
        1,
        "the header",
    ),
    ("a block deleted", lambda h, b, _s: (h, b[:4] + b[5:]), 5, "out of order"),
    ("two blocks swapped", lambda h, b, _s: (h, [*b[:3], b[4], b[3], *b[5:]]), 4, "out of order"),
    ("a block duplicated", lambda h, b, _s: (h, [*b[:6], b[5], *b[6:]]), 7, "out of order"),
    (
        "a seq renumbered",
        _set(6, lambda x: recrc(x.replace(b"000006", b"000007").replace(b"seq = 6", b"seq = 7"))),
        6,
        "out of order",
    ),
    (
        "a trailer's seq changed",
        _set(6, lambda x: x.replace(b"end of event 000006", b"end of event 000007")),
        6,
        "out of order",
    ),
    ("a prev link rewritten", _set(7, lambda x: edit(x, prev_of(x), b"sha256:" + b"0" * 64)), 7, "chained to"),
    ("truncated mid-block", lambda h, b, _s: (h, [*b[:-1], b[-1][:40]]), 9, "torn"),
    ("the last byte cut", lambda h, b, _s: (h, [*b[:-1], b[-1][:-1]]), 9, "last byte is missing"),
    (
        "forged sign-off, valid crc and prev, unsigned",
        lambda h, b, _s: (h, [*b, forged(10, sha(b[-1]))]),
        10,
        "unsigned event by bob",
    ),
    ("forged block with a bad link", lambda h, b, _s: (h, [*b, forged(10, b"sha256:" + b"1" * 64)]), 10, "chained to"),
    (
        "re-signed with a key not allowed",
        resigned_by_mallory,
        4,
        "does not list",
    ),
    (
        "re-signed by the operator as bob",
        lambda h, b, s: (h, [*b[:3], resign(b[3], s["alice"]), *b[4:]]),
        4,
        "lists for the operator",
    ),
    ("a signature stripped", _set(4, strip_sig), 4, "unsigned event by bob"),
    (
        "a signature moved to another block",
        lambda h, b, _s: (h, [*b[:4], move_sig(b[7], b[4]), *b[5:]]),
        5,
        "does not match the bytes",
    ),
    ("garbage appended", lambda h, b, _s: (h, [*b, b"\n[events.000010]\nseq = 10\nkind = 'override'\n"]), 10, "torn"),
    # well-checksummed, well-chained blocks this cockpit cannot read: named, never a traceback
    (
        "a lone surrogate escaped",
        lambda h, b, _s: (h, [*b, hostile(10, sha(b[-1]), b'note = "a\\ud800b"\n')]),
        10,
        "unreadable event",
    ),
    (
        "invalid UTF-8 bytes",
        lambda h, b, _s: (h, [*b, hostile(10, sha(b[-1]), b'note = "a\xed\xa0\x80b"\n')]),
        10,
        "not valid UTF-8",
    ),
    (
        "a value nested 5,000 deep",
        lambda h, b, _s: (
            h,
            [*b, hostile(10, sha(b[-1]), b"[events.000010.facts]\nv = " + b"[" * 5000 + b"]" * 5000 + b"\n")],
        ),
        10,
        "unreadable event",
    ),
    (
        "facts the kind refuses",
        lambda h, b, _s: (h, [*b, hostile(10, sha(b[-1]), b"[events.000010.facts]\nreachable = 'maybe'\n")]),
        10,
        "not a valid event",
    ),
]


@dataclass(frozen=True)
class Tampered:
    """The signed log's copy with one of :data:`TAMPERS` applied."""

    name: str
    target: Path
    seq: int  # the seq verify must name
    why: str  # words its reason must hold


@pytest.fixture(params=TAMPERS, ids=[t[0] for t in TAMPERS])
def tampered(
    request: pytest.FixtureRequest, signed_log: tuple[Path, Path, dict[str, Signer]], tmp_path: Path
) -> Tampered:
    name, tamper, seq, why = request.param
    path, _allowed, signers = signed_log
    return Tampered(name, write_tampered(path, tamper, signers, tmp_path), seq, why)


def test_the_untouched_log_verifies_and_ssh_keygen_agrees(
    signed_log: tuple[Path, Path, dict[str, Signer]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, allowed, _ = signed_log
    status, out = verify(path, capsys)
    assert status == 0, out
    assert "chain: ok" in out and "signatures: 9 valid, 0 unsigned, 0 invalid" in out
    log = read_session(path)
    assert f"head 9:{log.chain.head}" in out  # as --head takes it back
    # the head an export printed pins the log: still reached when nothing was cut
    assert verify(path, capsys, "--head", f"9:{log.chain.head}")[0] == 0
    # ssh-keygen checks bob's sign-off on its own, from the bytes and signature cockpit dumps
    status, out = verify(path, capsys, "--dump-seq", "4", "--out", str(tmp_path / "dump"))
    assert status == 0 and "ssh-keygen -Y verify" in out
    data, sig = tmp_path / "dump" / "event-4.data", tmp_path / "dump" / "event-4.sig"
    good = subprocess.run(
        ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "bob", "-n", "cockpit-changelog", "-s", str(sig)],
        input=data.read_bytes(),
        capture_output=True,
    )
    assert good.returncode == 0 and b'Good "cockpit-changelog" signature for bob' in good.stdout, good.stderr
    # and refuses it for another principal, or for bytes changed by one character
    for principal, payload in (("alice", data.read_bytes()), ("bob", data.read_bytes().replace(b"right", b"wrong"))):
        bad = subprocess.run(
            [
                "ssh-keygen",
                "-Y",
                "verify",
                "-f",
                str(allowed),
                "-I",
                principal,
                "-n",
                "cockpit-changelog",
                "-s",
                str(sig),
            ],
            input=payload,
            capture_output=True,
        )
        assert bad.returncode != 0


def test_every_tamper_is_caught_at_the_seq_it_touched(
    signed_log: tuple[Path, Path, dict[str, Signer]], capsys: pytest.CaptureFixture[str], tampered: Tampered
) -> None:
    path = signed_log[0]
    name, target, seq, why = tampered.name, tampered.target, tampered.seq, tampered.why
    assert target.read_bytes() != path.read_bytes()
    status, out = verify(target, capsys)
    assert status == 1, (name, out)
    first = re.search(r"FAILED at seq (\d+): (.*)", out)
    assert first is not None, out
    assert int(first.group(1)) == seq, (name, out)
    assert why in first.group(2), (name, out)


def test_truncation_at_a_block_boundary_is_caught_by_the_head_an_export_printed(
    signed_log: tuple[Path, Path, dict[str, Signer]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, _, _ = signed_log
    head = read_session(path).chain.head
    header, original = blocks(path.read_bytes())
    target = tmp_path / path.name
    target.write_bytes(header + b"".join(original[:-2]))
    status, out = verify(target, capsys, "--head", f"9:{head}")
    assert status == 1 and "FAILED at seq 8: the log ends at seq 7, before seq 9" in out, out
    # a log rewritten after the anchor: every link recomputed, the anchored block no longer the same
    status, out = verify(path, capsys, "--head", f"9:sha256:{'2' * 64}")
    assert status == 1 and "FAILED at seq 9: not the block the anchor names" in out


def test_bad_input_is_exit_2(
    signed_log: tuple[Path, Path, dict[str, Signer]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, _, _ = signed_log
    assert verify(tmp_path / "nope.toml", capsys)[0] == 2
    assert verify(path, capsys, "--head", "nonsense")[0] == 2
    assert verify(path, capsys, "--dump-seq", "4")[0] == 2
    assert verify(path, capsys, "--allowed-signers", str(tmp_path / "missing"))[0] == 2


def test_a_damaged_log_stops_appends_until_a_person_repairs_it(
    signed_log: tuple[Path, Path, dict[str, Signer]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, allowed, _ = signed_log
    header, original = blocks(path.read_bytes())
    target = tmp_path / path.name
    target.write_bytes(
        header + b"".join([*original[:6], edit(original[6], b"580 in", b"590 in", crc=False), *original[7:]])
    )
    with pytest.raises(JournalDamaged, match="event 7") as info:
        Journal.open_for_append(target, "alice")
    assert info.value.seq == 7
    bob_key = allowed.parent / "bob"
    status, out = verify(target, capsys, "--repair", "--as", "bob", "--signing-key", str(bob_key))
    assert status == 0 and "seq 7-9" in out and "moved aside" in out, out
    kept = list((tmp_path / "CHG-TAMPER").glob("damaged-*.bin"))
    assert len(kept) == 1 and kept[0].read_bytes().startswith(b"\n[events.000007]")
    log = read_session(target)
    assert [e.seq for e in log.events] == [1, 2, 3, 4, 5, 6, 10]  # 7-9 are never used again
    assert log.events[-1].actor == "bob" and "log repaired by bob" in (log.events[-1].note or "")
    status, out = verify(target, capsys)
    assert status == 0 and "signatures: 7 valid" in out, out  # 1-6 (the probes too) and the repair
    with Journal.open_for_append(target, "alice") as journal:
        assert journal.append(EventKind.NOTE, note="carrying on").seq == 11


def test_verification_spread_over_processes_says_the_same(
    signed_log: tuple[Path, Path, dict[str, Signer]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cockpit.changelog import chain
    from cockpit.changelog.sshsig import read_allowed_signers
    from cockpit.changelog.verify import verify_file

    path, allowed, signers = signed_log
    target = write_tampered(path, resigned_by_mallory, signers, tmp_path)
    serial = verify_file(target, read_allowed_signers(allowed))[0]
    monkeypatch.setattr(chain, "PARALLEL_FROM", 1)  # the same log, through the process pool
    parallel = verify_file(target, read_allowed_signers(allowed))[0]
    assert parallel.failures == serial.failures and parallel.signed == serial.signed
    assert serial.first_failure is not None and serial.first_failure[0] == 4


def _note_seqs(seen: list[int], _header: object, events: list[Event]) -> None:
    seen.extend(e.seq for e in events)


@pytest.mark.slow  # 30 tampers, each read by three process pools; one log spread: test above
def test_a_log_read_in_ranges_by_several_processes_says_what_one_read_says(
    signed_log: tuple[Path, Path, dict[str, Signer]], monkeypatch: pytest.MonkeyPatch, tampered: Tampered
) -> None:
    """cockpit verify reads a big log in ranges, one per core, each from the link and seq the
    one before it ends with: on every tamper it names what the one read names."""
    import os

    from cockpit.changelog import reader
    from cockpit.changelog import verify as verify_module
    from cockpit.changelog.sshsig import read_allowed_signers

    chunk = reader.SCAN_CHUNK_BYTES
    allowed = signed_log[1]
    name, target, seq, why = tampered.name, tampered.target, tampered.seq, tampered.why
    signed_by = read_allowed_signers(allowed)
    serial = verify_module.verify_file(target, signed_by)[0]
    monkeypatch.setattr(verify_module, "SPREAD_FROM_BYTES", 1)
    for cores in (2, 3, 5):
        monkeypatch.setattr(os, "cpu_count", lambda n=cores: n)
        spread = verify_module.verify_file(target, signed_by)[0]
        assert spread == serial, (name, cores, spread.summary(), serial.summary())
        assert verify_module.verify_file(target, signed_by, keep_blocks=False)[0] == serial, (name, cores)
        # read once, in order, for a fold, with the signatures checked by workers chunk by chunk
        monkeypatch.setattr(reader, "SCAN_CHUNK_BYTES", 700)
        seen: list[int] = []
        folding = verify_module.verify_file(target, signed_by, fold=functools.partial(_note_seqs, seen))
        monkeypatch.setattr(reader, "SCAN_CHUNK_BYTES", chunk)
        assert folding[0] == serial, (name, cores, folding[0].summary(), serial.summary())
        assert seen == sorted(seen) and (serial.chain is None or len(seen) == serial.events), (name, seen)
    assert serial.first_failure is not None and serial.first_failure[0] == seq and why in serial.first_failure[1]


def test_a_key_held_by_the_ssh_agent_signs_what_ssh_keygen_accepts(tmp_path: Path) -> None:
    if shutil.which("ssh-agent") is None or shutil.which("ssh-add") is None:
        pytest.skip("needs OpenSSH's ssh-agent")
    import os
    import time

    from cockpit.changelog.sshsig import armor, signer_from_agent

    key = keygen(tmp_path, "bob")
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True, capture_output=True)
        signer = signer_from_agent("bob", str(sock))
        message = b"\n[events.000004]\nseq = 4\n"
        (tmp_path / "msg.sig").write_text(armor(signer.sign(message)))
        allowed = tmp_path / "allowed_signers"
        allowed.write_text("bob " + " ".join(key.with_suffix(".pub").read_text().split()[:2]) + "\n")
        sig = str(tmp_path / "msg.sig")
        checked = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "bob", "-n", "cockpit-changelog", "-s", sig],
            input=message,
            capture_output=True,
        )
        assert checked.returncode == 0, checked.stderr
    finally:
        agent.terminate()  # the agent this test started, by its own handle
        agent.wait(timeout=10)


def test_without_libsodium_cryptography_checks_the_same_signatures(
    signed_log: tuple[Path, Path, dict[str, Signer]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    from cockpit.changelog import sshsig
    from cockpit.changelog.verify import verify_file

    path, allowed, signers = signed_log
    target = write_tampered(path, resigned_by_mallory, signers, tmp_path)
    signed_by = sshsig.read_allowed_signers(allowed)
    with_nacl = [verify_file(p, signed_by)[0] for p in (path, target)]
    monkeypatch.setattr(sshsig, "_KEY_CACHE", {})
    monkeypatch.setitem(sys.modules, "nacl.bindings", None)  # import fails: the fallback is taken
    assert sshsig._Ed25519(b"\x01" * 32)._nacl is None
    without = [verify_file(p, signed_by)[0] for p in (path, target)]
    assert without == with_nacl and without[0].ok and without[1].first_failure is not None
    assert without[1].first_failure[0] == 4 and "does not list" in without[1].first_failure[1]


def test_the_fast_path_for_ed25519_blobs_says_what_the_general_one_says(
    signed_log: tuple[Path, Path, dict[str, Signer]], monkeypatch: pytest.MonkeyPatch, tampered: Tampered
) -> None:
    from cockpit.changelog import sshsig
    from cockpit.changelog.verify import verify_file

    path, allowed, _signers = signed_log
    name, target = tampered.name, tampered.target
    signed_by = sshsig.read_allowed_signers(allowed)
    fast = [verify_file(p, signed_by)[0] for p in (path, target)]
    monkeypatch.setattr(sshsig, "_ed25519_prefix", lambda _key: b"")  # no blob is of the fast form
    general = [verify_file(p, signed_by)[0] for p in (path, target)]
    assert fast == general, name
    assert fast[0].ok and len(fast[0].signed) == 9


def test_the_direct_libsodium_call_answers_as_the_binding_does() -> None:
    """_Ed25519 calls libsodium's crypto_sign_open through PyNaCl's cffi library with a scratch
    buffer: valid, flipped signature bits, a flipped message byte, a message past the scratch
    buffer (the binding's path) and a short signature get the binding's answers."""
    from nacl.bindings import crypto_sign, crypto_sign_keypair, crypto_sign_open
    from nacl.exceptions import BadSignatureError

    from cockpit.changelog import sshsig

    def binding_says(signature: bytes, message: bytes, public: bytes) -> bool:
        try:
            crypto_sign_open(signature + message, public)
        except (BadSignatureError, ValueError):
            return False
        return True

    public, secret = crypto_sign_keypair()
    key = sshsig._Ed25519(public)
    assert key._nacl is not None
    cases = []
    for size in (0, 1, 96, 100, sshsig._SCRATCH - 64, sshsig._SCRATCH - 63, 5000):
        message = bytes(range(256)) * (size // 256) + bytes(size % 256)
        signature = crypto_sign(message, secret)[:64]
        flipped = bytes([signature[0] ^ 1]) + signature[1:]
        other = bytes([message[0] ^ 1]) + message[1:] if message else b"x"
        cases += [(signature, message), (flipped, message), (signature, other), (signature[:63], message)]
    answers = [key.check(signature, message) for signature, message in cases]
    assert answers == [binding_says(signature, message, public) for signature, message in cases]
    assert answers.count(True) == 7  # each size's own signature, nothing else


def _spread_everything(monkeypatch: pytest.MonkeyPatch, cores: int) -> None:
    """Every log, however small, verified as a big one is on ``cores`` cores: its signatures
    checked by workers forked from its bytes before it is parsed (:mod:`.spread`)."""
    import os

    from cockpit.changelog import spread
    from cockpit.changelog import verify as verify_module

    monkeypatch.setattr(spread, "SPREAD_FROM_BYTES", 1)
    monkeypatch.setattr(verify_module, "SPREAD_FROM_BYTES", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)


@pytest.mark.slow  # a process pool per tamper
def test_cockpit_verify_with_its_workers_started_first_says_what_one_process_says(
    tampered: Tampered, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command starts the signature checks from the file's bytes before it reads the
    log: on every tamper its output and exit status are those of one process doing all."""
    _spread_everything(monkeypatch, 1)
    alone = verify(tampered.target, capsys)
    _spread_everything(monkeypatch, 2)
    spread = verify(tampered.target, capsys)
    assert spread == alone, tampered.name
    assert alone[0] == 1 and f"seq {tampered.seq}" in alone[1], (tampered.name, alone)


def _sig_table(block: bytes, new: Callable[[bytes], bytes]) -> bytes:
    """The block with its signature table (the lines after the signed bytes) rewritten by
    ``new``, its checksum made to match: the signed bytes and the blob are unchanged."""
    at = block.rindex(b"\n[events.")  # the last table: the signature's (a probe's facts come before)
    trailer = block.rindex(b"# end of event ")
    return recrc(block[:at] + new(block[at:trailer]) + block[trailer:])


def _signed_again(block: bytes, signer: Signer) -> bytes:
    """:func:`resign` for a block with sub-tables too: everything before its signature table signed."""
    at = block.rindex(b"\n[events.")
    blob = base64.b64encode(signer.sign(block[:at])).decode()
    return recrc(block[:at] + re.sub(rb'sshsig = "[^"]*"', f'sshsig = "{blob}"'.encode(), block[at:]))


#: signature tables as TOML reads them the same but the journal never writes them: a worker
#: does not take them, the reader checks each itself (name, rewrite)
OTHERWISE_WRITTEN: list[tuple[str, Callable[[bytes], bytes]]] = [
    ("a comment after the blob", lambda t: t.replace(b'"\n', b'" # checked\n')),
    ("a comment line after it", lambda t: t + b"# a line after the blob\n"),
    ("no spaces around =", lambda t: t.replace(b"sshsig = ", b"sshsig=")),
    ("a literal string", lambda t: t.replace(b'sshsig = "', b"sshsig = '").replace(b'"\n', b"'\n")),
    ("a blank line before the trailer", lambda t: t + b"\n"),
]


def _rewritten(b: list[bytes], s: dict[str, Signer], mallory: bool) -> list[bytes]:
    """Events 2-6 with their signature tables written otherwise (:data:`OTHERWISE_WRITTEN`),
    each block after them chained and signed again (by its own signer; bob's sign-off, 4,
    by mallory when ``mallory``)."""
    out = [b[0]]
    for n, block in enumerate(b[1:], 2):
        block = recrc(block.replace(prev_of(block), sha(out[-1]), 1))
        actor = re.search(rb'actor = "([^"]+)"', block)
        assert actor is not None
        by = "mallory" if mallory and n == 4 else "bob" if actor.group(1) == b"bob" else "alice"
        block = _signed_again(block, s[by])
        if 2 <= n <= 6:
            block = _sig_table(block, OTHERWISE_WRITTEN[n - 2][1])
        out.append(block)
    return out


@pytest.mark.parametrize("mallory", [False, True], ids=["signed as written", "re-signed by mallory"])
def test_a_signature_table_written_otherwise_is_checked_all_the_same(
    signed_log: tuple[Path, Path, dict[str, Signer]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    mallory: bool,
) -> None:
    """A block whose signature table is not where and as the journal writes it is never
    answered for by a worker: the reader checks it, so a valid signature still counts and
    one by a key not allowed still fails at its seq, spread over processes or not."""
    path, _allowed, signers = signed_log
    target = write_tampered(path, lambda h, b, s: (h, _rewritten(b, s, mallory)), signers, tmp_path)
    _spread_everything(monkeypatch, 1)
    alone = verify(target, capsys)
    _spread_everything(monkeypatch, 2)
    assert verify(target, capsys) == alone
    if mallory:
        assert alone[0] == 1 and "FAILED at seq 4" in alone[1] and "does not list" in alone[1], alone
    else:
        assert alone[0] == 0 and "signatures: 9 valid, 0 unsigned, 0 invalid" in alone[1], alone


def test_a_workers_answer_counts_only_for_the_bytes_the_reader_read(
    signed_log: tuple[Path, Path, dict[str, Signer]],
) -> None:
    """settle takes a worker's answer for a block only when it names the signed bytes the
    reader's own reading found: answers about other bytes (a worker's rows shifted by a
    byte, each claiming a valid signature) are not taken, the reader checks each block
    itself, and says what one process checking everything says."""
    from concurrent.futures import Future

    from cockpit.changelog.chain import SignatureTally, sig_marker
    from cockpit.changelog.spread import SpreadChecks
    from cockpit.changelog.sshsig import AllowedSigner, Checker, read_allowed_signers

    path, allowed, _signers = signed_log
    data = path.read_bytes()
    header, bodies = blocks(data)
    deferred, jobs, pos = [], [], len(header)
    for seq, body in enumerate(bodies, 1):
        signed_end = pos + body.index(sig_marker(f"{seq:06d}"))
        sshsig = re.search(rb'sshsig = "([^"]+)"', body)
        actor = re.search(rb'actor = "([^"]+)"', body)
        assert sshsig is not None and actor is not None
        deferred.append((seq, pos, signed_end, actor.group(1).decode()))
        jobs.append((seq, pos, signed_end, sshsig.group(1).decode(), actor.group(1).decode()))
        pos += len(body)
    signers = read_allowed_signers(allowed)
    one_process = SignatureTally()
    one_process.take(Checker(signers, "alice").check_many(jobs, memoryview(data)), "alice")
    assert len(one_process.valid) == 9 and not one_process.failures
    # the same log with alice's key taken off the list: her blocks no longer count
    only_bob = [entry for entry in signers if "bob" in entry.principals]
    refused = SignatureTally()
    refused.take(Checker(only_bob, "alice").check_many(jobs, memoryview(data)), "alice")
    assert refused.failures and len(refused.valid) < 9

    def settled(spread: SpreadChecks, allowed_now: list[AllowedSigner]) -> SignatureTally:
        tally = SignatureTally()
        spread.settle(deferred, allowed_now, "alice", tally)
        return tally

    with SpreadChecks(data, len(header), 2) as spread:
        assert settled(spread, signers) == one_process
        assert settled(spread, only_bob) == refused
        answered = [part.result() for part in spread._parts]
        for at, (keys, rows) in enumerate(answered):
            shifted: Future[object] = Future()
            shifted.set_result(
                (keys, [(seq, start, end + 1, 0 if keys else -1, "") for seq, start, end, _k, _w in rows])
            )
            spread._parts[at] = shifted  # type: ignore[assignment]  # a worker answering for other bytes
        assert settled(spread, signers) == one_process
        assert settled(spread, only_bob) == refused


def test_a_blob_read_from_its_letters_says_what_the_decoded_blob_says(
    signed_log: tuple[Path, Path, dict[str, Signer]],
) -> None:
    """Checker.key_of_text decodes only a known key's signature letters: for the blob as
    written and for each letter changed (in the part every signature by the key shares, in
    the signature, its padding), and for letters not base64, it says what key_of says of
    the whole blob decoded (or that it is not base64)."""
    import binascii

    from cockpit.changelog.chain import sig_marker
    from cockpit.changelog.sshsig import Checker

    _header, bodies = blocks(signed_log[0].read_bytes())
    body = bodies[3]  # bob's sign-off
    found = re.search(rb'sshsig = "([^"]+)"', body)
    assert found is not None
    text = found.group(1)
    message = body[: body.index(sig_marker("000004"))]
    texts = [text]
    for at in (0, 40, 163, 164, 200, 249, 250, 251):
        for letter in (b"A", b"/", b"=", b"*"):
            texts.append(text[:at] + letter + text[at + 1 :])
    texts += [text[:-2] + b"A=", text[:-1], text + b"AAAA", text[:-4]]

    def whole(t: bytes) -> tuple[bytes | None, str]:
        try:
            blob = base64.b64decode(t, validate=True)
        except binascii.Error:
            return None, "signature is not base64"
        return Checker(None).key_of(message, blob)

    from cockpit.changelog import blocks as blocks_module
    from cockpit.changelog import spread

    assert spread._HEADER_END == blocks_module.HEADER_END  # the light module's copy of the format
    checker = Checker(None)
    assert checker.key_of_text(message, text)[0] is not None  # the key is known from here on
    said = [checker.key_of_text(message, t) for t in texts]
    assert said == [whole(t) for t in texts]
    assert said[0][0] is not None and sum(key is not None for key, _ in said) < len(said) // 2
