"""Log triage: find the first failing line of an engine or container log and classify it.

Each class is recognised by the underlying failure (CUDA error codes and their
symbolic names, the NVML and container-CLI messages, the PyTorch wordings), not by
one tool's exact sentence, so the same fault is found through any wrapper: a
``RuntimeError``, a ``UserWarning``, an NCCL ``WARN`` line, a ``docker`` error.

When several classes appear, the one earliest in :data:`PRECEDENCE` wins (a driver
too old for the image explains everything after it); the line reported is the first
line that evidences that class. A log with no known class but a generic failure
line (an exception, ``ERROR``, ``fatal``) is ``unknown`` with that line; a log with
no failure at all is ``unknown`` with ``line`` None.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from cockpit.errors import BadInput
from cockpit.gpu.compat import max_cuda_for, min_driver_for, parse_cuda


class TriageClass(StrEnum):
    DRIVER_TOO_OLD = "driver-too-old"
    DRIVER_LIBRARY_MISMATCH = "driver-library-mismatch"
    DRIVER_NOT_LOADED = "driver-not-loaded"
    FABRIC_MANAGER_NOT_READY = "fabric-manager-not-ready"
    CUDA_DRIVER_MISMATCH = "cuda-driver-mismatch"
    FORWARD_COMPAT_UNSUPPORTED = "forward-compat-unsupported"
    OUT_OF_MEMORY = "out-of-memory"
    NCCL = "nccl"
    MODEL_NOT_FOUND = "model-not-found"
    UNKNOWN = "unknown"


#: Preferred class first when a log shows several.
PRECEDENCE: tuple[TriageClass, ...] = tuple(TriageClass)


def _code(number: int) -> str:
    # a CUDA status number after a word that announces one ("Error 802", "returned 802",
    # "Cuda failure 802", "error code: 802"), never part of a path, address or larger number
    return rf"(?:error|err|failure|failed|returned|code|status)\b[^\n]{{0,24}}?(?<![\w.:/-]){number}(?![\w.])"


_PATTERNS: dict[TriageClass, tuple[str, ...]] = {
    TriageClass.DRIVER_TOO_OLD: (
        r"unsatisfied condition:\s*cuda\s*>=",
        r"driver (?:on your system |version )?is too old",
        r"cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER",
        r"CUDA driver version is insufficient",
        r"please update your (?:nvidia |gpu )?driver to a newer version",
        r"(?:cuda\s*(?:error|failure)|returned|error code)\W{0,5}35(?![\w.])",
    ),
    TriageClass.DRIVER_LIBRARY_MISMATCH: (
        r"driver/library version mismatch",
        r"NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        r"API mismatch: the NVIDIA kernel module has version",
    ),
    TriageClass.DRIVER_NOT_LOADED: (
        r"couldn'?t communicate with the NVIDIA driver",
        r"NVML_ERROR_DRIVER_NOT_LOADED|nvml error: driver not loaded|NVML: Driver Not Loaded",
        r"Failed to initialize NVML: Driver Not Loaded",
        r"(?:found )?no NVIDIA driver (?:on your system|is installed|found|installed)",
        r"NVIDIA (?:kernel )?(?:driver|module) is not loaded",
        r"libnvidia-ml\.so(?:\.1)?: cannot open shared object file",
    ),
    TriageClass.FABRIC_MANAGER_NOT_READY: (
        _code(802),
        r"cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY",
        r"system not yet initiali[sz]ed",
        r"fabric ?manager (?:is )?not (?:running|started|ready|initiali[sz]ed)",
    ),
    TriageClass.CUDA_DRIVER_MISMATCH: (
        _code(803),
        r"cudaErrorSystemDriverMismatch|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        r"unsupported display driver\s*/\s*cuda driver combination",
    ),
    TriageClass.FORWARD_COMPAT_UNSUPPORTED: (
        _code(804),
        r"cudaErrorCompatNotSupportedOnDevice|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        r"forward compatibility was attempted on non supported HW",
    ),
    TriageClass.OUT_OF_MEMORY: (
        r"CUDA out of memory",
        r"\bOutOfMemoryError\b",
        r"cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY",
        r"(?:cuda|gpu|device)\b[^\n]{0,40}?\bout of memory",
        # the engines' own start-up memory budget and KV-cache words (source cited per line):
        # vLLM v0 worker.py raise_if_cache_size_invalid, v1 kv_cache_utils.py
        # check_enough_kv_cache_memory (vllm-project/vllm #10439 and #27508 tracebacks: line 493, 699)
        r"No available memory for the cache blocks",
        # vLLM v1 kv_cache_utils.py check_enough_kv_cache_memory (tpu-inference #223 traceback: line 588)
        r"larger than the available KV cache memory",
        # vLLM v0 (before v1): "The model's max seq len (N) is larger than the maximum number of
        # tokens that can be stored in KV cache (M)" (vllm-project/vllm #2418, #10517)
        r"larger than the maximum number of tokens that can be stored in KV cache",
        # vLLM v1 worker/utils.py request_memory: "Free memory on device ... on startup is less
        # than desired GPU memory utilization"
        r"on startup is less than desired GPU memory utili[sz]ation",
        # SGLang model_executor/pool_configurator.py MemoryPoolConfig.__post_init__ (older:
        # model_runner.py init_memory_pool): RuntimeError("Not enough memory. Please try to
        # increase --mem-fraction-static.")
        r"Not enough memory\. Please try to increase --mem-fraction-static",
        # TGI server/text_generation_server/models/flash_causal_lm.py:1551 ("Not enough memory
        # to handle {num_tokens} prefill tokens") and backends/v3/src/lib.rs:181 ("Not enough
        # memory to handle `max_total_tokens={0}`"), at db931fcf
        r"Not enough memory to handle\b",
        # TensorRT-LLM _torch/pyexecutor/py_executor_creator.py observe_creation_stage
        # (NVIDIA/TensorRT-LLM #5872, #8802): "Executor creation failed due to insufficient GPU memory"
        r"insufficient GPU memory",
        # TensorRT-LLM C++ runtime: "CUDA runtime error in ::cudaMallocAsync(...): out of memory"
        r"cudaMalloc\w*\b[^\n]{0,80}?\bout of memory",
        # Ollama llm/server.go (before 9db4bdbad; ollama/ollama #10920): host memory, not GPU
        r"model requires more system memory",
    ),
    TriageClass.NCCL: (
        r"\bNCCL error\b",
        r"\bnccl(?:System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument|Remote)Error\b",
        r"\bNCCL WARN\b",
        r"Watchdog caught collective operation timeout",
        r"\bDistBackendError\b",
    ),
    TriageClass.MODEL_NOT_FOUND: (
        r"Repository ?Not ?Found",
        r"Invalid repository ID or local directory",
        r"is not a local folder and is not a valid model identifier",
        r"\b(?:HFValidationError|EntryNotFoundError|RevisionNotFoundError)\b",
        r"404 Client Error[^\n]{0,80}?(?:huggingface|/api/models|/resolve/)",
        r"\bmodel\s+['\"`]?[\w./:@-]+['\"`]?\s+(?:does not exist|not found)\b",
        # gated or unauthorised repositories: huggingface_hub utils/_http.py:822 ("Cannot access
        # gated repo for url ...", GatedRepoError, errors.py:331) and the Hub's "Access to model
        # X is restricted"; transformers utils/hub.py: "You are trying to access a gated repo"
        r"\bGatedRepoError\b",
        r"Cannot access gated repo",
        r"Access to model \S+ is restricted",
        r"trying to access a gated repo",
        # huggingface_hub utils/_http.py:879: a 401 on a repo URL reads "Repository Not Found for
        # url" (RepositoryNotFoundError, errors.py:301), covered by "Repository ?Not ?Found" above
        # missing registry manifests: Ollama server/images.go:1025 wraps "pull model manifest: %s"
        # (cmd/cloud_suggest.go:32 spells the not-found case "pull model manifest: file does not
        # exist"); the Docker registry API answers MANIFEST_UNKNOWN ("manifest unknown")
        r"pull model manifest: file does not exist",
        r"\bmanifest unknown\b",
        r"\bmanifest for \S+ not found\b",
    ),
}


# Lower-case words of which each class's patterns need at least one in the line. A class's
# expression runs only on lines holding one of its words, and most log lines hold none at
# all: this is what keeps triage of a long log fast. Keep in step with the patterns.
_CLASS_KEYWORDS: dict[TriageClass, tuple[str, ...]] = {
    TriageClass.DRIVER_TOO_OLD: ("cuda", "too old", "driver", "returned", "error code"),
    TriageClass.DRIVER_LIBRARY_MISMATCH: ("mismatch",),
    TriageClass.DRIVER_NOT_LOADED: ("nvidia", "nvml"),
    TriageClass.FABRIC_MANAGER_NOT_READY: ("802", "not_ready", "notready", "not yet initiali", "fabric"),
    TriageClass.CUDA_DRIVER_MISMATCH: ("803", "mismatch", "display driver"),
    TriageClass.FORWARD_COMPAT_UNSUPPORTED: ("804", "compat"),
    TriageClass.OUT_OF_MEMORY: ("memory",),
    TriageClass.NCCL: ("nccl", "watchdog", "distbackend"),
    TriageClass.MODEL_NOT_FOUND: ("repositor", "model", "notfound", "hfvalidation", "404", "gated", "manifest"),
}
_GENERIC_KEYWORDS: tuple[str, ...] = (
    "error",
    "exception",
    "exit",
    "traceback",
    "terminate called",
    "segmentation fault",
    "panic:",
    "fatal",
    "critical",
    "failed",
    "failure",
)

_COMPILED: dict[TriageClass, re.Pattern[str]] = {
    cls: re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE) for cls, patterns in _PATTERNS.items()
}

# A failure of some kind, when no class matched: an exception message, a log level, a crash.
_GENERIC = re.compile(
    r"^\s*(?:[\w.]+(?:Error|Exception|Exit)\b:?|Traceback \(most recent call last\)"
    r"|terminate called after throwing|Segmentation fault|panic:)"
    r"|\b(?:ERROR|FATAL|CRITICAL)\b|(?i:\b(?:error|fatal|failed|failure)\b\s*[:!])"
    r"|(?i:\berror response from daemon\b|\bexit(?:ed with)? (?:code|status)\s*[1-9])",
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

_REQUIRED_CUDA = re.compile(r"cuda\s*>=\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
_FOUND_VERSION = re.compile(r"too old \(found version (\d{4,6})\)", re.IGNORECASE)
_CEILING = re.compile(r"CUDA Version:\s*(\d+\.\d+)", re.IGNORECASE)
_VER = r"(\d{3}\.\d{1,3}(?:\.\d{1,3})?)"
_DRIVER_MENTION = re.compile(
    rf"Driver Version:\s*{_VER}|NVML library version:\s*{_VER}|NVIDIA-Linux-[\w]+-{_VER}\.run"
    rf"|nvidia-driver[-\w]*?-{_VER}|kernel module has version \"?{_VER}|\bdriver(?: version)?\s+{_VER}(?![\w.])",
    re.IGNORECASE,
)

SUBSYSTEM: dict[TriageClass, str] = {
    TriageClass.DRIVER_TOO_OLD: "host driver versus the image's CUDA",
    TriageClass.DRIVER_LIBRARY_MISMATCH: "driver install: userspace and kernel module differ",
    TriageClass.DRIVER_NOT_LOADED: "NVIDIA kernel module",
    TriageClass.FABRIC_MANAGER_NOT_READY: "NVSwitch fabric manager",
    TriageClass.CUDA_DRIVER_MISMATCH: "CUDA user-mode driver (libcuda) versus the kernel driver",
    TriageClass.FORWARD_COMPAT_UNSUPPORTED: "CUDA forward-compatibility libraries",
    TriageClass.OUT_OF_MEMORY: "GPU memory",
    TriageClass.NCCL: "NCCL collectives and their network",
    TriageClass.MODEL_NOT_FOUND: "model source (hub, revision, local path)",
    TriageClass.UNKNOWN: "not recognised",
}

_HINTS: dict[TriageClass, str] = {
    TriageClass.DRIVER_TOO_OLD: (
        "The driver's CUDA ceiling is below what the image or runtime needs. Stop tuning launch "
        "flags: upgrade the driver branch, or run an image built for a CUDA this driver supports."
    ),
    TriageClass.DRIVER_LIBRARY_MISMATCH: (
        "NVML userspace and the loaded kernel module are different versions, usually a driver "
        "package upgraded without a reboot (unattended-upgrades). Compare nvidia-smi's library "
        "with /proc/driver/nvidia/version; drain and reboot the node."
    ),
    TriageClass.DRIVER_NOT_LOADED: (
        "nvidia-smi cannot reach the kernel driver: the module is not loaded or did not build "
        "for the running kernel. Check lsmod, dkms status and dmesg for NVRM lines."
    ),
    TriageClass.FABRIC_MANAGER_NOT_READY: (
        "CUDA error 802 (system not yet initialized): on NVSwitch systems the fabric manager is "
        "not running or not finished. Check the nvidia-fabricmanager service and that its "
        "version matches the driver exactly; wait for it before retrying."
    ),
    TriageClass.CUDA_DRIVER_MISMATCH: (
        "CUDA error 803: the CUDA user-mode driver does not match the kernel driver (mixed "
        "installs, a cuda-compat package on the wrong host, or a pending reboot). Compare "
        "libcuda's version with /proc/driver/nvidia/version."
    ),
    TriageClass.FORWARD_COMPAT_UNSUPPORTED: (
        "CUDA error 804: forward-compatibility libraries were loaded on a GPU that does not "
        "support them. Remove cuda-compat from the library path, or upgrade the host driver."
    ),
    TriageClass.OUT_OF_MEMORY: (
        "Memory ran out or the engine's start-up budget does not fit: a capacity problem, not a "
        "driver one. Check other processes on the GPU, then the engine's own knobs: vLLM "
        "--gpu-memory-utilization and --max-model-len, SGLang --mem-fraction-static, TGI "
        "--max-batch-prefill-tokens and --max-batch-total-tokens, TensorRT-LLM "
        "kv_cache_free_gpu_mem_fraction; Ollama's 'system memory' is host RAM. Or add GPUs."
    ),
    TriageClass.NCCL: (
        "A collective failed. Rerun with NCCL_DEBUG=INFO; check the network (IB/RoCE), NVLink "
        "and that every rank sees its GPUs."
    ),
    TriageClass.MODEL_NOT_FOUND: (
        "The engine cannot find or may not read the model: check the repository id, the revision, "
        "access to a gated model (HF_TOKEN and an accepted licence; a 401 reads as 'not found'), "
        "the image or model tag in its registry, offline mode and the local cache path. Not a "
        "driver problem."
    ),
    TriageClass.UNKNOWN: "No known failure class: read the reported line and the lines before it.",
}
_NO_FAILURE_HINT = "No failing line found in the log."


class Evidence(BaseModel):
    """The first line that shows one class."""

    model_config = ConfigDict(extra="forbid")

    cls: TriageClass = Field(serialization_alias="class")
    line: int
    text: str


class TriageResult(BaseModel):
    """The class of the first failing cause, where the log shows it, and what to do."""

    model_config = ConfigDict(extra="forbid")

    cls: TriageClass = Field(serialization_alias="class")
    line: int | None = None  # 1-based; None when no failing line was found
    text: str | None = None
    hint: str
    subsystem: str
    evidence: list[Evidence] = Field(default_factory=list)  # every class seen, in precedence order
    required_cuda: str | None = None  # from "cuda>=12.8"
    driver_cuda: str | None = None  # the driver's CUDA ceiling the log reports
    driver_version: str | None = None  # the first driver version the log mentions

    @property
    def failed(self) -> bool:
        return self.line is not None

    def as_json(self) -> dict[str, object]:
        """The JSON document shape: ``class``, ``line``, ``text``, ``hint``, then the rest."""
        return self.model_dump(mode="json", by_alias=True)


def _lines(text: str) -> list[str]:
    # split on newlines only, so numbers match an editor's; \r and colour codes are noise
    return [_ANSI.sub("", line).rstrip("\r") if "\x1b" in line else line.rstrip("\r") for line in text.split("\n")]


def _first(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    for line in lines:
        match = pattern.search(line)
        if match:
            return next((g for g in match.groups() if g), None)
    return None


def triage(text: str) -> TriageResult:
    """Classify a log. Never raises for any text; see the module doc for the rules."""
    lines = _lines(text)
    evidence: dict[TriageClass, Evidence] = {}
    generic: tuple[int, str] | None = None
    fact_lines: list[str] = []  # the facts' patterns all need one of the class words too
    for number, line in enumerate(lines, start=1):
        low = line.lower()
        relevant = False
        for cls, words in _CLASS_KEYWORDS.items():
            if any(word in low for word in words):
                relevant = True
                if cls not in evidence and _COMPILED[cls].search(line):
                    evidence[cls] = Evidence(cls=cls, line=number, text=line.strip())
        if relevant:
            fact_lines.append(line)
        if generic is None and any(word in low for word in _GENERIC_KEYWORDS) and _GENERIC.search(line):
            generic = (number, line.strip())

    found = [evidence[c] for c in PRECEDENCE if c in evidence]
    facts = _facts(fact_lines)
    if found:
        top = found[0]
        return TriageResult(
            cls=top.cls,
            line=top.line,
            text=top.text,
            hint=_hint(top.cls, facts),
            subsystem=SUBSYSTEM[top.cls],
            evidence=found,
            **facts,
        )
    if generic is not None:
        return TriageResult(
            cls=TriageClass.UNKNOWN,
            line=generic[0],
            text=generic[1],
            hint=_HINTS[TriageClass.UNKNOWN],
            subsystem=SUBSYSTEM[TriageClass.UNKNOWN],
            **facts,
        )
    return TriageResult(
        cls=TriageClass.UNKNOWN, hint=_NO_FAILURE_HINT, subsystem=SUBSYSTEM[TriageClass.UNKNOWN], **facts
    )


def _facts(lines: list[str]) -> dict[str, str | None]:
    required = _first(_REQUIRED_CUDA, lines)
    found = _first(_FOUND_VERSION, lines)
    ceiling = _first(_CEILING, lines)
    driver_cuda = None
    try:
        driver_cuda = parse_cuda(found) if found else parse_cuda(ceiling) if ceiling else None
        required = parse_cuda(required) if required else None
    except BadInput:
        pass  # an odd number in a log is not worth failing the triage over
    return {"required_cuda": required, "driver_cuda": driver_cuda, "driver_version": _first(_DRIVER_MENTION, lines)}


def _hint(cls: TriageClass, facts: dict[str, str | None]) -> str:
    hint = _HINTS[cls]
    if cls is TriageClass.DRIVER_TOO_OLD:
        extra = []
        required, driver = facts["required_cuda"], facts["driver_version"]
        if required:
            minimum = min_driver_for(required)
            extra.append(f"needs CUDA {required}" + (f" (driver {minimum} or newer)" if minimum else ""))
        if driver:
            ceiling = max_cuda_for(driver)
            extra.append(
                f"the log shows driver {driver}" + (f", which supports CUDA up to {ceiling}" if ceiling else "")
            )
        elif facts["driver_cuda"]:
            extra.append(f"the driver reports CUDA {facts['driver_cuda']}")
        if extra:
            hint = f"{hint} The log: {'; '.join(extra)}."
    return hint
