"""The pre-change gate's checks on folded states: each passes, fails, and says what it saw."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from gating_scenarios import HOSTS, Log, small_runbook

from cockpit.changelog.events import EventKind
from cockpit.engine.checks import CheckResult, run_check
from cockpit.engine.fold import fold
from cockpit.engine.state import CockpitState
from cockpit.gpu.parsers.platform import installed_packages, kernel_headers
from cockpit.runbook.builtins import CHECKS

KERNEL = "6.8.0-60-generic"
PERSISTENCED = "2114 nvidia-persiste (nvidia-persistenced.service)"
EXPORTER = "3377 dcgm-exporter (dcgm-exporter.service)"


def recorded(**platform: Any) -> CockpitState:
    """gpu01's window with a baseline of these platform facts (and the driver's own)."""
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="drain")
    facts = {"driver_package": "nvidia-driver-575=575.57.08-1", "driver_version": "575.57.08", "gpu_count": 8}
    log.add(EventKind.BASELINE_RECORDED, node="gpu01", facts={**facts, "boot_id": "b0", **platform})
    return fold(small_runbook(), {}, HOSTS, log.events)


def check(name: str, params: dict[str, object] | None = None, **platform: Any) -> CheckResult:
    return run_check(name, recorded(**platform), "gpu01", params or {})


def test_the_gate_checks_are_named_builtins() -> None:
    for name in (
        "gpu_holders_known",
        "module_buildable_next_kernel",
        "secure_boot_loadable",
        "driver_flavour_kept",
        "driver_install_supported",
    ):
        assert name in CHECKS


def test_without_a_baseline_every_gate_check_fails_saying_so() -> None:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="drain")
    state = fold(small_runbook(), {}, HOSTS, log.events)
    for name in ("gpu_holders_known", "secure_boot_loadable", "driver_install_supported"):
        assert run_check(name, state, "gpu01", {}) == CheckResult(False, "gpu01: no baseline recorded")
        assert run_check(name, state, None, {}) == CheckResult(False, "this check needs a node")


@pytest.mark.parametrize(
    ("holders", "ok", "says"),
    [
        ([], True, "gpu01: no process holds /dev/nvidia*"),
        (
            [PERSISTENCED, EXPORTER],
            True,
            f"gpu01: GPU holders: {PERSISTENCED}: stopped by the record stage, started again by the expand stage; "
            f"{EXPORTER}: stopped by the record stage",
        ),
        # a reboot-based upgrade (the runbook reboots): nothing is refused, each is named with its fate
        (
            [PERSISTENCED, "5120 python3"],
            True,
            "5120 python3: not the runbook's; the reboot ends it (a workload? then the drain did not empty the node)",
        ),
        (
            ["3228 nv-fabricmanage (nvidia-fabricmanager.service)", "5521 nvidia-device-p"],
            True,
            "3228 nv-fabricmanage (nvidia-fabricmanager.service): fabric manager: left running, the reboot "
            "restarts it on the new driver; 5521 nvidia-device-p: the device plugin's pod",
        ),
        (None, False, "gpu01: fuser did not answer, so who holds /dev/nvidia* is unknown"),
    ],
)
def test_gpu_holders_known(holders: list[str] | None, ok: bool, says: str) -> None:
    res = check("gpu_holders_known", gpu_holders=holders)
    assert res.ok is ok and says in res.evidence, res


@pytest.mark.parametrize(
    ("nxt", "headers", "ok", "says"),
    [
        (KERNEL, [KERNEL], True, f"gpu01: headers for {KERNEL} (next boot) installed"),
        (
            "6.8.0-62-generic",
            [KERNEL],
            False,
            f"no headers for 6.8.0-62-generic, the kernel that boots next (headers for: {KERNEL})",
        ),
        (KERNEL, [], False, "(headers for: none): DKMS cannot build the new module for it; install linux-headers-"),
        (None, [KERNEL], False, "gpu01: the kernel that boots next is not known"),
        (KERNEL, None, False, "installed kernel headers not recorded"),
    ],
)
def test_module_buildable_next_kernel(nxt: str | None, headers: list[str] | None, ok: bool, says: str) -> None:
    res = check("module_buildable_next_kernel", kernel_next=nxt, kernel_headers=headers)
    assert res.ok is ok and says in res.evidence, res


@pytest.mark.parametrize(
    ("platform", "ok", "says"),
    [
        ({"secure_boot": False}, True, "gpu01: Secure Boot off"),
        (
            {"secure_boot": True, "module_signer": "site MOK", "module_signer_enrolled": True},
            True,
            "signed by site MOK, an enrolled key",
        ),
        (
            {"secure_boot": True, "module_signer": "DKMS module signing key", "module_signer_enrolled": False},
            False,
            "gpu01: Secure Boot on and the module's signer (DKMS module signing key) is not an enrolled key",
        ),
        ({"secure_boot": True}, False, "signer (nobody (unsigned)) is not an enrolled key"),  # unknown is not yes
        ({}, False, "Secure Boot state unknown"),
    ],
)
def test_secure_boot_loadable(platform: dict[str, Any], ok: bool, says: str) -> None:
    res = check("secure_boot_loadable", **platform)
    assert res.ok is ok and says in res.evidence, res


@pytest.mark.parametrize(
    ("have", "params", "ok", "says"),
    [
        ("open", {"driver_flavour": "open"}, True, "gpu01: flavour open kept"),
        ("proprietary", {"driver_flavour": "open"}, False, "installed flavour proprietary, target open: a flavour"),
        (
            "proprietary",
            {"driver_flavour": "open", "allow_flavour_change": True},
            True,
            "proprietary -> open, allowed by allow_flavour_change",
        ),
        ("server", {"driver_flavour": "open", "allow_flavour_change": "false"}, False, "refused"),
        ("open", {}, True, "gpu01: flavour open kept"),  # driver_flavour defaults to keep
        ("server-open", {"driver_flavour": "keep"}, True, "gpu01: flavour server-open kept"),
        (None, {"driver_flavour": "open"}, False, "the installed driver's flavour is not known"),
    ],
)
def test_driver_flavour_kept(have: str | None, params: dict[str, object], ok: bool, says: str) -> None:
    res = check("driver_flavour_kept", params, driver_flavour=have)
    assert res.ok is ok and says in res.evidence, res


@pytest.mark.parametrize(
    ("how", "ok", "says"),
    [
        ("distribution", True, "gpu01: driver installed from distribution packages"),
        ("cuda-repository", True, "from cuda-repository packages"),
        ("gpu-operator", False, "GPU Operator's driver container manages it: leave the host alone"),
        ("runfile", False, "remove it with nvidia-uninstall and install the distribution's packages first"),
        (None, False, "how the driver was installed is not known"),
    ],
)
def test_driver_install_supported(how: str | None, ok: bool, says: str) -> None:
    res = check("driver_install_supported", driver_install=how)
    assert res.ok is ok and says in res.evidence, res


def test_kernel_headers_from_the_paths_that_exist() -> None:
    paths = [
        f"/lib/modules/{KERNEL}/build/Makefile",
        "/lib/modules/6.8.0-9-generic/build/Makefile",
        "/lib/modules/*/build/Makefile",  # a glob that matched nothing stays literal
        f"/boot/vmlinuz-{KERNEL}",
    ]
    assert kernel_headers(paths) == ["6.8.0-9-generic", KERNEL]
    assert kernel_headers([]) == []


def test_held_packages_are_installed_packages() -> None:
    # dpkg-query's db:Status-Abbrev: hi = on hold and installed, rc = removed with its configuration left
    text = "ii nvidia-utils-575=575.57.08-1\nhi nvidia-driver-575=575.57.08-1\nrc nvidia-driver-570=570.1-1\n"
    assert installed_packages(text) == {"nvidia-utils-575": "575.57.08-1", "nvidia-driver-575": "575.57.08-1"}


@pytest.mark.parametrize(
    ("flavour", "models", "params", "ok", "says"),
    [
        ("open", ["NVIDIA B200"], {}, True, "gpu01: NVIDIA B200 run the open kernel modules"),
        ("server-open", ["NVIDIA GH200 480GB"], {}, True, "run the server-open kernel modules"),
        ("open", ["NVIDIA B200"], {"driver_flavour": "proprietary"}, False, "NVIDIA B200 runs only the open GPU"),
        ("open", ["NVIDIA H100 80GB HBM3"], {"driver_flavour": "proprietary"}, True, "run the proprietary"),
        ("proprietary", ["Tesla V100-SXM2-32GB"], {"driver_flavour": "open"}, False, "not supported by the open"),
        ("open", ["NVIDIA B200", "Tesla V100-SXM2-32GB"], {}, False, "no kernel module flavour runs all"),
        ("open", [], {}, False, "the GPU models are not known"),
        (None, ["NVIDIA B200"], {}, False, "the target flavour is not known"),
    ],
)
def test_kernel_modules_fit_gpus(
    flavour: str | None, models: list[str], params: dict[str, object], ok: bool, says: str
) -> None:
    """Blackwell and Grace Hopper run only the open modules, Volta and older only the proprietary
    ones (NVIDIA's statement, cockpit/gpu/kernel_modules.py): the gate refuses a target that cannot load."""
    res = check("kernel_modules_fit_gpus", params, driver_flavour=flavour, gpu_models=models)
    assert res.ok is ok and says in res.evidence, res.evidence


def test_the_loaded_module_flavour_is_compared_with_the_installed_one() -> None:
    log = Log()
    log.open_window()
    log.add(EventKind.WAVE_STARTED, wave=0)
    log.node_through("gpu01", until="drain")
    base = {"driver_package": "nvidia-driver-575-open=575.57.08-1", "driver_version": "575.57.08", "gpu_count": 8}
    log.add(EventKind.BASELINE_RECORDED, node="gpu01", facts={**base, "boot_id": "b0", "driver_flavour": "open"})
    for loaded, params, ok in (
        ("open", {}, True),
        ("proprietary", {}, False),  # a metapackage's alternative moved the node to the other modules
        ("proprietary", {"driver_flavour": "proprietary"}, True),
    ):
        log.probed("gpu01", "b1", kernel_module_flavour=loaded)
        state = fold(small_runbook(), {}, HOSTS, log.events)
        res = run_check("module_flavour_matches_target", state, "gpu01", params)
        assert res.ok is ok and f"the {loaded} kernel module is loaded" in res.evidence


@pytest.mark.parametrize(
    ("holders", "ok", "says"),
    [
        ([PERSISTENCED, EXPORTER], True, "stopped by the record stage"),
        (
            [PERSISTENCED, "5120 python3"],
            False,
            "gpu01: the module must be unloaded (no reboot) but these hold /dev/nvidia*: "
            "5120 python3 (no unit): stop it (its pod or process)",
        ),
        (
            ["4410 vllm (vllm.service)"],
            False,
            "4410 vllm (vllm.service): systemctl stop vllm.service, or name it in gpu_holder_units",
        ),
    ],
)
def test_gpu_holders_without_a_reboot_must_let_go(holders: list[str], ok: bool, says: str) -> None:
    """A runbook that swaps the module without rebooting needs every holder gone before the unload."""
    state = recorded(gpu_holders=holders)
    state.roles = replace(state.roles, reboot=None)  # the runbook's stages, read by role: none reboots
    res = run_check("gpu_holders_known", state, "gpu01", {})
    assert res.ok is ok and says in res.evidence, res
