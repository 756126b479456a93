"""Checking a change log's integrity: its hash chain (:mod:`.chain`) and every signature
(:mod:`.sshsig`), block by block, naming the first seq that fails and why.

What a signature covers, exactly: the block's *signed bytes*, from its leading newline
through the last line of the event's own tables (``[events.NNNNNN]`` and its sub-tables,
``prev`` included), i.e. everything the CRC covers except the ``[events.NNNNNN.sig]``
table that follows. ``prev`` binds a signed event to the whole history before it.

Only events a person wrote are signed; the cockpit's own (probes, automatic triggers)
are held by the chain alone. A chain can be recomputed by whoever can rewrite the file,
so the head an export printed (``--head SEQ:sha256:...``) is what proves a log was not
cut or rewritten after that ticket, and signatures are what prove who wrote an event.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.changelog.blocks import JournalDamaged, parse_header
from cockpit.changelog.chain import BlockMeta, ChainReport, SignatureTally, digest
from cockpit.changelog.reader import SESSION_MAX_BYTES, SessionLog, parse_session_bytes, session_signers
from cockpit.changelog.sshsig import AllowedSigner, armor, read_allowed_signers
from cockpit.errors import BadInput, read_user_file


@dataclass(frozen=True)
class Verification:
    """The verdict on one change log."""

    chain: ChainReport | None  # None when a damaged block stopped the read
    #: seq -> the principal whose allowed key validly signed it (the fold's input for sign-offs)
    signed: dict[int, str] = field(default_factory=dict)
    unsigned: int = 0  # events by a person without a signature
    invalid: int = 0
    failures: tuple[tuple[int, str], ...] = ()  # (seq, why), in seq order
    signers_checked: bool = False  # an allowed_signers file was given
    events: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures and self.chain is not None and self.chain.chained

    @property
    def first_failure(self) -> tuple[int, str] | None:
        return self.failures[0] if self.failures else None

    def chain_words(self) -> str:
        if self.chain is None:  # a damaged block stopped the read: that is where the chain ends
            seq, why = self.failures[0]
            return f"chain: BROKEN at seq {seq}: {why}"
        return self.chain.describe()

    def signature_words(self) -> str:
        whose = "" if self.signers_checked else " (signers not checked: no allowed_signers)"
        return f"signatures: {len(self.signed)} valid, {self.unsigned} unsigned, {self.invalid} invalid{whose}"

    last_seq: int = 0

    def head_words(self) -> str:
        """The head as ``--head`` takes it back: ``SEQ:sha256:...``."""
        return f"head {self.last_seq}:{self.chain.head}" if self.chain is not None else "head unknown (damaged)"

    def summary(self) -> str:
        """One line: chain, signatures, head (the first line of exports, replay and review)."""
        line = f"{self.chain_words()}; {self.signature_words()}; {self.head_words()}"
        if self.failures and self.chain is not None:
            seq, why = self.failures[0]
            line += f"; FAILED at seq {seq}: {why}"
        return line


def verify_log(
    log: SessionLog, data: bytes, allowed: list[AllowedSigner] | None, anchor: tuple[int, str] | None = None
) -> Verification:
    """Check the chain and every signature of ``log`` (read from ``data``)."""
    failures: list[tuple[int, str]] = []
    if log.chain.broken_at is not None:
        failures.append((log.chain.broken_at, log.chain.why or "chain broken"))
    tally = SignatureTally()
    header = log.header
    tally.add(log.events, log.blocks, data, 0, allowed, require=header.require_signatures, operator=header.operator)
    failures.extend(tally.failures)
    # a complete block that is not a readable event: its bytes are as written (the chain
    # went through it) but nothing in it can be checked or folded
    failures.extend((seq, f"unreadable event, left out of the fold: {why}") for seq, why in log.unreadable)
    signed, unsigned, invalid = tally.valid, tally.unsigned, tally.invalid
    view = memoryview(data)
    if log.torn is not None:
        seq = max(log.torn.seq_seen, log.last_seq + 1)
        failures.append((seq, f"{log.torn.describe()}: not a complete block"))
    if anchor is not None:
        failures.extend(_check_anchor(anchor, log, view))
    return Verification(
        chain=log.chain,
        signed=signed,
        unsigned=unsigned,
        invalid=invalid,
        failures=tuple(sorted(failures, key=lambda f: f[0])),
        signers_checked=allowed is not None,
        events=len(log.events),
        last_seq=log.last_seq,
    )


def _check_anchor(anchor: tuple[int, str], log: SessionLog, view: memoryview) -> list[tuple[int, str]]:
    seq, want = anchor
    if seq > log.last_seq:
        return [(log.last_seq + 1, f"the log ends at seq {log.last_seq}, before seq {seq} the anchor names (cut)")]
    block = next((b for b in log.blocks if b.seq == seq), None)
    if block is None:
        return [(seq, f"seq {seq} the anchor names is not in the log")]
    if digest(view[block.start : block.end]) != want:
        return [(seq, "not the block the anchor names (rewritten after it was recorded)")]
    return []


def parse_anchor(text: str) -> tuple[int, str]:
    match = re.fullmatch(r"(\d+):(sha256:[0-9a-f]{64})", text.strip())
    if match is None:
        raise BadInput(f"--head {text!r}: expected SEQ:sha256:HEX (as an export prints it)")
    return int(match.group(1)), match.group(2)


def verify_file(
    path: str | os.PathLike[str],
    allowed: list[AllowedSigner] | None,
    anchor: tuple[int, str] | None = None,
    *,
    signers_from_header: bool = False,
) -> tuple[Verification, SessionLog | None, bytes]:
    """Read and verify the log at ``path``; a damaged block is a failure at its seq, not an error.

    ``signers_from_header``: with no ``allowed`` given, check against the allowed_signers
    file the session recorded (read before the log is parsed: the log is read once)."""
    path = Path(path)
    data = read_user_file(path, "a session file", max_bytes=SESSION_MAX_BYTES)
    if allowed is None and signers_from_header:
        raw, _ = parse_header(data, str(path))
        recorded = raw.get("allowed_signers")
        if isinstance(recorded, str) and recorded:
            allowed = read_allowed_signers(recorded)
    try:
        log = parse_session_bytes(data, str(path), path)
    except JournalDamaged as exc:
        damaged = Verification(chain=None, failures=((exc.seq, str(exc)),), signers_checked=allowed is not None)
        return damaged, None, data
    return verify_log(log, data, allowed, anchor), log, data


def block_of(log: SessionLog, seq: int) -> BlockMeta:
    for block in log.blocks:
        if block.seq == seq:
            return block
    raise BadInput(f"--dump-seq {seq}: the log has no event {seq}")


def dump_signed(log: SessionLog, data: bytes, seq: int, out: Path) -> tuple[Path, Path | None]:
    """Write event ``seq``'s signed bytes (``event-N.data``) and, when signed, its armored
    SSHSIG (``event-N.sig``) for ``ssh-keygen -Y verify -n cockpit-changelog``."""
    block = block_of(log, seq)
    out.mkdir(parents=True, exist_ok=True)
    data_path = out / f"event-{seq}.data"
    data_path.write_bytes(data[block.start : block.signed_end])
    if block.sshsig is None:
        return data_path, None
    sig_path = out / f"event-{seq}.sig"
    sig_path.write_text(armor(base64.b64decode(block.sshsig)))
    return data_path, sig_path


def log_integrity(log: SessionLog, verification: Verification | None = None) -> str:
    """The one line exports, replay and review open with: the chain, the signatures, the head.

    Without a ``verification`` (the caller read the log without its bytes) the signatures
    are counted, not checked, and the line says so."""
    if verification is not None:
        return verification.summary()
    signed = sum(1 for block in log.blocks if block.sshsig is not None)
    line = (
        f"{log.chain.describe()}; signatures: {signed} present, not checked here (cockpit verify checks them); "
        f"head {log.last_seq}:{log.chain.head}"
    )
    if log.unreadable:
        seq, why = log.unreadable[0]
        line += f"; {len(log.unreadable)} unreadable event(s) left out, first seq {seq}: {why}"
    if log.torn is not None:
        line += f"; FAILED at seq {max(log.torn.seq_seen, log.last_seq + 1)}: {log.torn.describe()}"
    return line


def read_verified(path: str | os.PathLike[str]) -> tuple[SessionLog, Verification]:
    """Read a log once and verify it against the allowed signers its header names: what
    export and replay show in their first lines. A damaged block is :class:`JournalDamaged`."""
    path = Path(path)
    data = read_user_file(path, "a session file", max_bytes=SESSION_MAX_BYTES)
    log = parse_session_bytes(data, str(path), path)
    allowed = session_signers(log.header) if log.header.allowed_signers else None
    return log, verify_log(log, data, allowed)
