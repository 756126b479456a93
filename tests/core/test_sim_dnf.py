"""A RHEL node of the simulator answers rpm and dnf as dnf 4 does, and not apt: the module
stream and its fm profile, versionlock, the RPM database lock, saved packages, modular filtering.

Real parts: a simulated node's own shell (the same one its SSH server runs), no SSH needed
to read what a command prints; the wording is dnf's (cited in cockpit/sim/dnf.py).
"""

from __future__ import annotations

import asyncio

import pytest
from sim_nodes import quick_node, sh

from cockpit.sim.node import SimNode
from cockpit.sim.platform import RHEL8_PROFILE, RHEL9_PROFILE
from cockpit.sim.scenarios import SCENARIOS


def _node(scenario: str = "happy", index: int = 0) -> SimNode:
    return quick_node("gpu01", index, SCENARIOS[scenario], profile=RHEL9_PROFILE)


@pytest.mark.parametrize("command", ["apt-get update", "dpkg -l 'nvidia-*'", "apt-mark showhold", "dpkg-query -W"])
async def test_apt_and_dpkg_do_not_exist_on_rhel(command: str) -> None:
    status, _, err = await sh(_node(), command)
    assert status == 127
    assert err == f"bash: line 1: {command.split()[0]}: command not found\n"


def test_the_rhel_profiles_carry_their_os_release() -> None:
    assert 'ID="rhel"\n' in RHEL9_PROFILE.os_release and 'VERSION_ID="9.6"\n' in RHEL9_PROFILE.os_release
    assert 'VERSION_ID="8.10"\n' in RHEL8_PROFILE.os_release and RHEL8_PROFILE.package_manager == "dnf"


async def test_rpm_lists_the_driver_with_its_fabric_manager_and_a_missing_package_says_so() -> None:
    node = _node()
    status, out, _ = await sh(node, "rpm -q nvidia-driver nvidia-fabric-manager libnvidia-nscq-575 nvidia-open")
    assert status == 1
    assert out == (
        "nvidia-driver-575.57.08-1.el9.x86_64\nnvidia-fabric-manager-575.57.08-1.x86_64\n"
        "libnvidia-nscq-575-575.57.08-1.x86_64\npackage nvidia-open is not installed\n"
    )
    _, out, _ = await sh(node, "dnf -q module list --enabled nvidia-driver")
    assert "nvidia-driver  575-dkms [e]" in out and "fm [i]" in out


async def test_enabling_another_stream_is_refused_and_switch_to_moves_driver_fabric_manager_and_nscq() -> None:
    node = _node()
    status, _, err = await sh(node, "dnf -y module enable nvidia-driver:580-dkms")
    assert status == 1
    assert (
        "The operation would result in switching of module 'nvidia-driver' stream '575-dkms' to stream '580-dkms'"
        in err
    )
    assert "Error: It is not possible to switch enabled streams of a module unless explicitly enabled" in err
    # 580 renames fabric manager and nscq: the switch replaces packages, which dnf does only when let erase
    status, _, err = await sh(node, "dnf -y module switch-to nvidia-driver:580-dkms/fm")
    assert status == 1 and "try to add '--allowerasing'" in err
    status, out, _ = await sh(node, "dnf -y module switch-to nvidia-driver:580-dkms/fm --allowerasing")
    assert status == 0 and "nvidia-driver                                 575-dkms -> 580-dkms" in out
    _, out, _ = await sh(node, "rpm -q --qf '%{VERSION}\\n' nvidia-driver nvidia-fabricmanager libnvidia-nscq")
    assert out == "580.95.05\n580.95.05\n580.95.05\n"
    assert node.driver.userspace is not None and node.driver.userspace.version == "580.95.05"
    assert node.driver.module is not None and node.driver.module.version == "575.57.08"  # until the reboot


async def test_without_the_fm_profile_the_fabric_manager_stays_behind() -> None:
    node = _node()
    status, _, _ = await sh(node, "dnf -y module reset nvidia-driver && dnf -y module enable nvidia-driver:580-dkms")
    assert status == 0
    parts = "nvidia-driver nvidia-driver-libs nvidia-driver-cuda nvidia-driver-cuda-libs nvidia-kmod-common"
    pinned = " ".join(f"{p}-3:580.95.05" for p in [*parts.split(), "nvidia-persistenced", "kmod-nvidia-latest-dkms"])
    status, _, _ = await sh(node, f"dnf -y install {pinned}")
    assert status == 0
    _, out, _ = await sh(node, "rpm -q --qf '%{VERSION}\\n' nvidia-driver-cuda nvidia-fabric-manager")
    assert out == "580.95.05\n575.57.08\n"


async def test_a_versionlock_blocks_the_change_until_it_is_deleted() -> None:
    node = _node("held-packages", index=1)
    status, out, _ = await sh(node, "dnf -q versionlock list")
    assert "nvidia-driver-3:575.57.08-1.el9.*" in out.splitlines()
    status, _, err = await sh(node, "dnf -y module switch-to nvidia-driver:580-dkms/fm --allowerasing")
    assert status == 1
    assert " Problem: cannot install the best candidate for the job\n" in err
    assert "  - package nvidia-driver-3:580.95.05-1.el9.x86_64 is filtered out by exclude filtering\n" in err
    _, out, _ = await sh(node, "dnf versionlock delete 'nvidia-*' 'kmod-nvidia*' 'libnvidia-nscq*'")
    assert "Deleting versionlock for: nvidia-driver-3:575.57.08-1.el9.*\n" in out
    # the driver set is more than nvidia-*: libnvidia-ml, libnvidia-cfg, xorg-x11-nvidia stay locked
    status, _, err = await sh(node, "dnf -y module switch-to nvidia-driver:580-dkms/fm --allowerasing")
    assert status == 1 and "package libnvidia-ml-3:580.95.05-1.el9.x86_64 is filtered out" in err
    await sh(node, "dnf versionlock delete 'nvidia-*' 'libnvidia-*' 'kmod-nvidia*' xorg-x11-nvidia")
    status, _, _ = await sh(node, "dnf -y module switch-to nvidia-driver:580-dkms/fm --allowerasing")
    assert status == 0


async def test_modular_filtering_and_no_match_are_said_in_dnfs_words() -> None:
    node = _node()
    status, out, err = await sh(node, "dnf -y install nvidia-driver-cuda-3:580.95.05")
    assert status == 1
    assert out.endswith(
        "All matches were filtered out by modular filtering for argument: nvidia-driver-cuda-3:580.95.05\n"
    )
    assert err == "Error: Unable to find a match: nvidia-driver-cuda-3:580.95.05\n"
    status, out, _ = await sh(node, "dnf -y install nvidia-driver-cuda-3:999.1.1")
    assert status == 1 and "No match for argument: nvidia-driver-cuda-3:999.1.1\n" in out


async def test_a_second_transaction_waits_for_the_rpm_database_or_exits_200() -> None:
    node = _node()
    assert node.dnf is not None
    node.dnf.busy = True
    status, _, err = await sh(
        node, "dnf -y --setopt=exit_on_lock=True module switch-to nvidia-driver:580-dkms/fm --allowerasing"
    )
    assert status == 200 and err == "RPMDB already locked by 48213\n"

    async def release() -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        assert node.dnf is not None
        node.dnf.busy = False

    waiting = asyncio.create_task(release())
    status, out, _ = await sh(node, "dnf -y module switch-to nvidia-driver:580-dkms/fm --allowerasing")
    await waiting
    assert status == 0 and "Waiting for process with pid 48213 to finish.\n" in out


async def test_saved_packages_restore_the_old_branch_after_the_repository_moved_on() -> None:
    node = _node("rollback-repo-gone", index=1)
    save = (
        "mkdir -p /var/cache/cockpit/C1 && rpm -qa --qf '%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}\\n' 'nvidia-driver*' "
        "nvidia-kmod-common 'kmod-nvidia*' nvidia-persistenced nvidia-fabric-manager 'libnvidia-nscq*' "
        "| xargs -r dnf download --destdir /var/cache/cockpit/C1/"
    )
    status, out, _ = await sh(node, save)
    assert status == 0 and "nvidia-fabric-manager-575.57.08-1.x86_64.rpm" in out
    assert (await sh(node, "dnf -y module switch-to nvidia-driver:580-dkms/fm --allowerasing"))[0] == 0
    # the repository now keeps only the newest 575: the recorded version cannot be fetched by name
    status, _, err = await sh(node, "dnf download nvidia-driver-575.57.08-1.el9.x86_64")
    assert status == 1 and "No package nvidia-driver-575.57.08-1.el9.x86_64 available." in err
    # a saved modular package installs only in its own stream (the stricter reading)
    downgrade = "find /var/cache/cockpit/C1 -maxdepth 1 -name '*.rpm' | xargs -r dnf -y downgrade"
    status, out, _ = await sh(node, downgrade)
    assert status == 123 and "filtered out by modular filtering" in out  # xargs: 123 when dnf failed
    enable = "dnf -y module reset nvidia-driver && dnf -y module enable nvidia-driver:575-dkms"
    status, out, _ = await sh(node, f"{enable} && {downgrade}")
    # dnf downgrade never installs: fabric manager and nscq were renamed at 580, so their saved
    # 575 files are skipped (exit 0 all the same, as the real dnf does)
    assert status == 0 and "Package nvidia-fabric-manager not installed, cannot downgrade it." in out
    _, out, _ = await sh(node, "rpm -q --qf '%{VERSION}\\n' nvidia-driver nvidia-fabricmanager")
    assert out == "575.57.08\n580.95.05\n"
    # installing the saved files, letting dnf erase what they conflict with, brings all of them back
    reinstall = "find /var/cache/cockpit/C1 -maxdepth 1 -name '*.rpm' | xargs -r dnf -y install --allowerasing"
    assert (await sh(node, reinstall))[0] == 0
    _, out, _ = await sh(node, "rpm -q --qf '%{VERSION}\\n' nvidia-driver nvidia-fabric-manager libnvidia-nscq-575")
    assert out == "575.57.08\n575.57.08\n575.57.08\n"
