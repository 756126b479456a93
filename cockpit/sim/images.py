"""What a simulated container image is: its entrypoint, its environment, its labels.

Images are told apart by name, as a registry would hand them out:

- ``vllm/vllm-openai`` (any tag): vLLM's OpenAI server image. Its Dockerfile
  (vllm-project/vllm docker/Dockerfile, stage ``vllm-openai``) ends with
  ``ENTRYPOINT ["vllm", "serve"]`` (older releases ``["python3", "-m",
  "vllm.entrypoints.openai.api_server"]``) and no CMD, on ``FINAL_BASE_IMAGE =
  nvidia/cuda:${CUDA_VERSION}-devel-ubuntu22.04``, ``WORKDIR /vllm-workspace``. So
  ``docker run IMAGE python -c ...`` hands ``python -c ...`` to ``vllm serve`` as
  arguments; only ``--entrypoint`` runs something else.
- anything else: an image with no entrypoint (its CMD replaced by the arguments).

The environment is the nvidia/cuda base image's (``CUDA_VERSION``, ``NVIDIA_REQUIRE_CUDA``,
``NV_CUDA_CUDART_VERSION``, ``NVIDIA_VISIBLE_DEVICES``, ``NVIDIA_DRIVER_CAPABILITIES``), as
``docker image inspect`` shows it for vllm/vllm-openai:v0.28.0 (CUDA_VERSION=13.0.2,
NV_CUDA_CUDART_VERSION=13.0.96-1, NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand=...). The torch
build is not in the image's config: vLLM's images carry no label for it.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

#: the CUDA toolkit patch release and cudart package of each minor the images are built on
CUDA_RELEASES = {
    (13, 0): ("13.0.2", "13.0.96-1"),
    (12, 9): ("12.9.1", "12.9.79-1"),
    (12, 8): ("12.8.1", "12.8.90-1"),
}
PATH_ENV = "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def image_id(image: str) -> str:
    """A stable image digest, the same for the same image on every node."""
    return f"sha256:{random.Random(image).getrandbits(256):064x}"


def image_cuda(image: str) -> tuple[int, int]:
    """The CUDA version a container image was built for, from its tag (cu130, cuda12.8...)."""
    m = re.search(r"cuda[-_]?(\d+)\.(\d+)", image)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.search(r"cu(\d{2})(\d)\b", image)
    if m:
        return int(m.group(1)), int(m.group(2))
    return 13, 0  # the serving image of this change (a cu130 build) unless its tag says otherwise


def torch_build(image: str) -> tuple[str, str]:
    """The torch version and torch CUDA an image ships (what ``torch.__version__`` prints)."""
    major, minor = image_cuda(image)
    version = "2.9.0" if (major, minor) >= (13, 0) else "2.8.0"
    return f"{version}+cu{major}{minor}", f"{major}.{minor}"


@dataclass(frozen=True)
class ImageConfig:
    name: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    workdir: str
    env: tuple[str, ...]
    labels: dict[str, str]

    @property
    def is_vllm(self) -> bool:
        return self.entrypoint[:2] == ("vllm", "serve")


def image_config(image: str) -> ImageConfig:
    major, minor = image_cuda(image)
    version, cudart = CUDA_RELEASES.get((major, minor), (f"{major}.{minor}.0", f"{major}.{minor}.0-1"))
    env = (
        PATH_ENV,
        "NVARCH=x86_64",
        # the base image's clause list is long; its head is what the toolkit checks first
        f"NVIDIA_REQUIRE_CUDA=cuda>={major}.{minor} brand=unknown,driver>=535,driver<536 "
        "brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536",
        f"NV_CUDA_CUDART_VERSION={cudart}",
        f"CUDA_VERSION={version}",
        "LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
        "NVIDIA_VISIBLE_DEVICES=all",
        "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
    )
    repo = image.split("@", 1)[0].rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image.split("@", 1)[0]
    labels = {"maintainer": "NVIDIA CORPORATION <cudatools@nvidia.com>", "org.opencontainers.image.version": "22.04"}
    if repo.endswith("vllm-openai"):
        return ImageConfig(
            image,
            ("vllm", "serve"),
            (),
            "/vllm-workspace",
            (*env, "VLLM_USAGE_SOURCE=production-docker-image"),
            labels,
        )
    return ImageConfig(image, (), ("/bin/bash",), "/", env, labels)


def inspect_json(config: ImageConfig) -> dict[str, object]:
    """The part of ``docker image inspect``'s document the simulator answers."""
    return {
        "Id": image_id(config.name),
        "RepoTags": [config.name],
        "RepoDigests": [f"{config.name.rsplit(':', 1)[0]}@{image_id(config.name + '@')}"],
        "Config": {
            "Env": list(config.env),
            "Entrypoint": list(config.entrypoint) or None,
            "Cmd": list(config.cmd) or None,
            "WorkingDir": config.workdir,
            "Labels": config.labels,
        },
    }


class TemplateError(ValueError):
    pass


_FIELD = re.compile(r"^\{\{\s*(json\s+)?((?:\.[A-Za-z]+)+)\s*\}\}$")


def render_format(template: str, document: dict[str, object]) -> str:
    """``--format`` for the Go templates smokes use: ``{{.Id}}``, ``{{json .Config.Env}}``..."""
    m = _FIELD.match(template.strip())
    if not m:
        raise TemplateError(
            f"template parsing error: the simulator models only {{{{.Field}}}} and {{{{json .Field}}}}: {template}"
        )
    value: object = document
    for part in m.group(2).split(".")[1:]:
        if not isinstance(value, dict) or part not in value:
            raise TemplateError(
                f'template: :1:{len(template)}: executing "" at <{m.group(2)}>: map has no entry for key "{part}"'
            )
        value = value[part]
    if m.group(1):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, list):
        return "[" + " ".join(str(v) for v in value) + "]"  # Go's %v of a slice
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(value.items())) + "]"
    return "<no value>" if value is None else str(value)
