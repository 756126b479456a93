"""Log triage: find the first failing line of an engine or container log and classify it.

Each class is recognised by the underlying failure (CUDA error codes and their
symbolic names, the NVML and container-CLI messages, the PyTorch wordings), not by
one tool's exact sentence, so the same fault is found through any wrapper: a
``RuntimeError``, a ``UserWarning``, an NCCL ``WARN`` line, a ``docker`` error.

Evidence has a strength. A line stated as an error beats a warning or debug line,
which beats a generic failure of no known class, which beats a symptom of another
cause (a pinned-memory fallback): so a warning that mentions CUDA yields to a later
error of another cause, and a quiet GPU error followed by a CPU fallback counts as an
error. Among evidence of one strength the class earliest in :data:`PRECEDENCE` wins
(a driver too old for the image explains everything after it); the line reported is
the first line that evidences that class at that strength. Beside a sign that the
container sees no driver, error 35 and "no driver" wordings become
``driver-not-visible``. A status number on the decisive line is named (``code``), and
a failure after the server reported itself up says so. A log with no known class but
a generic failure line (an exception, ``ERROR``, ``fatal``) is ``unknown`` with that
line; a log with no failure at all is ``unknown`` with ``line`` None.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from cockpit.errors import BadInput
from cockpit.gpu.compat import max_cuda_for, min_driver_for, parse_cuda


class TriageClass(StrEnum):
    DRIVER_NOT_VISIBLE = "driver-not-visible"
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


def _nvml(number: int) -> str:
    # an NVML return code given as a bare number: ollama's "nvmlInit_v2 err: 18" and "nvml vram
    # init failure: 18" (discover/gpu_info_nvml.c), nvidia-smi's exit status (its exit status is
    # the nvmlReturn_t value: "nvidia-smi failed with return code 18")
    return (
        rf"(?:nvml|nvidia-smi)\w*\b[^\n]{{0,40}}?"
        rf"(?:err|error|failure|failed|returned|return code|status)\W{{0,3}}{number}(?![\w.])"
    )


_PATTERNS: dict[TriageClass, tuple[str, ...]] = {
    # The container (or pod) sees no driver although the host may have a good one: the NVIDIA
    # runtime did not inject the driver's libraries and device nodes. Sources per line.
    TriageClass.DRIVER_NOT_VISIBLE: (
        # go-nvml's dl error as the device plugin logs it (k8s-device-plugin #182, #478, #826):
        # "Failed to initialize NVML: could not load NVML library", "could not load NVML library:
        # libnvidia-ml.so.1: cannot open shared object file"
        r"could not load NVML library",
        r"did you set the docker default runtime",
        # pynvml NVMLError_LibraryNotFound's text (NVML_ERROR_LIBRARY_NOT_FOUND = 12), as vLLM's
        # platform probe logs it (vllm-project/vllm #23935, kserve/kserve #4722)
        r"NVML Shared Library Not Found|NVML_ERROR_LIBRARY_NOT_FOUND",
        _nvml(12),
        # the NGC images' entrypoint banner (Triton, TensorRT-LLM, PyTorch containers)
        r"The NVIDIA Driver was not detected",
        # libcuda absent from the container: vLLM _custom_ops, llama.cpp/Ollama load_backend
        r"libcuda\.so(?:\.1)?: cannot open shared object file",
        # nvidia-smi runs but libcuda was not mounted (NVIDIA_DRIVER_CAPABILITIES without compute)
        r"CUDA Version:\s*N/A",
        r"nvidia-smi: (?:command )?not found",
        # the device cgroup lost after a systemd daemon-reload (NVIDIA Container Toolkit's
        # troubleshooting: containers then print "Failed to initialize NVML: Unknown Error")
        r"Failed to initialize NVML: Unknown Error",
    ),
    TriageClass.DRIVER_TOO_OLD: (
        r"unsatisfied condition:\s*cuda\s*>=",
        r"driver (?:on your system |version )?is too old",
        r"cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER",
        r"CUDA driver version is insufficient",
        r"please update your (?:nvidia |gpu )?driver to a newer version",
        r"(?:cuda\s*(?:error|failure)|returned|error code)\W{0,5}35(?![\w.])",
        # cudaErrorInsufficientDriver as a bare number: Torch-TensorRT's "Return status: 35",
        # Ollama's "cudaSetDevice err: 35", glog's "(35 vs. 0)"
        r"\b(?:status|err)\W{1,3}35(?![\w.])|\(35 vs\. 0\)",
        # a versioned driver API entry point missing from libcuda: the caller was built against a
        # newer CUDA than the driver (cuCtxCreate_v3 arrived with CUDA 11.4; ollama #5493, #6626)
        r"undefined symbol: cu[A-Z]\w*_v\d\b",
        r"symbol lookup for cu[A-Z]\w*_v\d failed",
        # cudaErrorCallRequiresNewerDriver (36): TurboMind, NCCL and PyTorch wrap its string
        r"API call is not supported in the installed CUDA driver",
        r"cudaErrorCallRequiresNewerDriver",
    ),
    TriageClass.DRIVER_LIBRARY_MISMATCH: (
        r"driver/library version mismatch",
        r"NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        r"API mismatch: the NVIDIA kernel module has version",
        _nvml(18),
    ),
    TriageClass.DRIVER_NOT_LOADED: (
        r"couldn'?t communicate with the NVIDIA driver",
        r"NVML_ERROR_DRIVER_NOT_LOADED|nvml error: driver not loaded|NVML: Driver Not Loaded",
        r"Failed to initialize NVML: Driver Not Loaded",
        r"(?:found )?no NVIDIA driver (?:on your system|is installed|found|installed)",
        r"NVIDIA (?:kernel )?(?:driver|module) is not loaded",
        r"libnvidia-ml\.so(?:\.1)?: cannot open shared object file",
        _nvml(9),
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
        # SGLang: the KV pool budget comes out at or below zero, warned first in
        # model_runner.py ("max_total_tokens=N is larger than the profiled value -M"), then
        # "Not enough memory" above; at run time the schedulers' pools: "Prefill out of memory",
        # "alloc_req_slots runs out of memory" (sglang #7691, #10408)
        r"larger than the profiled value -\d",
        r"\b(?:Prefill|Decode) out of memory\b",
        r"\bruns? out of memory\b",
        # LMDeploy pytorch engine cache_engine / config: RuntimeError("No enough gpu memory for kv cache.")
        r"No enough (?:gpu|host) memory for kv cache",
        # LMDeploy TurboMind: "`session_len` truncated to N due to limited KV cache memory" (lmdeploy #4366)
        r"due to limited KV cache memory",
        # llama.cpp (and llama-cpp-python, Ollama): llama_kv_cache_init and context creation
        # (gpustack #1269: "failed to allocate buffer for kv cache", "llama_kv_cache_init() failed")
        r"failed to allocate buffer for kv cache",
        r"llama_kv_cache_init\(\) failed",
        r"ggml_gallocr_reserve_n: failed to allocate",
        r"Not enough GPU memory for (?:the )?KV[ _]?cache",
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
        # Triton's model repository manager (core model_repository_manager.cc: "failed to poll model
        # 'X': model not found in any model repository", "Poll failed for model directory 'X'") and
        # its answer to a request for a model it never loaded ("Request for unknown model: 'X' is
        # not found"; triton server #2254, kserve #2755)
        r"not found in any model repository",
        r"failed to poll model\b",
        r"Poll failed for model directory",
        r"Request for unknown model",
    ),
}


# Lower-case words of which each class's patterns need at least one in the line. A class's
# expression runs only on lines holding one of its words, and most log lines hold none at
# all: this is what keeps triage of a long log fast. Keep in step with the patterns.
_CLASS_KEYWORDS: dict[TriageClass, tuple[str, ...]] = {
    TriageClass.DRIVER_NOT_VISIBLE: ("nvml", "nvidia", "libcuda", "docker default runtime"),
    TriageClass.DRIVER_TOO_OLD: (
        "cuda",
        "too old",
        "driver",
        "returned",
        "error code",
        "status",
        "err: 35",
        "35 vs",
        "symbol",
    ),
    TriageClass.DRIVER_LIBRARY_MISMATCH: ("mismatch", "nvml", "nvidia-smi"),
    TriageClass.DRIVER_NOT_LOADED: ("nvidia", "nvml"),
    TriageClass.FABRIC_MANAGER_NOT_READY: ("802", "not_ready", "notready", "not yet initiali", "fabric"),
    TriageClass.CUDA_DRIVER_MISMATCH: ("803", "mismatch", "display driver"),
    TriageClass.FORWARD_COMPAT_UNSUPPORTED: ("804", "compat"),
    TriageClass.OUT_OF_MEMORY: ("memory", "kv cache", "ggml_gallocr", "llama_kv_cache_init", "profiled value"),
    TriageClass.NCCL: ("nccl", "watchdog", "distbackend"),
    TriageClass.MODEL_NOT_FOUND: ("repositor", "model", "notfound", "hfvalidation", "404", "gated", "manifest"),
}
_GENERIC_KEYWORDS: tuple[str, ...] = (
    "err",
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

# words that wake the ready and CPU-fallback probes (see _READY and _CPU_FALLBACK below)
_READY_KEYWORDS = ("startup complete", "uvicorn", "started", "server is", "listening", "connected")
_FALLBACK_KEYWORDS = (
    "compatible gpu",
    "using the cpu",
    "back to",
    "unspecifiedplatform",
    "cpu kv",
    "cpu model",
    "cpu output",
    "cpu compute",
    "library=cpu",
    "offloaded 0/",
)
_CLASS_WORDS = frozenset(word for words in _CLASS_KEYWORDS.values() for word in words)


def _any_word() -> tuple[re.Pattern[str], dict[str, frozenset[str]]]:
    """One scan of a line finds every keyword of every check below: a lookahead at each position
    (so overlapping words are all found), the longest word first; a word found stands for the
    shorter ones it starts with too. glog's "e0817 " and "f0817 " heads count for the generic check."""
    words = {*_CLASS_WORDS, *_GENERIC_KEYWORDS, *_READY_KEYWORDS, *_FALLBACK_KEYWORDS}
    longest_first = sorted(words, key=len, reverse=True)
    pattern = re.compile("(?=(" + "|".join(re.escape(w) for w in longest_first) + "))")
    return pattern, {w: frozenset(k for k in words if w.startswith(k)) for w in words}


_ANY_WORD, _PREFIXES = _any_word()


def _words_in(low: str) -> set[str]:
    found: set[str] = set()
    for word in _ANY_WORD.findall(low):
        found |= _PREFIXES[word]
    return found


_COMPILED: dict[TriageClass, re.Pattern[str]] = {
    cls: re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE) for cls, patterns in _PATTERNS.items()
}

# A failure of some kind, when no class matched: an exception message, a log level, a crash.
_GENERIC = re.compile(
    r"^\s*(?:[\w.]+(?:Error|Exception|Exit)\b:?|Traceback \(most recent call last\)"
    r"|terminate called after throwing|Segmentation fault|panic:)"
    r"|\b(?:ERROR|FATAL|CRITICAL)\b|(?i:\b(?:error|fatal|failed|failure)\b\s*[:!])"
    r"|(?i:\berror response from daemon\b|\bexit(?:ed with)? (?:code|status)\s*[1-9])"
    # glog's error and fatal levels (Triton, TensorRT, TensorFlow): "E0817 19:18:51.786824 ..."
    r"|^\s*[EF]\d{4} \d\d:\d\d:\d\d"
    # a status number alone: Ollama's "cuInit err: 999"
    r"|(?i:\berr:\s*\d{1,3}\b)",
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

# Lines that report a failure without stopping anything: warning and debug levels (vLLM's
# "WARNING"/"DEBUG", Ollama's level=INFO/WARN/DEBUG, glog's W and I, PyTorch's UserWarning). Their
# evidence yields to a failure of another class stated as an error. NCCL's "NCCL WARN" lines are
# NCCL's errors, not warnings.
_SOFT = re.compile(
    r"(?<!NCCL )\b(?:WARN(?:ING)?|DEBUG)\b|\blevel=(?:WARN|INFO|DEBUG)\b|\b\w*Warning:"
    r"|^\s*(?:\(\w+ pid=\d+\) )?(?:INFO|DEBUG)\b|^\s*[WI]\d{4} \d\d:|\[W\]"
    # nvidia-smi's banner row: a state, not a failure; the error it explains is the decisive line
    r"|CUDA Version:\s*N/A"
)
# Symptoms that follow a cause rather than state one: Triton's pinned-memory manager and
# llama.cpp's pinned host buffers fall back to pageable memory on any CUDA failure (a Triton
# maintainer on triton-inference-server/server #2674: "The first is actually a warning").
_SECONDARY = re.compile(r"pinned (?:system )?memory|ggml_cuda_host_malloc", re.IGNORECASE)
# The process gave up on the GPU and went on without it: the GPU error before this is the cause
# of whatever fails later (a host-memory shortage, a slow run, a crash on the CPU path).
_CPU_FALLBACK = re.compile(
    r"no compatible GPUs were discovered|No compatible GPU found|Using the CPU|fall(?:ing)? back to (?:the )?CPU"
    r"|running on UnspecifiedPlatform|\bCPU (?:KV|model|output|compute) buffer size|\blibrary=cpu\b"
    r"|offloaded 0/\d+ layers to GPU",
    re.IGNORECASE,
)
# The server reported itself up: a failure after this happened while serving, not at start-up.
_READY = re.compile(
    r"Application startup complete|Uvicorn running on|Started (?:HTTPService|GRPCInferenceService)"
    r"|\bserver is (?:up|ready)\b|llama runner started|HTTP server listening|\bConnected$|Listening on "
)
# Evidence strength, strongest first: an error line; a warning line; a symptom of another cause.
_STRONG, _SOFT_TIER, _SECONDARY_TIER = 0, 1, 2
_DRIVER_CLASSES = frozenset(
    {
        TriageClass.DRIVER_NOT_VISIBLE,
        TriageClass.DRIVER_TOO_OLD,
        TriageClass.DRIVER_LIBRARY_MISMATCH,
        TriageClass.DRIVER_NOT_LOADED,
        TriageClass.FABRIC_MANAGER_NOT_READY,
        TriageClass.CUDA_DRIVER_MISMATCH,
        TriageClass.FORWARD_COMPAT_UNSUPPORTED,
    }
)

# Status numbers a log may give without words: (symbolic name, meaning). cudaError_t values from
# cuda_runtime_api's driver_types.h (CUresult uses the same numbers for 100, 802-804, 999);
# nvmlReturn_t values from nvml.h.
_CUDA_CODES: dict[int, tuple[str, str]] = {
    35: ("cudaErrorInsufficientDriver", "the CUDA driver is older than the CUDA runtime, or no driver is reachable"),
    36: ("cudaErrorCallRequiresNewerDriver", "the API call needs a newer driver"),
    100: ("cudaErrorNoDevice / CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is visible"),
    802: ("cudaErrorSystemNotReady / CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized (fabric manager)"),
    803: (
        "cudaErrorSystemDriverMismatch / CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "the CUDA user-mode driver and the kernel driver differ",
    ),
    804: (
        "cudaErrorCompatNotSupportedOnDevice / CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        "forward compatibility is not supported on this GPU",
    ),
    999: ("cudaErrorUnknown / CUDA_ERROR_UNKNOWN", "an unknown internal driver error"),
}
_NVML_CODES: dict[int, tuple[str, str]] = {
    3: ("NVML_ERROR_NOT_SUPPORTED", "the device does not support the call"),
    9: ("NVML_ERROR_DRIVER_NOT_LOADED", "the NVIDIA kernel driver is not loaded"),
    12: ("NVML_ERROR_LIBRARY_NOT_FOUND", "the NVML shared library could not be found or loaded"),
    15: ("NVML_ERROR_GPU_IS_LOST", "the GPU fell off the bus or is otherwise inaccessible"),
    17: ("NVML_ERROR_OPERATING_SYSTEM", "the GPU control device was blocked by the operating system or cgroups"),
    18: ("NVML_ERROR_LIB_RM_VERSION_MISMATCH", "driver/library version mismatch"),
    999: ("NVML_ERROR_UNKNOWN", "an internal driver error"),
}
_STATUS_NUMBER = re.compile(
    r"(?:\berr(?:or)?|failure|failed|returned|return code|status|code)\b\W{0,3}(\d{1,3})(?![\w.])"
    r"|\((\d{1,3}) vs\. 0\)|\berror (\d{3})\b",
    re.IGNORECASE,
)

SUBSYSTEM: dict[TriageClass, str] = {
    TriageClass.DRIVER_NOT_VISIBLE: "container runtime: the driver is not injected into the container",
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
    TriageClass.DRIVER_NOT_VISIBLE: (
        "The container sees no NVIDIA driver: its libraries and device nodes were not injected, and "
        "the host driver may be fine, so do not upgrade the driver for this. Check the container "
        "runtime (docker --gpus or --runtime=nvidia; containerd or CRI-O with nvidia as the default "
        "runtime, or the pod's runtimeClassName), the NVIDIA device plugin or GPU Operator on the "
        "node (the pod must request nvidia.com/gpu), and NVIDIA_VISIBLE_DEVICES / "
        "NVIDIA_DRIVER_CAPABILITIES (compute,utility). On a bare host it means no driver is installed."
    ),
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
    code: str | None = None  # what a status number on the decisive line means, and where it was read
    ready_line: int | None = None  # the "server is up" line, when the failure came after it

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
    # per class, its first line at each strength: {cls: {tier: Evidence}}
    seen: dict[TriageClass, dict[int, Evidence]] = {}
    generic: tuple[int, str] | None = None
    fallback_lines: list[int] = []
    ready: int | None = None
    fact_lines: list[str] = []  # the facts' patterns all need one of the class words too
    for number, line in enumerate(lines, start=1):
        low = line.lower()
        words = _words_in(low)  # one scan finds every word any check below needs
        if not words and not _GLOG_ERROR.match(line):
            continue
        secondary = False
        if not words.isdisjoint(_CLASS_WORDS):
            fact_lines.append(line)
            for cls, class_words in _CLASS_KEYWORDS.items():
                if not words.isdisjoint(class_words) and _COMPILED[cls].search(line):
                    secondary = secondary or bool(_SECONDARY.search(line))
                    tier = _SECONDARY_TIER if secondary else _SOFT_TIER if _SOFT.search(line) else _STRONG
                    seen.setdefault(cls, {}).setdefault(tier, Evidence(cls=cls, line=number, text=line.strip()))
        if generic is None and not secondary and _is_generic(line, words):
            generic = (number, line.strip())
        if not words.isdisjoint(_FALLBACK_KEYWORDS) and _CPU_FALLBACK.search(line):
            fallback_lines.append(number)
        if ready is None and not words.isdisjoint(_READY_KEYWORDS) and _READY.search(line):
            ready = number

    facts = _facts(fact_lines)
    evidence = _strengthen(seen, fallback_lines)
    _container_without_driver(evidence, facts)
    found = sorted(
        (min(tiers.values(), key=lambda e: e.line) for tiers in evidence.values()),
        key=lambda e: PRECEDENCE.index(e.cls),
    )
    top = _decisive(evidence, generic)
    if top is None:
        if generic is None:
            return TriageResult(
                cls=TriageClass.UNKNOWN, hint=_NO_FAILURE_HINT, subsystem=SUBSYSTEM[TriageClass.UNKNOWN], **facts
            )
        top = Evidence(cls=TriageClass.UNKNOWN, line=generic[0], text=generic[1])
    # a status number names a driver-level cause; in a memory, NCCL or model line it is something else
    code = _code_meaning(top.text, top.line) if top.cls in _DRIVER_CLASSES or top.cls is TriageClass.UNKNOWN else None
    after_ready = ready if ready is not None and ready < top.line and top.cls not in _DRIVER_CLASSES else None
    found = [top, *(e for e in found if e.cls is not top.cls)] if top.cls is not TriageClass.UNKNOWN else found
    return TriageResult(
        cls=top.cls,
        line=top.line,
        text=top.text,
        hint=_hint(top.cls, facts, code, after_ready, lines),
        subsystem=SUBSYSTEM[top.cls],
        evidence=found,
        code=code,
        ready_line=after_ready,
        **facts,
    )


_GLOG_ERROR = re.compile(r"\s*[EF]\d{4} \d\d:\d\d:\d\d")


def _is_generic(line: str, words: set[str]) -> bool:
    return (not words.isdisjoint(_GENERIC_KEYWORDS) or bool(_GLOG_ERROR.match(line))) and bool(_GENERIC.search(line))


def _strengthen(
    seen: dict[TriageClass, dict[int, Evidence]], fallback_lines: list[int]
) -> dict[TriageClass, dict[int, Evidence]]:
    """A GPU failure the process stepped around (a CPU fallback after it) is the cause, however
    quietly it was logged: its evidence counts as an error line."""
    if not fallback_lines:
        return seen
    out: dict[TriageClass, dict[int, Evidence]] = {}
    for cls, tiers in seen.items():
        tiers = dict(tiers)
        soft = tiers.get(_SOFT_TIER)
        if cls in _DRIVER_CLASSES and soft is not None and any(soft.line <= n for n in fallback_lines):
            strong = tiers.get(_STRONG)
            tiers[_STRONG] = soft if strong is None or soft.line < strong.line else strong
        out[cls] = tiers
    return out


def _container_without_driver(evidence: dict[TriageClass, dict[int, Evidence]], facts: dict[str, str | None]) -> None:
    """Beside a sign that the container sees no driver, two other verdicts mean the same thing and
    merge into "driver not visible", at the stronger (then earlier) line: cudaErrorInsufficientDriver
    (35), which the CUDA runtime also returns when it finds no driver at all, unless the log reads a
    CUDA ceiling or a requirement (then a driver is there, and old); and "no driver" wordings
    (PyTorch's "Found no NVIDIA driver", nvidia-smi's "couldn't communicate"), which inside a
    container say nothing about the host's driver."""
    hidden = evidence.get(TriageClass.DRIVER_NOT_VISIBLE)
    if hidden is None:
        return
    merged = dict(hidden)
    for cls in (TriageClass.DRIVER_TOO_OLD, TriageClass.DRIVER_NOT_LOADED):
        other = evidence.get(cls)
        if other is None:
            continue
        if cls is TriageClass.DRIVER_TOO_OLD and (
            facts["required_cuda"]
            or facts["driver_cuda"]
            or not all(_INSUFFICIENT.search(e.text) for e in other.values())
        ):
            continue  # a missing symbol, a cuda>= requirement or a CUDA ceiling reads a driver that is there
        for tier, e in other.items():
            if tier not in merged or e.line < merged[tier].line:
                merged[tier] = Evidence(cls=TriageClass.DRIVER_NOT_VISIBLE, line=e.line, text=e.text)
        del evidence[cls]
    evidence[TriageClass.DRIVER_NOT_VISIBLE] = merged


_INSUFFICIENT = re.compile(
    r"insufficient|\b35\b|cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER", re.IGNORECASE
)


def _decisive(evidence: dict[TriageClass, dict[int, Evidence]], generic: tuple[int, str] | None) -> Evidence | None:
    """Error lines first, by precedence; then warnings; then a generic failure; then symptoms."""
    for tier in (_STRONG, _SOFT_TIER):
        at = [tiers[tier] for tiers in evidence.values() if tier in tiers]
        if at:
            return min(at, key=lambda e: PRECEDENCE.index(e.cls))
    if generic is not None:
        return None  # the caller reports the generic failure
    at = [tiers[_SECONDARY_TIER] for tiers in evidence.values() if _SECONDARY_TIER in tiers]
    return min(at, key=lambda e: PRECEDENCE.index(e.cls)) if at else None


def _code_meaning(text: str, line: int) -> str | None:
    """What a status number on the decisive line means, and where it was read."""
    low = text.lower()
    table = _NVML_CODES if ("nvml" in low or "nvidia-smi" in low) else _CUDA_CODES
    family = "NVML return code" if table is _NVML_CODES else "CUDA error"
    for match in _STATUS_NUMBER.finditer(text):
        number = int(next(g for g in match.groups() if g))
        if number in table:
            name, meaning = table[number]
            return f"{family} {number} = {name} ({meaning}), read at line {line}"
    return None


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


def _hint(
    cls: TriageClass, facts: dict[str, str | None], code: str | None, after_ready: int | None, lines: list[str]
) -> str:
    hint = _HINTS[cls]
    if code:
        hint = f"{hint} The number: {code}."
    if cls is TriageClass.FABRIC_MANAGER_NOT_READY and any("Driver Version:" in line for line in lines):
        hint += (
            " nvidia-smi working (as this log shows) does not rule this out: it reaches the kernel "
            "driver, not the NVSwitch fabric."
        )
    if after_ready is not None:
        hint += (
            f" The server reported itself up at line {after_ready}, before this: a failure while "
            "serving (a request, a model loaded on demand), not at start-up."
        )
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
