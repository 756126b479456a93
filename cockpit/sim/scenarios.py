"""Named fault scenarios for the simulated fleet.

A scenario picks one node (``target``, 0-based, the second node by default so the
canary passes and the fault shows on the next node) and says what goes wrong there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the spare node of the fabric the demo's fleet names as the re-join gate's reference (healthy, idle,
#: outside the window): every simulated node's mpirun reaches it (cockpit.sim.gputools)
SPARE_REFERENCE = "gpu-ref"


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    target: int = 1
    gpus_lost_on_reboot: int = 0  # the target comes back from its first reboot with fewer GPUs
    never_returns: bool = False  # the target's first reboot never ends
    fabric_manager_fails: bool = False  # fabric manager fails to start after the upgrade (CUDA error 802)
    stale_module: bool = False  # the new kernel module is not built: mismatch persists after reboot
    flaky_drop_rate: float = 0.0  # chance that a command on the target loses its connection mid-output
    latency_s: float = 0.0  # extra delay before every reply, on every node
    xids_after_reboot: tuple[int, ...] = ()  # NVRM: Xid codes the target logs after its first reboot
    container_cuda_error: int | None = None  # CUDA error in the target's GPU containers after its first reboot
    # -- the fabric and links after the target's first reboot (cockpit.sim.node._links_after_boot)
    fabric_incomplete: bool = False  # fabric manager active, yet the GPUs' fabric state stays "In Progress"
    nvlink_down: int = 0  # this many of GPU 0's NVLinks come back <inactive>
    sxids_after_reboot: tuple[int, ...] = ()  # Fatal NVSwitch SXid codes logged after the first reboot
    pcie_downtrained: bool = False  # the last GPU trains at PCIe Gen4 x8 instead of Gen5 x16
    peermem_missing: bool = False  # nvidia_peermem does not load after the reboot (it did before)
    #: the first boot after the install leaves PCIe ACS on: nvidia_peermem loads, every single-node check
    #: passes, but GPUDirect RDMA traffic detours through the root complex (a fifth of the network bandwidth)
    gdr_degraded: bool = False
    dcgm_version: str | None = None  # the target's DCGM, where it is not the fleet's (4.4.2)
    mig_layout: tuple[str, ...] = ()  # the target's GPU 0 runs MIG with these devices, recreated at each boot
    mig_lost: bool = False  # ... except at the first boot after the install: none recreated
    ecc_under_load: bool = False  # the target's last GPU takes a double-bit ECC error (Xid 48) only under load
    flavour_flipped: bool = False  # the first boot after the install loads the other module flavour
    # HGX package scenarios (cockpit.sim.packages): apt as strict as on a real node
    fabric_manager_lags: bool = False  # the target's mirror carries driver 580.95.05 but fabric manager 580.82.07
    imex_lags: bool = False  # the target's mirror has driver 590.48.01 but no nvidia-imex 590 (only 580.95.05)
    held: bool = False  # the target's NVIDIA packages are on `apt-mark hold`
    index_drops_old_version: bool = False  # once the target upgraded, the index replaces 575.57.08 by 575.64.05
    #: the NodeProfile (cockpit.sim.platform.PROFILES) of every node, and of the target where it differs
    profile: str = "ubuntu-24.04-hgx"
    target_profile: str | None = None
    #: the fleet's SSH login: root, or a user whose sudo is passwordless, password-required or absent
    ssh_user: str = "root"
    sudo: str = "passwordless"
    notes: list[str] = field(default_factory=list)
    #: runbook parameters a site with this fleet would pass (the demo sets them; a test's own win)
    params: tuple[tuple[str, str], ...] = ()


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("happy", "every node upgrades cleanly"),
        Scenario(
            "gpu-missing",
            "the second node comes back from its reboot with one GPU fewer (Xid 79 in the kernel log)",
            gpus_lost_on_reboot=1,
            xids_after_reboot=(79,),
        ),
        Scenario("no-return", "the second node never comes back after its reboot", never_returns=True),
        Scenario(
            "fabric-manager",
            "fabric manager is not active after the upgrade on the second node; containers hit CUDA error 802",
            fabric_manager_fails=True,
        ),
        Scenario(
            "mismatch",
            "the second node's new kernel module was not built: driver/library mismatch persists after reboot",
            stale_module=True,
        ),
        Scenario("flaky-link", "the link to the second node drops now and then mid-command", flaky_drop_rate=0.3),
        Scenario("slow", "a slow link: every reply is delayed", latency_s=0.3),
        Scenario(
            "xid", "the second node logs a fatal Xid 48 (double-bit ECC) after its reboot", xids_after_reboot=(48,)
        ),
        # vLLM images from v0.15 put the image's cuda-compat libcuda ahead of the driver's in
        # ld.so.conf; under some runtime configurations it is loaded instead of the host's and
        # every CUDA call fails with 803 while nvidia-smi (NVML) is fine (gpustack/gpustack#4678,
        # vllm-project/vllm#33447, fixed in the image by vllm-project/vllm#34226)
        Scenario(
            "smoke-false-pass",
            "after its reboot the second node's serving image loads its own cuda-compat libcuda instead of "
            "the new driver's: CUDA error 803 in every container, nvidia-smi healthy, is_available() False at exit 0",
            container_cuda_error=803,
        ),
        # -- the fabric, links and errors a node can come back with (the fault matrix,
        # benchmarks/fault_matrix.py): each is caught in the smoke stage or by its trigger
        Scenario(
            "fabric-incomplete",
            "the second node's fabric manager is active after its reboot, but its GPUs' fabric state stays "
            "In Progress: the smoke item smoke/fabric-completed stops it",
            fabric_incomplete=True,
        ),
        Scenario(
            "nvlink-down",
            "two of GPU 0's NVLinks come back <inactive> on the second node: smoke/nvlink-links stops it",
            nvlink_down=2,
        ),
        Scenario(
            "sxid",
            "an NVSwitch of the second node logs a fatal SXid 20034 (LTSSM Fault Up) after its reboot",
            sxids_after_reboot=(20034,),
        ),
        Scenario(
            "xid-94", "the second node logs a fatal Xid 94 (contained ECC) after its reboot", xids_after_reboot=(94,)
        ),
        Scenario(
            "xid-95", "the second node logs a fatal Xid 95 (uncontained ECC) after its reboot", xids_after_reboot=(95,)
        ),
        Scenario(
            "xid-143",
            "the second node logs Xid 143 (GPU initialisation failure) after its reboot",
            xids_after_reboot=(143,),
        ),
        Scenario(
            "xid-149",
            "the second node logs Xid 149 (NVLink NETIR error, Fatal) after its reboot",
            xids_after_reboot=(149,),
        ),
        Scenario(
            "gpu-missing-no-xid",
            "the second node comes back from its reboot with one GPU fewer and no Xid in its kernel log",
            gpus_lost_on_reboot=1,
        ),
        Scenario(
            "pcie-downtrained",
            "the second node's last GPU trains at PCIe Gen4 x8 after its reboot (Gen5 x16 before): smoke/pcie-link",
            pcie_downtrained=True,
        ),
        Scenario(
            "peermem-missing",
            "nvidia_peermem (GPUDirect RDMA) does not load on the second node after its reboot: smoke/peermem",
            peermem_missing=True,
        ),
        Scenario(
            "rejoin-slow",
            "after its reboot the second node's PCIe switches have ACS enabled again: every single-node check "
            "passes, but GPUDirect RDMA detours through the root complex and the two-node all-reduce with the "
            "fabric's reference node runs at a fifth of its record-stage figure: smoke/fabric-rejoin stops it",
            gdr_degraded=True,
        ),
        Scenario(
            "flavour-flip",
            "the second node boots the proprietary kernel module after an install meant to keep the open one: "
            "smoke/module-flavour stops it",
            flavour_flipped=True,
        ),
        Scenario(
            "mig-lost",
            "the second node's GPU 0 runs two MIG 3g.40gb devices; after its reboot MIG is still enabled but no "
            "device was recreated: smoke/gpu-settings names the lost layout",
            mig_layout=("3g.40gb", "3g.40gb"),
            mig_lost=True,
        ),
        Scenario(
            "load-ecc",
            "the second node passes every idle check after its reboot, but its last GPU takes a double-bit ECC "
            "error (Xid 48) under sustained load: the burn-in (burn_in_s, dcgmi diag -r targeted_stress) catches it",
            ecc_under_load=True,
            params=(("burn_in_s", "300"),),
        ),
        Scenario(
            "dcgm-old",
            "the second node runs DCGM 3.3.9, fine beside 575 (CUDA 12.9) but without diagnostics for the "
            "580 driver's CUDA 13: smoke/dcgm stops it",
            dcgm_version="3.3.9",
        ),
        # -- HGX packages: lockstep, holds, a repository that moves on -------------------
        Scenario(
            "hgx-lockstep",
            "the second node's mirror has driver 580.95.05 but only fabric manager 580.82.07: "
            "the pinned dry run (upgrade/target-downloadable) stops it before anything changes",
            fabric_manager_lags=True,
        ),
        Scenario(
            "held-packages",
            "the second node's driver, fabric manager and nscq are on apt-mark hold: "
            "the upgrade records them, releases them for the change and holds the new branch",
            held=True,
        ),
        Scenario(
            "rollback-repo-gone",
            "the second node's fabric manager fails on r580 and, meanwhile, the index replaced 575.57.08 "
            "by 575.64.05: the rollback reinstalls the packages saved before the install",
            fabric_manager_fails=True,
            index_drops_old_version=True,
        ),
        # -- RHEL: dnf module streams instead of apt --------------------------------------
        Scenario(
            "rhel9",
            "every node runs RHEL 9 on HGX: the runbook's dnf steps move the nvidia-driver module stream "
            "575-dkms -> 580-dkms with its fm profile (driver, fabric manager and nscq in lockstep, fabric "
            "manager renamed on the way); apt exits 127 there",
            profile="rhel-9-hgx",
        ),
        Scenario(
            "rhel9-precompiled",
            "every node runs RHEL 9 with NVIDIA's precompiled kmods (stream 575, no DKMS): the change "
            "switches to the precompiled stream 580 and keeps the packaging",
            profile="rhel-9-hgx-precompiled",
        ),
        Scenario(
            "non-root",
            "the fleet's SSH user is ops, not root, with passwordless sudo: every step that needs root "
            "runs under sudo -n and the change log says so",
            ssh_user="ops",
        ),
        Scenario(
            "sudo-password",
            "the fleet's SSH user is ops and its sudo wants a password: the first step that needs root "
            "is refused by sudo -n, and a person gives ops its rights before anything changes",
            ssh_user="ops",
            sudo="password-required",
        ),
        # -- packaging as the repositories publish it (cockpit/sim/repos) -------------------
        Scenario(
            "ubuntu-archive-hgx",
            "every node runs Ubuntu's own 570-server-open driver with fabric manager and nscq from the archive: "
            "the change installs the 580-server-open driver beside them (the desktop driver cannot satisfy "
            "the fabric manager's kernel-common) and keeps the open modules",
            profile="ubuntu-24.04-archive-hgx",
            params=(("driver_version", "580.126.20"),),
        ),
        Scenario(
            "precompiled-rollback",
            "every node runs Ubuntu's precompiled 570-server modules (linux-restricted-modules, no DKMS); the "
            "second node's fabric manager fails on 580 and the rollback reinstalls the saved driver and "
            "precompiled modules",
            profile="ubuntu-24.04-archive-precompiled",
            fabric_manager_fails=True,
            params=(("driver_version", "580.126.20"),),
        ),
        Scenario(
            "r590-rename",
            "every node runs 580-open from NVIDIA's repository and moves to 590, whose packages drop the "
            "branch from their names (nvidia-driver-open, nvidia-dkms-open)",
            profile="ubuntu-24.04-cuda-580",
            params=(("target_branch", "590"), ("driver_version", "590.48.01"), ("image_cuda", "13.0")),
        ),
        Scenario(
            "imex",
            "every node runs 580-open with nvidia-imex (a GB200 NVL rack's compute trays) and moves to 590: "
            "IMEX moves with the driver, and smoke/imex holds its service up at the driver's version",
            profile="ubuntu-24.04-cuda-580-imex",
            params=(("target_branch", "590"), ("driver_version", "590.48.01"), ("image_cuda", "13.0")),
        ),
        Scenario(
            "imex-skew",
            "the second node's mirror has the 590 driver but only nvidia-imex 580.95.05: the pinned dry run "
            "(upgrade/target-downloadable) stops it before IMEX could be left behind the driver",
            profile="ubuntu-24.04-cuda-580-imex",
            imex_lags=True,
            params=(("target_branch", "590"), ("driver_version", "590.48.01"), ("image_cuda", "13.0")),
        ),
        Scenario(
            "open-only-gpu",
            "the second node is a Blackwell (B200) and the window asks for the proprietary modules: the "
            "pre-change item record/modules-fit-gpus stops it before the upgrade (it would come back with no GPUs)",
            target_profile="ubuntu-24.04-blackwell",
            params=(("driver_flavour", "proprietary"), ("allow_flavour_change", "true")),
        ),
        # -- the pre-change gate and the runtime the node has ---------------------------------
        Scenario(
            "secure-boot",
            "the second node boots with Secure Boot on and the DKMS key that signs its modules is not enrolled: "
            "the pre-change item record/secure-boot stops it before the upgrade (the new module would be rejected)",
            target_profile="ubuntu-24.04-hgx-secure-boot",
        ),
        Scenario(
            "gpu-holders",
            "a DCGM exporter holds the second node's GPUs: the gate lists it with its unit, the record stage stops "
            "it with nvidia-persistenced, and the expand stage starts them again",
            target_profile="ubuntu-24.04-hgx-dcgm-exporter",
        ),
        Scenario(
            "k8s-holders",
            "fabric manager and the device plugin's and dcgm-exporter's DaemonSet pods hold the second node's GPUs "
            "after the drain: the reboot-based upgrade names each with what becomes of it and goes on",
            target_profile="ubuntu-24.04-hgx-k8s-holders",
        ),
        Scenario(
            "podman",
            "the second node runs podman (GPUs as CDI devices) with its CDI spec in /etc/cdi: the smoke "
            "regenerates it for the new driver (smoke/cdi-refreshed) and the container smoke runs through podman",
            target_profile="ubuntu-24.04-hgx-podman",
        ),
        Scenario(
            "cdi-stale",
            "the second node runs podman with its CDI spec in /var/run/cdi, generated for 575 and never refreshed: "
            "the smoke's regenerated /etc/cdi spec is shadowed by it (CDI prefers /var/run/cdi), so podman mounts "
            "the old driver's libraries and smoke/container-cuda-podman stops it",
            target_profile="ubuntu-24.04-hgx-podman-run-cdi",
        ),
        Scenario(
            "containerd-only",
            "the second node is a Kubernetes node with containerd and nerdctl, no docker: "
            "its container smoke runs through nerdctl",
            target_profile="ubuntu-24.04-hgx-containerd",
        ),
    )
}

DEFAULT_SCENARIO = "happy"
