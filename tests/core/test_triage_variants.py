"""Triage generalises: other wrappers and wordings of the same failures, noise, hostile input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.gpu.triage import TriageClass, triage

C = TriageClass

#: Other wrappers and wordings of each failure, under the class they must triage to.
VARIANTS_BY_CLASS: dict[TriageClass, list[str]] = {
    # driver too old, through other tools and wordings
    C.DRIVER_TOO_OLD: [
        'Error: failed to start container "vllm": Error response from daemon: nvidia-container-cli: requirement error: unsatisfied condition: cuda >= 13.0, please update your driver',
        "CUDA error: CUDA driver version is insufficient for CUDA runtime version",
        "cudaGetDeviceCount returned 35 -> CUDA driver version is insufficient",
        "what():  cudaErrorInsufficientDriver: CUDA driver version is insufficient",
        "E0601 engine.cc:88] CUDA_ERROR_INSUFFICIENT_DRIVER while creating context",
        "AssertionError: The NVIDIA driver on your system is too old (found version 12020).",
    ],
    # driver/library mismatch: container CLI, NVML enum, kernel log
    C.DRIVER_LIBRARY_MISMATCH: [
        "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown",
        "pynvml.NVMLError_LibRmVersionMismatch: NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        "[ 4711.12] NVRM: API mismatch: the NVIDIA kernel module has version 575.57.08, but this NVIDIA driver component has version 580.95.05.",
    ],
    # driver not loaded
    C.DRIVER_NOT_LOADED: [
        "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver",
        "load library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or directory",
    ],
    # fabric manager, through NCCL and other wrappers
    C.FABRIC_MANAGER_NOT_READY: [
        "node01:1234:1234 [0] include/alloc.h:103 NCCL WARN Cuda failure 802 'system not yet initialized'",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version 2.21.5 ... Last error: Cuda failure 'system not yet initialized'",
        "CUDA initialization failed: cudaErrorSystemNotReady",
        "cuInit returned error code 802",
    ],
    # 803 / 804 in other wrappers
    C.CUDA_DRIVER_MISMATCH: [
        "RuntimeError: CUDA error: system has unsupported display driver / cuda driver combination",
        "Failed to get device count, cudaGetDeviceCount returned 803",
        "ggml_cuda_init: failed to initialize CUDA: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    ],
    C.FORWARD_COMPAT_UNSUPPORTED: [
        "CUDA error: forward compatibility was attempted on non supported HW",
        "cudaErrorCompatNotSupportedOnDevice (error 804)",
    ],
    # out of memory
    C.OUT_OF_MEMORY: [
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: CUDA error: out of memory",
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
        "[TensorRT-LLM][ERROR] CUDA runtime error in cudaMalloc: cudaErrorMemoryAllocation",
    ],
    # NCCL (not 802)
    C.NCCL: [
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error",
        "[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed",
    ],
    # model not found
    C.MODEL_NOT_FOUND: [
        "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. Repository Not Found for url: https://huggingface.co/api/models/org/nope",
        "OSError: org/nope is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'",
        "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://huggingface.co/org/nope/resolve/main/config.json",
        "Error: model 'llama9:70b' not found, try pulling it first",
    ],
}
VARIANTS = [(cls, line) for cls, lines in VARIANTS_BY_CLASS.items() for line in lines]


@pytest.mark.parametrize(("cls", "line"), VARIANTS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(VARIANTS)])
def test_variant_between_noise(cls: TriageClass, line: str) -> None:
    log = (
        "INFO 08-05 10:00:01 starting engine\nWARNING 08-05 10:00:02 slow tokenizer\n" + line + "\nINFO shutting down\n"
    )
    result = triage(log)
    assert result.cls is cls, result.evidence
    assert result.line == 3 and result.text == line.strip()


def test_required_cuda_from_other_spacing() -> None:
    assert triage(VARIANTS[0][1]).required_cuda == "13.0"
    assert "driver 580.65.06 or newer" in triage(VARIANTS[0][1]).hint


def test_driver_mention_from_kernel_log() -> None:
    result = triage(VARIANTS[8][1])
    assert result.driver_version == "575.57.08"


def test_higher_class_later_in_the_log_wins_and_lower_is_evidence() -> None:
    log = "\n".join(
        [
            "torch.OutOfMemoryError: CUDA out of memory.",  # 1
            "NCCL WARN Cuda failure 802 'system not yet initialized'",  # 2
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0",  # 3
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0",  # 4
        ]
    )
    result = triage(log)
    assert (result.cls, result.line) == (C.DRIVER_TOO_OLD, 3)
    assert [(e.cls, e.line) for e in result.evidence] == [
        (C.DRIVER_TOO_OLD, 3),
        (C.FABRIC_MANAGER_NOT_READY, 2),
        (C.OUT_OF_MEMORY, 1),
        (C.NCCL, 2),
    ]


#: Numbers and words that only look like failures.
LOOKALIKES = [
    "INFO loaded 803 tensors from checkpoint",
    '  File "/srv/app/model.py", line 802, in forward',
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-804a0000-0000)",
    "listening on 0.0.0.0:8035",
    "WARNING: destroy_process_group() was not called before program exit (ProcessGroupNCCL)",
    "model weights took 15.0 GiB; memory profiling done",
    "we found no errors in 35 checks",
    "INFO the model weights were not found in the cache, downloading",
    "INFO process exited with code 0",
]
#: Failures' words split by a newline: no pattern runs across one.
SPLIT_BY_A_NEWLINE = [
    "cudaGetDeviceCount returned\n35 items",
    "unsatisfied condition:\ncuda>=13.0",
    "the model\nnot found",
    "failed\n: ok",
    "INFO step\nexit code\n1",
]


@pytest.mark.parametrize("log", [*LOOKALIKES, *SPLIT_BY_A_NEWLINE])
def test_lookalikes_and_split_patterns_are_not_failures(log: str) -> None:
    result = triage(log)
    assert result.cls is C.UNKNOWN and result.line is None, result


def test_unknown_failure_reports_its_first_line() -> None:
    log = "INFO ok\nTraceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'foo'\n"
    result = triage(log)
    assert (result.cls, result.line, result.text) == (C.UNKNOWN, 2, "Traceback (most recent call last):")
    assert result.failed and result.evidence == []


@pytest.mark.parametrize(
    ("line", "number"),
    [
        ("Error: unknown flag: --max-num-seqs2", 2),
        ("docker: Error response from daemon: pull access denied for vllm/nope", 2),
        ("[2026-08-05 10:00:03] FATAL engine core died", 2),
        ("worker exited with code 137", 2),
        ("error: cannot open /dev/nvidia-uvm", 2),
    ],
)
def test_unknown_generic_failures(line: str, number: int) -> None:
    result = triage("INFO starting\n" + line + "\nKeyError: 'later'\n")
    assert (result.cls, result.line, result.text) == (C.UNKNOWN, number, line)


def test_clean_log_has_no_failing_line() -> None:
    result = triage("INFO started\nINFO serving on :8000\n")
    assert result.cls is C.UNKNOWN and result.line is None and result.text is None and not result.failed
    assert result.hint == "No failing line found in the log."


def test_empty_log() -> None:
    assert triage("").line is None


def test_crlf_and_colour_codes_keep_line_numbers() -> None:
    log = "\x1b[32mINFO\x1b[0m start\r\n\rprogress 10%\rprogress 90%\r\n\x1b[31mFailed to initialize NVML: Driver/library version mismatch\x1b[0m\r\n"
    result = triage(log)
    assert (result.cls, result.line) == (C.DRIVER_LIBRARY_MISMATCH, 3)
    assert result.text == "Failed to initialize NVML: Driver/library version mismatch"


def test_json_shape() -> None:
    doc = triage("Failed to initialize NVML: Driver/library version mismatch").as_json()
    assert list(doc)[:4] == ["class", "line", "text", "hint"]
    assert doc["class"] == "driver-library-mismatch" and doc["line"] == 1
    assert doc["evidence"] == [
        {
            "class": "driver-library-mismatch",
            "line": 1,
            "text": "Failed to initialize NVML: Driver/library version mismatch",
        }
    ]


def test_long_log_with_the_cause_at_the_end() -> None:
    log = "INFO step\n" * 50_000 + "x" * 200_000 + "\nError 802: system not yet initialized\n"
    result = triage(log)
    assert (result.cls, result.line) == (C.FABRIC_MANAGER_NOT_READY, 50_002)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises(text: str) -> None:
    result = triage(text)
    assert (result.line is None) == (result.text is None)
    if result.line is not None:
        assert 1 <= result.line <= text.count("\n") + 1


def test_every_class_has_keywords_for_its_fast_path() -> None:
    from cockpit.gpu.triage import _CLASS_KEYWORDS, _COMPILED

    assert set(_CLASS_KEYWORDS) == set(_COMPILED) == set(TriageClass) - {C.UNKNOWN}
    assert all(word == word.lower() for words in _CLASS_KEYWORDS.values() for word in words)


@pytest.mark.parametrize(("cls", "line"), VARIANTS[::3])
def test_variants_in_other_case(cls: TriageClass, line: str) -> None:
    assert triage(line.upper()).cls is cls
    assert triage(line.lower()).cls is cls


def _all_words() -> list[str]:
    from cockpit.gpu.triage import _CLASS_WORDS, _FALLBACK_KEYWORDS, _GENERIC_KEYWORDS, _READY_KEYWORDS

    return sorted({*_CLASS_WORDS, *_GENERIC_KEYWORDS, *_READY_KEYWORDS, *_FALLBACK_KEYWORDS})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_all_words()) | st.text(alphabet="abcdekv _:3", max_size=3), max_size=8))
def test_the_one_scan_word_finder_finds_what_substring_search_finds(parts: list[str]) -> None:
    # overlapping and abutting keywords ("cpu kv cache", "drivererror code") are all found
    from cockpit.gpu.triage import _words_in

    low = "".join(parts)
    assert _words_in(low) == {word for word in _all_words() if word in low}
