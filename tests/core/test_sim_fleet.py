"""The fleet simulator behaves like GPU nodes through a driver upgrade, over real SSH."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from cockpit.fleet.results import ErrorKind
from cockpit.fleet.transport import Transport, TransportOptions
from cockpit.sim import SCENARIOS, SimFleet, node_names
from cockpit.sim.smi import MISMATCH, NOT_LOADED

FAST = 20.0  # install ~0.1 s, reboot ~0.2 s


# the developer's own ~/.ssh and agent never leak into these tests
pytestmark = [pytest.mark.ssh, pytest.mark.usefixtures("isolated_home")]


@asynccontextmanager
async def open_fleet(
    tmp_path: Path, nodes: int = 2, scenario: str = "happy"
) -> AsyncIterator[tuple[SimFleet, Transport]]:
    """A started simulated fleet and a transport to it, both closed on the way out."""
    async with SimFleet(nodes, scenario, speed=FAST) as fleet:
        files = fleet.write_client_files(tmp_path / "sim")
        options = TransportOptions(ssh_config=files.ssh_config, backoff_initial_s=0.05)
        async with Transport(fleet.targets(), options) as transport:
            yield fleet, transport


@pytest.fixture
async def happy(tmp_path: Path) -> AsyncIterator[tuple[SimFleet, Transport]]:
    async with open_fleet(tmp_path) as opened:
        yield opened


async def wait_back(transport: Transport, host: str, old_boot: str, limit_s: float = 5.0) -> str:
    """Poll until the node answers with a new boot id (what the executor does after a reboot)."""
    deadline = asyncio.get_running_loop().time() + limit_s
    while asyncio.get_running_loop().time() < deadline:
        r = await transport.run(host, "cat /proc/sys/kernel/random/boot_id", timeout=2)
        if r.ok and r.stdout.strip() != old_boot:
            return r.stdout.strip()
        await asyncio.sleep(0.05)
    raise AssertionError(f"{host} did not come back within {limit_s} s")


def test_node_names_are_zero_padded() -> None:
    assert node_names(3) == ["gpu01", "gpu02", "gpu03"]
    assert node_names(100)[0] == "gpu001" and node_names(100)[-1] == "gpu100"


async def test_client_files_describe_every_host(happy: tuple[SimFleet, Transport], tmp_path: Path) -> None:
    fleet, _ = happy
    files = fleet.write_client_files(tmp_path / "again")
    config = files.ssh_config.read_text()
    for name in fleet.all_names:
        host, port = fleet.endpoint(name)
        assert f"Host {name}\n    HostName {host}\n    Port {port}\n" in config
        assert f"[{host}]:{port} ssh-ed25519 " in files.known_hosts.read_text()
    assert "StrictHostKeyChecking yes" in config and f"IdentityFile {files.identity}" in config
    assert stat.S_IMODE(files.identity.stat().st_mode) == 0o600
    assert len({fleet.host_key(n).get_fingerprint() for n in fleet.all_names}) == len(fleet.all_names)


async def test_upgrade_then_reboot_round_trip(happy: tuple[SimFleet, Transport], tmp_path: Path) -> None:
    fleet, t = happy
    before = await t.run(
        "gpu01", "nvidia-smi --version; cat /proc/driver/nvidia/version; cat /proc/sys/kernel/random/boot_id"
    )
    assert "DRIVER version      : 575.57.08" in before.stdout and "CUDA Version        : 12.9" in before.stdout
    old_boot = before.stdout.strip().splitlines()[-1]
    refused = await t.run("gpu01", "docker run --rm --gpus all vllm/vllm-openai:v0.11.0-cu130 python -c 'import torch'")
    assert refused.exit_status == 125
    assert "unsatisfied condition: cuda>=13.0, please update your driver" in refused.stderr

    chunks: list[str] = []
    # an HGX node: the fabric manager and nscq move with the driver only when named
    install = await t.run(
        "gpu01",
        "sudo apt-get install -y nvidia-driver-580-open nvidia-fabricmanager=580.95.05-1 libnvidia-nscq=580.95.05-1",
        on_output=lambda s, c: chunks.append(c),
    )
    assert install.ok and "Setting up nvidia-driver-580-open (580.95.05-0ubuntu1)" in install.stdout
    assert len(chunks) > 5, "install output is streamed, not delivered at the end"

    pending = await t.run("gpu01", "nvidia-smi; cat /proc/driver/nvidia/version")
    assert pending.exit_status == 0  # the status of the last command: cat of the still-loaded module
    assert f"{MISMATCH}\nNVML library version: 580.95\n" in pending.stdout
    assert "575.57.08" in pending.stdout  # the kernel module only changes at boot
    smi_rc = await t.run("gpu01", "nvidia-smi -L")
    assert smi_rc.exit_status == 18

    reboot = await t.run("gpu01", "sudo systemctl reboot")
    assert reboot.ok
    await asyncio.sleep(0.1)
    assert not fleet.is_up("gpu01")
    files = fleet.write_client_files(tmp_path / "one-shot")
    async with Transport(fleet.targets(), TransportOptions(ssh_config=files.ssh_config, connect_attempts=1)) as once:
        away = await once.run("gpu01", "true")
    assert away.error_kind == ErrorKind.CONNECT_FAILED and "refused" in (away.error or "").lower()
    new_boot = await wait_back(t, "gpu01", old_boot)
    assert new_boot != old_boot
    after = await t.run(
        "gpu01",
        "cat /proc/driver/nvidia/version; nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u",
    )
    assert "Kernel Module for x86_64  580.95.05" in after.stdout and after.stdout.endswith("580.95.05\n")
    code = '"import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"'
    # the image's ENTRYPOINT is vllm serve: without --entrypoint the arguments go to the server
    to_server = await t.run("gpu01", f"docker run --rm --gpus all vllm/vllm-openai:v0.11.0-cu130 python -c {code}")
    assert (
        to_server.exit_status == 2 and "vllm serve: error: unrecognized arguments: -c import torch" in to_server.stderr
    )
    smoke = await t.run(
        "gpu01", f"docker run --rm --gpus all --entrypoint python3 vllm/vllm-openai:v0.11.0-cu130 -c {code}"
    )
    assert smoke.stdout == "2.9.0+cu130 13.0 True\n"
    pkg = await t.run("gpu01", "dpkg-query -W -f='${Version}' nvidia-driver-580-open")
    assert pkg.stdout == "580.95.05-0ubuntu1"


async def test_a_driver_only_install_leaves_the_fabric_manager_behind(happy: tuple[SimFleet, Transport]) -> None:
    _, t = happy
    old_boot = (await t.run("gpu02", "cat /proc/sys/kernel/random/boot_id")).stdout.strip()
    assert (await t.run("gpu02", "apt-get install -y nvidia-driver-580-open")).ok
    left = await t.run(
        "gpu02", "dpkg-query -W -f='${Package}=${Version}\\n' 'nvidia-fabricmanager-*' 'libnvidia-nscq-*'"
    )
    assert left.stdout == "nvidia-fabricmanager-575=575.57.08-1\nlibnvidia-nscq-575=575.57.08-1\n"
    assert (await t.run("gpu02", "systemctl reboot")).ok
    await asyncio.sleep(0.1)
    await wait_back(t, "gpu02", old_boot)
    status = await t.run("gpu02", "systemctl status nvidia-fabricmanager")
    assert status.exit_status == 3 and "Active: failed" in status.stdout
    assert "interface version 575.57.08 doesn't match with driver version 580.95.05" in status.stdout
    smoke = await t.run(
        "gpu02",
        "docker run --rm --gpus all --entrypoint python3 vllm/vllm-openai:v0.11.0-cu130 -c "
        '"import torch; print(torch.cuda.is_available())"',
    )
    # torch warns and answers False at exit 0: the false pass the strict smoke item refuses
    assert smoke.exit_status == 0 and smoke.stdout == "False\n"
    assert "Error 802: system not yet initialized" in smoke.stderr


async def test_the_old_branch_comes_back_while_the_index_carries_it(happy: tuple[SimFleet, Transport]) -> None:
    _, t = happy
    assert (await t.run("gpu01", "apt-get install -y nvidia-driver-580-open")).ok
    # another branch is other packages (the old ones are removed), not a downgrade in apt's sense
    back = await t.run("gpu01", "apt-get install -y nvidia-driver-575-open=575.57.08-0ubuntu1")
    assert back.ok and "The following packages will be REMOVED:" in back.stdout
    smi = await t.run("gpu01", "nvidia-smi --query-gpu=index --format=csv,noheader")
    assert smi.ok and smi.stdout.count("\n") == 8  # userspace 575 matches the loaded 575 module again


async def test_control_host_drains_and_uncordons(happy: tuple[SimFleet, Transport]) -> None:
    _, t = happy
    drain = await t.run("control", "kubectl drain gpu01 --ignore-daemonsets --delete-emptydir-data --timeout=600s")
    assert drain.ok and "node/gpu01 drained" in drain.stdout and "ignoring DaemonSet-managed Pods" in drain.stderr
    get = await t.run("control", "kubectl get node gpu01")
    assert "Ready,SchedulingDisabled" in get.stdout
    missing = await t.run("control", "kubectl cordon gpu99")
    assert missing.exit_status == 1 and 'nodes "gpu99" not found' in missing.stderr
    assert (await t.run("control", "kubectl uncordon gpu01")).stdout == "node/gpu01 uncordoned\n"
    label = await t.run(
        "control", "kubectl get node gpu01 -o jsonpath='{.metadata.labels.nvidia\\.com/cuda\\.driver-version\\.full}'"
    )
    assert label.stdout == "575.57.08"

    jobs = await t.run("control", "squeue -h -w gpu02")
    assert "gpu02" in jobs.stdout
    assert (await t.run("control", "scontrol update nodename=gpu02 state=drain reason=CHG-1")).ok
    await asyncio.sleep(1.0 / FAST + 0.1)
    assert (await t.run("control", "squeue -h -w gpu02")).stdout == ""
    assert "State=IDLE+DRAIN" in (await t.run("control", "scontrol show node gpu02")).stdout
    assert (await t.run("control", "scontrol update nodename=gpu02 state=resume")).ok


async def test_node_rebooting_shows_not_ready_on_the_control_host(happy: tuple[SimFleet, Transport]) -> None:
    fleet, t = happy
    assert (await t.run("gpu02", "reboot")).ok
    await asyncio.sleep(0.05)
    assert not fleet.is_up("gpu02")
    ready = await t.run(
        "control", "kubectl get node gpu02 -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}'"
    )
    assert ready.stdout == "Unknown"


@asynccontextmanager
async def scenario_after_upgrade(tmp_path: Path, scenario: str) -> AsyncIterator[tuple[SimFleet, Transport, str]]:
    """gpu02 of a two-node fleet in ``scenario``, upgraded and rebooting; with its old boot id."""
    async with open_fleet(tmp_path, 2, scenario) as (fleet, t):
        old = (await t.run("gpu02", "cat /proc/sys/kernel/random/boot_id")).stdout.strip()
        assert (await t.run("gpu02", "apt-get install -y nvidia-driver-580-open")).ok
        assert (await t.run("gpu02", "systemctl reboot")).ok
        await asyncio.sleep(0.1)
        yield fleet, t, old


async def test_gpu_missing_scenario_loses_a_gpu_with_xid_79(tmp_path: Path) -> None:
    async with scenario_after_upgrade(tmp_path, "gpu-missing") as (_fleet, t, old):
        await wait_back(t, "gpu02", old)
        smi = await t.run("gpu02", "nvidia-smi --query-gpu=index --format=csv,noheader")
        assert smi.stdout.count("\n") == 7
        xid = await t.run("gpu02", "journalctl -k -b 0 --no-pager -q -g 'NVRM: Xid'")
        assert xid.ok and "NVRM: Xid (PCI:0000:DB:00): 79, " in xid.stdout and "fallen off the bus" in xid.stdout
        canary = await t.run("gpu01", "nvidia-smi -L")
        assert canary.stdout.count("\n") == 8


async def test_no_return_scenario_never_comes_back(tmp_path: Path) -> None:
    async with scenario_after_upgrade(tmp_path, "no-return") as (fleet, t, old):
        with pytest.raises(AssertionError, match="did not come back"):
            await wait_back(t, "gpu02", old, limit_s=0.8)  # four times the simulated reboot
        assert not fleet.is_up("gpu02")


async def test_mismatch_scenario_persists_after_reboot(tmp_path: Path) -> None:
    async with scenario_after_upgrade(tmp_path, "mismatch") as (_fleet, t, old):
        await wait_back(t, "gpu02", old)
        smi = await t.run("gpu02", "nvidia-smi")
        assert smi.exit_status == 18 and MISMATCH in smi.stdout
        assert "575.57.08" in (await t.run("gpu02", "cat /proc/driver/nvidia/version")).stdout


async def test_fabric_manager_scenario_fails_fm_and_containers(tmp_path: Path) -> None:
    async with scenario_after_upgrade(tmp_path, "fabric-manager") as (_fleet, t, old):
        await wait_back(t, "gpu02", old)
        fm = await t.run("gpu02", "systemctl is-active nvidia-fabricmanager")
        assert fm.exit_status == 3 and fm.stdout == "failed\n"
        # torch warns and answers False at exit status 0; only a real CUDA call raises
        run = await t.run(
            "gpu02", "docker run --rm --gpus all img:cu130 python -c 'import torch; print(torch.cuda.is_available())'"
        )
        assert run.exit_status == 0 and run.stdout == "False\n"
        assert "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount()" in run.stderr
        assert "Error 802: system not yet initialized" in run.stderr
        call = await t.run(
            "gpu02", "docker run --rm --gpus all img:cu130 python -c 'import torch; torch.ones(1, device=\"cuda:0\")'"
        )
        assert call.exit_status == 1 and "RuntimeError: Unexpected error from cudaGetDeviceCount()" in call.stderr


async def test_driver_not_loaded_after_removing_the_module(happy: tuple[SimFleet, Transport]) -> None:
    fleet, t = happy
    fleet.nodes["gpu01"].module = None  # as after a failed DKMS build on a new kernel
    smi = await t.run("gpu01", "nvidia-smi")
    assert smi.exit_status == 9 and smi.stdout == NOT_LOADED + "\n"


async def test_slow_scenario_delays_every_reply(tmp_path: Path) -> None:
    fleet = SimFleet(1, "slow", speed=1.0)
    async with fleet:
        files = fleet.write_client_files(tmp_path / "sim")
        async with Transport(fleet.targets(), TransportOptions(ssh_config=files.ssh_config)) as t:
            await t.run("gpu01", "true")  # connect first
            r = await t.run("gpu01", "true")
    assert r.ok and r.duration_s >= SCENARIOS["slow"].latency_s


async def test_a_client_that_connects_before_the_fleet_serves_waits_for_it(tmp_path: Path) -> None:
    fleet = SimFleet(1, speed=FAST)
    fleet.bind()  # ports known, client files written, nothing served yet
    try:
        files = fleet.write_client_files(tmp_path / "sim")
        async with Transport(fleet.targets(), TransportOptions(ssh_config=files.ssh_config)) as t:
            early = asyncio.create_task(t.run("gpu01", "hostname"))
            await asyncio.sleep(0.3)
            assert not early.done()  # in the listen backlog, waiting for the banner: neither refused nor failed
            await fleet.start()
            r = await early
        assert r.ok and r.stdout == "gpu01\n"
    finally:
        await fleet.stop()


async def test_start_on_first_connection_serves_once_a_client_knocks(tmp_path: Path) -> None:
    fleet = SimFleet(2, speed=FAST)
    fleet.start_on_first_connection()
    try:
        await asyncio.sleep(0.05)
        assert not fleet.started
        files = fleet.write_client_files(tmp_path / "sim")
        async with Transport(fleet.targets(), TransportOptions(ssh_config=files.ssh_config)) as t:
            results = await t.run_many(["gpu01", "gpu02", "control"], "hostname")
        assert [r.stdout for r in results.values()] == ["gpu01\n", "gpu02\n", "control\n"]
        assert fleet.started
    finally:
        await fleet.stop()


async def test_a_bound_fleet_that_never_served_frees_its_ports_on_stop(tmp_path: Path) -> None:
    fleet = SimFleet(1, speed=FAST)
    fleet.start_on_first_connection()
    host, port = fleet.endpoint("gpu01")
    await fleet.stop()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection(host, port)


async def test_a_sleep_command_follows_the_fleets_speed() -> None:
    """`sleep N` on a simulated node or the control host takes N seconds of the fleet's clock."""
    import time

    fleet = SimFleet(1, speed=100.0)
    out: list[str] = []
    for shell in (fleet.nodes["gpu01"].shell(), fleet.control.shell()):
        started = time.monotonic()
        assert await shell.run("sleep 3 && echo woke", out.append, out.append) == 0
        assert time.monotonic() - started < 1.0  # 3 s at speed 100: 0.03 s, not 3
    assert out == ["woke\n", "woke\n"]
    assert await fleet.nodes["gpu01"].shell().run("sleep soon", out.append, out.append) == 1
