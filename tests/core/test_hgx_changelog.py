"""On HGX nodes the change log shows what an SRE checks: the rollback packages saved before
the install, the driver, fabric manager and nscq moved in lockstep, holds recorded and set
again, and a rollback that reinstalls the saved files when the index moved on.

Real parts: the demo fleet called in process (InProcessTransport), the session, the autopilot taking Next; the
assertions read the change log written on disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from step_events import Events, finished, step_events, verified
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import StepStartedEvent
from cockpit.changelog.reader import read_session
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session

SPEED = IN_PROCESS_WALK_SPEED  # in process: no handshakes to leave room for


async def _walk(scenario: str, tmp_path: Path) -> tuple[Events, str]:
    async with demo_session(in_process=True, nodes=2, scenario=scenario, sessions_dir=tmp_path, speed=SPEED) as (
        session,
        fleet,
    ):
        await drive(session)
        path = session.path
        change_id = read_session(path).header.change_id
        if scenario == "rollback-repo-gone":  # the index moved on: the old version cannot be fetched by name
            index = fleet.nodes["gpu02"].packages.index
            assert {p.version for p in index if p.name == "nvidia-driver-575-open"} == {"575.64.05-0ubuntu1"}
    events = step_events(path)
    return events, change_id


@pytest.mark.timeout(90)
async def test_happy_hgx_node_saves_the_rollback_then_moves_in_lockstep(tmp_path: Path) -> None:
    events, change_id = await _walk("happy", tmp_path)
    for node in ("gpu01", "gpu02"):
        saved = finished(events, node, "upgrade", "save-rollback")
        install_started = next(
            e
            for e in events
            if isinstance(e, StepStartedEvent) and (e.node, e.stage, e.step) == (node, "upgrade", "install")
        )
        assert saved.seq < install_started.seq  # saved before anything changed
        assert saved.facts.ok and "Download complete and in download only mode" in (saved.facts.stdout or "")
        # NVIDIA's repository: the driver's parts at -0ubuntu1, fabric manager and nscq at -1
        saved_set = {
            "nvidia-driver-575-open": "575.57.08-0ubuntu1",
            "nvidia-dkms-575-open": "575.57.08-0ubuntu1",
            "nvidia-fabricmanager-575": "575.57.08-1",
            "libnvidia-nscq-575": "575.57.08-1",
        }
        for pkg, version in saved_set.items():
            assert f"{pkg} amd64 {version}" in (saved.facts.stdout or "")
            assert f" {pkg}_{version}_amd64.deb\n" in (saved.facts.stdout or "")  # listed on disk
        assert verified(events, node, "upgrade", "rollback-saved").facts.ok  # still there at the gate
        install = finished(events, node, "upgrade", "install")
        assert install.facts.ok
        # the open flavour kept; from 580 NVIDIA's repository names fabric manager and nscq without the branch
        for pkg, version in (
            ("nvidia-driver-580-open", "580.95.05-0ubuntu1"),
            ("nvidia-fabricmanager", "580.95.05-1"),
            ("libnvidia-nscq", "580.95.05-1"),
        ):
            assert f"Setting up {pkg} ({version})" in (install.facts.stdout or "")
        assert "nvidia-dkms-580-open (580.95.05-0ubuntu1)" in (install.facts.stdout or "")
        assert "Removing nvidia-fabricmanager-575 (575.57.08-1)" in (install.facts.stdout or "")
        lockstep = verified(events, node, "upgrade", "lockstep")
        assert lockstep.facts.ok and "580.95.05" in (lockstep.facts.evidence or "")
        fabric = verified(events, node, "smoke", "fabric-manager")
        assert fabric.facts.ok
    assert change_id in (finished(events, "gpu01", "upgrade", "holds").facts.command or "")


@pytest.mark.timeout(90)
async def test_held_packages_are_recorded_released_and_set_on_the_new_branch(tmp_path: Path) -> None:
    events, _ = await _walk("held-packages", tmp_path)
    holds = finished(events, "gpu02", "upgrade", "holds")
    assert "nvidia-driver-575-open\n" in (holds.facts.stdout or "") and "nvidia-fabricmanager-575\n" in (
        holds.facts.stdout or ""
    )
    unhold = finished(events, "gpu02", "upgrade", "unhold")
    assert "Canceled hold on nvidia-driver-575-open." in (unhold.facts.stdout or "")
    assert finished(events, "gpu02", "upgrade", "install").facts.ok
    rehold = finished(events, "gpu02", "upgrade", "rehold")
    for pkg in ("nvidia-driver-580-open", "nvidia-dkms-580-open", "nvidia-fabricmanager", "libnvidia-nscq"):
        assert f"{pkg} set on hold." in (rehold.facts.stdout or "")
    # gpu01 held nothing: its rehold set none
    assert "set on hold" not in (finished(events, "gpu01", "upgrade", "rehold").facts.stdout or "")


@pytest.mark.timeout(90)
async def test_hgx_lockstep_stops_before_anything_changes(tmp_path: Path) -> None:
    events, _ = await _walk("hgx-lockstep", tmp_path)
    dry = finished(events, "gpu02", "upgrade", "target-downloadable")
    assert dry.facts.exit_status == 123  # xargs: the apt-get it ran failed (apt-get's own 100)
    assert "E: Version '580.95.05*' for 'nvidia-fabricmanager' was not found" in (dry.facts.stderr or "")
    assert not [e for e in events if isinstance(e, StepStartedEvent) and (e.node, e.step) == ("gpu02", "install")]


@pytest.mark.timeout(120)
async def test_rollback_reinstalls_the_saved_files_when_the_index_moved_on(tmp_path: Path) -> None:
    events, change_id = await _walk("rollback-repo-gone", tmp_path)
    saved = finished(events, "gpu02", "upgrade", "save-rollback")
    assert " nvidia-driver-575-open_575.57.08-0ubuntu1_amd64.deb\n" in (saved.facts.stdout or "")
    drained = finished(events, "gpu02", "rollback", "drain")
    reinstall = finished(events, "gpu02", "rollback", "reinstall")
    assert drained.seq < reinstall.seq and reinstall.facts.ok
    assert f"find /var/cache/cockpit/{change_id}" in (reinstall.facts.command or "")
    for pkg, version in (("nvidia-driver-575-open", "575.57.08-0ubuntu1"), ("nvidia-fabricmanager-575", "575.57.08-1")):
        assert f"Unpacking {pkg} ({version})" in (reinstall.facts.stdout or "")
    assert "Get:" not in (reinstall.facts.stdout or "")  # nothing came from the repository
    assert verified(events, "gpu02", "rollback", "recorded-driver").facts.ok
    assert verified(events, "gpu02", "rollback", "library-match").facts.ok
