"""The platform sections of the probe: what a record step (and a probe step) learns besides
the GPUs, each section a read-only command that answers "not available" when its tool is
missing (its exit status 127, or nothing printed), never an error of the whole probe.

The sections join the probe's one command line (:func:`cockpit.fleet.probes.probe_command`);
:func:`platform_facts` assembles them with the pure parsers of
:mod:`cockpit.gpu.parsers.platform`. A runbook's own facts (``[facts.NAME]``) become
sections ``fact-NAME`` of the same line.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from cockpit.fleet.privilege import SUDO_ABSENT, SUDO_PASSWORD_REQUIRED, SUDO_PASSWORDLESS
from cockpit.gpu.parsers import platform as p
from cockpit.gpu.platform import PlatformFacts
from cockpit.runbook import regexes

#: dpkg on Debian/Ubuntu, rpm on RHEL: every NVIDIA package (driver, fabric manager, nscq) as ii name=version
_PACKAGES = (
    "dpkg-query -W -f='${db:Status-Abbrev}${Package}=${Version}\\n' 'nvidia-*' 'libnvidia-nscq*' 'cuda-drivers*'"
    " 'linux-modules-nvidia-*'"
    " 2>/dev/null || rpm -qa --qf 'ii %{NAME}=%{VERSION}-%{RELEASE}\\n' 'nvidia-*' 'libnvidia-nscq*'"
    " 'kmod-nvidia*' 'cuda-drivers*' 2>/dev/null"
)
_TOOLS = ("apt-get", "dnf", "yum", "docker", "podman", "nerdctl", "ctr")
_PATHS = (
    "/run/nvidia/driver",
    "/usr/bin/nvidia-uninstall",
    "/var/log/nvidia-installer.log",
    "/dev/nvidia-nvswitchctl",
    "/etc/cdi/*",
    "/var/run/cdi/*",
    "/boot/vmlinuz-*",
    # a kernel's headers as DKMS uses them (the build symlink followed to the headers' Makefile)
    "/lib/modules/*/build/Makefile",
)
_CUDA_REPO = "developer.download.nvidia.com/compute/cuda"

#: section name -> command (fixed text: nothing from a runbook or an operator in it)
PLATFORM_SECTIONS: dict[str, str] = {
    "os-release": "cat /etc/os-release 2>/dev/null",
    "tools": "; ".join(f"command -v {t}" for t in _TOOLS),
    "packages": _PACKAGES,
    "cuda-repo": f"grep -rls '{_CUDA_REPO}' /etc/apt/sources.list /etc/apt/sources.list.d /etc/yum.repos.d 2>/dev/null",
    "dnf-module": "dnf -q module list --enabled nvidia-driver 2>/dev/null",
    "modinfo": "modinfo nvidia 2>/dev/null",
    # the shell expands the globs; one that matches nothing stays literal and ls says so on stderr
    "paths": "ls -d " + " ".join(_PATHS) + " 2>/dev/null",
    "grubby": "grubby --default-kernel 2>/dev/null",
    "sb-state": "mokutil --sb-state 2>&1",
    "mok-keys": "mokutil --list-enrolled 2>/dev/null",
    "dkms": "dkms status 2>/dev/null",
    "holds-apt": "apt-mark showhold 2>/dev/null",
    "holds-dnf": "dnf -q versionlock list 2>/dev/null",
    "unattended-unit": "systemctl is-enabled unattended-upgrades.service dnf-automatic-install.timer 2>/dev/null",
    "apt-periodic": "apt-config dump APT::Periodic::Unattended-Upgrade 2>/dev/null",
    # fuser shows another user's processes only to root (proc(5): /proc/PID/fd): through sudo -n
    # where it lets us, else as the login (then the facts say the holders are not known)
    "holders": "{ sudo -n true 2>/dev/null && sudo -n fuser -v /dev/nvidia* 2>&1; } || fuser -v /dev/nvidia* 2>&1",
    "holder-units": "systemctl show -p Id,MainPID " + " ".join(p.HOLDER_UNITS) + " 2>/dev/null",
    "smi-list": "nvidia-smi -L 2>/dev/null",
    # who the SSH login is, and whether sudo -n lets it escalate (sudo(8): -n never prompts)
    "login": "id -un; id -u",
    "sudo": "sudo -n true 2>&1",
}

FACT_PREFIX = "fact-"


@dataclass(frozen=True)
class FactProbe:
    """A runbook's own fact: a read-only command, and a regex whose first group (or whole
    match) is the value; without one, the output's first line."""

    name: str
    command: str
    regex: str | None = None


def fact_section(fact: FactProbe) -> tuple[str, str]:
    # in a shell of its own, quoted as one word, so that the author's `;` or `exit` stays inside the section
    return FACT_PREFIX + fact.name, f"sh -c {shlex.quote(fact.command)} 2>/dev/null"


def custom_value(fact: FactProbe, text: str, status: int | None) -> str | None:
    """The fact's value from its section, None when the command failed or nothing matched."""
    if status != 0:
        return None
    if fact.regex is None:
        return next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
    try:  # RE2, linear in the output: a node's answer cannot stall the event loop
        m = regexes.search(fact.regex, text)
    except ValueError:
        return None
    if m is None:
        return None
    return ((m.group(1) if m.groups() else m.group(0)) or "").strip() or None


def _answered(texts: Mapping[str, tuple[str, int | None]], name: str) -> str | None:
    """A section's text when its tool ran (not 127, not cut short), else None."""
    found = texts.get(name)
    if found is None or found[1] is None or found[1] == 127:
        return None
    return found[0]


def platform_facts(texts: Mapping[str, tuple[str, int | None]]) -> PlatformFacts | None:
    """The platform facts from the probe's sections (name -> (text, exit status)); None when
    the probe had no platform sections at all (a routine probe round)."""
    if "os-release" not in texts:
        return None

    def text(name: str) -> str:
        return _answered(texts, name) or ""

    def printed(name: str) -> str:
        # a section whose last fallback may be missing (dpkg-query || rpm): what it printed counts
        return texts.get(name, ("", None))[0]

    osr = p.parse_os_release(text("os-release"))
    tools = printed("tools").splitlines()
    packages = p.installed_packages(printed("packages"))
    modinfo = p.parse_modinfo(text("modinfo"))
    stream = p.dnf_module_stream(text("dnf-module"))
    paths = [ln.strip() for ln in text("paths").splitlines() if ln.strip()]
    sb = p.secure_boot(text("sb-state"))
    holds_apt, holds_dnf = _answered(texts, "holds-apt"), _answered(texts, "holds-dnf")
    holders = _answered(texts, "holders")
    if holders is not None and "not found" in holders and "fuser" in holders:
        holders = None
    ssh_user, uid = _login(text("login"))
    sudo = sudo_state(*texts.get("sudo", ("", None)))
    if uid not in (None, 0) and sudo != SUDO_PASSWORDLESS:
        holders = None  # fuser as a user sees only its own processes: not knowing is not "none"
    return PlatformFacts(
        os_id=osr.get("ID") or None,
        os_version=osr.get("VERSION_ID") or None,
        os_like=osr.get("ID_LIKE") or None,
        package_manager=p.package_manager(tools),
        driver_flavour=p.driver_flavour(packages, modinfo.get("license"), stream),
        driver_install=p.driver_install(packages, paths, bool(text("cuda-repo").strip())),
        driver_packages=[f"{k}={v}" for k, v in sorted(packages.items())],
        driver_metapackage=p.driver_metapackage(packages),
        module_packaging=p.module_packaging(packages, stream),
        module_license=modinfo.get("license"),
        module_signer=modinfo.get("signer"),
        nvswitch=("/dev/nvidia-nvswitchctl" in paths) if "paths" in texts else None,
        fabric_manager_version=p.package_version(packages, ("nvidia-fabricmanager", "nvidia-fabric-manager")),
        nscq_version=p.package_version(packages, ("libnvidia-nscq",)),
        imex_version=p.package_version(packages, ("nvidia-imex",)),
        container_runtimes=p.container_runtimes(tools),
        cdi_specs=sorted(x for x in paths if x.startswith(("/etc/cdi/", "/var/run/cdi/")) and "*" not in x),
        secure_boot=sb,
        module_signer_enrolled=p.signer_enrolled(modinfo, text("mok-keys"), sb),
        kernel_next=p.kernel_next(text("grubby"), paths),
        kernel_headers=p.kernel_headers(paths) if "paths" in texts else None,
        dkms=p.dkms_status(text("dkms")),
        package_holds=p.package_holds(holds_apt, holds_dnf),
        unattended_upgrades=p.unattended_upgrades(text("unattended-unit"), text("apt-periodic")),
        gpu_holders=p.gpu_holders(holders, text("holder-units")),
        mig_layout=p.mig_layout(text("smi-list")),
        gpu_models=p.gpu_models(text("smi-list")) or None,
        ssh_user=ssh_user,
        uid=uid,
        sudo=sudo,
    )


def _login(text: str) -> tuple[str | None, int | None]:
    """``id -un; id -u``: the login's name and uid (None where a line is missing)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    user = lines[0] if lines and not lines[0].isdigit() else None
    uid = next((int(ln) for ln in lines if ln.isdigit()), None)
    return user, uid


def sudo_state(text: str, status: int | None) -> str | None:
    """``sudo -n true``: passwordless (exit 0), password-required (sudo's "a password is
    required", also a login sudoers does not list), absent (the shell found no sudo)."""
    if status == 0:
        return SUDO_PASSWORDLESS
    if status == 127 or "not found" in text:
        return SUDO_ABSENT
    if status is None:
        return None  # the section was cut short
    return SUDO_PASSWORD_REQUIRED


def sections_text(facts: tuple[FactProbe, ...]) -> list[tuple[str, str]]:
    """The platform sections and a runbook's own, in probe order."""
    return [*PLATFORM_SECTIONS.items(), *(fact_section(f) for f in facts)]
