"""A recorded change window, written through the Journal, and its tickets compared with golden files.

The scenario: canary gpu01 passes every stage; the second node gpu02 needs an
override (it has no Kubernetes labels to record), comes back from its reboot with
7 of 8 GPUs, the gpu-missing trigger fires, gpu02 is rolled back, the trigger is
cleared, and the decision keeps the canary on r580.

Regenerate after an intended change (then review the diff):
``COCKPIT_REGEN_GOLDEN=1 python -m pytest tests/core/test_export_golden.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from repo_paths import EXAMPLE

from cockpit.changelog.events import EventKind as K
from cockpit.changelog.journal import Journal, SessionHeader, read_session
from cockpit.changelog.verify import read_verified
from cockpit.export import FORMATS, export_text, summarise
from cockpit.runbook.loader import load_runbook

GOLDEN = Path(__file__).resolve().parent / "golden"
#: the runbook exactly as it was when the example was recorded (its sha256 is in the header)
RUNBOOK = GOLDEN / "driver-upgrade-r580.toml"
REGEN = os.environ.get("COCKPIT_REGEN_GOLDEN") == "1"
SUFFIX = {"markdown": "md", "jira": "jira.txt", "jira-adf": "adf.json", "servicenow": "servicenow.json"}
START = datetime(2026, 8, 5, 22, 0, 0, tzinfo=UTC)
TRIGGERS = [
    "gpu-missing", "driver-versions-inconsistent", "node-not-back", "mismatch-after-reboot", "smoke-failed",
    "fabric-manager-down", "fatal-xid", "wave-failure-budget", "protected-workload-failed",
    "rdma-registration-broken", "inseparable-app-failure", "unexplained-in-window",
]  # fmt: skip


class Clock:
    """The recorded times: each event happens ``step`` seconds after the previous one."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def wait(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _apt_output(version: str, node: str) -> str:
    lines = [f"# {node}: apt-get install -y nvidia-driver-580"] + [
        f"Get:{i} http://archive.ubuntu.com/ubuntu noble/restricted amd64 libnvidia-compute-580 {version} [{40 + i} MB]"
        for i in range(1, 120)
    ]
    lines += ["Building initial module for 6.8.0-60-generic", "Done.", f"Setting up nvidia-driver-580 ({version}) ..."]
    return "\n".join(lines) + "\n"


#: one recorded event: the seconds since the previous one, its kind and its fields
Row = tuple[float, K, dict[str, object]]


def record_demo(directory: Path) -> Path:
    """Record the scenario through the Journal into ``directory``; return the change log's path."""
    runbook = load_runbook(RUNBOOK)
    clock = Clock()
    header = SessionHeader(
        change_id="demo-gpu-missing",
        runbook_id=runbook.runbook.id,
        runbook_sha256=runbook.sha256,
        runbook_path="checklists/driver-upgrade-r580.toml",
        operator="alice",
        hosts=["gpu01", "gpu02"],
        parameters={
            "target_branch": "580",
            "driver_package": "nvidia-driver-580",
            "scheduler": "kubernetes",
            "wave_size": 4,
        },
        tool_version="0.1.0",
        created_at=START,
    )
    j = Journal.create(directory, header, clock=clock)
    for seconds, kind, fields in _scenario(j):
        clock.wait(seconds)
        j.append(kind, **fields)  # type: ignore[arg-type]  # each event's own fields, as the table spells them
    j.close()
    return j.path


def _scenario(j: Journal) -> list[Row]:
    """The whole window, one event a row (the nodes' install output goes into ``j``'s artifacts).

    Every event is one the window's rules allow at its point, by its actor (the fold judges
    each: :mod:`cockpit.engine.judge`): each stage's steps, ticks, checks and sign-offs come
    before its gate. The rows stay one line each (``fmt: skip``) so that the scenario reads
    as a table.
    """
    smoke = (
        "docker run --rm --gpus all vllm/vllm-openai:kimi-k3 python -c 'import torch; print(torch.cuda.device_count())'"
    )
    image_torch = (
        "docker run --rm --gpus all vllm/vllm-openai:kimi-k3 python -c 'import torch; print(torch.version.cuda)'"
    )
    inspect = "docker image inspect vllm/vllm-openai:kimi-k3"
    reinstall_575 = "apt-get install -y --allow-downgrades nvidia-driver-575=575.57.08-0ubuntu1"
    return [
        (0, K.SESSION_STARTED, dict(facts={"operator": "alice"})),
        # window stages: evidence, compatibility, path, preflight, arming
        (40, K.STEP_FINISHED, dict(stage="freeze", step="host-smi", node="gpu01", facts=_ran("nvidia-smi", where="node", duration_s=0.9, stdout="Driver Version: 575.57.08      CUDA Version: 12.9\n"))),
        (20, K.STEP_FINISHED, dict(stage="freeze", step="image-inspect", node="gpu01", facts=_ran(inspect, where="node", duration_s=0.4, stdout='"RepoDigests": ["vllm/vllm-openai@sha256:5f1c0a0e"]\n'))),
        (30, K.STEP_FINISHED, dict(stage="freeze", step="image-torch", node="gpu01", facts=_ran(image_torch, where="node", duration_s=11.2, stdout="2.9.0+cu130\n13.0\n"))),
        _tick(40, "freeze", "vllm-source", "vllm 0.11.0 from the official kimi-k3 image, no local patches"),
        _tick(20, "freeze", "model-revision-launch", "kimi-k3 revision 4e1c, launched with the team's standard serve command"),
        _tick(30, "freeze", "engine-init-log", "full engine init log kept in the incident ticket INC-2210"),
        _tick(20, "freeze", "runtime-visibility-network", "docker with nvidia runtime, all 8 GPUs visible, host network"),
        _tick(60, "freeze", "first-failing-line", "engine init: 'CUDA driver version is insufficient for CUDA runtime version' (first failing line, not the final traceback)"),
        (5, K.GATE_PASSED, dict(stage="freeze")),
        _tick(20, "compat", "ceiling-only", None),
        _tick(45, "compat", "cu130-on-r575", "cu130 image on r575 hosts: a hard compatibility decision, no flag tuning"),
        _tick(20, "compat", "cu130-on-r580", "r580 supports CUDA 13.0: the image runs once hosts are upgraded"),
        _tick(20, "compat", "custom-cu129", "a custom cu129 build is possible but not maintained by the vendor"),
        _tick(20, "compat", "floating-image", "the image is pinned by digest, not a floating tag"),
        _signoff(60, "compat", "classified", "classified as a driver/runtime version conflict"),
        (5, K.GATE_PASSED, dict(stage="compat")),
        (120, K.PATH_CHOSEN, dict(facts={
            "path": "A: upgrade the driver to r580",
            "rationale": "failure confirmed as cu130 vs r575; approved window tonight; rollback to the recorded 575 package tested",
            "owner": "platform team (alice)",
        })),
        _tick(20, "path", "path-upgrade", "upgrade to r580: the vendor's supported route for cu130 images"),
        _tick(20, "path", "path-cu129", "a cu129 image would keep r575 but loses the kimi-k3 release"),
        _tick(20, "path", "path-isolated", "an isolated r580 pool needs hardware we do not have this month"),
        _tick(20, "path", "path-chosen", "path A chosen: upgrade the driver to r580 tonight"),
        _tick(20, "path", "path-owner", "platform team (alice) owns the path"),
        (5, K.GATE_PASSED, dict(stage="path")),
        (60, K.STEP_FINISHED, dict(stage="preflight", step="toolkit-version", node="gpu01", facts=_ran("nvidia-ctk --version", where="node", duration_s=0.3, stdout="NVIDIA Container Toolkit CLI version 1.17.8\n"))),
        _tick(30, "preflight", "container-toolkit", "NVIDIA Container Toolkit 1.17.8 on every node"),
        _tick(30, "preflight", "agents-procedure", "the node agents are stopped by the drain, restarted by uncordon"),
        _signoff(240, "preflight", "gpu-models-supported", "H100 SXM on the r580 support list"),
        _signoff(20, "preflight", "cuda12-rollback-tested", "rollback to 575 tested on a spare node last week"),
        _signoff(20, "preflight", "drain-safe", "drain procedure agreed with the serving team"),
        _signoff(20, "preflight", "thresholds-agreed", "thresholds agreed: any GPU missing rolls the node back"),
        _signoff(20, "preflight", "one-node-rule", "one node at a time, canary first"),
        _signoff(20, "preflight", "window-approved", "window approved in CAB-1187"),
        (5, K.GATE_PASSED, dict(stage="preflight")),
        _signoff(60, "arm", "triggers-reviewed", "12 triggers reviewed"),
        _signoff(30, "arm", "rollback-understood", None),
        (5, K.TRIGGERS_ARMED, dict(facts={"triggers": TRIGGERS})),
        (5, K.GATE_PASSED, dict(stage="arm")),

        # wave 0: the canary passes everything
        (20, K.WAVE_STARTED, dict(wave=0, facts={"nodes": ["gpu01"]})),
        *_node_until_reboot(j, "gpu01", labels_ok=True),
        (30, K.PROBE, dict(node="gpu01", actor="cockpit", facts=_probe("580.65.06", 8))),
        _verified(2, "reboot", "boot-id-changed", "gpu01", "boot id changed"),
        (5, K.GATE_PASSED, dict(stage="reboot", node="gpu01")),
        (10, K.STEP_FINISHED, dict(stage="smoke", step="probe", node="gpu01", facts={"where": "node", "exit_status": 0, "ok": True, "duration_s": 1.2})),
        (60, K.STEP_FINISHED, dict(stage="smoke", step="container-smoke", node="gpu01", facts=_ran(smoke, where="node", duration_s=14.8, stdout="8\n"))),
        _verified(2, "smoke", "gpus-visible", "gpu01", "8 GPUs, baseline 8"),
        _verified(1, "smoke", "library-match", "gpu01", "kernel module 580.65.06, userspace 580.65.06"),
        _verified(1, "smoke", "on-target", "gpu01", "driver 580.65.06 on branch 580"),
        _verified(1, "smoke", "ceiling", "gpu01", "CUDA ceiling 13.0 meets the image's 13.0"),
        _verified(1, "smoke", "fabric-manager", "gpu01", "nvidia-fabricmanager active"),
        _verified(1, "smoke", "no-fatal-xid", "gpu01", "no XID since the reboot"),
        _tick(120, "smoke", "smallest-serve", "the smallest kimi-k3 config served one request", node="gpu01"),
        _tick(240, "smoke", "app-requests", "kimi-k3 answered 20 requests, tool calls parsed", node="gpu01"),
        (5, K.GATE_PASSED, dict(stage="smoke", node="gpu01")),
        (30, K.STEP_FINISHED, dict(stage="expand", step="uncordon", node="gpu01", facts=_ran("kubectl uncordon gpu01", where="control", duration_s=0.6))),
        _tick(120, "expand", "baseline-workloads", "the usual CUDA 12 jobs run again on gpu01", node="gpu01"),
        (5, K.GATE_PASSED, dict(stage="expand", node="gpu01")),

        # wave 1: gpu02 loses a GPU after the reboot and is rolled back
        (30, K.WAVE_STARTED, dict(wave=1, facts={"nodes": ["gpu02"]})),
        *_node_until_reboot(j, "gpu02", labels_ok=False),
        (30, K.PROBE, dict(node="gpu02", actor="cockpit", facts={**_probe("580.65.06", 7), "health": "gpu-missing", "xid_codes": [79]})),
        (1, K.TRIGGER_FIRED, dict(trigger="gpu-missing", node="gpu02", actor="cockpit", facts={"evidence": "gpu02 shows 7 GPUs, baseline 8 (0000:9A:00.0 gone; XID 79 'GPU has fallen off the bus')"})),
        (90, K.ROLLBACK_STARTED, dict(node="gpu02", reason="trigger gpu-missing fired after the reboot")),
        (5, K.STEP_STARTED, dict(stage="rollback", step="reinstall", node="gpu02", facts={"command": reinstall_575, "where": "node"})),
        (88, K.STEP_FINISHED, dict(stage="rollback", step="reinstall", node="gpu02", facts=_ran(reinstall_575, where="node", duration_s=88.1, stdout="Setting up nvidia-driver-575 (575.57.08-0ubuntu1) ...\n"))),
        (5, K.STEP_STARTED, dict(stage="rollback", step="reboot", node="gpu02", facts={"where": "node"})),
        (195, K.STEP_FINISHED, dict(stage="rollback", step="reboot", node="gpu02", facts=_ran(None, where="node", duration_s=191.0))),
        (20, K.PROBE, dict(node="gpu02", actor="cockpit", facts=_probe("575.57.08", 8))),
        (2, K.STEP_FINISHED, dict(stage="rollback", step="probe", node="gpu02", facts={"where": "node", "exit_status": 0, "ok": True, "duration_s": 1.1})),
        _verified(2, "rollback", "rebooted", "gpu02", "boot id changed"),
        _verified(1, "rollback", "gpus-visible", "gpu02", "8 GPUs, baseline 8"),
        _verified(1, "rollback", "library-match", "gpu02", "kernel module 575.57.08, userspace 575.57.08"),
        _verified(1, "rollback", "no-fatal-xid", "gpu02", "no XID since the rollback's reboot"),
        _tick(60, "rollback", "cuda12-workloads", "rollback verified: 8 GPUs, driver 575.57.08, CUDA 12 jobs run", node="gpu02"),
        _tick(30, "rollback", "node-disposition", "gpu02 stays drained for hardware ticket HW-4471", node="gpu02"),
        (2, K.ROLLBACK_FINISHED, dict(node="gpu02", facts={"ok": True})),
        (120, K.TRIGGER_CLEARED, dict(trigger="gpu-missing", reason="gpu02 back on 575.57.08 with 8 GPUs; XID 79 on 0000:9A:00.0 handed to hardware ticket HW-4471")),

        # the closing stages: what was not tested is said so; the decision and its sign-off
        _verified(30, "prefix-cache", "flag-in-process", None, "the prefix-cache flag is in the serving process's command line"),
        *[_tick(10, "prefix-cache", item, "not tested in this window: needs the real request pattern") for item in (
            "request-pair", "repetitions", "ids-and-logs", "cause-parameter", "cause-request", "cause-retention")],
        _tick(10, "prefix-cache", "no-reupgrade", None),
        (5, K.GATE_PASSED, dict(stage="prefix-cache")),
        _tick(30, "capacity", "load-1-model", "model load on gpu01 in 4 minutes"),
        _tick(10, "capacity", "load-2-short", "20 short requests on gpu01 answered"),
        *[_tick(10, "capacity", item, "not tested in this window: one upgraded node") for item in (
            "load-3-context", "load-4-prefixes", "load-5-concurrency", "load-6-tools", "load-7-multimodal",
            "load-8-cross-node")],
        (5, K.GATE_PASSED, dict(stage="capacity")),
        _tick(60, "decision", "failure-reproducible", "yes on r575 nodes, not on gpu01"),
        _tick(10, "decision", "prefix-cache-real-pattern", "not tested in this window"),
        _tick(10, "decision", "tools-structured-correct", "20 requests on gpu01, tool calls parsed"),
        _tick(10, "decision", "maintenance-load", "no extra maintenance: the official cu130 image"),
        _tick(10, "decision", "outcome", "keep the upgrade path: gpu01 stays on r580, gpu02 on r575 until HW-4471 is closed"),
        (600, K.DECISION, dict(facts={
            "outcome": "keep-upgraded-path",
            "answers": {
                "failure-reproducible": "yes on r575 nodes, not on gpu01",
                "prefix-cache-real-pattern": "not tested in this window",
                "tools-structured-correct": "20 requests on gpu01, tool calls parsed",
                "maintenance-load": "no extra maintenance: the official cu130 image",
            },
        })),
        _signoff(60, "decision", "outcome-signed", None),
        (5, K.GATE_PASSED, dict(stage="decision")),
        _tick(30, "closing", "image-recorded", "vllm/vllm-openai:kimi-k3 @ sha256:5f1c0a0e"),
        _tick(10, "closing", "driver-branch-recorded", "gpu01 580.65.06; gpu02 575.57.08"),
        _tick(10, "closing", "failing-subsystem", "CUDA runtime init: cu130 needs r580"),
        _tick(10, "closing", "path-has-owner", "platform team (alice)"),
        _verified(2, "closing", "trigger-written", None, "12 triggers armed at seq 37"),
        _tick(10, "closing", "isolated-smoke", "gpu01 container smoke passed"),
        _tick(10, "closing", "load-and-short", "model load and 20 short requests on gpu01"),
        _tick(10, "closing", "decision-expiry", "review on 2026-08-12 with HW-4471"),
        (30, K.SESSION_ENDED, dict(note="1 of 2 nodes upgraded, gpu02 rolled back and held for HW-4471")),
    ]  # fmt: skip


def _tick(seconds: float, stage: str, item: str, note: str | None, *, node: str | None = None) -> Row:
    """The operator ticks ``item`` (with the note the runbook asks for)."""
    fields: dict[str, object] = dict(stage=stage, item=item)
    if note is not None:
        fields["note"] = note
    if node is not None:
        fields["node"] = node
    return (seconds, K.ITEM_TICKED, fields)


def _signoff(seconds: float, stage: str, item: str, note: str | None) -> Row:
    """bob, the second person, signs ``item`` off."""
    fields: dict[str, object] = dict(stage=stage, item=item, actor="bob")
    if note is not None:
        fields["note"] = note
    return (seconds, K.SIGNOFF, fields)


def _verified(seconds: float, stage: str, item: str, node: str | None, evidence: str) -> Row:
    """The cockpit's own check of ``item`` held."""
    fields: dict[str, object] = dict(stage=stage, item=item, actor="cockpit", facts={"ok": True, "evidence": evidence})
    if node is not None:
        fields["node"] = node
    return (seconds, K.ITEM_VERIFIED, fields)


def _ran(command: str | None, *, where: str, duration_s: float, **output: object) -> dict[str, object]:
    """The facts of a step that exited 0, in the order the recording wrote them."""
    named = {"command": command} if command is not None else {}
    return {**named, "where": where, "exit_status": 0, "ok": True, "duration_s": duration_s, **output}


def _probe(driver: str, gpus: int) -> dict[str, object]:
    return {"reachable": True, "health": "ok", "driver_version": driver, "kernel_module_version": driver,
            "cuda_version": "13.0" if driver.startswith("580") else "12.9", "fabric_manager": "active",
            "gpu_count": gpus, "xid_codes": []}  # fmt: skip


def _node_until_reboot(j: Journal, node: str, *, labels_ok: bool) -> list[Row]:
    """One node from its cordon to the end of its reboot; without labels it records an override."""
    install = "apt-get install -y nvidia-driver-580"
    output = _apt_output("580.65.06-0ubuntu1", node)
    drain = f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data --timeout=600s"
    baseline = {
        "driver_package": "nvidia-driver-575=575.57.08-0ubuntu1",
        "driver_version": "575.57.08",
        "boot_id": f"4c2d{node[-2:]}e0-1b7a-4f0e-9a51-0d1f2b3c4d5e",
        "gpu_count": 8,
        "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"} if labels_ok else {},
    }
    no_labels = {
        "command": f"kubectl get node {node} --show-labels",
        "where": "control",
        "exit_status": 1,
        "ok": False,
        "duration_s": 0.4,
        "stderr": f'Error from server (NotFound): nodes "{node}" not found',
        "error": "exit status 1",
    }
    labels = (
        _ran(f"kubectl get node {node} --show-labels", where="control", duration_s=0.4, stdout="nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n")
        if labels_ok else no_labels
    )  # fmt: skip
    record: list[Row] = [(5, K.GATE_PASSED, dict(stage="record", node=node))] if labels_ok else [
        (90, K.OVERRIDE, dict(stage="record", node=node, reason=f"{node} left the Kubernetes pool last week (PLAT-311): no node labels exist to record; confirmed with bob", facts={"blocked_by": ["record/labels"]})),
    ]  # fmt: skip
    return [
        (10, K.STEP_FINISHED, dict(stage="drain", step="cordon", node=node, facts=_ran(f"kubectl cordon {node}", where="control", duration_s=0.7))),
        (60, K.STEP_FINISHED, dict(stage="drain", step="drain", node=node, facts=_ran(drain, where="control", duration_s=58.3))),
        (5, K.GATE_PASSED, dict(stage="drain", node=node)),
        (20, K.BASELINE_RECORDED, dict(node=node, facts=baseline)),
        (5, K.STEP_FINISHED, dict(stage="record", step="baseline", node=node, facts={"where": "node", "exit_status": 0, "ok": True, "duration_s": 2.1})),
        (5, K.STEP_FINISHED, dict(stage="record", step="packages", node=node, facts=_ran("dpkg-query -W 'nvidia-driver-*'", where="node", duration_s=0.3, stdout="nvidia-driver-575\t575.57.08-0ubuntu1\n"))),
        (5, K.STEP_FINISHED, dict(stage="record", step="module", node=node, facts=_ran("cat /proc/driver/nvidia/version", where="node", duration_s=0.1, stdout="NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.57.08\n"))),
        (5, K.STEP_FINISHED, dict(stage="record", step="boot-id", node=node, facts=_ran("cat /proc/sys/kernel/random/boot_id", where="node", duration_s=0.1, stdout=f"{baseline['boot_id']}\n"))),
        (5, K.STEP_FINISHED, dict(stage="record", step="k8s-labels", node=node, facts=labels)),
        _verified(2, "record", "baseline-recorded", node, "baseline recorded: 575.57.08, 8 GPUs"),
        *record,
        (10, K.STEP_STARTED, dict(stage="upgrade", step="install", node=node, facts={"command": install, "where": "node"})),
        (96, K.STEP_FINISHED, dict(stage="upgrade", step="install", node=node, facts=_ran(install, where="node", duration_s=96.4, stdout=output[:200], artifact=j.store_artifact(output)))),
        _verified(2, "upgrade", "package-present", node, "nvidia-driver-580 580.65.06-0ubuntu1 installed"),
        _tick(30, "upgrade", "official-procedure", "installed from the Ubuntu archive with apt, the vendor's procedure", node=node),
        (5, K.GATE_PASSED, dict(stage="upgrade", node=node)),
        (5, K.STEP_STARTED, dict(stage="reboot", step="reboot", node=node, facts={"where": "node"})),
        (184, K.STEP_FINISHED, dict(stage="reboot", step="reboot", node=node, facts=_ran(None, where="node", duration_s=183.5))),
    ]  # fmt: skip


# --------------------------------------------------------------------------- tests


def test_the_committed_example_is_this_scenario_recorded_through_the_journal(tmp_path: Path) -> None:
    recorded = record_demo(tmp_path)
    if REGEN:
        EXAMPLE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(recorded, EXAMPLE)
        shutil.rmtree(EXAMPLE.with_suffix(""), ignore_errors=True)
        shutil.copytree(recorded.with_suffix(""), EXAMPLE.with_suffix(""))
    assert recorded.read_bytes() == EXAMPLE.read_bytes()
    artifacts = sorted(p.name for p in (EXAMPLE.with_suffix("") / "artifacts").iterdir())
    assert artifacts == sorted(p.name for p in (recorded.with_suffix("") / "artifacts").iterdir())
    for name in artifacts:  # content-addressed: each file's sha256 is its name
        assert hashlib.sha256((EXAMPLE.with_suffix("") / "artifacts" / name).read_bytes()).hexdigest() == name


def test_example_reads_clean() -> None:
    log = read_session(EXAMPLE)
    assert log.torn is None and log.header.change_id == "demo-gpu-missing"
    assert log.header.runbook_sha256 == load_runbook(RUNBOOK).sha256
    assert [e.seq for e in log.events] == list(range(1, len(log.events) + 1))


@pytest.mark.parametrize("fmt", FORMATS)
def test_golden_ticket(fmt: str) -> None:
    log, verification = read_verified(EXAMPLE)  # as `cockpit export` does: the verification is its first line
    text = export_text(log, fmt, load_runbook(RUNBOOK), verification.summary())
    golden = GOLDEN / f"demo-gpu-missing.{SUFFIX[fmt]}"
    if REGEN:
        golden.write_text(text)
    assert text == golden.read_text()


def test_summary_of_the_example() -> None:
    s = summarise(read_session(EXAMPLE), load_runbook(RUNBOOK))
    assert s.runbook_matched
    assert s.operator == "alice" and s.reviewers == ["bob"]
    by_node = {n.node: n for n in s.nodes}
    assert by_node["gpu01"].outcome == "upgraded" and by_node["gpu01"].last_stage == "expand"
    assert (by_node["gpu01"].driver_before, by_node["gpu01"].driver_after) == ("575.57.08", "580.65.06")
    assert by_node["gpu02"].outcome == "rolled back" and by_node["gpu02"].last_stage == "upgrade"
    assert (by_node["gpu02"].driver_before, by_node["gpu02"].driver_after) == ("575.57.08", "575.57.08")
    assert [w.nodes for w in s.waves] == [["gpu01"], ["gpu02"]]
    (firing,) = s.firings
    assert firing.trigger == "gpu-missing" and firing.node == "gpu02" and firing.cleared_by == "alice"
    assert "7 GPUs, baseline 8" in firing.evidence
    assert firing.title == "GPU devices missing compared with the node's recorded baseline"
    (override,) = s.overrides
    assert override.stage == "record" and override.node == "gpu02" and "PLAT-311" in override.reason
    assert override.blocked_by == ["record/labels"]
    assert len(s.triggers_armed) == 12
    states = {e.item: e.state for e in s.closing}
    assert states["trigger-written"] == "verified" and states["image-recorded"] == "done"
    assert (
        states["prefix-tested"] == "open" and states["cross-node-tested"] == "open"
    )  # from the runbook: never touched
    assert len(s.closing) == 11
    assert len(s.artifacts) == 2 and {a.node for a in s.artifacts} == {"gpu01", "gpu02"}
    assert s.ended_at is not None and s.duration == timedelta(minutes=78, seconds=2)
    assert s.outcome == "keep-upgraded-path"


def test_without_the_recorded_runbook_only_touched_items_show(tmp_path: Path) -> None:
    changed = tmp_path / "driver-upgrade-r580.toml"
    changed.write_text(RUNBOOK.read_text() + "\n# edited after the window\n")
    s = summarise(read_session(EXAMPLE), load_runbook(changed))
    assert not s.runbook_matched
    assert "prefix-tested" not in {e.item for e in s.closing}
    assert s.firings[0].title is None
    md = export_text(read_session(EXAMPLE), "markdown", load_runbook(changed))
    assert "Runbook file not matched" in md


def test_servicenow_fields() -> None:
    doc = json.loads(export_text(read_session(EXAMPLE), "servicenow", load_runbook(RUNBOOK)))
    cr = doc["change_request"]
    assert set(cr) == {
        "short_description", "description", "implementation_plan", "backout_plan", "test_plan",
        "start_date", "end_date", "close_code", "close_notes", "work_notes",
    }  # fmt: skip
    assert cr["start_date"] == "2026-08-05 22:00:00" and cr["end_date"] > cr["start_date"]
    assert cr["close_code"] == "successful_issues"
    assert "gpu02: 575.57.08 -> 575.57.08: rolled back" in cr["close_notes"]
    assert "OVERRIDE record on gpu02" in cr["close_notes"]
    assert "Rollbacks executed: gpu02" in cr["backout_plan"]
    assert len(cr["short_description"]) <= 160
