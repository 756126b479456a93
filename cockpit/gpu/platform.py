"""What a node's platform is, as the record step's probe learned it (see
:mod:`cockpit.gpu.parsers.platform` for the tools and formats it comes from)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PlatformFacts"]


class PlatformFacts(BaseModel):
    """What the platform probe learned; every field ``None`` when the tool could not say."""

    model_config = ConfigDict(extra="forbid")

    os_id: str | None = None  # "ubuntu", "rhel", "rocky"
    os_version: str | None = None  # VERSION_ID: "24.04", "9.4"
    os_like: str | None = None  # ID_LIKE: "debian", "rhel centos fedora"
    package_manager: str | None = None  # "apt" or "dnf"
    driver_flavour: str | None = None  # proprietary, open, server, server-open
    driver_install: str | None = None  # distribution, cuda-repository, runfile, gpu-operator
    driver_packages: list[str] = Field(default_factory=list)  # name=version of every nvidia package
    driver_metapackage: str | None = None  # the package the driver was installed by: nvidia-driver-575-server-open
    module_packaging: str | None = None  # dkms or precompiled
    module_license: str | None = None
    module_signer: str | None = None
    nvswitch: bool | None = None
    fabric_manager_version: str | None = None
    nscq_version: str | None = None
    imex_version: str | None = None  # nvidia-imex (GB200 NVL), in lockstep with the driver like fabric manager
    container_runtimes: list[str] = Field(default_factory=list)
    cdi_specs: list[str] = Field(default_factory=list)
    secure_boot: bool | None = None
    module_signer_enrolled: bool | None = None
    kernel_next: str | None = None
    #: kernels whose headers are installed (/lib/modules/K/build/Makefile): what DKMS builds against
    kernel_headers: list[str] | None = None
    dkms: list[str] = Field(default_factory=list)  # "nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed"
    package_holds: list[str] | None = None  # None: no hold tool answered
    unattended_upgrades: str | None = None  # "enabled", "disabled"; None: not installed
    gpu_holders: list[str] | None = None  # "PID COMMAND (UNIT)"; None: no fuser
    mig_layout: list[str] | None = None  # "GPU 0: MIG 3g.40gb" per MIG device, from nvidia-smi -L
    gpu_models: list[str] | None = None  # the distinct GPU model names, from nvidia-smi -L
    ssh_user: str | None = None  # the SSH login (id -un)
    uid: int | None = None  # its uid (id -u): 0 is root
    sudo: str | None = None  # sudo -n true: "passwordless", "password-required" or "absent"
