"""The decision's outcomes come from the runbook in use: its ``[decision]`` table; else, for a
runbook with a ``decision`` window stage written before that table (the shipped r580), that
stage's four calls; else only the generic end, ``roll-back``. Never another runbook's."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_paths import EXAMPLE_RUNBOOK, REPO

from cockpit.runbook.loader import load_runbook
from cockpit.runbook.model import DEFAULT_DECISION_OUTCOMES, ROLLBACK_OUTCOME


@pytest.mark.parametrize(
    ("runbook", "outcomes"),
    [
        (REPO / "checklists" / "minimal-driver-upgrade.toml", ("roll-back",)),
        (REPO / "checklists" / "driver-upgrade-gpu-operator.toml", ("roll-back",)),
        (REPO / "checklists" / "driver-upgrade.toml", ("keep-upgraded-path", "roll-back")),
        (REPO / "checklists" / "driver-upgrade-r580.toml", DEFAULT_DECISION_OUTCOMES),
        (EXAMPLE_RUNBOOK, DEFAULT_DECISION_OUTCOMES),  # a recorded session's runbook reads as it did
    ],
    ids=lambda v: v.name if isinstance(v, Path) else "",
)
def test_each_runbook_offers_its_own_outcomes(runbook: Path, outcomes: tuple[str, ...]) -> None:
    assert load_runbook(runbook).runbook.decision_outcomes == outcomes


def test_a_runbook_without_decision_offers_only_the_generic_end(tmp_path: Path) -> None:
    rb = load_runbook(REPO / "checklists" / "minimal-driver-upgrade.toml").runbook
    assert rb.decision is None and "decision" not in [s.id for s in rb.stages]
    assert rb.decision_outcomes == (ROLLBACK_OUTCOME,)
    assert not set(rb.decision_outcomes) & {"keep-isolated-path", "keep-cu129-transition"}


def test_a_decision_table_of_its_own_wins_over_a_decision_stage(tmp_path: Path) -> None:
    text = (REPO / "checklists" / "driver-upgrade-r580.toml").read_text()
    path = tmp_path / "own.toml"
    path.write_text(text + '\n[decision]\noutcomes = ["go", "no-go"]\n')
    assert load_runbook(path).runbook.decision_outcomes == ("go", "no-go")
