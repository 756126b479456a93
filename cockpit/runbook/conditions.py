"""``when`` conditions and the recorded facts they (and ``{recorded_*}`` placeholders) read.

A condition maps a name to a string (equality) or a list of strings (membership); a name
written ``not_NAME`` holds where that condition does not (a runbook's "else": docker where the
node has it, ``not_recorded_container_runtimes = ["docker"]`` for the variant without). A name is
a runbook parameter or a recorded fact of the node (``recorded_os_id``, ...; what its
``record`` step kept in the baseline, and a runbook's own ``[facts.NAME]``). A condition over
a recorded fact cannot be decided before the node's baseline exists: :func:`when_holds`
says ``None`` (pending) then, and the fold, the executor, the dry run and the checker all
ask this one function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: How a recorded fact is named in placeholders and conditions.
RECORDED_PREFIX = "recorded_"

#: The baseline keys a record step writes, each usable as ``recorded_KEY``; a test holds this
#: list to :class:`cockpit.changelog.facts.BaselineFacts`.
RECORDED_FACTS: dict[str, str] = {
    "driver_package": "the installed driver package as name=version (an apt pin)",
    "driver_version": "the userspace driver version (nvidia-smi)",
    "kernel_module_version": "the loaded kernel module's version",
    "kernel_module_flavour": "the loaded kernel module's flavour: open or proprietary",
    "cuda_version": "the driver's CUDA ceiling",
    "boot_id": "the boot id before the change",
    "gpu_count": "GPUs visible",
    "fabric_manager": "the fabric manager's state (active, failed, ...), absent when not installed",
    "container_toolkit_version": "the NVIDIA Container Toolkit's version",
    "kernel": "the running kernel",
    "os_id": "ID of /etc/os-release (ubuntu, rhel, rocky)",
    "os_version": "VERSION_ID of /etc/os-release (24.04, 9.4)",
    "os_like": "ID_LIKE of /etc/os-release (debian, rhel centos fedora)",
    "package_manager": "apt or dnf",
    "driver_flavour": "proprietary, open, server or server-open",
    "driver_install": "distribution, cuda-repository, runfile or gpu-operator",
    "driver_packages": "every NVIDIA package as name=version (a list)",
    "driver_metapackage": "the package the driver was installed by (nvidia-driver-575-server-open)",
    "module_packaging": "how the kernel module comes: dkms or precompiled",
    "module_license": "the kernel module's license (Dual MIT/GPL: the open modules)",
    "module_signer": "who signed the kernel module",
    "nvswitch": "whether the node has NVSwitches (true/false)",
    "fabric_manager_version": "the fabric manager package's version",
    "nscq_version": "the libnvidia-nscq package's version",
    "imex_version": "the nvidia-imex package's version, absent when not installed",
    "container_runtimes": "docker, podman, nerdctl, ctr (a list)",
    "cdi_specs": "CDI spec files in /etc/cdi and /var/run/cdi (a list)",
    "secure_boot": "Secure Boot enabled (true/false)",
    "module_signer_enrolled": "the module's signing key is enrolled (true/false)",
    "kernel_next": "the kernel that boots next",
    "kernel_headers": "kernels whose headers are installed, what DKMS builds against (a list)",
    "dkms": "the nvidia lines of dkms status (a list)",
    "package_holds": "held packages (a list)",
    "unattended_upgrades": "enabled or disabled",
    "gpu_holders": "processes holding /dev/nvidia* (a list)",
    "mig_layout": "MIG devices per GPU (a list)",
    "gpu_models": "the GPU model names (a list)",
    "ssh_user": "the SSH login (id -un)",
    "uid": "the SSH login's uid (0: root)",
    "sudo": "what sudo -n true said: passwordless, password-required or absent",
    "nvlink_active": "each GPU's active NVLinks (a list; nvidia-smi nvlink -s)",
    "fabric_completed": "every GPU's fabric state was Completed/Success (true/false), absent without a fabric",
    "peermem_loaded": "nvidia_peermem was loaded (true/false)",
    "imex": "nvidia-imex's service state, absent when not installed",
    "dcgm_version": "DCGM's version (dcgmi --version), absent without DCGM",
}

#: ``not_NAME`` in a ``when``: the condition on NAME, negated.
NEGATION_PREFIX = "not_"

Scalar = str | int | float | bool
WhenValue = str | list[str]


def fact_text(value: object) -> str:
    """A value as a condition compares it: booleans as ``true``/``false``, None as empty."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def recorded_facts(baseline: Mapping[str, Any], *, lists: bool = True) -> dict[str, Any]:
    """``recorded_NAME`` -> value from a folded baseline: its scalar keys, a runbook's own facts
    (the ``facts`` table), and with ``lists`` its lists of strings (for conditions; a placeholder
    is one shell word, so it gets scalars only)."""
    out: dict[str, Any] = {}
    for key, value in baseline.items():
        if key == "facts" and isinstance(value, Mapping):
            out.update({RECORDED_PREFIX + str(k): v for k, v in value.items() if isinstance(v, Scalar)})
        elif isinstance(value, Scalar):
            out[RECORDED_PREFIX + key] = value
        elif lists and isinstance(value, list) and all(isinstance(x, str) for x in value):
            out[RECORDED_PREFIX + key] = list(value)
    return out


def condition_name(key: str, params: Mapping[str, object] | None = None) -> tuple[str, bool]:
    """A ``when`` key as (the name it reads, whether it is negated): ``not_recorded_x`` ->
    (``recorded_x``, True); a parameter literally named ``not_...`` is read as itself."""
    if key.startswith(NEGATION_PREFIX) and (params is None or key not in params):
        return key.removeprefix(NEGATION_PREFIX), True
    return key, False


def is_fact_condition(name: str, params: Mapping[str, object]) -> bool:
    """Whether ``name`` in a ``when`` reads a recorded fact (a parameter of that name wins)."""
    name = condition_name(name, params)[0]
    return name.startswith(RECORDED_PREFIX) and name not in params


def names_facts(when: Mapping[str, WhenValue], params: Mapping[str, object]) -> bool:
    return any(is_fact_condition(k, params) for k in when)


def _matches(value: object, wanted: WhenValue) -> bool:
    choices = wanted if isinstance(wanted, list) else [wanted]
    if isinstance(value, list):  # a list fact holds when one of its members is wanted
        return any(fact_text(v) in choices for v in value)
    return fact_text(value) in choices


def when_holds(
    when: Mapping[str, WhenValue], params: Mapping[str, object], facts: Mapping[str, object] | None = None
) -> bool | None:
    """Whether a step or item with this ``when`` applies: every condition holds (a name not set
    never matches, so its ``not_`` form always holds). ``facts`` are the node's recorded facts,
    None before its baseline exists: then a condition over a fact is pending and the answer is
    None, unless another is false."""
    pending = False
    for key, wanted in when.items():
        name, negated = condition_name(key, params)
        if is_fact_condition(key, params):
            if facts is None:
                pending = True
                continue
            source: Mapping[str, object] = facts
        else:
            source = params
        matched = name in source and _matches(source[name], wanted)
        if matched == negated:
            return False
    return None if pending else True


def when_text(when: Mapping[str, WhenValue]) -> str:
    """A condition in words: ``scheduler=slurm, recorded_os_id in rhel|rocky, recorded_x not in a|b``."""

    def one(key: str, value: WhenValue) -> str:
        name, negated = condition_name(key)
        if isinstance(value, list):
            return f"{name} {'not in' if negated else 'in'} {'|'.join(value)}"
        return f"{name}{'!=' if negated else '='}{value}"

    return ", ".join(one(k, v) for k, v in when.items())
