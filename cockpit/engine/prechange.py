"""The pre-change gate's built-in checks: what bites only after the reboot, judged on the
node's baseline (the platform facts its record step kept) before anything changes.

Each is a pure function of the folded state, like every check of :mod:`cockpit.engine.checks`
(which lists them in its table), with one line of evidence that names the node, what was
seen, and what to do instead when the node must not go on.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from cockpit.changelog.facts import BaselineFacts
from cockpit.engine.state import CockpitState, NodeProgress, recorded
from cockpit.gpu.kernel_modules import OPEN, PROPRIETARY, flavour_need, is_open
from cockpit.runbook.targets import flavour_after


@dataclass(frozen=True, slots=True)
class CheckResult:
    ok: bool
    evidence: str


CheckFn = Callable[[CockpitState, str | None, Mapping[str, object]], CheckResult]
#: what a node check judges: the node's recorded baseline, or its progress once a probe reached it
_Seen = TypeVar("_Seen")

#: The GPU-holding services a runbook stops before the upgrade and starts again after it
#: (its ``stop-gpu-units`` step asks systemd for exactly these); override with ``gpu_holder_units``.
KNOWN_HOLDER_UNITS: tuple[str, ...] = (
    "nvidia-persistenced.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "dcgm-exporter.service",
)

_HOLDER = re.compile(r"^(?P<pid>\d+) (?P<command>.*?)(?: \((?P<unit>[^()]+)\))?$")


def node_progress(state: CockpitState, node: str | None) -> NodeProgress | CheckResult:
    """The node's progress in the window, or the failed result saying why there is none."""
    if node is None:
        return CheckResult(False, "this check needs a node")
    progress = state.nodes.get(node)
    if progress is None:
        return CheckResult(False, f"{node}: not in this window's fleet")
    return progress


def _baseline(state: CockpitState, node: str | None) -> BaselineFacts | CheckResult:
    """The node's recorded baseline, or the failed result saying why there is none."""
    progress = node_progress(state, node)
    if isinstance(progress, CheckResult):
        return progress
    if not recorded(progress.baseline):
        return CheckResult(False, f"{node}: no baseline recorded")
    return progress.baseline


def node_check(
    find: Callable[[CockpitState, str | None], _Seen | CheckResult],
) -> Callable[[Callable[[_Seen, str, Mapping[str, object]], CheckResult]], CheckFn]:
    """A decorator for a check of one node: the check judges what ``find`` sees of the node;
    where ``find`` sees nothing (no node, no baseline, no probe), its failed result stands."""

    def decorate(check: Callable[[_Seen, str, Mapping[str, object]], CheckResult]) -> CheckFn:
        @functools.wraps(check)
        def run(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
            seen = find(state, node)
            if isinstance(seen, CheckResult):
                return seen
            assert node is not None  # find found the node
            return check(seen, node, params)

        return run

    return decorate


_with_baseline = node_check(_baseline)


def _words(value: object) -> list[str]:
    """A parameter given as a list or as comma-separated text."""
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return [w.strip() for w in str(value or "").split(",") if w.strip()]


def _truthy(value: object) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes")


#: Holders a reboot-based upgrade leaves alone, by the name fuser shows (the kernel's 15-character
#: comm), and what becomes of each: none keeps apt or dnf from installing, and the reboot, not an
#: unload, swaps the module.
_LEFT_TO_THE_REBOOT: dict[str, str] = {
    # nv-fabricmanager holds /dev/nvidia-nvswitch* and the GPUs while the fabric is up (NVSentinel#883)
    "nv-fabricmanage": "fabric manager: left running, the reboot restarts it on the new driver",
    # the DaemonSet pods `kubectl drain --ignore-daemonsets` leaves on the node
    "nvidia-device-p": (
        "the device plugin's pod (a DaemonSet drain leaves): the reboot ends it, the kubelet starts it again"
    ),
    "dcgm-exporter": "dcgm-exporter (a DaemonSet pod drain leaves): the reboot ends it, the kubelet starts it again",
    "nv-hostengine": "DCGM's host engine: the reboot ends it, its unit starts it again",
}


def gpu_holders_known(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
    """Who holds /dev/nvidia*, each with what becomes of it. A reboot-based upgrade (the runbook
    has a reboot stage) refuses none: apt and dnf install beside open device files and the reboot
    replaces the module, so the fabric manager and the DaemonSet pods drain leaves stay where they
    are. An upgrade without a reboot must unload the module: there every holder must run in a
    unit the runbook stops (``gpu_holder_units``), and each one that does not is named with what to do."""
    base = _baseline(state, node)
    if isinstance(base, CheckResult):
        return base
    holders = base.gpu_holders
    if holders is None:
        return CheckResult(False, f"{node}: fuser did not answer, so who holds /dev/nvidia* is unknown")
    if not holders:
        return CheckResult(True, f"{node}: no process holds /dev/nvidia*")
    known = set(_words(params.get("gpu_holder_units"))) or set(KNOWN_HOLDER_UNITS)
    reboots = state.roles.reboot is not None
    said, refused = [], []
    for holder in map(str, holders):
        m = _HOLDER.match(holder)
        unit, command = (m.group("unit"), m.group("command")) if m else (None, holder)
        if unit in known:
            said.append(f"{holder}: stopped by the record stage, started again by the expand stage")
        elif reboots:
            fate = _LEFT_TO_THE_REBOOT.get(command)
            unknown = "not the runbook's; the reboot ends it (a workload? then the drain did not empty the node)"
            said.append(f"{holder}: {fate or unknown}")
        else:
            what = f"systemctl stop {unit}, or name it in gpu_holder_units" if unit else "stop it (its pod or process)"
            refused.append(f"{holder}{'' if unit else ' (no unit)'}: {what}")
    if refused:
        return CheckResult(
            False,
            f"{node}: the module must be unloaded (no reboot) but these hold /dev/nvidia*: {'; '.join(refused)}",
        )
    return CheckResult(True, f"{node}: GPU holders: {'; '.join(said)}")


@_with_baseline
def module_buildable_next_kernel(base: BaselineFacts, node: str, params: Mapping[str, object]) -> CheckResult:
    """The headers of the kernel that boots next are installed, so DKMS builds the new module for it."""
    # NVIDIA's driver installation guide (pre-installation actions): the kernel headers and
    # development packages must be installed whenever the driver is (re)built; DKMS builds
    # for a kernel only where its headers are present, and the package manager's own attempt
    # installs the newest headers, "which may or may not match" the kernel that boots.
    if base.module_packaging == "precompiled":
        # linux-restricted-modules / NVIDIA's precompiled kmods: built for the kernel, nothing to build here
        return CheckResult(True, f"{node}: precompiled kernel modules: no DKMS build, no headers needed")
    nxt = base.kernel_next
    if not nxt:
        return CheckResult(False, f"{node}: the kernel that boots next is not known")
    headers = base.kernel_headers
    if headers is None:
        return CheckResult(False, f"{node}: installed kernel headers not recorded, so the module build is unknown")
    if nxt in headers:
        return CheckResult(True, f"{node}: headers for {nxt} (next boot) installed: DKMS builds the new module for it")
    have = ", ".join(headers) or "none"
    return CheckResult(
        False,
        f"{node}: no headers for {nxt}, the kernel that boots next (headers for: {have}): "
        f"DKMS cannot build the new module for it; install linux-headers-{nxt} (kernel-devel on RHEL) first",
    )


@_with_baseline
def secure_boot_loadable(base: BaselineFacts, node: str, params: Mapping[str, object]) -> CheckResult:
    """Secure Boot off, or the module signed by a key the firmware's MOK list holds."""
    sb = base.secure_boot
    if sb is False:
        return CheckResult(True, f"{node}: Secure Boot off: the kernel loads the module unsigned")
    if sb is None:
        return CheckResult(False, f"{node}: Secure Boot state unknown (mokutil --sb-state gave no answer)")
    signer = base.module_signer or "nobody (unsigned)"
    if base.module_signer_enrolled is True:
        return CheckResult(True, f"{node}: Secure Boot on, the module is signed by {signer}, an enrolled key")
    return CheckResult(
        False,
        f"{node}: Secure Boot on and the module's signer ({signer}) is not an enrolled key: the module built "
        "for the next boot will be rejected; enrol the signing key (mokutil --import, confirmed at the console) "
        "or use modules signed by an enrolled key first",
    )


@_with_baseline
def driver_flavour_kept(base: BaselineFacts, node: str, params: Mapping[str, object]) -> CheckResult:
    """The flavour after the change (``driver_flavour``; ``keep``: the node's own) is the
    recorded one, unless ``allow_flavour_change``."""
    have = base.driver_flavour
    if not have:
        return CheckResult(False, f"{node}: the installed driver's flavour is not known")
    want = flavour_after(params.get("driver_flavour"), have)
    if have == want:
        return CheckResult(True, f"{node}: flavour {have} kept")
    if _truthy(params.get("allow_flavour_change")):
        return CheckResult(True, f"{node}: flavour {have} -> {want}, allowed by allow_flavour_change")
    return CheckResult(
        False,
        f"{node}: installed flavour {have}, target {want}: a flavour change is refused "
        "(driver_flavour = keep, or allow_flavour_change = true)",
    )


@_with_baseline
def kernel_modules_fit_gpus(base: BaselineFacts, node: str, params: Mapping[str, object]) -> CheckResult:
    """The node's GPUs run the flavour the change installs: Blackwell and Grace Hopper only the
    open modules, Maxwell, Pascal and Volta only the proprietary ones (:mod:`cockpit.gpu.kernel_modules`)."""
    want = flavour_after(params.get("driver_flavour"), base.driver_flavour)
    models = [str(m) for m in base.gpu_models or []]
    if not want:
        return CheckResult(False, f"{node}: the target flavour is not known (no recorded flavour to keep)")
    if not models:
        return CheckResult(False, f"{node}: the GPU models are not known (nvidia-smi -L gave none)")
    need = flavour_need(models)
    shown = ", ".join(need.models)
    if need.conflict:
        return CheckResult(False, f"{node}: {shown}: no kernel module flavour runs all of these GPUs")
    target_open = is_open(want)
    if need.required == OPEN and not target_open:
        return CheckResult(
            False,
            f"{node}: {shown} runs only the open GPU kernel modules and the change installs {want}: "
            "the node would come back with no GPUs; set driver_flavour to an open flavour "
            "(open, server-open) with allow_flavour_change",
        )
    if need.required == PROPRIETARY and target_open:
        return CheckResult(
            False,
            f"{node}: {shown} is not supported by the open GPU kernel modules and the change installs {want}",
        )
    return CheckResult(True, f"{node}: {', '.join(models)} run the {want} kernel modules")


#: how the driver got on the node -> what to do instead of this runbook, where it must not run
REFUSED_INSTALLS: dict[str, str] = {
    "gpu-operator": (
        "the GPU Operator's driver container manages it: leave the host alone and change the ClusterPolicy's "
        "driver version, which the operator's upgrade controller rolls out node by node"
    ),
    "runfile": (
        "it came from NVIDIA's .run installer, which package steps cannot change or roll back: remove it with "
        "nvidia-uninstall and install the distribution's packages first"
    ),
}


@_with_baseline
def driver_install_supported(base: BaselineFacts, node: str, params: Mapping[str, object]) -> CheckResult:
    """The driver came from packages (the distribution's or NVIDIA's repository), which the runbook changes."""
    how = base.driver_install
    if how in REFUSED_INSTALLS:
        return CheckResult(False, f"{node}: driver installed by {how}: {REFUSED_INSTALLS[how]}")
    if not how:
        return CheckResult(False, f"{node}: how the driver was installed is not known (no driver package found)")
    return CheckResult(True, f"{node}: driver installed from {how} packages")


PRECHANGE_CHECKS: dict[str, CheckFn] = {
    "gpu_holders_known": gpu_holders_known,
    "module_buildable_next_kernel": module_buildable_next_kernel,
    "secure_boot_loadable": secure_boot_loadable,
    "driver_flavour_kept": driver_flavour_kept,
    "kernel_modules_fit_gpus": kernel_modules_fit_gpus,
    "driver_install_supported": driver_install_supported,
}
