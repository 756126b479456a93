"""The shipped runbooks carry the procedure: stage order, gating, triggers, commands.

Commands are filled with the defaults and sample node facts and split like a shell
would, so every shipped command is checked to be well formed.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from cockpit.runbook.builtins import CHECKS, TRIGGER_EVALUATORS
from cockpit.runbook.loader import load, shipped_runbooks
from cockpit.runbook.model import (
    NODE_STAGE_IDS,
    Runbook,
    Scope,
    StepKind,
    TriggerMode,
    Verify,
)
from cockpit.runbook.placeholders import ParamValue, fill
from cockpit.runbook.targets import target_facts
from cockpit.runbook.waves import plan_waves

FACTS: dict[str, ParamValue] = {
    "node": "gpu01",
    "node_name": "gpu01",
    "host": "10.0.0.1",
    "change_id": "CHG-1",
    "operator": "alice",
    "recorded_driver_package": "nvidia-driver-575=575.57.08-0ubuntu1",
    "recorded_driver_version": "575.57.08",
    "recorded_boot_id": "0b7c",
    "recorded_gpu_count": 8,
    "recorded_dnf_stream": "575",  # the r580 runbook's own fact (facts.dnf_stream)
    "recorded_rejoin_busbw": "70.4869",  # ... and facts.rejoin_busbw (the re-join gate's baseline)
}


@pytest.fixture(scope="module")
def r580() -> Runbook:
    return load("driver-upgrade-r580").runbook


def commands(runbook: Runbook) -> list[str]:
    found = []
    for stage in [*runbook.stages, runbook.rollback]:
        assert stage is not None
        found += [s.run for s in stage.steps if s.run]
        found += [i.command for i in stage.items if i.command]
    return found


@pytest.mark.parametrize("stem", ["driver-upgrade", "driver-upgrade-r580", "minimal-driver-upgrade"])
def test_shipped_runbook_has_the_six_node_stages_in_order(stem: str) -> None:
    runbook = load(stem).runbook
    assert tuple(s.id for s in runbook.node_stages) == NODE_STAGE_IDS
    arm = [i for i, s in enumerate(runbook.stages) if s.arms_triggers]
    first_node = next(i for i, s in enumerate(runbook.stages) if s.scope is Scope.NODE)
    assert arm and arm[0] < first_node
    assert runbook.rollback is not None


@pytest.mark.parametrize("stem", ["driver-upgrade", "driver-upgrade-r580", "minimal-driver-upgrade"])
def test_every_command_fills_and_splits(stem: str) -> None:
    runbook = load(stem).runbook
    values: dict[str, ParamValue] = {**runbook.defaults(), **FACTS}
    values.update(target_facts(values))  # what the executor adds: the node's target set
    for template in commands(runbook):
        words = shlex.split(fill(template, values))
        while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
            words = words[1:]  # NAME=value words set the command's environment
        assert words and (
            words[0]
            in {
                "nvidia-smi",
                "curl",  # the capacity stage's requests to the canary's serving engine
                "docker",
                "podman",
                "nerdctl",
                "fuser",
                "nvidia-ctk",
                "kubectl",
                "scontrol",
                "squeue",
                "dpkg",
                "cat",
                "apt-get",
                "systemctl",
                "pgrep",
                "test",
                "mkdir",
                "apt-mark",
                "dpkg-query",
                "rpm",
                "dnf",
                "grep",
                "printf",
                "xargs",
                "find",
                "ls",
                "!",
                "env",
                "mpirun",
            }
        ), template


def test_r580_window_stages_in_order(r580: Runbook) -> None:
    assert [s.id for s in r580.opening_stages] == ["freeze", "compat", "path", "preflight", "arm"]
    assert [s.id for s in r580.closing_stages] == ["prefix-cache", "capacity", "decision", "closing"]


def test_r580_parameters(r580: Runbook) -> None:
    defaults = r580.defaults()
    assert defaults["target_branch"] == "580"
    assert defaults["driver_package"] == ""  # the node's own metapackage (cockpit.runbook.targets)
    assert defaults["scheduler"] == "kubernetes" and r580.parameters["scheduler"].choices == [
        "kubernetes",
        "slurm",
        "none",
    ]
    assert defaults["control_host"] == "control"
    assert defaults["smoke_image"] == "vllm/vllm-openai:kimi-k3"
    assert defaults["image_cuda"] == "13.0"
    assert (defaults["wave_size"], defaults["max_parallel"], defaults["reboot_timeout_s"]) == (4, 1, 600)
    assert {"drain_timeout_s", "failure_budget"} <= set(defaults)


def test_r580_waves_plan_canary_second_then_waves(r580: Runbook) -> None:
    hosts = [f"gpu{i:02d}" for i in range(1, 11)]
    plan = plan_waves(hosts, r580.waves, r580.defaults())
    assert [len(w) for w in plan] == [1, 1, 4, 4]
    assert plan[0] == ["gpu01"]


def test_r580_triggers_cover_every_evaluator_and_the_manual_ones(r580: Runbook) -> None:
    auto = {t.evaluator for t in r580.triggers if t.mode is TriggerMode.AUTO}
    # an engine's word on a node is judged only where the runbook runs through an engine
    engines = [b for b in r580.backends if b != "ssh"]
    assert auto == set(TRIGGER_EVALUATORS) - (set() if engines else {"engine_reported_failure"})
    manual = {t.id for t in r580.triggers if t.mode is TriggerMode.MANUAL}
    assert {"protected-workload-failed", "rdma-registration-broken", "inseparable-app-failure"} <= manual


def test_r580_evidence_freeze(r580: Runbook) -> None:
    freeze = r580.stage("freeze")
    runs = [s.run for s in freeze.steps]
    assert "nvidia-smi" in runs
    assert "docker image inspect {smoke_image}" in runs
    # read-only on a node that still serves: the image's CUDA from its config, no container started
    assert "docker image inspect --format '{{{{json .Config.Env}}}}' {smoke_image}" in runs
    assert not any("docker run" in (r or "") for r in runs)
    assert len(freeze.items) == 9
    assert "Container torch version and torch CUDA captured" in [i.text for i in freeze.items]
    assert [i.id for i in freeze.items if i.note_required] == [
        "vllm-source",
        "model-revision-launch",
        "torch-cuda-captured",
        "engine-init-log",
        "first-failing-line",
    ]
    # the runtime, the GPUs the driver shows and the interfaces: captured by a read-only step
    visibility = next(i for i in freeze.items if i.id == "runtime-visibility-network")
    assert visibility.verify is Verify.STEP and visibility.step == "runtime-network"
    assert "docker info && nvidia-smi -L && ip -brief address" in runs


def test_r580_compat_gate_has_four_outcomes_and_the_ceiling_note(r580: Runbook) -> None:
    compat = r580.stage("compat")
    ids = [i.id for i in compat.items]
    assert [i for i in ids if i in {"cu130-on-r575", "cu130-on-r580", "custom-cu129", "floating-image"}] == [
        "cu130-on-r575",
        "cu130-on-r580",
        "custom-cu129",
        "floating-image",
    ]
    assert "ceiling" in compat.items[0].text
    assert "r580" in compat.description and "cu129" in compat.description


def test_r580_path_and_preflight(r580: Runbook) -> None:
    path = r580.stage("path")
    # each path weighed in a person's words; the choice and its owner are the path-chosen event's
    weighed = {"path-upgrade", "path-cu129", "path-isolated"}
    assert all(i.note_required for i in path.items if i.id in weighed)
    chosen = {i.id: i for i in path.items if i.id not in weighed}
    assert set(chosen) == {"path-chosen", "path-owner"}
    assert all(i.verify is Verify.CHECK and i.check == "path_chosen" for i in chosen.values())
    cu129 = next(i for i in path.items if i.id == "path-cu129")
    for fact in ("FlashInfer", "regression tests", "pinned vLLM revision"):
        assert fact in cu129.description
    preflight = r580.stage("preflight")
    signoffs = {i.id for i in preflight.items if i.verify is Verify.SIGNOFF}
    assert {
        "gpu-models-supported",
        "cuda12-rollback-tested",
        "drain-safe",
        "thresholds-agreed",
        "one-node-rule",
    } <= signoffs
    assert "CUDA unavailable" in preflight.description


@pytest.mark.parametrize("scheduler", ["kubernetes", "slurm", "none"])
def test_r580_drain_and_expand_for_each_scheduler(r580: Runbook, scheduler: str) -> None:
    for stage_id in ("drain", "expand"):
        stage = r580.stage(stage_id)
        steps = [s for s in stage.steps if s.when.get("scheduler", scheduler) == scheduler]
        items = [i for i in stage.items if i.when.get("scheduler", scheduler) == scheduler]
        assert items, (stage_id, scheduler)
        if scheduler == "none":  # no scheduler step (the GPU services' restart in expand is not one)
            assert not [s for s in steps if "scheduler" in s.when] and any(i.note_required for i in items)
        else:
            assert steps
    drain_runs = [s.run for s in r580.stage("drain").steps]
    assert (
        "kubectl drain {node_name} --ignore-daemonsets --delete-emptydir-data --timeout={drain_timeout_s}s"
        in drain_runs
    )
    assert "scontrol update nodename={node_name} state=drain reason={change_id}" in drain_runs
    assert "squeue -h -w {node_name}" in drain_runs


def test_r580_change_stages(r580: Runbook) -> None:
    upgrade = r580.stage("upgrade")
    ids = [s.id for s in upgrade.steps]
    # nothing changes before the lists are fresh, the holds recorded, the rollback packages
    # saved and the target proven installable; the install is the stage's only destructive step
    assert ids.index("apt-update") < ids.index("holds") < ids.index("save-rollback") < ids.index("install")
    assert ids.index("target-downloadable") < ids.index("install") < ids.index("rehold")
    # one destructive install per node: apt's on Ubuntu, dnf's on RHEL (a node whose package
    # manager is unknown runs none), or Ansible running that SSH path; what it installs is the
    # node's own target set
    assert [s.id for s in upgrade.steps if s.destructive] == ["install", "dnf-install", "via-ansible"]
    assert upgrade.steps[ids.index("via-ansible")].when == {"backend": "ansible"}
    # the same steps under ssh and slurm (whose install stays the runbook's, over SSH)
    apt = {"recorded_package_manager": "apt", "not_backend": "ansible"}
    dnf = {"recorded_package_manager": "dnf", "not_backend": "ansible"}
    assert upgrade.steps[ids.index("install")].when == apt
    assert upgrade.steps[ids.index("dnf-install")].when == dnf
    assert upgrade.steps[ids.index("dnf-install")].run == "dnf -y module switch-to {target_dnf_module} --allowerasing"
    assert ids.index("target-set") < ids.index("target-downloadable")
    for step in upgrade.steps:  # every package step names its package manager
        words = (step.run or "").replace("!", "").split()
        if {"apt-get", "apt-mark", "dpkg-query", "dpkg"} & set(words):
            assert (step.when or {}).get("recorded_package_manager") == "apt", step.id
        if {"dnf", "rpm"} & set(words):
            assert (step.when or {}).get("recorded_package_manager") == "dnf", step.id
    assert ids.index("dnf-makecache") < ids.index("dnf-holds") < ids.index("dnf-save-rollback")
    assert ids.index("dnf-save-rollback") < ids.index("dnf-target-downloadable") < ids.index("dnf-install")
    install = upgrade.steps[ids.index("install")]
    assert install.run == (
        "xargs -r env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y"
        " < /var/cache/cockpit/{change_id}/target"
    )
    target_set = upgrade.steps[ids.index("target-set")].run or ""
    for role in ("driver", "module", "fabric", "nscq", "imex"):
        assert "{target_" + role + "_spec}" in target_set
    reboot = r580.stage("reboot").steps[0]
    assert reboot.kind is StepKind.REBOOT and reboot.destructive and reboot.timeout_s == "reboot_timeout_s"
    assert r580.stage("reboot").items[0].check == "boot_id_changed"
    smoke_checks = {i.check for i in r580.stage("smoke").items if i.verify is Verify.CHECK}
    assert {
        "gpus_match_baseline",
        "gpu_settings_match_baseline",  # persistence, power, clocks, MIG, ECC, row remapping
        "driver_library_match",
        "driver_matches_target",
        "fabric_manager_ok",
        "no_fatal_xid",
    } <= smoke_checks
    assert smoke_checks <= set(CHECKS)
    smoke = {i.id: i for i in r580.stage("smoke").items}
    container = smoke["container-cuda"]
    assert container.verify is Verify.COMMAND and container.command and container.expect
    assert "--gpus all --entrypoint python3 {smoke_image} -c '" in container.command
    assert container.command.endswith("' {recorded_gpu_count}")  # the count is an argument, not templated code
    assert "{" not in container.command.split("'")[1]  # no placeholder inside the quoted code
    assert container.expect.stdout_matches and container.timeout_s == 900
    assert smoke["dcgm-diag"].timeout_s == "dcgm_diag_timeout_s"
    assert "-g {recorded_gpu_count}" in (smoke["nccl-allreduce"].command or "")
    assert smoke["k8s-gpus-allocatable"].when == {"scheduler": "kubernetes"}
    assert smoke["slurm-gres"].when == {"scheduler": "slurm"}
    assert "baseline-workloads" in {i.id for i in r580.stage("expand").items}


def test_r580_closing_stages(r580: Runbook) -> None:
    assert len(r580.stage("capacity").items) == 8
    assert "OOM" in r580.stage("capacity").description
    cache = r580.stage("prefix-cache")
    assert {"cause-parameter", "cause-request", "cause-retention", "no-reupgrade"} <= {i.id for i in cache.items}
    decision = r580.stage("decision")
    assert sum(1 for i in decision.items if i.text.endswith("?")) == 4
    assert "Roll back" in decision.description
    assert len(r580.stage("closing").items) == 12  # with the alert silence's end


def test_r580_rollback(r580: Runbook) -> None:
    assert r580.rollback is not None
    steps = r580.rollback.steps
    ids = [s.id for s in steps]
    # drained first (a node already returned to service), then the saved files, holds, reboot
    assert ids[:3] == ["cordon", "drain", "slurm-drain"]
    assert ids.index("unhold") < ids.index("reinstall") < ids.index("holds") < ids.index("reboot")
    reinstall = steps[ids.index("reinstall")]
    assert reinstall.destructive and "/var/cache/cockpit/{change_id}" in (reinstall.run or "")
    assert "--allow-downgrades" in (reinstall.run or "")
    assert ids.index("dnf-unlock") < ids.index("dnf-reinstall") < ids.index("dnf-relock") < ids.index("reboot")
    assert "{recorded_dnf_stream}" in (steps[ids.index("dnf-reinstall")].run or "")
    assert steps[ids.index("dnf-relock") + 1].kind is StepKind.REBOOT
    assert any("{recorded_driver_package}" in (i.command or "") for i in r580.rollback.items)
    assert {"gpus_match_baseline", "driver_library_match"} <= {i.check for i in r580.rollback.items}


def test_r580_is_written_in_its_own_words() -> None:
    # The runbook the product was born from is not ours to ship, so this comparison runs
    # only where a copy is at hand (.ci/run points COCKPIT_SEED_DIR at one when it has it).
    seed_dir = os.environ.get("COCKPIT_SEED_DIR")
    seeds = sorted(Path(seed_dir).glob("*.txt")) if seed_dir else []
    if not seeds:
        pytest.skip("no seed runbook to compare with: set COCKPIT_SEED_DIR to a folder holding it")
    seed = seeds[0]

    def shingles(text: str, n: int = 8) -> set[tuple[str, ...]]:
        words = re.findall(r"[a-z0-9]+", text.lower())
        return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}

    runbook_text = shipped_runbooks()["driver-upgrade-r580"].read_text(encoding="utf-8")
    shared = shingles(seed.read_text(encoding="utf-8")) & shingles(runbook_text)
    assert not shared, sorted(" ".join(s) for s in shared)[:5]
