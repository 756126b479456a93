"""A manual item's scope: ticked per node, once per wave or once per window; the loader
takes it only on a manual item of a node stage, and the shipped runbooks use it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.runbook.loader import RunbookInvalid, load, load_runbook
from cockpit.runbook.model import ItemScope

MINIMAL = Path(__file__).resolve().parents[2] / "checklists" / "minimal-driver-upgrade.toml"


def test_the_shipped_attestations_are_per_window_or_per_wave() -> None:
    for name in ("driver-upgrade-r580", "driver-upgrade"):
        runbook = load(name).runbook
        scopes = {i.id: i.scope for s in runbook.node_stages for i in s.items}
        verify = {i.id: i.verify.value for s in runbook.node_stages for i in s.items}
        assert scopes["official-procedure"] is ItemScope.WINDOW
        # what a command proves on every node is no attestation: the serve and request checks
        assert scopes["smallest-serve"] is ItemScope.NODE and verify["smallest-serve"] == "command"
        assert scopes["app-requests"] is ItemScope.NODE and verify["app-requests"] == "command"
        # a node with no docker keeps them by hand, once per window and per wave
        assert scopes["smallest-serve-by-hand"] is ItemScope.WINDOW
        assert scopes["app-requests-by-hand"] is ItemScope.WAVE
        assert scopes["baseline-workloads"] is ItemScope.WAVE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a check item is the cockpit's on every node: no scope
        ('check = "baseline_recorded"\n', 'check = "baseline_recorded"\n  scope = "wave"\n'),
        # a window stage's item is once per window already
        ('verify = "signoff"\n', 'verify = "signoff"\n  scope = "wave"\n'),
    ],
)
def test_a_scope_only_on_a_node_stage_manual_item(tmp_path: Path, old: str, new: str) -> None:
    text = MINIMAL.read_text()
    assert old in text
    bad = tmp_path / "scoped.toml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(RunbookInvalid) as caught:
        load_runbook(bad)
    assert any(
        p.field_path.endswith(".scope") and "manual item of a node stage" in p.message for p in caught.value.problems
    )
