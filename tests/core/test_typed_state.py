"""The folded state keeps typed facts: no plain tables of facts in the engine or the views.

The fold stores the models the events are validated with (ProbeFacts, BaselineFacts,
NodeObservedFacts, the records of path, decision and watch); its readers use their fields.
A source scan keeps it so (a ``dict[str, Any]`` or a ``.get("...")`` on facts coming back
fails here), and an old log's facts read back from the typed state exactly as written.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from repo_paths import REPO

from cockpit.changelog.facts import BaselineFacts, GpuFacts, NodeObservedFacts, ProbeFacts, gpu_facts
from cockpit.changelog.journal import read_session
from cockpit.engine.state import NO_PROBE, recorded
from cockpit.gpu.nodestate import GPU_SETTINGS, LINK_SETTINGS
from cockpit.session.review import session_runbook
from cockpit.view.replay import Replay

SCANNED = ("cockpit/engine", "cockpit/view")
OLD_LOG = REPO / "tests" / "fixtures" / "schema1" / "demo-gpu-missing.toml"

#: The plain tables the engine and the views may keep, none of them facts: (file, text on the line, why).
ANY_TABLES_ALLOWED = (
    # the namespace exec() runs the generated slot copier in: Python's own table of names
    ("cockpit/engine/state.py", "scope: dict[str, Any] = ", "exec namespace"),
)

#: What ``.get("...")`` may be called on in the engine and the views, none of them facts.
GET_RECEIVERS_ALLOWED = {
    # the runbook's parameters (CockpitState.params, a check's or trigger's params): user input
    # whose keys are the runbook's own, each optional, so a lookup with a default is the reading
    "params",
}

_GET = re.compile(r"""([\w.\]\[)]+?)\.get\((["'])""")


def offending_lines(path: str, text: str) -> list[str]:
    """The lines of one source file that keep or read facts as plain tables."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if "dict[str, Any]" in line and not any(path == file and part in line for file, part, _ in ANY_TABLES_ALLOWED):
            found.append(f"{path}:{number}: {line.strip()}")
        for match in _GET.finditer(line):
            receiver = re.split(r"[.\[(]", match.group(1))[-1]
            if receiver not in GET_RECEIVERS_ALLOWED:
                found.append(f"{path}:{number}: {line.strip()}")
    return found


def scanned_files() -> list[Path]:
    return sorted(p for d in SCANNED for p in (REPO / d).rglob("*.py"))


def test_the_engine_and_the_views_keep_no_facts_as_plain_tables() -> None:
    files = scanned_files()
    assert len(files) > 20  # the scan reads the packages, not an empty folder
    found = [line for p in files for line in offending_lines(str(p.relative_to(REPO)), p.read_text())]
    assert found == []


def test_the_scan_finds_a_fact_read_from_a_table() -> None:
    # the scan itself can fail: each way a fact table could come back is caught
    planted = {
        'now = progress.probe.get("boot_id")': 1,
        "kmod = probe.get('kernel_module_version')": 1,
        'base = state.nodes[node].baseline.get("gpu_count")': 1,
        'x = gpus[0].get("uuid")': 1,
        "observation: dict[str, Any] = field(default_factory=dict)": 1,
        # the allowed ones stay allowed, and only where they are declared
        'want = params.get("driver_flavour")': 0,
        'reboot = state.roles.get("reboot")': 1,
        'if trigger.params.get("stage"):': 0,
        "    params: dict[str, Any]": 1,  # the runbook's parameters are typed (ParamValue)
        'scope: dict[str, Any] = {"_new": 1}': 0,  # the exec namespace stays allowed
    }
    for line, expected in planted.items():
        assert len(offending_lines("cockpit/engine/state.py", line)) == expected, line
    assert offending_lines("cockpit/view/fleet.py", 'scope: dict[str, Any] = {"_new": 1}') != []


def test_an_old_log_folds_to_typed_facts_equal_to_its_tables() -> None:
    log = read_session(OLD_LOG)
    state = Replay.for_session(log, session_runbook(log.header, OLD_LOG).runbook).final
    raw = tomllib.loads(OLD_LOG.read_text())["events"]
    latest: dict[tuple[str, str], dict[str, object]] = {}
    for _, event in sorted(raw.items()):
        latest[(event["kind"], event.get("node", ""))] = event  # a raw table of the log, read as written
    compared = 0
    for node, progress in state.nodes.items():
        assert isinstance(progress.probe, ProbeFacts) and isinstance(progress.baseline, BaselineFacts)
        assert isinstance(progress.observation, NodeObservedFacts)
        for kind, facts in (("probe", progress.probe), ("baseline-recorded", progress.baseline)):
            table = latest.get((kind, node))
            if table is None:
                assert not recorded(facts), (node, kind)
                continue
            assert facts.to_toml() == table.get("facts", {}), (node, kind)
            compared += 1
    assert compared >= 3  # both baselines and a probe
    chosen = latest[("path-chosen", "")]
    assert state.path is not None and state.path.facts.to_toml() == chosen["facts"]
    assert (state.path.seq, state.path.actor) == (chosen["seq"], chosen["actor"])


def test_gpu_facts_read_every_setting_the_checks_compare() -> None:
    # the checks read each of GPU_SETTINGS and LINK_SETTINGS off a GpuFacts by name
    assert set(GPU_SETTINGS) | set(LINK_SETTINGS) <= set(GpuFacts.model_fields)
    (gpu,) = gpu_facts([{"index": 0, "uuid": "GPU-1", "pcie_gen": 4, "pcie_width": 16, "serial": "new key"}])
    assert (gpu.key, gpu.pcie_gen, gpu.pcie_width) == ("GPU-1", 4, 16)
    # a value of another type (a hand-edited log) reads as not recorded, the rest as written
    (odd,) = gpu_facts([{"index": 1, "pcie_gen": "fast", "pcie_width": 8}])
    assert (odd.key, odd.pcie_gen, odd.pcie_width) == (1, None, 8)
    assert gpu_facts(None) == [] and not recorded(NO_PROBE)
