"""The pre-change gate's scenarios, read from the change log on disk: which gate item caught
what (secure-boot), the GPU holders listed, stopped and started again (gpu-holders), and the
container smoke through the runtime the node has (containerd-only).

Real parts: the demo fleet called in process (InProcessTransport), the session, the autopilot taking Next; the
simulated node of each scenario is its NodeProfile (cockpit.sim.scenarios).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from step_events import Events, finished, step_events, verified
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import StepFinishedEvent, StepStartedEvent
from cockpit.changelog.reader import read_session
from cockpit.engine.state import CockpitState
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.autopilot import AutopilotResult, drive
from cockpit.session.demo import demo_session

SPEED = IN_PROCESS_WALK_SPEED  # in process: no handshakes to leave room for


async def _walk(scenario: str, tmp_path: Path) -> tuple[Events, CockpitState, AutopilotResult]:
    async with demo_session(in_process=True, nodes=2, scenario=scenario, sessions_dir=tmp_path, speed=SPEED) as (
        session,
        _fleet,
    ):
        result = await drive(session)
        state, path = session.state, session.path
    events = step_events(path)
    return events, state, result


def _started(events: Events, node: str, stage: str) -> list[str]:
    return [e.step or "" for e in events if isinstance(e, StepStartedEvent) and (e.node, e.stage) == (node, stage)]


@pytest.mark.timeout(90)
async def test_secure_boot_is_stopped_by_the_gate_before_the_upgrade(tmp_path: Path) -> None:
    events, state, result = await _walk("secure-boot", tmp_path)
    caught = verified(events, "gpu02", "record", "secure-boot")
    assert not caught.facts.ok
    assert "gpu02: Secure Boot on and the module's signer (DKMS module signing key) is not an enrolled key" in (
        caught.facts.evidence or ""
    )
    assert verified(events, "gpu01", "record", "secure-boot").facts.evidence == (
        "gpu01: Secure Boot off: the kernel loads the module unsigned"
    )
    # the gate items before it held on the same node: Secure Boot is what stops it
    for item in ("install-supported", "flavour-kept", "module-buildable"):
        assert verified(events, "gpu02", "record", item).facts.ok, item
    assert _started(events, "gpu02", "upgrade") == []  # nothing changed on the node
    assert state.nodes["gpu02"].current == "record" and state.nodes["gpu01"].current == "done"
    assert (
        result.stuck_on is not None and "check 'secure-boot' on gpu02 failed" in result.stuck_on
    )  # a person's Next, in its words


@pytest.mark.timeout(120)
async def test_gpu_holders_are_listed_stopped_and_started_again(tmp_path: Path) -> None:
    events, state, result = await _walk("gpu-holders", tmp_path)
    assert result.stuck_on is None and result.outcome == "keep-upgraded-path"
    listed = verified(events, "gpu02", "record", "gpu-holders-known")
    assert listed.facts.ok
    assert "3377 dcgm-exporter (dcgm-exporter.service)" in (listed.facts.evidence or "")
    assert "2114 nvidia-persiste (nvidia-persistenced.service): stopped by the record stage" in (
        listed.facts.evidence or ""
    )
    stopped = finished(events, "gpu02", "record", "stop-gpu-units")
    assert stopped.facts.ok and stopped.facts.stdout == "nvidia-persistenced.service\ndcgm-exporter.service\n"
    assert "dcgm-exporter" not in (finished(events, "gpu01", "record", "stop-gpu-units").facts.stdout or "")
    install = next(e for e in events if isinstance(e, StepStartedEvent) and (e.node, e.step) == ("gpu02", "install"))
    assert stopped.seq < install.seq
    started = finished(events, "gpu02", "expand", "start-gpu-units")
    assert started.facts.ok and "dcgm-exporter.service" in (started.facts.stdout or "")
    assert finished(events, "gpu02", "expand", "resume-upgrades").facts.ok
    assert state.nodes["gpu02"].current == "done"


@pytest.mark.timeout(120)
async def test_containerd_only_node_smokes_through_nerdctl(tmp_path: Path) -> None:
    events, state, result = await _walk("containerd-only", tmp_path)
    assert result.stuck_on is None and result.outcome == "keep-upgraded-path"
    assert state.nodes["gpu02"].baseline.container_runtimes == ["nerdctl"]
    smoke = verified(events, "gpu02", "smoke", "container-cuda-nerdctl")
    assert smoke.facts.ok and "smoke ok: matmul on 8 of 8 GPUs" in (smoke.facts.evidence or "")
    items = state.nodes["gpu02"].stages["smoke"].items
    assert {i: items[i].status for i in ("container-cuda", "container-cuda-podman", "container-cuda-by-hand")} == {
        "container-cuda": "skipped",
        "container-cuda-podman": "skipped",
        "container-cuda-by-hand": "skipped",
    }
    assert verified(events, "gpu01", "smoke", "container-cuda").facts.ok  # the canary has docker
    assert state.nodes["gpu01"].stages["smoke"].items["container-cuda-nerdctl"].status == "skipped"


@pytest.mark.timeout(120)
async def test_alert_silence_starts_before_the_first_change_and_ends_at_closing(tmp_path: Path) -> None:
    silence = "echo 'silence 4f1c added for 4h: cluster=gpu-a'"
    params: dict[str, ParamValue] = {
        "silence": True,
        "silence_command": silence,
        "silence_end_command": "echo 'silence 4f1c expired'",
    }
    async with demo_session(
        in_process=True, nodes=2, scenario="happy", sessions_dir=tmp_path, speed=SPEED, params=params
    ) as (
        session,
        _fleet,
    ):
        result = await drive(session)
        path = session.path
    assert result.stuck_on is None and result.outcome == "keep-upgraded-path"
    events: Events = [e for e in read_session(path).events if isinstance(e, StepStartedEvent | StepFinishedEvent)]
    start = finished(events, None, "arm", "silence-start")  # a window step: no node
    assert start.facts.ok and start.facts.stdout == "silence 4f1c added for 4h: cluster=gpu-a\n"
    first_change = next(e for e in events if isinstance(e, StepStartedEvent) and e.step == "install")
    assert start.seq < first_change.seq
    end = finished(events, None, "closing", "silence-end")
    assert end.facts.ok and end.facts.stdout == "silence 4f1c expired\n"


@pytest.mark.timeout(120)
async def test_without_silence_its_steps_are_skipped(tmp_path: Path) -> None:
    async with demo_session(in_process=True, nodes=1, scenario="happy", sessions_dir=tmp_path, speed=SPEED) as (
        session,
        _fleet,
    ):
        await drive(session)
        window = session.state.window
    assert window["arm"].steps["silence-start"].status == "skipped"
    assert window["closing"].items["silence-ended"].status == "skipped"


@pytest.mark.timeout(120)
async def test_fabric_manager_and_daemonset_pods_do_not_block_a_reboot_based_upgrade(tmp_path: Path) -> None:
    events, state, result = await _walk("k8s-holders", tmp_path)
    assert result.stuck_on is None and result.outcome == "keep-upgraded-path"
    evidence = verified(events, "gpu02", "record", "gpu-holders-known").facts.evidence or ""
    assert "3228 nv-fabricmanage (nvidia-fabricmanager.service): fabric manager: left running" in evidence
    assert "5521 nvidia-device-p: the device plugin's pod" in evidence
    assert "5604 dcgm-exporter: dcgm-exporter (a DaemonSet pod drain leaves)" in evidence
    assert state.nodes["gpu02"].current == "done"
