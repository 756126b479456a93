"""What a node's change installs: the target packages named the way the node's own repository names them.

A node is moved to the target branch in the flavour and packaging it has (unless the
operator asks for another flavour), so the names follow what its record step saw:

- the driver metapackage is the one the node was installed with, on the target branch
  (``nvidia-driver-575-server-open`` -> ``nvidia-driver-580-server-open``;
  ``nvidia-headless-no-dkms-570-server`` -> ``nvidia-headless-no-dkms-580-server``); on
  Ubuntu's archive the ``-server`` drivers are the ones whose kernel-common package
  NVIDIA's fabric manager, nscq and IMEX depend on (Launchpad bug 2129682), so a server
  node installs a server driver;
- the kernel module is named too, so the flavour is never left to a metapackage's
  alternatives: ``nvidia-dkms-580-server-open`` where DKMS builds it, or the precompiled
  ``linux-modules-nvidia-580-server-open-generic`` (linux-restricted-modules) where the
  node runs precompiled modules;
- NVIDIA's CUDA repository drops the branch from every name from 590 on (``nvidia-driver-open``,
  ``nvidia-dkms-open``; NVIDIA Driver Installation Guide, "Ubuntu 590 package renames"), and
  from 580 on names fabric manager, nscq and IMEX without it (``nvidia-fabricmanager``,
  NVIDIA/gpu-driver-container's install scripts); Ubuntu's archive keeps the branch;
- on RHEL the module stream follows the packaging: ``580`` is NVIDIA's precompiled
  stream (kmods built for given kernels), ``580-dkms`` the proprietary DKMS one and
  ``580-open`` the open DKMS one; the ``fm`` profile adds fabric manager and nscq.

Every value is one package name or ``name=version*`` spec, or empty where the node has no
such part; :func:`target_facts` validates them as package names so that a recorded fact
can never carry anything else into a command.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from cockpit.errors import BadInput
from cockpit.runbook.conditions import RECORDED_PREFIX

#: The operator's driver_flavour that keeps whatever the node runs.
KEEP = "keep"

#: The placeholders :func:`target_facts` fills, with what each holds (the checker knows them as node facts).
TARGET_FACTS: dict[str, str] = {
    "target_flavour": "the driver flavour after the change (the recorded one where driver_flavour is keep)",
    "target_driver_package": "the driver metapackage to install (apt), named as the node's repository names it",
    "target_module_package": "the kernel module package to install (apt): DKMS or precompiled, as the node has",
    "target_fabric_package": "the fabric manager package to install (apt), empty where the node has none",
    "target_nscq_package": "the nscq package to install (apt), empty where the node has none",
    "target_imex_package": "the IMEX package to install (apt), empty where the node has none",
    "target_driver_spec": "target_driver_package=driver_version* (an apt version pin)",
    "target_module_spec": "target_module_package, pinned where its version is the driver's (DKMS)",
    "target_fabric_spec": "target_fabric_package=driver_version*, or empty",
    "target_nscq_spec": "target_nscq_package=driver_version*, or empty",
    "target_imex_spec": "target_imex_package=driver_version*, or empty",
    "target_pinning_spec": "nvidia-driver-pinning-BRANCH where the node pins its branch that way (NVIDIA's repository)",
    "target_dnf_stream": "the nvidia-driver module stream to switch to (dnf): 580, 580-dkms or 580-open",
    "target_dnf_module": "nvidia-driver:STREAM/PROFILE for dnf module switch-to (fm where fabric manager is installed)",
}

_SUFFIX = {"proprietary": "", "open": "-open", "server": "-server", "server-open": "-server-open"}
_KIND = re.compile(
    r"^(?P<kind>nvidia-driver|nvidia-headless-no-dkms|nvidia-headless|nvidia-open|cuda-drivers)"
    r"(?:-(?P<branch>\d+))?(?P<flavour>(?:-server)?(?:-open)?)$"
)
#: a precompiled module metapackage that follows a kernel flavour (not one kernel's ABI)
_MODULES_META = re.compile(
    r"^linux-modules-nvidia-\d+(?P<flavour>(?:-server)?(?:-open)?)-(?P<kflavour>[a-z][a-z0-9.-]*)$"
)
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]*(?:=[A-Za-z0-9.+~:-]+\*?)?$")
_DNF = re.compile(r"^(?:nvidia-driver:)?[A-Za-z0-9._-]+(?:/[a-z]+)?$")
#: NVIDIA's CUDA repository: branch-less names from these branches on
_CUDA_RENAMED_FROM = 590
_CUDA_UNSUFFIXED_FABRIC_FROM = 580


def _branch_number(branch: str) -> int:
    m = re.match(r"\d+", branch)
    return int(m.group(0)) if m else 0


def flavour_after(asked: object, recorded: object) -> str:
    """The flavour a node runs after the change: the operator's ``driver_flavour``, or the
    node's own (``recorded``) under ``keep``; empty where neither is known."""
    wanted = str(asked or KEEP)
    return str(recorded or "") if wanted == KEEP else wanted


def target_flavour(values: Mapping[str, object]) -> str:
    """:func:`flavour_after` over placeholder values (parameters and ``recorded_*`` facts)."""
    return flavour_after(values.get("driver_flavour"), values.get(RECORDED_PREFIX + "driver_flavour"))


def _named(branch: str, renamed: bool) -> str:
    return "" if renamed else f"-{branch}"


def _driver_package(kind: str, branch: str, flavour: str, renamed: bool) -> str:
    suffix = _SUFFIX.get(flavour, "")
    if kind in ("nvidia-open", "cuda-drivers"):
        # NVIDIA's own metapackages name the flavour: nvidia-open(-580) the open, cuda-drivers(-580) the proprietary
        return ("nvidia-open" if suffix.endswith("-open") else "cuda-drivers") + _named(branch, renamed)
    return kind + _named(branch, renamed) + suffix


def _precompiled(packages: Sequence[str], branch: str, flavour: str, kernel: str) -> str:
    """The precompiled module package on the target branch: the kernel-flavour metapackage the
    node has (``linux-modules-nvidia-575-server-generic`` -> ``...-580-server-generic``), else the
    one for the kernel that boots next."""
    suffix = _SUFFIX.get(flavour, "")
    for name in packages:
        m = _MODULES_META.match(name)
        if m and not re.search(r"\d+\.\d+\.\d+-\d+", m.group("kflavour")):
            return f"linux-modules-nvidia-{branch}{suffix}-{m.group('kflavour')}"
    return f"linux-modules-nvidia-{branch}{suffix}-{kernel}" if kernel else ""


def _installed_names(values: Mapping[str, object]) -> list[str]:
    raw = values.get(RECORDED_PREFIX + "driver_packages")
    if not isinstance(raw, list | tuple):
        return []
    return [str(p).split("=", 1)[0] for p in raw]


def target_facts(values: Mapping[str, object]) -> dict[str, str]:
    """The ``target_*`` placeholders for one node: from the parameters (``target_branch``,
    ``driver_version``, ``driver_flavour``, ``driver_package``, ``driver_stream``) and the
    node's recorded facts (``recorded_*``, lists included). Empty strings before the node's
    baseline exists; :class:`BadInput` when a value is not a package name."""
    branch = str(values.get("target_branch") or "")
    version = str(values.get("driver_version") or "")
    flavour = target_flavour(values)
    recorded = {k.removeprefix(RECORDED_PREFIX): v for k, v in values.items() if k.startswith(RECORDED_PREFIX)}
    facts = dict.fromkeys(TARGET_FACTS, "")
    facts["target_flavour"] = flavour
    if not branch or not recorded:
        return facts
    if not recorded.get("module_packaging"):
        # how the module comes is not known: naming DKMS for it could move a precompiled node to
        # DKMS unseen; nothing is named, so the target-set step fails before anything changes
        return facts
    pin = f"={version}*" if version else ""
    cuda_repo = recorded.get("driver_install") == "cuda-repository"
    renamed = cuda_repo and _branch_number(branch) >= _CUDA_RENAMED_FROM
    unsuffixed_parts = cuda_repo and _branch_number(branch) >= _CUDA_UNSUFFIXED_FABRIC_FROM
    packaging = str(recorded.get("module_packaging"))
    # apt: the names the node's repository gives the target branch
    m = _KIND.match(str(recorded.get("driver_metapackage") or ""))
    kind = m.group("kind") if m else "nvidia-driver"
    override = str(values.get("driver_package") or "").strip()
    driver = override or _driver_package(kind, branch, flavour, renamed)
    facts["target_driver_package"] = driver
    facts["target_driver_spec"] = driver + pin
    suffix = _SUFFIX.get(flavour, "")
    if packaging == "precompiled":
        kernel = str(recorded.get("kernel_next") or recorded.get("kernel") or "")
        module = _precompiled(_installed_names(values), branch, flavour, kernel)
        facts["target_module_package"] = facts["target_module_spec"] = module  # its version is the kernel's
    else:
        module = "nvidia-dkms" + _named(branch, renamed) + ("-open" if suffix.endswith("-open") else "")
        if not renamed and "server" in suffix:
            module = f"nvidia-dkms-{branch}{suffix}"
        facts["target_module_package"] = module
        facts["target_module_spec"] = module + pin
    parts = {
        "fabric": ("fabric_manager_version", "nvidia-fabricmanager"),
        "nscq": ("nscq_version", "libnvidia-nscq"),
        "imex": ("imex_version", "nvidia-imex"),
    }
    for role, (fact, stem) in parts.items():
        if recorded.get(fact):
            name = stem + ("" if unsuffixed_parts else f"-{branch}")
            facts[f"target_{role}_package"] = name
            facts[f"target_{role}_spec"] = name + pin
    # NVIDIA's branch pin (nvidia-driver-pinning-580: an apt preferences file) moves with the branch,
    # in the same transaction: left behind it would hold the node to the old branch's versions
    if any(name.startswith("nvidia-driver-pinning-") for name in _installed_names(values)):
        facts["target_pinning_spec"] = f"nvidia-driver-pinning-{branch}"
    # dnf: the stream of the node's packaging and the target flavour, fm where fabric manager is installed
    stream = str(values.get("driver_stream") or "").strip()
    if not stream:
        if flavour.endswith("open"):
            stream = f"{branch}-open"
        elif packaging == "precompiled":
            stream = branch
        else:
            stream = f"{branch}-dkms"
    facts["target_dnf_stream"] = stream
    profile = "fm" if recorded.get("fabric_manager_version") else "default"
    facts["target_dnf_module"] = f"nvidia-driver:{stream}/{profile}"
    for name, value in facts.items():
        shape = _DNF if name.startswith("target_dnf_") else _PACKAGE
        if value and name != "target_flavour" and not shape.match(value):
            raise BadInput(f"{name}: {value!r} is not a package name")
    return facts
