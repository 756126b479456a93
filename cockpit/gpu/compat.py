"""CUDA toolkit versus driver: the compatibility gate, by the rules NVIDIA documents.

Pure functions over version strings; the tables and their sources are in
:mod:`cockpit.gpu.cuda_tables`. The rules (CUDA Compatibility document):

* **Native**: a driver at least as new as a toolkit's GA driver (release notes, Table 3)
  runs everything built with that toolkit, and every older one (backward compatibility).
* **Minor-version compatibility** (section "Minor Version Compatibility", Table 1): an
  application built with any 13.x toolkit runs on any r580+ driver, 12.x on r525+, 11.x
  on 450.80.02+, with a limited feature set (:data:`MINOR_VERSION_LIMITS`). It never
  crosses a major version.
* **Forward compatibility** (section "Forward Compatibility"): a newer major on an older
  driver through the ``cuda-compat`` package, only on data center GPUs and supported
  branches (:data:`FORWARD_COMPAT_BRANCHES`); offered as a way out, never assumed.
* nvidia-smi's "CUDA Version" is only the driver's ceiling: it does not prove that
  every kernel, container library or engine dependency works with the workload.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cockpit.errors import BadInput
from cockpit.gpu.cuda_tables import (
    CUDA_MIN_DRIVER as CUDA_MIN_DRIVER,  # re-exported: callers read the table from here
)
from cockpit.gpu.cuda_tables import (
    FORWARD_COMPAT_BRANCHES,
    FORWARD_COMPAT_LIMITS,
    MINOR_VERSION_FLOOR,
    MINOR_VERSION_LIMITS,
)
from cockpit.gpu.image_env import ImageCuda

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


def _major(cuda: str) -> int:
    return _cuda_key(cuda)[0]


def minor_version_ok(driver: str, cuda: str) -> bool:
    """Whether ``driver`` runs CUDA ``cuda`` under minor-version compatibility (same major,
    at least the major's floor); False for a major the table does not know."""
    floor = MINOR_VERSION_FLOOR.get(_major(cuda))
    if floor is None:
        return False
    return _meets(driver, floor) and _driver_major_cuda(driver) == _major(cuda)


def _driver_major_cuda(driver: str) -> int | None:
    """The newest CUDA major ``driver`` runs natively (r575 -> 12, r580 -> 13)."""
    majors = [major for major, floor in MINOR_VERSION_FLOOR.items() if _meets(driver, floor)]
    return max(majors) if majors else None


class Mode(StrEnum):
    """How the driver runs the image's CUDA."""

    NATIVE = "native"  # the driver meets the toolkit's own GA driver
    MINOR_VERSION = "minor-version"  # same major, older driver: a limited feature set


def ceiling_check(ceiling: str, needed: str) -> tuple[bool, Mode | None, str]:
    """The driver's CUDA ceiling (nvidia-smi "CUDA Version") against the image's CUDA:
    (whether it runs, how, one line saying why). Same major and a lower minor runs under
    minor-version compatibility; a lower major does not."""
    have, need = _cuda_key(ceiling), _cuda_key(needed)
    shown_have, shown_need = f"{have[0]}.{have[1]}", f"{need[0]}.{need[1]}"
    if have >= need:
        return True, Mode.NATIVE, f"driver CUDA ceiling {shown_have} >= image CUDA {shown_need}"
    if have[0] == need[0] and need[0] in MINOR_VERSION_FLOOR:
        return (
            True,
            Mode.MINOR_VERSION,
            f"driver CUDA ceiling {shown_have} < image CUDA {shown_need}, same major: runs under "
            f"minor-version compatibility (limits: {MINOR_VERSION_LIMITS[0]}; {MINOR_VERSION_LIMITS[1]}; "
            f"a container whose NVIDIA_REQUIRE_CUDA says cuda>={shown_need} with no brand= term for this "
            "branch is still refused by nvidia-container-cli: the container smoke decides)",
        )
    return False, None, f"driver CUDA ceiling {shown_have} < image CUDA {shown_need}"


# --- GPU classes for forward compatibility ----------------------------------------------

# Consumer and workstation brands: forward compatibility is for data center GPUs (the
# CUDA Compatibility document allows only "select NGC Server Ready SKUs" of RTX cards,
# which a name cannot tell apart, so every RTX is refused: stricter, never kinder).
_NOT_DATACENTER = re.compile(r"geforce|\brtx\b|quadro|titan|\bgtx\b|\bnvs\b", re.IGNORECASE)
_DATACENTER = re.compile(r"\btesla\b|\b(?:[ABHLT]\d{1,3}[A-Z]?|GH\d{3}|GB\d{3}|B\d{3})\b(?:[-\s]|$)", re.IGNORECASE)


def gpu_is_datacenter(name: str) -> bool | None:
    """``NVIDIA H100 80GB HBM3`` -> True; ``NVIDIA GeForce RTX 4090`` -> False; unknown -> None."""
    if _NOT_DATACENTER.search(name):
        return False
    if _DATACENTER.search(name.replace("NVIDIA", " ")):
        return True
    return None


class ForwardCompat(BaseModel):
    """Whether the cuda-compat package is a way to run the image on this node, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    offered: bool
    reason: str
    package: str | None = None  # cuda-compat-13-0
    limits: list[str] = Field(default_factory=list)


def forward_compat(cuda: str, driver: str, *, gpu: str | None = None, image: ImageCuda | None = None) -> ForwardCompat:
    """Forward compatibility for CUDA ``cuda`` on ``driver`` and ``gpu``: offered only on a
    data center GPU, a supported branch, and (when the image is known) a branch the
    image's own requirement names. Never offered on a GeForce/RTX: CUDA error 804."""
    cuda = parse_cuda(cuda)
    package = "cuda-compat-" + cuda.replace(".", "-")
    driver_branch = parse_version(driver)[0]
    if gpu is None or not gpu.strip():
        return ForwardCompat(offered=False, reason="the GPU model is not known: record nvidia-smi first")
    datacenter = gpu_is_datacenter(gpu)
    if datacenter is False:
        return ForwardCompat(
            offered=False,
            reason=f"{gpu} is not a data center GPU: forward compatibility is not supported there "
            "and a cuda-compat library fails every CUDA call with error 804 "
            "(cudaErrorCompatNotSupportedOnDevice)",
        )
    if datacenter is None:
        return ForwardCompat(offered=False, reason=f"{gpu} is not a GPU the cockpit knows as data center class")
    listed = FORWARD_COMPAT_BRANCHES.get(driver_branch)
    if listed is None:
        known = ", ".join(f"r{b}" for b in FORWARD_COMPAT_BRANCHES)
        return ForwardCompat(
            offered=False,
            reason=f"r{driver_branch} is not a branch with forward compatibility support "
            f"(long-term and production branches: {known})",
        )
    if image is not None and image.brand_terms and driver_branch not in image.forward_compat_branches():
        named = ", ".join(f"r{b}" for b in image.forward_compat_branches())
        return ForwardCompat(
            offered=False,
            reason=f"the image's NVIDIA_REQUIRE_CUDA accepts its cuda-compat on {named}, not r{driver_branch}",
        )
    return ForwardCompat(
        offered=True,
        reason=f"{gpu} on r{driver_branch} ({listed.designation}, end of life {listed.end_of_life}) "
        f"can run CUDA {cuda} through {package}",
        package=package,
        limits=list(FORWARD_COMPAT_LIMITS),
    )


# --- the container runtime's own check ------------------------------------------------

# The brands NVML reports for a GPU, as libnvidia-container matches brand= terms; told from
# the product name (data center parts report "tesla" on older drivers, "nvidia" on newer).
_BRANDS: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"geforce", re.IGNORECASE), frozenset({"geforce", "geforcertx"})),
    (re.compile(r"titan", re.IGNORECASE), frozenset({"titan", "titanrtx"})),
    (re.compile(r"quadro", re.IGNORECASE), frozenset({"quadro", "quadrortx"})),
    (re.compile(r"\brtx\b", re.IGNORECASE), frozenset({"nvidiartx"})),
)


def gpu_brands(name: str | None) -> frozenset[str]:
    """The brand names a GPU may carry in ``brand=`` terms; empty when the GPU is unknown."""
    if not name:
        return frozenset()
    for pattern, brands in _BRANDS:
        if pattern.search(name):
            return brands
    return frozenset({"tesla", "nvidia"}) if gpu_is_datacenter(name) else frozenset()


def runtime_refusal(cuda: str, driver: str, *, gpu: str | None, image: ImageCuda | None) -> str | None:
    """Why nvidia-container-cli would refuse to start the image on ``driver``, or None.

    It checks ``NVIDIA_REQUIRE_CUDA`` against the driver's own CUDA version before anything
    runs (the real capture: ``unsatisfied condition: cuda>=12.8`` on a 550 driver), so
    minor-version compatibility helps a container only when the requirement admits the
    driver: a ``brand=`` term naming its branch and the GPU's brand, no requirement at all,
    or ``NVIDIA_DISABLE_REQUIRE``. An image not read is taken to declare ``cuda>=`` its
    CUDA, as every nvidia/cuda-based image does, with no term known to admit the driver.
    """
    ceiling = max_cuda_for(driver)
    if image is not None and (image.disable_require or image.require is None):
        return None
    required = (image.required_cuda if image is not None else None) or cuda
    if ceiling is not None and _cuda_key(ceiling) >= _cuda_key(required):
        return None
    driver_branch = parse_version(driver)[0]
    if image is not None:
        brands = gpu_brands(gpu)
        if any(t.branch == driver_branch and t.brand in brands for t in image.brand_terms):
            return None
        why = (
            f"no brand= term of it names r{driver_branch} for {gpu}"
            if brands
            else "the GPU's brand is not known, so no brand= term can be counted on"
        )
    else:
        why = "the image was not read, so no brand= term is known to admit it"
    return (
        f"the container runtime refuses to start the image: NVIDIA_REQUIRE_CUDA cuda>={required} and "
        f"driver {driver} reports CUDA {ceiling or 'older than the table'} ({why}; nvidia-container-cli: "
        "unsatisfied condition)"
    )


# --- the gate --------------------------------------------------------------------------


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
    min_driver: str | None = None  # the image's CUDA's own (GA) driver, when known
    mode: Mode | None = None  # how the driver runs it, when it does
    limits: list[str] = Field(default_factory=list)  # what that mode does not give
    forward_compat: ForwardCompat | None = None  # on a hard stop: whether cuda-compat is a way out
    image_evidence: str | None = None  # what the image itself says, when it was read
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
    gpu: str | None = None,
    image: ImageCuda | None = None,
) -> CompatVerdict:
    """Classify an image against a node's driver, as the runbook's compatibility gate does.

    Order: an unknown or unpinned image comes first (nothing else can be trusted
    until the image is pinned), then a driver that runs the image neither natively nor
    under minor-version compatibility (a hard stop, whoever built the image; forward
    compatibility is named where it applies), then a custom build, then compatible.
    ``image`` (read by :func:`~cockpit.gpu.image_env.parse_image_inspect`) supplies the
    CUDA when ``image_cuda`` is None. Raises :class:`BadInput` when the driver is unknown,
    a version is malformed, or a CUDA major is outside the tables.
    """
    evidence = image.evidence() if image is not None else None
    if image_cuda is None and image is not None:
        image_cuda = image.cuda
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
            image_evidence=evidence,
        )
    if driver is None or not driver.strip():
        raise BadInput("the node's driver version is unknown: record nvidia-smi on the node first")
    driver = driver.strip()
    cuda = parse_cuda(image_cuda)
    major = _major(cuda)
    floor = MINOR_VERSION_FLOOR.get(major)
    minimum = min_driver_for(cuda)
    if floor is None and minimum is None:
        known = list(CUDA_MIN_DRIVER)
        raise BadInput(f"no minimum driver known for CUDA {cuda} (the table covers {known[0]} to {known[-1]})")

    def verdict(**fields: Any) -> CompatVerdict:
        """Every verdict from here on names the same image CUDA, driver, minimum and evidence."""
        return CompatVerdict(image_cuda=cuda, driver=driver, min_driver=minimum, image_evidence=evidence, **fields)

    if minimum is not None and _meets(driver, minimum):
        mode, limits, runs = Mode.NATIVE, [], f"driver {driver} meets the minimum {minimum} for CUDA {cuda}"
    elif minor_version_ok(driver, cuda) and (refusal := runtime_refusal(cuda, driver, gpu=gpu, image=image)):
        return verdict(
            outcome=CompatOutcome.HARD_STOP,
            reason=refusal,
            next_step=(
                "read the image's requirement (docker image inspect; --image-inspect), use an image whose "
                f"NVIDIA_REQUIRE_CUDA admits r{branch(driver)}, or upgrade the driver: minor-version "
                f"compatibility would run CUDA {cuda} on it, but the container never starts"
            ),
        )
    elif minor_version_ok(driver, cuda):
        mode, limits = Mode.MINOR_VERSION, list(MINOR_VERSION_LIMITS)
        own = (
            f"below CUDA {cuda}'s own driver {minimum}" if minimum else f"CUDA {cuda}'s own driver is not in the table"
        )
        runs = (
            f"driver {driver} runs CUDA {cuda} under minor-version compatibility "
            f"(CUDA {major}.x needs {floor} or newer; {own})"
        )
    else:
        needed = floor or minimum
        assert needed is not None  # one of them is known (checked above)
        ceiling = max_cuda_for(driver)
        can = (
            f"r{branch(driver)} supports CUDA up to {ceiling}"
            if ceiling
            else f"r{branch(driver)} predates CUDA {min(CUDA_MIN_DRIVER)}"
        )
        offer = forward_compat(cuda, driver, gpu=gpu, image=image)
        way_out = f"; or, tested first, forward compatibility: {offer.package}" if offer.offered else ""
        return verdict(
            outcome=CompatOutcome.HARD_STOP,
            reason=(
                f"the image is built for CUDA {cuda}, which needs driver {needed} or newer "
                f"(r{branch(needed)} family); the node has {driver} and {can}"
            ),
            next_step=(
                "stop tuning launch flags (batch size, context length): this is a driver or environment "
                f"decision; upgrade to r{branch(needed)} or newer, move the workload to a compatible "
                f"environment, or rebuild the image for the CUDA this driver supports{way_out}"
            ),
            forward_compat=offer,
        )
    if custom_build:
        return verdict(
            outcome=CompatOutcome.CUSTOM_BUILD,
            reason=f"a custom CUDA {cuda} build: {runs}",
            next_step=(
                "record the source commit, the PyTorch build, the compiler and the kernel package "
                "versions: the team now owns this dependency chain"
            ),
            mode=mode,
            limits=limits,
        )
    return verdict(
        outcome=CompatOutcome.COMPATIBLE,
        reason=runs,
        next_step="continue with image integrity, model revision, GPU visibility and topology checks",
        mode=mode,
        limits=limits,
    )
