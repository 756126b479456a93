"""NVIDIA's CUDA/driver tables, as data with their sources (read by :mod:`cockpit.gpu.compat`).

Sources (NVIDIA documentation, as stored in the reference corpus):

* CUDA Toolkit Release Notes, "CUDA Toolkit and Corresponding Driver Versions" (Table 3
  in the 12.x notes): the Linux x86_64 driver each toolkit release shipped with (its GA
  driver). https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/
* CUDA Compatibility, "Minor Version Compatibility", Table 1 "CUDA Toolkit 11.x, 12.x
  and 13.x Driver Version Ranges": CUDA 13.x runs on >= 580, 12.x on >= 525, 11.x on
  >= 450 (with the note that 11.x needs 450.80.02, the Tesla recommended driver).
  https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
* CUDA Compatibility, "Forward Compatibility": applicable only to NVIDIA Data Center
  GPUs, select NGC Server Ready RTX SKUs and Jetson boards, through the
  ``cuda-compat-<major>-<minor>`` package; the FAQ limits it to the long-term and
  production branches. https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html
* NVIDIA Data Center Drivers, "Supported Drivers and CUDA Toolkit Versions", Table 2
  "CUDA and Drivers" (the r615 and r620 editions): branch designation, end of life and
  the maximum CUDA major each branch runs without the forward-compatibility package.
  https://docs.nvidia.com/datacenter/tesla/drivers/620/supported-drivers-and-cuda-toolkit-versions.html
"""

from __future__ import annotations

from typing import NamedTuple

#: CUDA toolkit (major.minor) -> the Linux x86_64 driver it was released with (its GA
#: driver, release notes Table 3). Meeting it gives every feature of that toolkit.
CUDA_MIN_DRIVER: dict[str, str] = {
    "11.0": "450.36.06",
    "11.1": "455.23",
    "11.2": "460.27.03",
    "11.3": "465.19.01",
    "11.4": "470.42.01",
    "11.5": "495.29.05",
    "11.6": "510.39.01",
    "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
    "13.1": "590.44.01",
    "13.2": "595.45.04",
}

#: CUDA major -> the oldest driver that runs any toolkit of that major under minor-version
#: compatibility (CUDA Compatibility, Minor Version Compatibility, Table 1). 11.x: the
#: document's note names 450.80.02; 12.x and 13.x: the first release of the branch the
#: table names (12.0's and 13.0's GA drivers), the stricter reading of ">= 525" / ">= 580".
MINOR_VERSION_FLOOR: dict[int, str] = {
    11: "450.80.02",
    12: "525.60.13",
    13: "580.65.06",
}


class DriverBranch(NamedTuple):
    """One data center driver branch as NVIDIA's support matrix lists it."""

    designation: str  # "LTSB" (long term support) or "PB" (production)
    end_of_life: str  # as the table states it
    max_cuda_major: int  # without the forward-compatibility package


#: Branches on which forward compatibility is supported: the long-term and production
#: branches of the data center support matrix (Table 2, r615 and r620 editions). New
#: feature branches are left out (the matrix lists them only as short-lived). A branch not
#: listed here is not offered forward compatibility: the cockpit does not guess.
FORWARD_COMPAT_BRANCHES: dict[int, DriverBranch] = {
    535: DriverBranch("LTSB", "June 2026", 12),
    580: DriverBranch("LTSB", "June 2028", 13),
    595: DriverBranch("PB", "March 2027", 13),
    620: DriverBranch("LTSB", "September 2029", 13),
}

#: What minor-version compatibility does not give, in the words of the CUDA Compatibility
#: document (Minor Version Compatibility: application and deployment considerations).
MINOR_VERSION_LIMITS: tuple[str, ...] = (
    "features that need a newer driver fail at run time with cudaErrorCallRequiresNewerDriver (36)",
    "PTX built by the newer toolkit cannot be JIT-compiled by this driver "
    "(cudaErrorUnsupportedPtxVersion, 222): the image must carry SASS for these GPUs",
    "it holds inside one CUDA major only; a newer major needs a newer driver branch",
)

#: What forward compatibility does not give (CUDA Compatibility, Forward Compatibility:
#: deployment considerations and feature exceptions).
FORWARD_COMPAT_LIMITS: tuple[str, ...] = (
    "the cuda-compat package must match the image's CUDA and be on the library path "
    "(LD_LIBRARY_PATH or ldconfig) inside the container",
    "some features are excepted (the Forward Compatibility feature exceptions)",
    "on a GPU that does not support it every CUDA call fails with cudaErrorCompatNotSupportedOnDevice (804)",
)
