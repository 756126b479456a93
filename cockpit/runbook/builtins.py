"""Names of the built-in trigger evaluators and checklist checks.

Runbooks refer to these by name (``evaluator = "..."``, ``check = "..."``); the
loader refuses a name not listed here, and the gating and trigger modules provide
one implementation per name (a test holds them in step).
"""

from __future__ import annotations

#: Automatic rollback-trigger evaluators: name -> what makes it fire.
TRIGGER_EVALUATORS: dict[str, str] = {
    "gpu_count_below_baseline": "a node shows fewer GPUs than its recorded baseline",
    "driver_versions_inconsistent": "nodes that finished the upgrade report different driver versions",
    "reboot_timeout": "a node is not back with a new boot id within the reboot timeout",
    "mismatch_after_reboot": "the driver/library mismatch is still present after the reboot",
    "smoke_failed": "a smoke step or smoke check failed",
    "fabric_manager_down": "fabric manager is not active after the upgrade on a node that had it",
    "fatal_xid": "new XID errors of the fatal kinds since the reboot (params: codes)",
    "fatal_sxid": "an NVSwitch SXid the driver called Fatal since the reboot",
    "wave_failure_budget": "more nodes of one wave failed than the wave's failure budget",
    "engine_reported_failure": (
        "the engine the window runs through (Slurm, the GPU Operator, Ansible) reports a node failed"
    ),
}

#: Checklist checks (``verify = "check"``): name -> what must hold.
CHECKS: dict[str, str] = {
    "node_reachable": "the node answers over SSH",
    "baseline_recorded": "the node's baseline (driver package, version, boot id, GPUs) is recorded",
    "platform_recorded": "the node's baseline names its OS, package manager and driver flavour",
    "boot_id_changed": "the node's boot id differs from the recorded one",
    "driver_library_match": "kernel module and userspace driver versions agree (no reboot pending)",
    "driver_matches_target": "the loaded driver is on the target branch",
    "module_flavour_matches_target": "the loaded kernel module is the flavour the change installed (open or not)",
    "gpus_match_baseline": "the node shows at least as many GPUs as its baseline",
    "gpu_settings_match_baseline": (
        "persistence mode, power limit, application clocks, MIG mode and layout and ECC mode match the baseline "
        "after the reboot, and no GPU has a row remapping pending or failed"
    ),
    "fabric_manager_ok": "fabric manager is active, or the node has none",
    "no_fatal_xid": "no fatal XID errors since boot",
    "fabric_state_completed": "every GPU's fabric state is Completed and status Success (nvidia-smi fabric.state)",
    "nvlink_links_match_baseline": "each GPU has as many active NVLinks as recorded (nvidia-smi nvlink -s)",
    "pcie_link_matches_baseline": "each GPU's PCIe link generation and width are as recorded",
    "no_fatal_sxid": "no NVSwitch SXid the driver called Fatal since boot",
    "peermem_loaded_as_before": "nvidia_peermem is loaded where it was before the change",
    "dcgm_matches_driver": "DCGM's version and the CUDA major of its diagnostics fit the new driver (dcgmi --version)",
    "imex_in_lockstep": "nvidia-imex, where it was installed, is at the loaded driver's version and runs where it ran",
    "cuda_ceiling_meets_image": "the driver's CUDA ceiling is at least the image's CUDA version",
    "triggers_armed": "the rollback triggers are armed",
    "all_waves_done": "every node passed smoke and expand",
    "path_chosen": "the recovery path is recorded with its rationale and a named owner",
    "recorded": (
        "the earlier items (recaps, stage/item) hold in the change log, or the stages named passed their gate: "
        "a window stage's, or a node stage's on at least one node"
    ),
    # the pre-change gate (cockpit.engine.prechange): judged on the baseline, before any change
    "gpu_holders_known": (
        "who holds /dev/nvidia* is known, each named with what becomes of it; only an upgrade without a reboot "
        "(the module unloaded) refuses a holder outside the units the runbook stops"
    ),
    "module_buildable_next_kernel": "the headers of the kernel that boots next are installed, so DKMS builds for it",
    "secure_boot_loadable": "Secure Boot is off, or the module's signing key is enrolled",
    "driver_flavour_kept": "the flavour after the change (driver_flavour, keep) is the installed one, unless allowed",
    "kernel_modules_fit_gpus": "the GPUs run the target flavour: open only on Blackwell and Grace Hopper, not on Volta",
    "driver_install_supported": "the driver came from packages, not the GPU Operator or the .run installer",
}

#: XID codes treated as fatal (``fatal_xid``, ``no_fatal_xid``) unless the runbook says otherwise.
#: The one list: NVIDIA's Xid catalogue for Ampere and newer GPUs
#: (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), the codes whose
#: immediate action is a GPU reset or a reboot (RESET_GPU, RESTART_BM, RESTART_VM), which no
#: node may carry into service after a driver change: 48 double-bit ECC, 61/62 PMU internal
#: error and halt, 64 row-remapper / page-retirement failure, 74 NVLink error, 79 fallen off
#: the bus, 94/95 contained and uncontained ECC, 119/120 GSP RPC timeout and GSP error,
#: 140 unrecovered ECC, 154 GPU recovery action required, and 143-150 (143 GPU initialisation
#: failure, 144-150 Blackwell's NVLink errors: SAW, RLW, TLW, TREX, NETIR...). The catalogue's
#: rows for 143-150 could not be read in full here, and the driver logs some 144-150 events as
#: "Nonfatal" sub-codes (leptonai/gpud#1160): the stricter reading counts every one fatal. 63 (a row-remapping or
#: page-retirement *event*, informational) is not fatal; nor are application faults such as
#: 13, 31, 43 (RESTART_APP). A runbook narrows or extends it with the ``fatal_xid_codes``
#: parameter ("+13,-94") or replaces it ("48,79"); a trigger with its own ``codes``.
FATAL_XID_CODES: tuple[int, ...] = (
    *(48, 61, 62, 64, 74, 79, 94, 95, 119, 120, 140),
    *range(143, 151),
    154,
)
