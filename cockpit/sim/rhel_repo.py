"""NVIDIA's RHEL 9 repository as cockpit/sim/repos/rhel9 records it: every package version with
the ``nvidia-driver`` streams that carry it (packages.txt), and each stream's profiles
(modules.yaml), read once. The simulated dnf offers exactly these, so its streams, profiles
and package names are the repository's own; the real dnf reads the same two files
(tests/core/test_real_packages_dnf.py).

modules.yaml is read with a small reader of the modulemd layout that file uses (one
document per stream, ``profiles:`` mapping a profile to its ``rpms:`` list): the package
needs no YAML library for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from cockpit.sim.debcontrol import parse_stanzas
from cockpit.sim.repos import read_text


@dataclass(frozen=True)
class RpmEntry:
    """One package version of the repository, and the module streams that carry it (none: not modular)."""

    name: str
    epoch: int
    version: str
    release: str
    arch: str
    streams: tuple[str, ...]


@cache
def packages() -> tuple[RpmEntry, ...]:
    entries = []
    for stanza in parse_stanzas(read_text("rhel9/packages.txt")):
        streams = tuple(s.strip() for s in stanza.get("Stream", "").split(",") if s.strip())
        entries.append(
            RpmEntry(
                stanza["Name"],
                int(stanza.get("Epoch") or 0),
                stanza["Version"],
                stanza["Release"],
                stanza.get("Arch") or "x86_64",
                streams,
            )
        )
    return tuple(entries)


@cache
def profiles() -> dict[str, dict[str, tuple[str, ...]]]:
    """stream -> profile -> the package names it installs, as modules.yaml lists them."""
    found: dict[str, dict[str, tuple[str, ...]]] = {}
    for document in read_text("rhel9/modules.yaml").split("\n---"):
        if "document: modulemd\n" not in document:
            continue  # the modulemd-defaults document
        stream_line = re.search(r'(?m)^  stream: "?([^"\n]+)"?$', document)
        if stream_line is None:
            continue
        stream_profiles: dict[str, list[str]] = {}
        current: list[str] | None = None
        in_profiles = False
        for line in document.splitlines():
            if line == "  profiles:":
                in_profiles = True
            elif in_profiles and re.match(r"^  \S", line):
                in_profiles = False  # the next key of data: (api, artifacts, ...)
            elif in_profiles and (m := re.match(r"^    (\S+):$", line)):
                current = stream_profiles.setdefault(m.group(1), [])
            elif in_profiles and current is not None and (m := re.match(r"^      - (\S+)$", line)):
                current.append(m.group(1))
        found[stream_line.group(1)] = {p: tuple(names) for p, names in stream_profiles.items()}
    return found
