"""Refresh checklists/driver-upgrade.toml: the r580 runbook's parameters, facts, waves,
triggers, arm stage, node stages and rollback, copied verbatim, inside the routine
runbook's own short window (its header, its preflight, decision and closing stages and
its decision, kept as they stand in the target). Run it from the repository root after
changing any of those in driver-upgrade-r580.toml; tests/core/test_routine_runbook.py
holds the copies equal."""

import re
from pathlib import Path

SOURCE = Path("checklists/driver-upgrade-r580.toml")
TARGET = Path("checklists/driver-upgrade.toml")
BANNER = "# " + "-" * 75 + "\n"
#: the routine runbook's own window stages, before and after the node stages
OWN_BEFORE = ("preflight",)
OWN_AFTER = ("decision", "closing")


def sections(lines: list[str]) -> list[tuple[str, int, int]]:
    """Each top-level table or array of tables: its header line, first line and end."""
    starts = [n for n, line in enumerate(lines) if re.match(r"^\[\[?[a-z]", line)]
    return [(lines[n], n, starts[k + 1] if k + 1 < len(starts) else len(lines)) for k, n in enumerate(starts)]


def text(lines: list[str], first: int, end: int) -> str:
    """The section's lines, without the banner comments that introduce the next one."""
    chunk = lines[first:end]
    while chunk and (chunk[-1].startswith("#") or not chunk[-1]):
        chunk.pop()
    return "\n".join(chunk) + "\n"


def top_keys(lines: list[str]) -> tuple[int, int]:
    """Where the top-level keys before the first table (``backends = [...]``) lie, with the
    comment block above them: (first line, end); (0, 0) when there are none."""
    first_table = next(n for n, line in enumerate(lines) if re.match(r"^\[\[?[a-z]", line))
    keys = [n for n, line in enumerate(lines[:first_table]) if re.match(r"^[a-z_]+ = ", line)]
    if not keys:
        return 0, 0
    begin = keys[0]
    while begin > 0 and lines[begin - 1].startswith("#"):
        begin -= 1
    return begin, keys[-1] + 1


def stage_meta(lines: list[str], first: int, end: int) -> tuple[str | None, str | None]:
    sid = scope = None
    for line in lines[first:end]:
        if sid is None and (m := re.match(r'^id = "([^"]+)"', line)):
            sid = m.group(1)
        if m := re.match(r'^scope = "([^"]+)"', line):
            scope = m.group(1)
    return sid, scope


lines = SOURCE.read_text().split("\n")
params: list[str] = []
facts: list[str] = []
triggers: list[str] = []
node_stages: list[str] = []
waves = arm = rollback = ""
for head, first, end in sections(lines):
    if head.startswith("[parameters."):
        params.append(text(lines, first, end))
    elif head.startswith("[facts."):
        facts.append(text(lines, first, end))
    elif head.startswith("[waves]"):
        waves = text(lines, first, end)
    elif head.startswith("[[triggers]]"):
        triggers.append(text(lines, first, end))
    elif head.startswith("[[stages]]"):
        sid, scope = stage_meta(lines, first, end)
        if scope == "node":
            node_stages.append(text(lines, first, end))
        elif sid == "arm":
            arm = text(lines, first, end)
    elif head.startswith("[rollback]"):
        rollback = text(lines, first, end)

begin, stop = top_keys(lines)
TOP_KEYS = "\n".join(lines[begin:stop]) + "\n\n" if stop else ""

own = TARGET.read_text().split("\n")
begin, stop = top_keys(own)
own = own[:begin] + own[stop:]  # the copy of r580's top-level keys written last time: written anew below
own_sections = sections(own)
#: the comments and [runbook] table above the first parameter
HEAD = text(own, 0, next(first for head, first, _ in own_sections if head.startswith("[parameters.")))
own_stages = {
    stage_meta(own, first, end)[0]: text(own, first, end) for head, first, end in own_sections if head == "[[stages]]"
}
DECISION = next(text(own, first, end) for head, first, end in own_sections if head == "[decision]")

parts = [
    HEAD.replace("\n[runbook]\n", "\n" + TOP_KEYS + "[runbook]\n", 1),
    BANNER + "# parameters (set with --param name=value)\n\n" + "\n".join(params),
    "\n".join(facts),
    waves,
    BANNER + '# rollback triggers: reviewed and armed (stage "arm") before any node changes\n\n' + "\n".join(triggers),
    BANNER + "# window stages before any node changes\n\n" + "\n".join([*(own_stages[s] for s in OWN_BEFORE), arm]),
    BANNER + "# node stages, per node in wave order (the same as driver-upgrade-r580's)\n\n" + "\n".join(node_stages),
    BANNER + "# window stages after the node stages\n\n" + "\n".join(own_stages[s] for s in OWN_AFTER),
    BANNER + "\n" + rollback,
    DECISION,
]
out = re.sub(r"\n{3,}", "\n\n", "\n".join(parts))
TARGET.write_text(out)
print(f"{TARGET}: {len(out.splitlines())} lines")
