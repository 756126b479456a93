"""CUDA toolkit versus driver: the minimum-driver table and the compatibility gate.

Pure functions over version strings. Two facts shape this module:

* A CUDA toolkit (and an image built with it, ``cu130`` = CUDA 13.0) needs a driver
  at least as new as NVIDIA's minimum for that toolkit; CUDA 13.x lives in the r580
  family and newer. Minor-version compatibility inside one major version does not
  make a jump across majors safe, so the gate compares against the exact toolkit.
* nvidia-smi's "CUDA Version" is only the driver's ceiling: it does not prove that
  every kernel, container library or engine dependency works with the workload.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from cockpit.errors import BadInput

#: CUDA toolkit (major.minor) -> minimum Linux x86_64 driver, from NVIDIA's release notes.
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

CEILING_HINT = (
    "nvidia-smi's 'CUDA Version' is only the driver's ceiling: it does not prove that every "
    "model kernel, container library or engine dependency is compatible with the workload"
)

_DRIVER = re.compile(r"^[rR]?(\d+)(?:\.(\d+))?(?:\.(\d+))?$")
_CU_TAG = re.compile(r"^cu(\d)(\d)(\d)?$")  # cu92, cu118, cu130
_API_INT = re.compile(r"^(\d{4,6})$")  # cudaDriverGetVersion style: 12080 = 12.8
_DOTTED = re.compile(r"^(\d{1,2})(?:\.(\d{1,2}))?(?:\.\d+)?$")


def parse_version(text: str) -> tuple[int, ...]:
    """``"580.65.06"`` -> ``(580, 65, 6)``; ``"r580"`` -> ``(580,)``. :class:`BadInput` otherwise."""
    match = _DRIVER.match(text.strip())
    if match is None:
        raise BadInput(f"not a driver version: {text!r} (expected like 580.65.06 or r580)")
    return tuple(int(part) for part in match.groups() if part is not None)


def branch(driver: str) -> str:
    """The driver branch: ``"580.65.06"`` -> ``"580"``."""
    return str(parse_version(driver)[0])


def parse_cuda(text: str) -> str:
    """A CUDA version as ``major.minor`` from the ways logs and tags spell it.

    ``"13.0"``, ``"13"``, ``"12.8.1"``, ``"cu130"``, ``"cu118"``, ``"CUDA 12.8"``,
    ``"cuda>=12.8"`` and the integer form PyTorch prints (``12080``) are accepted.
    """
    value = re.sub(r"^(?:cuda)?\s*(?:>=|=)?\s*v?", "", text.strip().lower())
    tag = _CU_TAG.match(value)
    if tag:
        if tag[3] is None:
            return f"{tag[1]}.{tag[2]}"
        return f"{tag[1]}{tag[2]}.{tag[3]}"
    if _API_INT.match(value) and int(value) >= 1000:
        number = int(value)
        return f"{number // 1000}.{(number % 1000) // 10}"
    dotted = _DOTTED.match(value)
    if dotted:
        return f"{int(dotted[1])}.{int(dotted[2] or 0)}"
    raise BadInput(f"not a CUDA version: {text!r} (expected like 13.0, cu130 or 12080)")


def _cuda_key(cuda: str) -> tuple[int, int]:
    major, minor = parse_cuda(cuda).split(".")
    return int(major), int(minor)


def min_driver_for(cuda: str) -> str | None:
    """Minimum Linux driver for a CUDA toolkit, or ``None`` when the table does not know it."""
    return CUDA_MIN_DRIVER.get(parse_cuda(cuda))


def driver_supports(driver: str, cuda: str) -> bool:
    """Whether ``driver`` meets NVIDIA's minimum for CUDA ``cuda``.

    :class:`BadInput` for a CUDA version the table does not hold: guessing a
    minimum for a toolkit nobody checked would make the gate lie.
    """
    minimum = min_driver_for(cuda)
    if minimum is None:
        known = list(CUDA_MIN_DRIVER)
        raise BadInput(
            f"no minimum driver known for CUDA {parse_cuda(cuda)} (the table covers {known[0]} to {known[-1]})"
        )
    return _meets(driver, minimum)


def _meets(driver: str, minimum: str) -> bool:
    have = parse_version(driver)
    if len(have) == 1:
        # a bare branch ("r580", as operators say it) is compared by branch number alone
        return have[0] >= parse_version(minimum)[0]
    return have >= parse_version(minimum)


def max_cuda_for(driver: str) -> str | None:
    """The newest CUDA toolkit in the table that ``driver`` supports (None: older than all)."""
    supported = [c for c, minimum in CUDA_MIN_DRIVER.items() if _meets(driver, minimum)]
    return max(supported, key=_cuda_key) if supported else None


def cuda_ceiling_ok(ceiling: str, needed: str) -> bool:
    """Whether the driver's CUDA ceiling (nvidia-smi "CUDA Version") reaches ``needed``.

    Necessary, not sufficient: see :data:`CEILING_HINT`.
    """
    return _cuda_key(ceiling) >= _cuda_key(needed)


class CompatOutcome(StrEnum):
    """The four results of the compatibility gate."""

    HARD_STOP = "hard-stop"  # the image needs a newer driver branch than the node has
    COMPATIBLE = "compatible"  # go on to image integrity, model revision, GPU visibility, topology
    CUSTOM_BUILD = "custom-build"  # a self-built image: the team owns its dependency chain
    UNPINNED_IMAGE = "unpinned-image"  # unknown image or floating tag: pin a digest first


class CompatVerdict(BaseModel):
    """What the gate decided, why, and what to do next."""

    model_config = ConfigDict(extra="forbid")

    outcome: CompatOutcome
    reason: str
    next_step: str
    image_cuda: str | None = None
    driver: str | None = None
    min_driver: str | None = None  # the minimum driver for image_cuda, when known
    hint: str = CEILING_HINT

    @property
    def gate_open(self) -> bool:
        """Whether the window may go on past the compatibility gate."""
        return self.outcome in (CompatOutcome.COMPATIBLE, CompatOutcome.CUSTOM_BUILD)


def compat_outcome(
    image_cuda: str | None,
    driver: str | None,
    *,
    custom_build: bool = False,
    image_pinned: bool = True,
) -> CompatVerdict:
    """Classify an image against a node's driver, as the runbook's compatibility gate does.

    Order: an unknown or unpinned image comes first (nothing else can be trusted
    until the image is pinned), then a driver below the image's minimum (a hard
    stop, whoever built the image), then a custom build, then compatible.
    Raises :class:`BadInput` when the driver is unknown or a version is malformed.
    """
    if image_cuda is None or not image_pinned:
        what = (
            "the image's CUDA build is unknown"
            if image_cuda is None
            else f"the CUDA {parse_cuda(image_cuda)} image is not pinned"
        )
        return CompatVerdict(
            outcome=CompatOutcome.UNPINNED_IMAGE,
            reason=f"{what}: a floating tag can change under the test",
            next_step="replace the tag with a pinned image digest, record it, then classify again",
            image_cuda=parse_cuda(image_cuda) if image_cuda is not None else None,
            driver=driver,
        )
    if driver is None or not driver.strip():
        raise BadInput("the node's driver version is unknown: record nvidia-smi on the node first")
    driver = driver.strip()
    cuda = parse_cuda(image_cuda)
    minimum = min_driver_for(cuda)
    supported = driver_supports(driver, cuda)
    if not supported:
        assert minimum is not None  # driver_supports raised otherwise
        ceiling = max_cuda_for(driver)
        can = (
            f"r{branch(driver)} supports CUDA up to {ceiling}"
            if ceiling
            else f"r{branch(driver)} predates CUDA {min(CUDA_MIN_DRIVER)}"
        )
        return CompatVerdict(
            outcome=CompatOutcome.HARD_STOP,
            reason=(
                f"the image is built for CUDA {cuda}, which needs driver {minimum} or newer "
                f"(r{branch(minimum)} family); the node has {driver} and {can}"
            ),
            next_step=(
                "stop tuning launch flags (batch size, context length): this is a driver or environment "
                f"decision; upgrade to r{branch(minimum)} or newer, move the workload to a compatible "
                "environment, or rebuild the image for the CUDA this driver supports"
            ),
            image_cuda=cuda,
            driver=driver,
            min_driver=minimum,
        )
    if custom_build:
        return CompatVerdict(
            outcome=CompatOutcome.CUSTOM_BUILD,
            reason=f"a custom CUDA {cuda} build on driver {driver} (minimum {minimum})",
            next_step=(
                "record the source commit, the PyTorch build, the compiler and the kernel package "
                "versions: the team now owns this dependency chain"
            ),
            image_cuda=cuda,
            driver=driver,
            min_driver=minimum,
        )
    return CompatVerdict(
        outcome=CompatOutcome.COMPATIBLE,
        reason=f"driver {driver} meets the minimum {minimum} for CUDA {cuda}",
        next_step="continue with image integrity, model revision, GPU visibility and topology checks",
        image_cuda=cuda,
        driver=driver,
        min_driver=minimum,
    )
