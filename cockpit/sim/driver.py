"""A node's NVIDIA driver in its three places: the installed userspace, the module on disk, the loaded module.

They differ during a change, as on a real node: installing a branch replaces the
userspace (``nvidia-smi``, NVML) at once and builds the new kernel module on disk,
but the loaded module only changes at the next boot. In between every NVML call
fails with the driver/library version mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.sim import smi
from cockpit.sim.smi import DriverRelease

#: The branch every simulated node runs before the change.
INITIAL_BRANCH = "575"


@dataclass
class DriverStack:
    userspace: DriverRelease | None = None  # installed driver package (nvidia-smi, NVML)
    module_on_disk: DriverRelease | None = None  # what the next boot loads
    module: DriverRelease | None = None  # loaded kernel module; None = driver not loaded
    open_on_disk: bool = True  # the module on disk is NVIDIA's open kernel module (nvidia-dkms-*-open)
    open_loaded: bool = True  # the loaded one is ("Open Kernel Module" in /proc/driver/nvidia/version)
    precompiled_on_disk: bool = False  # the module on disk came built in a package (no DKMS build)

    def module_line(self, module: DriverRelease) -> str:
        """How NVRM names the loaded module: the open one says "Open Kernel Module" (the captures in
        tests/fixtures/proc_version)."""
        kind = "Open Kernel Module for x86_64" if self.open_loaded else "x86_64 Kernel Module"
        return f"NVIDIA UNIX {kind}  {module.version}  Release Build"

    def nvml_error(self) -> tuple[str, int] | None:
        """Why NVML cannot initialise right now, as nvidia-smi says it (text, exit status), or None."""
        if self.userspace is None:
            return "", 127
        if self.module is None:
            return smi.NOT_LOADED + "\n", 9
        if self.module.version != self.userspace.version:
            return f"{smi.MISMATCH}\nNVML library version: {self.userspace.nvml}\n", 18
        return None
