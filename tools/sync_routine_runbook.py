"""Write checklists/driver-upgrade.toml: the r580 runbook's parameters, facts, waves,
triggers, arm stage, node stages and rollback, copied verbatim, inside the routine
runbook's own short window. Run it from the repository root after changing any of those
in driver-upgrade-r580.toml; tests/core/test_routine_runbook.py holds the copies equal."""

import re
from pathlib import Path

SOURCE = Path("checklists/driver-upgrade-r580.toml")
TARGET = Path("checklists/driver-upgrade.toml")
BANNER = "# " + "-" * 75 + "\n"

lines = SOURCE.read_text().split("\n")
#: where each top-level table or array of tables starts
starts = [n for n, line in enumerate(lines) if re.match(r"^\[\[?[a-z]", line)]
sections = [(lines[n], n, starts[k + 1] if k + 1 < len(starts) else len(lines)) for k, n in enumerate(starts)]


def text(first: int, end: int) -> str:
    """The section's lines, without the banner comments that introduce the next one."""
    chunk = lines[first:end]
    while chunk and (chunk[-1].startswith("#") or not chunk[-1]):
        chunk.pop()
    return "\n".join(chunk) + "\n"


def stage_meta(first: int, end: int) -> tuple[str | None, str | None]:
    sid = scope = None
    for line in lines[first:end]:
        if sid is None and (m := re.match(r'^id = "([^"]+)"', line)):
            sid = m.group(1)
        if m := re.match(r'^scope = "([^"]+)"', line):
            scope = m.group(1)
    return sid, scope


#: top-level keys before the first table (``backends = [...]``), with the comment block above
#: them: they go before the routine runbook's own [runbook] table
top = lines[: starts[0]]
keys = [n for n, line in enumerate(top) if re.match(r"^[a-z_]+ = ", line)]
top_keys = ""
if keys:
    begin = keys[0]
    while begin > 0 and top[begin - 1].startswith("#"):
        begin -= 1
    top_keys = "\n".join(top[begin : keys[-1] + 1]) + "\n\n"

params: list[str] = []
facts: list[str] = []
triggers: list[str] = []
node_stages: list[str] = []
waves = arm = rollback = ""
for head, first, end in sections:
    if head.startswith("[parameters."):
        params.append(text(first, end))
    elif head.startswith("[facts."):
        facts.append(text(first, end))
    elif head.startswith("[waves]"):
        waves = text(first, end)
    elif head.startswith("[[triggers]]"):
        triggers.append(text(first, end))
    elif head.startswith("[[stages]]"):
        sid, scope = stage_meta(first, end)
        if scope == "node":
            node_stages.append(text(first, end))
        elif sid == "arm":
            arm = text(first, end)
    elif head.startswith("[rollback]"):
        rollback = text(first, end)

HEAD = '''# Routine NVIDIA driver branch change (canary, second node, waves).
#
# For planned branch moves: set target_branch, driver_version (and driver_stream on RHEL),
# the flavour, and the smoke image. The node stages, the rollback triggers and the rollback
# are the same as the incident runbook driver-upgrade-r580's, copied verbatim (TOML has no
# includes; a test holds the two copies equal); only the window stages differ: no evidence
# freeze, compatibility or path stages, which belong to the cu130 incident the r580
# runbook was written for. Check it with `cockpit check driver-upgrade`.
#
# Commands are templates: {name} is a parameter or a node fact, always shell-quoted when
# filled, never inside quotes the command writes; {{ and }} are literal braces.

[runbook]
id = "driver-upgrade"
title = "Routine driver branch change (canary, second node, waves)"
version = "1"
description = """
Moves nodes to a target driver branch one at a time with the rollback triggers armed \\
beforehand: the same drain, record, pre-change gate, lockstep upgrade, reboot, smoke and \\
expand as the incident runbook, with a short window around them."""

'''

PREFLIGHT = """[[stages]]
id = "preflight"
title = "Confirm the preconditions of the branch change"
scope = "window"
description = "Still a production change: the window, the GPUs in scope and the way back are agreed first."

  [[stages.items]]
  id = "gpu-models-supported"
  text = "The target driver branch supports every GPU model in scope"
  verify = "signoff"
  description = "Check against NVIDIA's driver and CUDA architecture support matrix."

  [[stages.items]]
  id = "workloads-tested"
  text = "The workloads that run on these nodes were tested on the target branch"
  verify = "signoff"

  [[stages.items]]
  id = "drain-safe"
  text = "Nodes can be drained or cordoned without interrupting protected workloads"
  verify = "signoff"

  [[stages.items]]
  id = "window-approved"
  text = "The maintenance window is approved; reboots happen only inside it"
  verify = "signoff"

"""

AFTER = """[[stages]]
id = "decision"
title = "Decision record after the observation period"
scope = "window"

  [[stages.items]]
  id = "workloads-pass"
  text = "The workloads pass on the upgraded nodes"
  note_required = true

  [[stages.items]]
  id = "outcome"
  text = "Outcome: keep the upgraded nodes or roll back"
  note_required = true

  [[stages.items]]
  id = "outcome-signed"
  text = "The outcome is signed off by a second person"
  verify = "signoff"

[[stages]]
id = "closing"
title = "Closing checklist"
scope = "window"

  [[stages.items]]
  id = "trigger-written"
  text = "The rollback triggers were written down and armed"
  verify = "check"
  check = "triggers_armed"

  [[stages.items]]
  id = "driver-branch-recorded"
  text = "The new driver branch is recorded in the inventory of record"
  note_required = true

"""

DECISION = """[decision]
outcomes = ["keep-upgraded-path", "roll-back"]
"""

parts = [
    HEAD.replace("\n[runbook]\n", "\n" + top_keys + "[runbook]\n", 1),
    BANNER + "# parameters (set with --param name=value)\n\n" + "\n".join(params),
    "\n".join(facts),
    waves,
    BANNER + '# rollback triggers: reviewed and armed (stage "arm") before any node changes\n\n' + "\n".join(triggers),
    BANNER + "# window stages before any node changes\n\n" + PREFLIGHT + arm,
    BANNER + "# node stages, per node in wave order (the same as driver-upgrade-r580's)\n\n" + "\n".join(node_stages),
    BANNER + "# window stages after the node stages\n\n" + AFTER,
    BANNER + "\n" + rollback,
    DECISION,
]
out = re.sub(r"\n{3,}", "\n\n", "\n".join(parts))
TARGET.write_text(out)
print(f"{TARGET}: {len(out.splitlines())} lines")
