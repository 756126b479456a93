"""``not_NAME`` in a ``when``: the runbook's "else", and the container smoke it chooses per runtime."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.runbook.conditions import when_holds, when_text
from cockpit.runbook.loader import RunbookInvalid, load

SMOKES = ("container-cuda", "container-cuda-podman", "container-cuda-nerdctl", "container-cuda-by-hand")


def test_a_negated_condition_holds_where_the_plain_one_does_not() -> None:
    when = {"recorded_container_runtimes": ["podman"], "not_recorded_container_runtimes": ["docker"]}
    assert when_holds(when, {}, {"recorded_container_runtimes": ["podman"]}) is True
    assert when_holds(when, {}, {"recorded_container_runtimes": ["docker", "podman"]}) is False
    assert when_holds(when, {}, None) is None  # before the baseline: pending
    assert when_holds({"not_scheduler": "slurm"}, {"scheduler": "kubernetes"}) is True
    assert when_holds({"not_scheduler": "slurm"}, {"scheduler": "slurm"}) is False
    assert when_holds({"not_recorded_os_id": "rhel"}, {}, {}) is True  # a fact not recorded never matches
    # a parameter literally named not_... is read as itself
    assert when_holds({"not_yet": "x"}, {"not_yet": "x"}) is True
    assert when_text(when) == "recorded_container_runtimes in podman, recorded_container_runtimes not in docker"
    assert when_text({"not_scheduler": "slurm"}) == "scheduler!=slurm"


@pytest.mark.parametrize(
    ("runtimes", "chosen"),
    [
        (["docker"], "container-cuda"),
        (["docker", "podman", "nerdctl", "ctr"], "container-cuda"),
        (["podman"], "container-cuda-podman"),
        (["podman", "nerdctl"], "container-cuda-podman"),
        (["nerdctl", "ctr"], "container-cuda-nerdctl"),
        (["ctr"], "container-cuda-by-hand"),
        ([], "container-cuda-by-hand"),
    ],
)
def test_exactly_one_container_smoke_applies_per_node(runtimes: list[str], chosen: str) -> None:
    smoke = load("driver-upgrade-r580").runbook.stage("smoke")
    facts = {"recorded_container_runtimes": runtimes, "recorded_cdi_specs": []}
    applies = [i.id for i in smoke.items if i.id in SMOKES and when_holds(i.when, {}, facts)]
    assert applies == [chosen]
    commands = {i.id: i.command or "" for i in smoke.items}
    assert commands["container-cuda-podman"].startswith("podman run --rm --device nvidia.com/gpu=all --entrypoint ")
    assert commands["container-cuda-nerdctl"].startswith("nerdctl run --rm --gpus all --entrypoint python3 ")


@pytest.mark.parametrize(
    ("runtimes", "specs", "steps"),
    [
        (["docker"], [], []),
        (["podman"], [], ["cdi-refresh"]),
        (["podman"], ["/etc/cdi/nvidia.yaml"], ["cdi-refresh"]),  # once, not twice
        (["docker"], ["/var/run/cdi/nvidia.yaml"], ["cdi-refresh-specs"]),
        (["nerdctl"], ["/etc/cdi/other-vendor.yaml"], []),
    ],
)
def test_cdi_is_regenerated_where_the_node_uses_it(runtimes: list[str], specs: list[str], steps: list[str]) -> None:
    smoke = load("driver-upgrade-r580").runbook.stage("smoke")
    facts = {"recorded_container_runtimes": runtimes, "recorded_cdi_specs": specs}
    cdi = [s.id for s in smoke.steps if s.id.startswith("cdi") and when_holds(s.when, {}, facts)]
    assert cdi == steps


def test_the_checker_reads_not_names_as_the_names_they_negate(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "checklists" / "minimal-driver-upgrade.toml").read_text()
    bad = text.replace(
        'id = "baseline-recorded"', 'id = "baseline-recorded"\n  when = { not_recorded_nothing_such = "x" }', 1
    )
    path = tmp_path / "bad.toml"
    path.write_text(bad)
    with pytest.raises(RunbookInvalid) as err:
        load(str(path))
    assert "not_recorded_nothing_such" in str(err.value) and "names no recorded fact" in str(err.value)
