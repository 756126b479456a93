"""What the parsers return, and the one error they raise."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cockpit.errors import BadInput
from cockpit.gpu.nodestate import GpuState


class ParseError(BadInput):
    """The text is not the expected format at all (exit status 2 from the CLI).

    ``first_line`` is the first non-blank line of the text, so a caller can show
    the tool's own error message (``Failed to initialize NVML: ...``) as is.
    """

    def __init__(self, message: str, first_line: str = "") -> None:
        super().__init__(message)
        self.first_line = first_line


class SmiFacts(BaseModel):
    """Node facts from one nvidia-smi output. ``None`` means the output did not say."""

    model_config = ConfigDict(extra="forbid")

    driver_version: str | None = None
    cuda_version: str | None = None  # the driver's CUDA ceiling, not proof of compatibility
    gpus: list[GpuState] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)


class KernelModuleFacts(BaseModel):
    """``/proc/driver/nvidia/version``: the kernel module actually loaded."""

    model_config = ConfigDict(extra="forbid")

    version: str | None = None
    flavour: Literal["open", "proprietary"] | None = None
    build_info: str | None = None  # builder and date, as printed
    gcc: str | None = None  # compiler version the module was built with
    warnings: list[str] = Field(default_factory=list)
