"""The CUDA an image was built for, read from the image itself (``docker image inspect``).

NVIDIA's CUDA base images set ``CUDA_VERSION`` (``12.9.1``) and ``NVIDIA_REQUIRE_CUDA``
in their config (``ENV`` in gitlab.com/nvidia/container-images/cuda, dist/*/base/Dockerfile),
and images built on them (vllm/vllm-openai, lmsysorg/sglang, ...) inherit both. The
requirement is what nvidia-container-cli checks at container start (libnvidia-container's
requirement language): terms separated by spaces are alternatives (OR), the conditions
inside one term, separated by commas, must all hold (AND). So
``cuda>=13.0 brand=tesla,driver>=535,driver<536`` reads "a driver whose CUDA reaches
13.0, or a tesla-brand r535 driver": the brand terms name the driver branches the
image's bundled cuda-compat package serves (forward compatibility).

Pure: the text of ``docker image inspect IMAGE`` (a JSON array of objects) in, facts out.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cockpit.errors import BadInput

_TERM_CONDITION = re.compile(r"^(cuda|driver|brand|arch)\s*(>=|<=|==|=|>|<)?\s*(.+)$")
_BRANCH_FLOOR = re.compile(r"^driver>=(\d+)$")


class BrandTerm(BaseModel):
    """One forward-compatibility alternative: a driver brand and branch range."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    brand: str
    branch: int  # from driver>=535,driver<536


class ImageCuda(BaseModel):
    """What an image says about its CUDA."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str | None = None  # RepoTags[0] or the Id, for the evidence
    cuda_version: str | None = None  # CUDA_VERSION, "12.9.1"
    required_cuda: str | None = None  # the cuda>= of NVIDIA_REQUIRE_CUDA, "12.9"
    require: str | None = None  # NVIDIA_REQUIRE_CUDA as written
    brand_terms: list[BrandTerm] = Field(default_factory=list)
    disable_require: bool = False  # NVIDIA_DISABLE_REQUIRE set: the runtime skips the check

    @property
    def cuda(self) -> str | None:
        """The image's CUDA as major.minor: the requirement first, else CUDA_VERSION."""
        value = self.required_cuda or self.cuda_version
        if value is None:
            return None
        parts = value.split(".")
        return f"{int(parts[0])}.{int(parts[1]) if len(parts) > 1 else 0}"

    def forward_compat_branches(self, brand: str = "tesla") -> list[int]:
        """The driver branches the image's requirement accepts for ``brand`` (cuda-compat)."""
        return sorted({t.branch for t in self.brand_terms if t.brand == brand})

    def evidence(self) -> str:
        """One line for the change log."""
        what = [f"CUDA_VERSION={self.cuda_version}" if self.cuda_version else "no CUDA_VERSION"]
        if self.required_cuda:
            what.append(f"NVIDIA_REQUIRE_CUDA cuda>={self.required_cuda}")
        branches = self.forward_compat_branches()
        if branches:
            what.append("cuda-compat branches " + ", ".join(f"r{b}" for b in branches))
        if self.disable_require:
            what.append("NVIDIA_DISABLE_REQUIRE set")
        return f"{self.image or 'image'}: " + "; ".join(what)


def parse_require(value: str) -> tuple[str | None, list[BrandTerm]]:
    """``NVIDIA_REQUIRE_CUDA`` -> (the cuda>= version, the brand/branch terms).

    A term that is not a condition list the runtime knows is refused: a requirement the
    cockpit cannot read must not be read as "no requirement".
    """
    required: str | None = None
    terms: list[BrandTerm] = []
    for term in value.split():
        conditions = term.split(",")
        brand: str | None = None
        floor: int | None = None
        for condition in conditions:
            match = _TERM_CONDITION.match(condition)
            if match is None:
                raise BadInput(f"NVIDIA_REQUIRE_CUDA: cannot read the condition {condition!r}")
            if match[1] == "cuda" and match[2] == ">=" and len(conditions) == 1:
                version = match[3]
                if not re.fullmatch(r"\d+(?:\.\d+){0,2}", version):
                    raise BadInput(f"NVIDIA_REQUIRE_CUDA: cannot read the version in {condition!r}")
                # the lowest cuda>= among alternatives is what lets the container start
                if required is None or _key(version) < _key(required):
                    required = version
            elif match[1] == "brand":
                brand = match[3].lower()
            elif (floor_match := _BRANCH_FLOOR.match(condition)) is not None:
                floor = int(floor_match[1])
        if brand is not None and floor is not None:
            terms.append(BrandTerm(brand=brand, branch=floor))
    return required, terms


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def image_cuda_from_env(env: list[str], image: str | None = None) -> ImageCuda:
    """From a container config's ``Env`` list (``NAME=value`` strings)."""
    values: dict[str, str] = {}
    for entry in env:
        name, sep, value = entry.partition("=")
        if sep:
            values[name] = value  # a later entry wins, as the runtime sees it
    require = values.get("NVIDIA_REQUIRE_CUDA")
    required, terms = parse_require(require) if require else (None, [])
    cuda_version = values.get("CUDA_VERSION")
    if cuda_version is not None and not re.fullmatch(r"\d+(?:\.\d+){0,2}", cuda_version):
        raise BadInput(f"CUDA_VERSION {cuda_version!r} is not a version")
    return ImageCuda(
        image=image,
        cuda_version=cuda_version,
        required_cuda=required,
        require=require,
        brand_terms=terms,
        disable_require=values.get("NVIDIA_DISABLE_REQUIRE", "").lower() in ("1", "true", "yes"),
    )


def parse_image_inspect(text: str) -> ImageCuda:
    """The first image of ``docker image inspect`` output (podman's has the same shape)."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"image inspect output is not JSON: {exc.msg} at line {exc.lineno}") from None
    if isinstance(data, list):
        if not data:
            raise BadInput("image inspect output is an empty list: no such image?")
        data = data[0]
    if not isinstance(data, dict):
        raise BadInput("image inspect output: expected an object or a list of objects")
    config = data.get("Config") or {}
    if not isinstance(config, dict):
        raise BadInput("image inspect output: Config is not an object")
    env = config.get("Env") or []
    if not isinstance(env, list) or not all(isinstance(e, str) for e in env):
        raise BadInput("image inspect output: Config.Env is not a list of strings")
    tags = data.get("RepoTags") or []
    name = tags[0] if isinstance(tags, list) and tags and isinstance(tags[0], str) else data.get("Id")
    return image_cuda_from_env(env, image=str(name) if name else None)
