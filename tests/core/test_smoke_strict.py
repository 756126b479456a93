"""The smoke fails when the GPU path is broken, on a simulator that is as strict as real containers.

Each simulated node is the real simulator part (its shell, container engines, torch, DCGM,
nccl-tests, kernel log), driven through its shell as a command over SSH would be; the
shipped runbook's own commands are filled and run. The torch warning, the DCGM table and
the nccl-tests failure are compared with the real captures in tests/fixtures/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sim_nodes import no_wait, quick_node, sh

from cockpit.engine.checks import fatal_codes, no_verdict
from cockpit.errors import BadInput
from cockpit.fleet.probes import XID_SECTION, parse_kernel_log, parse_xids
from cockpit.runbook.builtins import FATAL_XID_CODES
from cockpit.runbook.loader import load
from cockpit.runbook.model import Item
from cockpit.runbook.placeholders import fill
from cockpit.sim.node import SimNode
from cockpit.sim.scenarios import SCENARIOS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
IMAGE = "vllm/vllm-openai:kimi-k3"


def node(scenario: str = "happy", index: int = 1) -> SimNode:
    return quick_node(f"gpu0{index + 1}", index, SCENARIOS[scenario])


async def upgraded(scenario: str = "happy") -> SimNode:
    """The scenario's target, moved to 580 and rebooted."""
    n = node(scenario)
    # driver, fabric manager and nscq move together, as the runbook's install step moves them
    status, _, err = await sh(
        n, "apt-get install -y nvidia-driver-580-open nvidia-fabricmanager=580.95.05-1 libnvidia-nscq=580.95.05-1"
    )
    assert status == 0, err
    n.reboot_now()
    return n


def smoke_item(item_id: str) -> Item:
    return next(i for i in load("driver-upgrade-r580").runbook.stage("smoke").items if i.id == item_id)


def filled(item: Item, **values: object) -> str:
    runbook = load("driver-upgrade-r580").runbook
    assert item.command is not None
    return fill(item.command, {**runbook.defaults(), "node": "gpu02", "recorded_gpu_count": 8, **values})  # type: ignore[dict-item]  # ints and strs, as the session fills them


def passes(item: Item, status: int, stdout: str) -> bool:
    assert item.expect is not None and item.expect.stdout_matches is not None
    return status == item.expect.exit_status and re.search(item.expect.stdout_matches, stdout) is not None


OLD_SMOKE = f"docker run --rm --gpus all {IMAGE} python -c 'import torch; print(torch.cuda.is_available())'"


async def test_the_container_smoke_passes_on_a_healthy_node() -> None:
    n = await upgraded()
    item = smoke_item("container-cuda")
    status, out, err = await sh(n, filled(item))
    assert passes(item, status, out), (status, out, err)
    assert "smoke ok: matmul on 8 of 8 GPUs" in out and err == ""


async def test_smoke_false_pass_the_old_smoke_passes_at_exit_0_and_the_new_one_fails() -> None:
    n = await upgraded("smoke-false-pass")
    status, out, _ = await sh(n, "nvidia-smi -L")
    assert status == 0 and out.count("\n") == 8  # nvidia-smi shows nothing wrong
    # the old smoke hands its arguments to the image's ENTRYPOINT, vllm serve
    status, _, err = await sh(n, OLD_SMOKE)
    assert status == 2 and "vllm serve: error: unrecognized arguments: -c" in err
    # with the entrypoint overridden it is the false pass: False, a warning, exit status 0
    status, out, err = await sh(
        n, OLD_SMOKE.replace("--gpus all", "--gpus all --entrypoint python").replace(" python -c", " -c")
    )
    assert (status, out) == (0, "False\n")
    assert "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount()" in err
    assert "Error 803: system has unsupported display driver / cuda driver combination" in err
    item = smoke_item("container-cuda")
    status, out, err = await sh(n, filled(item))
    assert not passes(item, status, out)
    assert status == 1 and "FAIL: CUDA not usable in the container (available=False, devices=8, baseline=8)" in err


async def test_the_torch_warning_is_the_real_one() -> None:
    real = (FIXTURES / "errors" / "cuda803_torch-getDeviceCount_easydiffusion-379.txt").read_text()
    line = re.search(r"UserWarning: CUDA initialization: .*?\(Triggered internally at", real)
    assert line is not None
    n = await upgraded("smoke-false-pass")
    _, _, ours = await sh(
        n, OLD_SMOKE.replace("--gpus all", "--gpus all --entrypoint python3").replace(" python -c", " -c")
    )
    assert line.group(0) in ours  # the same words, up to the source location
    assert "\n  return torch._C._cuda_getDeviceCount() > 0\n" in ours


async def test_the_container_smoke_fails_below_the_baseline_count() -> None:
    n = await upgraded("gpu-missing")
    item = smoke_item("container-cuda")
    status, out, err = await sh(n, filled(item))
    assert not passes(item, status, out)
    assert "devices: 7 baseline: 8" in out and "devices=7, baseline=8" in err


async def test_dcgm_level_1_misses_a_broken_cuda_path_level_2_fails_it() -> None:
    n = await upgraded("fabric-manager")
    item = smoke_item("dcgm-diag")
    status, out, _ = await sh(n, filled(item, dcgm_diag_level=1))
    assert passes(item, status, out)  # deployment checks only, as DCGM's level 1 does
    status, out, _ = await sh(n, filled(item, dcgm_diag_level=2))
    assert status == 226 and not passes(item, status, out)
    assert "Unable to initialize CUDA library: 'system" in out
    status, out, _ = await sh(n, filled(item, dcgm_diag_level=0))
    assert passes(item, status, out) and "skipped" in out


async def test_dcgm_output_has_the_real_layout() -> None:
    real = (FIXTURES / "misc" / "dcgmi-diag-r2_pass_DCGM-4.4.2_driver-580.105.08_DCGM-124.txt").read_text()
    _, ours, _ = await sh(await upgraded(), "dcgmi diag -r 2")
    structure = [ln for ln in real.splitlines()[1:] if not re.search(r"\d", ln)]
    assert structure and all(ln in ours.splitlines() for ln in structure)


async def test_nccl_all_reduce_checks_bandwidth_and_fails_on_cuda_errors() -> None:
    item = smoke_item("nccl-allreduce")
    healthy = await upgraded()
    status, out, _ = await sh(healthy, filled(item))
    assert passes(item, status, out)
    status, out, _ = await sh(healthy, filled(item, nccl_min_busbw_gbps=500.0))
    assert status == 1 and not passes(item, status, out) and re.search(r"# Avg bus bandwidth\s*: [0-9.]+ FAILED", out)
    status, out, _ = await sh(healthy, filled(item, nccl_all_reduce_perf=""))
    assert passes(item, status, out) and "skipped" in out
    broken = await upgraded("fabric-manager")
    status, out, _ = await sh(broken, filled(item))
    real = (FIXTURES / "misc" / "nccl-tests_all_reduce_perf_802_8xH100_nccl-tests-264.txt").read_text()
    assert "Test CUDA failure common.cu:941 'system not yet initialized'" in real
    assert status != 0 and "gpu02: Test CUDA failure common.cu:941 'system not yet initialized'" in out


async def test_podman_and_nerdctl_take_gpus_as_their_clis_do() -> None:
    n = await upgraded()
    n.containers.engines = ("docker", "podman", "nerdctl")
    n._commands = None  # the command table follows the engines the node has
    code = "-c 'import torch; print(torch.cuda.is_available())'"
    status, _, err = await sh(n, f"podman run --rm --device nvidia.com/gpu=all --entrypoint python3 {IMAGE} {code}")
    assert status == 126 and "unresolvable CDI devices nvidia.com/gpu=all" in err
    assert (await sh(n, "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"))[0] == 0
    status, out, _ = await sh(n, f"podman run --rm --device nvidia.com/gpu=all --entrypoint python3 {IMAGE} {code}")
    assert (status, out) == (0, "True\n")
    status, out, _ = await sh(n, f"nerdctl run --rm --gpus all --entrypoint python3 {IMAGE} {code}")
    assert (status, out) == (0, "True\n")
    # a CDI spec left from before a driver change names libraries that are gone
    assert (await sh(n, "apt-get install -y --allow-downgrades nvidia-driver-575-open=575.57.08-0ubuntu1"))[0] == 0
    status, _, err = await sh(n, f"podman run --rm --device nvidia.com/gpu=all --entrypoint python3 {IMAGE} {code}")
    assert status == 126 and "libnvidia-ml.so.580.95.05" in err


async def test_image_inspect_reads_the_images_cuda_without_running_it() -> None:
    freeze = load("driver-upgrade-r580").runbook.stage("freeze")
    step = next(s for s in freeze.steps if s.id == "image-cuda")
    assert step.run is not None
    status, out, _ = await sh(node(), fill(step.run, {"smoke_image": IMAGE}))
    assert status == 0 and '"CUDA_VERSION=13.0.2"' in out and '"NVIDIA_REQUIRE_CUDA=cuda>=13.0 ' in out


async def test_an_unreadable_kernel_log_is_reported_not_read_as_no_xid() -> None:
    n = await upgraded("xid")
    _, out, _ = await sh(n, XID_SECTION)
    assert parse_kernel_log(out) == "journal" and [x.code for x in parse_xids(out)] == [48]
    n.kernel.restricted = True
    status, out, _ = await sh(n, XID_SECTION)
    assert status == 0
    assert parse_kernel_log(out) == "unreadable: dmesg: read kernel buffer failed: Operation not permitted"
    assert parse_xids(out) == []


def test_the_no_fatal_xid_check_fails_without_a_verdict_on_an_unreadable_log() -> None:
    from gating_scenarios import HOSTS, Log, probe, small_runbook

    from cockpit.changelog.events import EventKind
    from cockpit.engine.checks import CheckResult, run_check
    from cockpit.engine.fold import fold

    def check(name: str, state: object) -> CheckResult:
        return run_check(name, state, "gpu01", {})  # type: ignore[arg-type]  # a folded CockpitState

    def state_after(last_probe: dict[str, object]) -> object:
        log = Log()
        log.open_window()
        log.add(EventKind.WAVE_STARTED, wave=0)
        log.node_through("gpu01", until="reboot")
        log.add(EventKind.PROBE, actor="cockpit", node="gpu01", facts=last_probe)
        return fold(small_runbook(), {}, HOSTS, log.events)

    state = state_after(last_probe=probe("gpu01-new", kernel_log="unreadable: dmesg: read kernel buffer failed"))
    result = check("no_fatal_xid", state)
    assert not result.ok and "read kernel buffer failed" in result.evidence and no_verdict(result.evidence)
    missing = state_after(last_probe={**probe("gpu01-new"), "kernel_log": None})
    assert not check("no_fatal_xid", missing).ok
    informational = state_after(last_probe=probe("gpu01-new", xid_codes=[63]))
    assert check("no_fatal_xid", informational).ok


@pytest.mark.parametrize("code", [48, 74, 79, 94, 95, 119, 120, 154])
def test_the_catalogues_reset_and_reboot_xids_are_fatal(code: int) -> None:
    assert code in FATAL_XID_CODES and code in fatal_codes({})


def test_a_runbook_extends_narrows_or_replaces_the_fatal_list() -> None:
    assert 63 not in fatal_codes({}) and 13 not in fatal_codes({})
    changed = fatal_codes({"fatal_xid_codes": "+13,-94"})
    assert 13 in changed and 94 not in changed and 79 in changed
    assert fatal_codes({"fatal_xid_codes": [48, 79]}) == {48, 79}
    with pytest.raises(BadInput, match="expected XID codes"):
        fatal_codes({"fatal_xid_codes": "+x"})


async def test_slurm_gres_is_the_configured_count_and_a_short_node_is_drained() -> None:
    from cockpit.sim.slurm import Slurm

    n = await upgraded("gpu-missing")
    slurm = Slurm({n.name: n}, is_up=lambda _name: True, sleep=no_wait)
    out: list[str] = []
    from cockpit.sim.shell import Io

    await slurm.scontrol(["scontrol", "show", "node", n.name], Io(stdin="", out=out.append, err=out.append))
    text = "".join(out)
    assert "Gres=gpu:h100:8(S:0-1)" in text
    assert "Reason=gres/gpu count reported lower than configured (7 < 8)" in text
    registered = smoke_item("slurm-gres-registered")
    assert registered.expect is not None and registered.expect.stdout_matches is not None
    assert re.search(registered.expect.stdout_matches, text) is None
