"""The platform a node's driver lives on, from the read-only probe's platform sections.

One pure function per tool output; each answers ``None`` ("not available") for text it
cannot read (the tool missing, an empty section), never raises. Sources of the formats:

- ``/etc/os-release``: os-release(5), shell-style ``KEY=value`` lines, values optionally quoted.
- ``modinfo nvidia``: modinfo(8) ``field:  value`` lines; the open kernel modules declare
  ``license: Dual MIT/GPL`` (NVIDIA/open-gpu-kernel-modules, ``nv-kernel.c`` MODULE_LICENSE),
  the proprietary ones ``license: NVIDIA``.
- ``mokutil --sb-state``: ``SecureBoot enabled`` / ``SecureBoot disabled``, or ``EFI variables
  are not supported on this system`` on a BIOS boot (mokutil(1)).
- ``mokutil --list-enrolled``: one X.509 dump per key; ``Subject: ... CN=...`` and the
  ``X509v3 Subject Key Identifier:`` value on the next line.
- ``dkms status``: ``nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed`` (dkms 3), older
  ``nvidia, 535.54.03, 5.15.0-76-generic, x86_64: installed`` (dkms 2).
- ``apt-mark showhold``: one package a line; ``dnf versionlock list``: ``NAME-EPOCH:VERSION-RELEASE.*``.
- ``fuser -v FILE...`` (psmisc): a header ``USER PID ACCESS COMMAND``, then ``FILE:  USER PID
  ACCESS COMMAND`` rows, continuation rows without the file.
- ``systemctl show -p Id,MainPID UNIT...``: ``KEY=value`` blocks, one per unit, blank-line separated.
- ``dnf module list --enabled nvidia-driver``: ``nvidia-driver  580-open [e]  default [d], fm, ...``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

#: How a driver was put on the node.
DISTRIBUTION = "distribution"  # the OS vendor's archive (Ubuntu restricted, RHEL's own)
CUDA_REPOSITORY = "cuda-repository"  # NVIDIA's repository, developer.download.nvidia.com
RUNFILE = "runfile"  # the .run installer: no package, nvidia-uninstall on disk
GPU_OPERATOR = "gpu-operator"  # a driver container: /run/nvidia/driver, no host package

# how the kernel module comes (module_packaging)
DKMS = "dkms"  # built on the node by DKMS for each installed kernel
PRECOMPILED = "precompiled"  # built by the vendor for one kernel, shipped as a package per kernel

#: The GPU-holding services whose systemd unit the probe asks for (the MainPID of each).
HOLDER_UNITS: tuple[str, ...] = (
    "nvidia-persistenced.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "dcgm-exporter.service",
    "nvidia-fabricmanager.service",
)


def parse_os_release(text: str) -> dict[str, str]:
    """``KEY=value`` lines of os-release(5), quotes removed; unreadable lines skipped."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, raw = line.split("=", 1)
        try:
            words = shlex.split(raw)
        except ValueError:
            continue
        values[key.strip()] = words[0] if words else ""
    return values


def package_manager(tool_paths: Iterable[str]) -> str | None:
    """apt or dnf from the paths ``command -v apt-get dnf yum`` printed (yum is dnf on RHEL 8+)."""
    names = {p.strip().rsplit("/", 1)[-1] for p in tool_paths if p.strip()}
    if "apt-get" in names:
        return "apt"
    if "dnf" in names or "yum" in names:
        return "dnf"
    return None


def installed_packages(text: str) -> dict[str, str]:
    """``ii name=version`` lines (the probe's dpkg-query/rpm format) -> name: version. dpkg-query(1)'s
    ``db:Status-Abbrev`` is the wanted action, the status and the error flag: ``ii`` installed,
    ``hi`` installed and on hold (apt-mark hold): both count; ``rc`` (removed, config left) does not."""
    packages: dict[str, str] = {}
    for line in text.splitlines():
        if len(line) > 3 and line[0] in "uihrp" and line[1:3] == "i " and "=" in line:
            name, version = line[3:].strip().split("=", 1)
            if version:
                packages[name] = version
    return packages


def parse_modinfo(text: str) -> dict[str, str]:
    """modinfo's ``field:  value`` lines; repeated fields (sig_key continues on the next
    lines for long keys) keep their first line."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+):\s*(.*)$", line)
        if m and m.group(1) not in values:
            values[m.group(1)] = m.group(2).strip()
    return values


def dnf_module_stream(text: str) -> str | None:
    """The enabled ``nvidia-driver`` stream (``580-open``) from ``dnf module list --enabled``."""
    for line in text.splitlines():
        m = re.match(r"^nvidia-driver\s+(\S+)\s+.*\[e\]", line)
        if m:
            return m.group(1)
    return None


def driver_flavour(packages: Mapping[str, str], license_: str | None, stream: str | None) -> str | None:
    """proprietary, open, server or server-open: from the package names (Ubuntu's
    ``nvidia-driver-580-open``, ``nvidia-driver-580-server-open``, ``nvidia-dkms-580-open``),
    the dnf module stream (``580-open``), else the module's license (Dual MIT/GPL = open)."""
    names = " ".join(packages)
    branch_names = re.findall(
        r"nvidia-(?:driver|dkms|kernel-source|headless)(?:-no-dkms)?-\d+((?:-server)?(?:-open)?)\b", names
    )
    if branch_names:
        suffix = max(branch_names, key=len)
        return {"": "proprietary", "-open": "open", "-server": "server", "-server-open": "server-open"}[suffix]
    if stream is not None:
        return "open" if stream.endswith("-open") else "proprietary"
    if packages.get("kmod-nvidia-open-dkms") or any(n.startswith("kmod-nvidia-open") for n in packages):
        return "open"
    if license_:
        return "open" if "MIT" in license_ else "proprietary"
    return None


#: The metapackages that name a driver install, most specific first: the one a node was
#: installed with is what its upgrade installs again, on the target branch.
_METAPACKAGE = re.compile(
    r"^(?:nvidia-driver|nvidia-headless-no-dkms|nvidia-headless|nvidia-open|cuda-drivers)"
    r"(?:-\d+)?(?:-server)?(?:-open)?$"
)
_METAPACKAGE_ORDER = ("nvidia-driver", "nvidia-headless-no-dkms", "nvidia-headless", "nvidia-open", "cuda-drivers")


def driver_metapackage(packages: Mapping[str, str]) -> str | None:
    """The installed package that names the driver install (``nvidia-driver-575-server-open``,
    ``nvidia-headless-no-dkms-580-server``, ``nvidia-open``; RHEL's ``nvidia-driver``)."""
    found = [n for n in packages if _METAPACKAGE.match(n)]
    for kind in _METAPACKAGE_ORDER:
        named = sorted(n for n in found if n == kind or re.match(re.escape(kind) + r"-\d", n))
        named = [n for n in named if kind != "nvidia-headless" or not n.startswith("nvidia-headless-no-dkms")]
        if named:
            return named[0]
    return None


def module_packaging(packages: Mapping[str, str], stream: str | None) -> str | None:
    """How the kernel module comes: ``dkms`` (built on the node: Ubuntu's ``nvidia-dkms-*``,
    RHEL's ``kmod-nvidia-latest-dkms``/``kmod-nvidia-open-dkms``) or ``precompiled`` (built
    for one kernel: Ubuntu's ``linux-modules-nvidia-*`` from linux-restricted-modules, RHEL's
    ``kmod-nvidia-VERSION-KERNEL`` of the precompiled streams ``580`` and ``latest``)."""
    names = list(packages)
    if any(n.startswith("linux-modules-nvidia-") for n in names) or any(re.match(r"kmod-nvidia-\d", n) for n in names):
        return PRECOMPILED
    if any(n.startswith(("nvidia-dkms", "kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms")) for n in names):
        return DKMS
    if stream is not None:
        return DKMS if stream.endswith(("-dkms", "-open")) else PRECOMPILED
    return None


def gpu_models(text: str) -> list[str]:
    """``nvidia-smi -L``: the distinct GPU model names (``NVIDIA H100 80GB HBM3``), in order."""
    models: list[str] = []
    for line in text.splitlines():
        m = re.match(r"^GPU \d+: (.+?) \(UUID:", line)
        if m and m.group(1) not in models:
            models.append(m.group(1))
    return models


_DRIVER_PACKAGE = re.compile(
    r"(nvidia-driver|nvidia-headless|nvidia-open|nvidia-dkms|kmod-nvidia|cuda-drivers|linux-modules-nvidia)"
)


def driver_install(packages: Mapping[str, str], paths: Iterable[str], cuda_repo: bool) -> str | None:
    """How the driver came: a driver container, the .run installer, NVIDIA's repository or
    the distribution's packages (in that order of evidence)."""
    present = set(paths)
    has_package = any(_DRIVER_PACKAGE.match(n) for n in packages)
    if not has_package:
        if "/run/nvidia/driver" in present:
            return GPU_OPERATOR
        if present & {"/usr/bin/nvidia-uninstall", "/var/log/nvidia-installer.log"}:
            return RUNFILE
        return None
    return CUDA_REPOSITORY if cuda_repo else DISTRIBUTION


def package_version(packages: Mapping[str, str], prefixes: tuple[str, ...]) -> str | None:
    """The version of the first installed package whose name starts with one of ``prefixes``."""
    for name in sorted(packages):
        if name.startswith(prefixes):
            return packages[name]
    return None


def container_runtimes(tool_paths: Iterable[str]) -> list[str]:
    names = {p.strip().rsplit("/", 1)[-1] for p in tool_paths if p.strip()}
    return [r for r in ("docker", "podman", "nerdctl", "ctr") if r in names]


def secure_boot(text: str) -> bool | None:
    """``mokutil --sb-state``: True/False, None on a BIOS boot or without mokutil."""
    for line in text.splitlines():
        m = re.match(r"^\s*SecureBoot\s+(enabled|disabled)\b", line, re.IGNORECASE)
        if m:
            return m.group(1).lower() == "enabled"
    return None


def enrolled_keys(text: str) -> tuple[set[str], set[str]]:
    """(subject CNs, subject key identifiers, upper case) of ``mokutil --list-enrolled``."""
    names: set[str] = set()
    ids: set[str] = set()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cn = re.search(r"Subject:.*?CN\s*=\s*([^,/\n]+)", line)
        if cn:
            names.add(cn.group(1).strip())
        if "Subject Key Identifier" in line and i + 1 < len(lines):
            ids.add(lines[i + 1].strip().upper())
    return names, ids


def signer_enrolled(modinfo: Mapping[str, str], mok_text: str, secure: bool | None) -> bool | None:
    """Whether the module's signing key is enrolled: False for an unsigned module under Secure
    Boot; None when nothing can be said (no Secure Boot, no mokutil output)."""
    signer, key = modinfo.get("signer"), (modinfo.get("sig_key") or "").upper()
    if secure is not True:
        return None
    if not signer and not key:
        return False if modinfo else None  # an unsigned module does not load under Secure Boot
    names, ids = enrolled_keys(mok_text)
    if not names and not ids:
        return None
    return (signer in names) or (bool(key) and key in ids)


def version_key(text: str) -> tuple[tuple[int, str], ...]:
    """A sort key for kernel release names (``6.8.0-60-generic`` after ``6.8.0-9-generic``)."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.\-+~_]", text))


def kernel_next(grubby: str, paths: Iterable[str]) -> str | None:
    """The kernel that boots next: ``grubby --default-kernel`` where it answers (RHEL), else the
    newest ``/boot/vmlinuz-*`` (Debian's grub menu lists the newest first and boots it)."""
    for line in grubby.splitlines():
        if line.strip().startswith("/boot/vmlinuz-"):
            return line.strip().removeprefix("/boot/vmlinuz-")
    kernels = [p.removeprefix("/boot/vmlinuz-") for p in paths if p.startswith("/boot/vmlinuz-")]
    kernels = [k for k in kernels if k and not k.endswith(".old")]
    return max(kernels, key=version_key) if kernels else None


def kernel_headers(paths: Iterable[str]) -> list[str]:
    """Kernels with headers installed, from ``/lib/modules/K/build/Makefile`` paths that exist."""
    found = (re.fullmatch(r"/lib/modules/([^/*]+)/build/Makefile", p.strip()) for p in paths)
    return sorted({m.group(1) for m in found if m}, key=version_key)


def dkms_status(text: str) -> list[str]:
    """The nvidia lines of ``dkms status``, as printed."""
    return [ln.strip() for ln in text.splitlines() if re.match(r"^\s*nvidia[/,]", ln)]


def package_holds(apt: str | None, dnf: str | None) -> list[str] | None:
    """Held packages: ``apt-mark showhold`` names, or the names of ``dnf versionlock list``
    entries (``nvidia-driver-3:580.95.05-1.el9.*`` -> ``nvidia-driver``)."""
    if apt is None and dnf is None:
        return None
    holds = [ln.strip() for ln in (apt or "").splitlines() if ln.strip()]
    for line in (dnf or "").splitlines():
        m = re.match(r"^([A-Za-z0-9_.+\-]+?)-(?:\d+:)?\d[^\s]*$", line.strip())
        if m:
            holds.append(m.group(1))
    return holds


def unattended_upgrades(unit_state: str | None, apt_periodic: str | None) -> str | None:
    """``enabled`` when the service (or dnf-automatic timer) is enabled and apt's periodic
    ``Unattended-Upgrade`` is not ``"0"``; ``disabled`` otherwise; None when not installed."""
    state = (unit_state or "").strip().splitlines()
    words = {w.strip() for w in state if w.strip()}
    if not words:
        return None
    periodic = re.search(r'Unattended-Upgrade\s+"(\d+)"', apt_periodic or "")
    if "enabled" in words and not (periodic and periodic.group(1) == "0"):
        return "enabled"
    return "disabled"


def fuser_holders(text: str) -> dict[int, str]:
    """``fuser -v /dev/nvidia*``: pid -> command, each process once."""
    holders: dict[int, str] = {}
    for line in text.splitlines():
        if not line.strip() or re.match(r"^\s*USER\s+PID\s+ACCESS\s+COMMAND", line):
            continue
        body = line.split(":", 1)[1] if re.match(r"^\S+:", line) else line
        parts = body.split()
        if len(parts) >= 4 and parts[1].isdigit():
            holders.setdefault(int(parts[1]), " ".join(parts[3:]))
        elif len(parts) >= 3 and parts[1] == "kernel":
            continue  # the kernel's own mount of the file, no process
    return holders


def unit_pids(text: str) -> dict[int, str]:
    """``systemctl show -p Id,MainPID UNIT...``: main pid -> unit, for units that run."""
    units: dict[int, str] = {}
    block: dict[str, str] = {}

    def flush() -> None:
        pid = block.get("MainPID", "0")
        if pid.isdigit() and int(pid) > 0 and block.get("Id"):
            units[int(pid)] = block["Id"]
        block.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
            continue
        if "=" in line:
            key, value = line.split("=", 1)
            if key in block:  # no blank line between units: a repeated key starts the next
                flush()
            block[key] = value.strip()
    flush()
    return units


def gpu_holders(fuser: str | None, units: str) -> list[str] | None:
    """Processes holding ``/dev/nvidia*`` as ``PID COMMAND`` with `` (UNIT)`` where known."""
    if fuser is None:
        return None
    by_pid = unit_pids(units)
    return [
        f"{pid} {command}" + (f" ({by_pid[pid]})" if pid in by_pid else "")
        for pid, command in sorted(fuser_holders(fuser).items())
    ]


def mig_layout(text: str) -> list[str] | None:
    """``nvidia-smi -L``: one ``GPU N: MIG PROFILE`` per MIG device (empty: MIG not in use)."""
    if not text.strip():
        return None
    layout: list[str] = []
    gpu: str | None = None
    for line in text.splitlines():
        g = re.match(r"^GPU (\d+):", line)
        if g:
            gpu = g.group(1)
            continue
        m = re.match(r"^\s+MIG (\S+)\s+Device\s+\d+:", line)
        if m and gpu is not None:
            layout.append(f"GPU {gpu}: MIG {m.group(1)}")
    return layout
