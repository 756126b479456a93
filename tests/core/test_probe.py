"""Probes: the batch output parsed into NodeState, the verdict, and every simulator scenario."""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cockpit.fleet.probes import (
    MARK,
    decide_health,
    parse_fabric_manager,
    parse_probe_output,
    parse_xids,
    pick_driver_package,
    probe_command,
    probe_fleet,
    probe_node,
    split_packages,
    split_sections,
)
from cockpit.fleet.transport import Transport, TransportOptions
from cockpit.gpu.nodestate import Health, NodeState
from cockpit.gpu.parsers.query_gpu import probe_query_command
from cockpit.sim import SimFleet

FAST = 20.0


# the developer's own ~/.ssh and agent never leak into these tests
pytestmark = [pytest.mark.ssh, pytest.mark.usefixtures("isolated_home")]


def batch(**sections: tuple[str, int]) -> str:
    """Probe output as a node would print it: marker, text, status line per section."""
    out = []
    for name, (text, rc) in sections.items():
        out += [f"{MARK} {name.replace('_', '-')}", text.rstrip("\n"), f"{MARK} rc {rc}"]
    return "\n".join([*out, f"{MARK} end"]) + "\n"


# -- pure parsing, with real captured outputs -----------------------------------------


def test_split_sections_keeps_status_and_survives_a_cut_short_batch() -> None:
    out = f"{MARK} a\nline 1\nline 2\n{MARK} rc 0\n{MARK} b\npartial"
    sections = split_sections(out)
    assert sections["a"].text == "line 1\nline 2" and sections["a"].status == 0
    assert sections["b"].text == "partial" and sections["b"].status is None


def test_real_mismatch_output_is_a_pending_reboot(fixtures_dir: Path) -> None:
    capture = (fixtures_dir / "errors" / "nvml-mismatch_570.124_tinygrad-open-gpu-kernel-modules-47.txt").read_text()
    smi_lines = "\n".join(ln for ln in capture.splitlines() if "NVML" in ln)
    proc = (fixtures_dir / "proc_version" / "open-565.57.01_ubuntu24.04_nixGL-186.txt").read_text()
    state = parse_probe_output(
        "gpu01", batch(query_gpu=(smi_lines, 18), smi_version=(smi_lines, 18), proc_version=(proc, 0))
    )
    health, evidence = decide_health(state)
    assert health is Health.DRIVER_LIBRARY_MISMATCH
    assert "Failed to initialize NVML: Driver/library version mismatch" in evidence
    assert "565.57.01" in evidence and state.kernel_module_version == "565.57.01"
    assert state.gpus == [] and state.driver_version is None


def test_real_driver_not_loaded_output(fixtures_dir: Path) -> None:
    capture = (fixtures_dir / "errors" / "smi-no-driver_lyulyul-shine-cluster-50.txt").read_text()
    smi = "\n".join(ln for ln in capture.splitlines() if ln.startswith("NVIDIA-SMI"))
    state = parse_probe_output(
        "gpu07",
        batch(query_gpu=(smi, 9), proc_version=("cat: /proc/driver/nvidia/version: No such file or directory", 1)),
    )
    health, evidence = decide_health(state)
    assert health is Health.DRIVER_NOT_LOADED and "couldn't communicate with the NVIDIA driver" in evidence
    assert state.kernel_module_version is None


def test_real_version_outputs_give_driver_and_cuda(fixtures_dir: Path) -> None:
    version = (fixtures_dir / "misc" / "nvidia-smi--version_H200_580.173.02_utkuozdemir-capture.txt").read_text()
    row = "0, NVIDIA H200, GPU-00000000-0000-0000-0000-000000000000, 00000000:83:00.0, 580.173.02, 143771, 0, 0, 37, 85.12, 700.00, Enabled, 0, Disabled"
    proc = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.173.02  Release Build  (dvs-builder@x)  Tue Aug 12 2025\n"
    state = parse_probe_output(
        "h200",
        batch(
            query_gpu=(row, 0),
            smi_version=(version, 0),
            proc_version=(proc, 0),
            fabric_manager=("LoadState=not-found\nActiveState=inactive", 0),
        ),
    )
    assert (state.driver_version, state.cuda_version, state.kernel_module_version) == (
        "580.173.02",
        "13.0",
        "580.173.02",
    )
    assert state.gpus[0].memory_total_mib == 143771 and state.gpus[0].persistence_mode is True
    assert state.fabric_manager is None  # no fabric manager unit on a single-GPU box
    assert decide_health(state)[0] is Health.OK
    assert decide_health(state, baseline_gpus=2) == (Health.GPU_MISSING, "1 GPUs visible, baseline 2")


def test_small_parsers() -> None:
    assert (
        pick_driver_package("ii nvidia-driver-575=575.57.08-1\nun nvidia-driver-580=\n")
        == "nvidia-driver-575=575.57.08-1"
    )
    assert (
        pick_driver_package("ii cuda-drivers=580.95.05-1.el9\nii nvidia-driver=580.95.05-1.el9\n")
        == "cuda-drivers=580.95.05-1.el9"
    )
    assert pick_driver_package("") is None
    assert parse_fabric_manager("LoadState=loaded\nActiveState=failed\n") == "failed"
    assert parse_fabric_manager("LoadState=not-found\nActiveState=inactive\n") is None
    assert parse_fabric_manager("") is None
    xids = parse_xids(
        "Sep 01 20:41:56 gpu02 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        "[  812.345678] NVRM: Xid (0000:18:00): 48, pid=1, name=x, An uncorrectable double bit error\nunrelated line\n"
    )
    assert [(x.code, x.bus_id) for x in xids] == [(79, "0000:3b:00"), (48, "0000:18:00")]
    assert xids[0].text.startswith("NVRM: Xid (PCI:0000:3b:00): 79")


def test_fabric_manager_down_is_its_own_verdict() -> None:
    state = NodeState(
        host="n", reachable=True, driver_version="580.95.05", kernel_module_version="580.95.05", fabric_manager="failed"
    )
    assert decide_health(state) == (Health.FABRIC_MANAGER_DOWN, "nvidia-fabricmanager is failed")


def test_probe_command_is_one_line_without_placeholders() -> None:
    cmd = probe_command()
    assert "\n" not in cmd
    assert shlex.join(probe_query_command()) + " 2>&1" in cmd
    assert cmd.count(f"'{MARK} ") == 14  # thirteen sections and the end marker
    # one package query answers the driver package and the toolkit: the database is read once
    assert cmd.count("dpkg-query") == 1 and cmd.count("rpm -q") == 1


def test_one_package_query_gives_the_facts_the_two_queries_gave() -> None:
    """The "nvidia-packages" section against what the former driver-package and toolkit
    sections read from the same package database (dpkg-query and rpm line formats)."""
    apt = (
        "ii nvidia-container-toolkit=1.17.8-1\nhi nvidia-driver-580=580.95.05-0ubuntu1\n"
        "rc nvidia-driver-575=575.57.08-0ubuntu1\nii nvidia-driver-580-open=580.95.05-0ubuntu1\n"
    )
    rpm = "ii nvidia-driver=580.95.05-1.el9\nii nvidia-container-toolkit=1.17.8-1\nii cuda-drivers=580.95.05-1.el9\n"
    held_toolkit = "hi nvidia-container-toolkit=1.17.8-1\nii nvidia-driver-575=575.57.08-1\n"
    for text, expected in (
        (apt, ("nvidia-driver-580=580.95.05-0ubuntu1", "1.17.8-1")),
        (rpm, ("nvidia-driver=580.95.05-1.el9", "1.17.8-1")),
        (held_toolkit, ("nvidia-driver-575=575.57.08-1", None)),  # as before: only "ii " read as installed
        ("", (None, None)),
    ):
        assert split_packages(text) == expected
        state = parse_probe_output("n", batch(nvidia_packages=(text, 0)))
        assert (state.driver_package, state.container_toolkit_version) == expected
    # the two sections of earlier probes still read the same
    old = parse_probe_output(
        "n", batch(driver_package=("ii nvidia-driver-575=575.57.08-1", 0), toolkit=("ii 1.17.8-1", 0))
    )
    assert (old.driver_package, old.container_toolkit_version) == ("nvidia-driver-575=575.57.08-1", "1.17.8-1")


# -- against the simulator -------------------------------------------------------------


async def start(tmp_path: Path, nodes: int, scenario: str = "happy", **opts: object) -> tuple[SimFleet, Transport]:
    fleet = SimFleet(nodes, scenario, speed=FAST)
    await fleet.start()
    files = fleet.write_client_files(tmp_path / "sim")
    return fleet, Transport(
        fleet.targets(), TransportOptions(ssh_config=files.ssh_config, backoff_initial_s=0.05, **opts)
    )


@pytest.fixture
async def pair(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[SimFleet, Transport]]:
    fleet, transport = await start(tmp_path, 2, getattr(request, "param", "happy"))
    yield fleet, transport
    await transport.close()
    await fleet.stop()


async def upgrade_and_reboot(fleet: SimFleet, t: Transport, host: str = "gpu02", wait: bool = True) -> NodeState:
    before = await probe_node(t, host)
    assert (
        await t.run(
            host,
            "sudo apt-get install -y nvidia-driver-580-open nvidia-fabricmanager=580.95.05-1 libnvidia-nscq=580.95.05-1",
        )
    ).ok
    pending = await probe_node(t, host)
    assert pending.health is Health.DRIVER_LIBRARY_MISMATCH, pending.health_evidence
    assert (await t.run(host, "sudo systemctl reboot")).ok
    await asyncio.sleep(0.05)
    if not wait:
        return pending
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        state = await probe_node(t, host, baseline_gpus=8, rebooting=True)
        if state.reachable and state.boot_id != before.boot_id:
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"{host} did not come back")


async def test_sixty_four_nodes_probed(tmp_path: Path) -> None:
    fleet, t = await start(tmp_path, 64)
    try:
        hosts = fleet.node_names
        states = await probe_fleet(t, hosts, baseline_gpus={h: 8 for h in hosts})
    finally:
        await t.close()
        await fleet.stop()
    assert list(states) == hosts
    assert {s.health for s in states.values()} == {Health.OK}
    assert {(s.driver_version, s.cuda_version, s.kernel_module_version) for s in states.values()} == {
        ("575.57.08", "12.9", "575.57.08")
    }
    assert all(s.gpu_count == 8 and s.fabric_manager == "active" for s in states.values())
    assert len({s.boot_id for s in states.values()}) == 64
    assert len({g.uuid for s in states.values() for g in s.gpus}) == 64 * 8
    assert states["gpu01"].driver_package == "nvidia-driver-575-open=575.57.08-0ubuntu1"
    assert states["gpu01"].container_toolkit_version == "1.17.8-1"


async def test_happy_upgrade_ends_on_r580(pair: tuple[SimFleet, Transport]) -> None:
    fleet, t = pair
    state = await upgrade_and_reboot(fleet, t)
    assert state.health is Health.OK, state.health_evidence
    assert (state.driver_version, state.cuda_version, state.kernel_module_version) == ("580.95.05", "13.0", "580.95.05")
    assert state.driver_package == "nvidia-driver-580-open=580.95.05-0ubuntu1"


@pytest.mark.parametrize("pair", ["gpu-missing"], indirect=True)
async def test_gpu_missing_scenario(pair: tuple[SimFleet, Transport]) -> None:
    fleet, t = pair
    state = await upgrade_and_reboot(fleet, t)
    assert state.health is Health.GPU_MISSING and state.health_evidence == "7 GPUs visible, baseline 8"
    assert [x.code for x in state.xid_errors] == [79]
    assert (await probe_node(t, "gpu01", baseline_gpus=8)).health is Health.OK


@pytest.mark.parametrize("pair", ["no-return"], indirect=True)
async def test_no_return_scenario_is_rebooting_then_unreachable(pair: tuple[SimFleet, Transport]) -> None:
    fleet, t = pair
    await upgrade_and_reboot(fleet, t, wait=False)
    await asyncio.sleep(0.3)  # longer than the simulated reboot
    rebooting = await probe_node(t, "gpu02", rebooting=True)
    assert rebooting.health is Health.REBOOTING and not rebooting.reachable
    gone = await probe_node(t, "gpu02")
    assert gone.health is Health.UNREACHABLE and "refused" in gone.health_evidence


@pytest.mark.parametrize("pair", ["fabric-manager"], indirect=True)
async def test_fabric_manager_scenario(pair: tuple[SimFleet, Transport]) -> None:
    fleet, t = pair
    state = await upgrade_and_reboot(fleet, t)
    assert state.health is Health.FABRIC_MANAGER_DOWN and state.fabric_manager == "failed"


@pytest.mark.parametrize("pair", ["mismatch"], indirect=True)
async def test_mismatch_scenario_persists(pair: tuple[SimFleet, Transport]) -> None:
    fleet, t = pair
    state = await upgrade_and_reboot(fleet, t)
    assert state.health is Health.DRIVER_LIBRARY_MISMATCH and state.kernel_module_version == "575.57.08"


@pytest.mark.parametrize("pair", ["xid"], indirect=True)
async def test_xid_scenario_reports_the_xid(pair: tuple[SimFleet, Transport]) -> None:
    fleet, t = pair
    state = await upgrade_and_reboot(fleet, t)
    assert [x.code for x in state.xid_errors] == [48]  # the verdict stays ok: fatal XIDs are a trigger's call
    assert state.health is Health.OK


async def test_driver_not_loaded(pair: tuple[SimFleet, Transport]) -> None:
    fleet, t = pair
    fleet.nodes["gpu01"].module = None
    state = await probe_node(t, "gpu01")
    assert state.health is Health.DRIVER_NOT_LOADED and state.kernel_module_version is None
    assert state.fabric_manager == "active"  # facts that do not depend on the driver are still read


@pytest.mark.parametrize("pair", ["flaky-link"], indirect=True)
async def test_flaky_link_gives_an_unreachable_envelope_then_recovers(pair: tuple[SimFleet, Transport]) -> None:
    _fleet, t = pair
    states = [await probe_node(t, "gpu02") for _ in range(25)]
    lost = [s for s in states if not s.reachable]
    assert lost, "the flaky link never dropped in 25 probes"
    assert all(s.health is Health.UNREACHABLE and "connection lost" in (s.error or "") for s in lost)
    assert any(s.health is Health.OK for s in states)


@pytest.mark.parametrize("pair", ["slow"], indirect=True)
async def test_slow_scenario_still_probes(pair: tuple[SimFleet, Transport]) -> None:
    _fleet, t = pair
    state = await probe_node(t, "gpu01")
    assert state.health is Health.OK
