"""What a node's change installs is named as the node's own repository names it, in its flavour
and packaging (cockpit/runbook/targets.py); test_real_packages_apt.py proves the names resolve
with the real apt on the real metadata, this file pins the naming rules themselves."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from cockpit.errors import BadInput
from cockpit.runbook.targets import target_facts

ARCHIVE_HGX: dict[str, object] = {
    "recorded_driver_install": "distribution",
    "recorded_driver_flavour": "server-open",
    "recorded_driver_metapackage": "nvidia-driver-570-server-open",
    "recorded_module_packaging": "dkms",
    "recorded_fabric_manager_version": "570.211.01-0ubuntu0.24.04.1",
    "recorded_nscq_version": "570.211.01-0ubuntu0.24.04.1",
}
CUDA_575: dict[str, object] = {
    "recorded_driver_install": "cuda-repository",
    "recorded_driver_flavour": "open",
    "recorded_driver_metapackage": "nvidia-driver-575-open",
    "recorded_module_packaging": "dkms",
    "recorded_fabric_manager_version": "575.57.08-1",
}


def _facts(recorded: Mapping[str, object], **params: object) -> dict[str, str]:
    return target_facts({"target_branch": "580", "driver_version": "580.95.05", **params, **recorded})


def test_an_archive_server_node_keeps_its_server_open_driver_and_branch_named_parts() -> None:
    facts = _facts(ARCHIVE_HGX, driver_version="580.126.20")
    assert facts["target_driver_spec"] == "nvidia-driver-580-server-open=580.126.20*"
    assert facts["target_module_spec"] == "nvidia-dkms-580-server-open=580.126.20*"
    assert facts["target_fabric_spec"] == "nvidia-fabricmanager-580=580.126.20*"  # Ubuntu keeps the branch
    assert facts["target_nscq_spec"] == "libnvidia-nscq-580=580.126.20*"
    assert facts["target_imex_spec"] == ""  # the node has no IMEX


def test_nvidias_repository_drops_the_branch_from_fabric_manager_at_580_and_from_all_at_590() -> None:
    at_580 = _facts(CUDA_575)
    assert (at_580["target_driver_package"], at_580["target_fabric_package"]) == (
        "nvidia-driver-580-open",
        "nvidia-fabricmanager",
    )
    at_590 = _facts(CUDA_575, target_branch="590", driver_version="590.48.01")
    assert at_590["target_driver_spec"] == "nvidia-driver-open=590.48.01*"
    assert at_590["target_module_spec"] == "nvidia-dkms-open=590.48.01*"


def test_precompiled_modules_stay_precompiled_and_follow_the_kernel_flavour_metapackage() -> None:
    recorded = {
        **ARCHIVE_HGX,
        "recorded_driver_flavour": "server",
        "recorded_driver_metapackage": "nvidia-headless-no-dkms-570-server",
        "recorded_module_packaging": "precompiled",
        "recorded_driver_packages": ["linux-modules-nvidia-570-server-generic=6.8.0-90.91+1"],
    }
    facts = _facts(recorded)
    assert facts["target_driver_package"] == "nvidia-headless-no-dkms-580-server"
    assert facts["target_module_spec"] == "linux-modules-nvidia-580-server-generic"  # its version is the kernel's


def test_a_branch_pin_moves_with_the_branch() -> None:
    pinned = {**CUDA_575, "recorded_driver_packages": ["nvidia-driver-pinning-580=580-1ubuntu1"]}
    assert _facts(pinned, target_branch="590", driver_version="590.48.01")["target_pinning_spec"] == (
        "nvidia-driver-pinning-590"
    )
    assert _facts(CUDA_575)["target_pinning_spec"] == ""  # no pin, none added


def test_the_operators_flavour_and_rhel_streams() -> None:
    assert _facts(CUDA_575, driver_flavour="proprietary")["target_driver_package"] == "nvidia-driver-580"
    rhel = {"recorded_driver_flavour": "proprietary", "recorded_package_manager": "dnf"}
    assert (
        _facts({**rhel, "recorded_module_packaging": "dkms"})["target_dnf_module"] == "nvidia-driver:580-dkms/default"
    )
    assert _facts({**rhel, "recorded_module_packaging": "precompiled"})["target_dnf_stream"] == "580"
    fm = {**rhel, "recorded_module_packaging": "dkms", "recorded_fabric_manager_version": "575.57.08-1"}
    assert _facts(fm, driver_flavour="open")["target_dnf_module"] == "nvidia-driver:580-open/fm"


def test_nvidias_metapackages_follow_the_target_flavour() -> None:
    node = {**CUDA_575, "recorded_driver_metapackage": "nvidia-open-575"}
    assert _facts(node)["target_driver_package"] == "nvidia-open-580"
    moved = _facts(node, driver_flavour="proprietary")
    assert (moved["target_driver_package"], moved["target_module_package"]) == ("cuda-drivers-580", "nvidia-dkms-580")


def test_a_node_whose_module_packaging_is_unknown_gets_nothing_named() -> None:
    """Naming DKMS for it could move a precompiled node to DKMS unseen: the target-set step fails instead."""
    unknown = {k: v for k, v in CUDA_575.items() if k != "recorded_module_packaging"}
    assert _facts(unknown)["target_driver_spec"] == _facts(unknown)["target_module_spec"] == ""


def test_nothing_but_a_package_name_reaches_a_command() -> None:
    with pytest.raises(BadInput, match="is not a package name"):
        _facts(CUDA_575, driver_package="nvidia-driver-580; rm -rf /")
    assert _facts({}) == dict.fromkeys(_facts({}), "")  # no baseline yet: nothing named
