"""The simulator's machines behind the pre-change gate's scenarios, as strict as real nodes:
Secure Boot refuses a module no enrolled key signed, services hold the GPUs until stopped
(and systemd starts them again at boot), a containerd-only node has no docker, and
``nvidia-ctk cdi generate`` needs NVML to answer."""

from __future__ import annotations

from sim_nodes import quick_node, sh

from cockpit.sim.node import SimNode
from cockpit.sim.platform import DEFAULT_PROFILE, PROFILES
from cockpit.sim.scenarios import SCENARIOS
from cockpit.sim.smi import NOT_LOADED

INSTALL = "apt-get install -y nvidia-driver-580-open nvidia-fabricmanager=580.95.05-1 libnvidia-nscq=580.95.05-1"


def node(scenario: str, index: int = 1) -> SimNode:
    sc = SCENARIOS[scenario]  # the target is the kind of machine its scenario names, as the fleet builds it
    kind = PROFILES[sc.target_profile] if sc.target_profile and index == sc.target else DEFAULT_PROFILE
    return quick_node(f"gpu0{index + 1}", index, sc, profile=kind)


async def test_secure_boot_rejects_the_new_module_when_no_gate_stopped_the_change() -> None:
    n = node("secure-boot")
    assert await sh(n, "mokutil --sb-state") == (0, "SecureBoot enabled\n", "")
    _, info, _ = await sh(n, "modinfo nvidia")
    assert "signer:         DKMS module signing key\n" in info
    assert (await sh(n, "mokutil --list-enrolled"))[0] == 1  # nothing enrolled
    assert (await sh(n, INSTALL))[0] == 0  # a runbook without the gate installs...
    n.reboot_now()
    assert n.module is None  # ...and the new module does not load
    status, out, _ = await sh(n, "nvidia-smi")
    assert status == 9 and out.startswith(NOT_LOADED)
    status, _, err = await sh(n, "modprobe nvidia")
    assert status == 1 and err == "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"
    assert "Loading of module with unavailable key is rejected" in (await sh(n, "dmesg"))[1]
    assert (await sh(n, "ls -d /dev/nvidia0"))[0] == 2
    # the canary of the same window has Secure Boot off: its new module loads
    canary = node("secure-boot", index=0)
    assert (await sh(canary, INSTALL))[0] == 0
    canary.reboot_now()
    assert canary.module is not None and canary.module.branch == "580"


async def test_gpu_holders_hold_until_their_units_stop_and_return_at_boot() -> None:
    n = node("gpu-holders")
    status, _, err = await sh(n, "fuser -v /dev/nvidia0")
    assert status == 0 and " 3377 F.... dcgm-exporter\n" in err and " 2114 F.... nvidia-persiste\n" in err
    pattern = "nvidia-persistenced.service nvidia-dcgm.service dcgm.service dcgm-exporter.service"
    _, listed, _ = await sh(n, f"systemctl list-units --plain --no-legend --state=active {pattern}")
    assert [line.split()[0] for line in listed.splitlines()] == ["nvidia-persistenced.service", "dcgm-exporter.service"]
    assert (await sh(n, "systemctl stop nvidia-persistenced.service dcgm-exporter.service"))[0] == 0
    assert (await sh(n, "fuser -v /dev/nvidia0"))[0] == 1  # nobody holds the GPUs now
    assert (await sh(n, "systemctl is-active dcgm-exporter"))[1] == "inactive\n"
    n.reboot_now()  # enabled units start again at boot, whoever stopped them
    assert (await sh(n, "fuser -v /dev/nvidia0"))[0] == 0
    # a unit that does not exist cannot be stopped
    status, _, err = await sh(n, "systemctl stop nvidia-dcgm.service")
    assert status == 5 and "not found" in err


async def test_unattended_upgrades_pause_and_the_lock_is_waited_for() -> None:
    n = node("happy")
    assert (await sh(n, "systemctl stop apt-daily-upgrade.timer unattended-upgrades.service"))[0] == 0
    assert (await sh(n, "systemctl is-active unattended-upgrades"))[1] == "inactive\n"
    assert (await sh(n, "systemctl start apt-daily-upgrade.timer unattended-upgrades.service"))[0] == 0
    assert (await sh(n, "systemctl is-active unattended-upgrades"))[1] == "active\n"
    status, out, _ = await sh(n, "apt-get -o DPkg::Lock::Timeout=120 check")
    assert status == 0 and out.endswith("Reading state information...\n")


async def test_containerd_only_has_nerdctl_and_no_docker() -> None:
    n = node("containerd-only")
    assert (await sh(n, "docker --version"))[0] == 127
    assert (await sh(n, "nerdctl --version")) == (0, "nerdctl version 2.1.2\n", "")
    assert (await sh(node("containerd-only", index=0), "docker --version"))[0] == 0  # the canary has docker


async def test_cdi_generate_needs_nvml_so_it_waits_for_the_reboot() -> None:
    n = node("happy")
    assert (await sh(n, INSTALL))[0] == 0
    status, _, err = await sh(n, "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml")
    assert status == 1 and "failed to initialize NVML: Driver/library version mismatch" in err
    n.reboot_now()
    assert (await sh(n, "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"))[0] == 0
