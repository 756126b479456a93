"""Real OpenSSH keys and a ticking clock for the signing and trust tests: keys made by
``ssh-keygen`` itself (never a key written by hand), one second a reading."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path


def keygen(folder: Path, name: str) -> Path:
    """An ed25519 key pair made by ssh-keygen, no passphrase, commented with ``name``."""
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key


def public(key: Path) -> str:
    """The public key's type and blob, as an allowed_signers line carries them."""
    return " ".join(key.with_suffix(".pub").read_text().split()[:2])


def clock() -> Callable[[], datetime]:
    """A clock that starts on 2026-08-05 22:00 UTC and moves one second each time it is read."""
    now = [datetime(2026, 8, 5, 22, 0, tzinfo=UTC)]

    def tick() -> datetime:
        now[0] += timedelta(seconds=1)
        return now[0]

    return tick
