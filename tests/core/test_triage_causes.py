"""Triage by cause over every real log the project keeps (issue 31): the class and decisive line
each log's provenance gives (tests/fixtures/triage-manifest.toml), numbers read as what they mean,
the container that sees no driver, and the lines that mislead."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from cockpit.gpu.triage import TriageClass, triage

C = TriageClass
TRIAGE_DIRS = ("errors", "negative", "engines", "causes")


def manifest(fixtures_dir: Path) -> list[dict[str, object]]:
    with (fixtures_dir / "triage-manifest.toml").open("rb") as f:
        logs: list[dict[str, object]] = tomllib.load(f)["log"]
    return logs


def _entries() -> list[dict[str, object]]:
    return manifest(Path(__file__).resolve().parents[1] / "fixtures")


ENTRIES = _entries()


def test_the_manifest_lists_every_triage_log_once_with_its_provenance(fixtures_dir: Path) -> None:
    on_disk = {f"{d}/{p.name}" for d in TRIAGE_DIRS for p in (fixtures_dir / d).iterdir()}
    listed = [str(e["file"]) for e in ENTRIES]
    assert sorted(listed) == sorted(on_disk) and len(set(listed)) == len(listed)
    readme = (fixtures_dir / "README.md").read_text()
    for entry in ENTRIES:
        assert str(entry["source"]).startswith("https://github.com/"), entry
        assert str(entry["file"]) in readme, f"{entry['file']} has no provenance row in tests/fixtures/README.md"
        assert C(str(entry["class"]))  # a class the classifier knows


def test_every_kind_of_issue_31_has_real_logs() -> None:
    causes = [e for e in ENTRIES if str(e["file"]).startswith("causes/")]
    by_class = {str(e["class"]) for e in causes}
    assert {
        "driver-not-visible",
        "driver-too-old",
        "driver-library-mismatch",
        "fabric-manager-not-ready",
        "model-not-found",
        "out-of-memory",
    } <= by_class
    assert sum(e["class"] == "driver-not-visible" for e in causes) >= 4


@pytest.mark.parametrize("entry", ENTRIES, ids=[str(e["file"]).split("/")[1][:48] for e in ENTRIES])
def test_manifest_class_and_decisive_line(fixtures_dir: Path, entry: dict[str, object]) -> None:
    text = (fixtures_dir / str(entry["file"])).read_text()
    result = triage(text)
    assert str(result.cls) == entry["class"], (result.line, result.text, result.evidence)
    assert result.line == entry["line"]
    assert result.text == text.split("\n")[int(str(entry["line"])) - 1].strip()


def _log(name: str, fixtures_dir: Path) -> str:
    return (fixtures_dir / "causes" / name).read_text()


def test_a_number_alone_is_read_as_what_it_means_and_where(fixtures_dir: Path) -> None:
    nvml = triage(_log("ollama_nvmlInit_v2-err-18_545.29.06_ollama-flake-4.txt", fixtures_dir))
    assert nvml.text == "nvmlInit_v2 err: 18"
    assert nvml.code == (
        "NVML return code 18 = NVML_ERROR_LIB_RM_VERSION_MISMATCH (driver/library version mismatch), read at line 15"
    )
    assert nvml.code in nvml.hint and "reboot" in nvml.hint
    fm = triage(_log("ollama_cuInit-err-802_H200-docker_ollama-9031.txt", fixtures_dir))
    assert fm.text == "cuInit err: 802"
    assert fm.code is not None and fm.code.startswith("CUDA error 802 = cudaErrorSystemNotReady")
    assert fm.code.endswith("read at line 14")
    hidden = triage(_log("deviceQuery_35_nvidia-smi-not-found-in-container_nvidia-docker-180.txt", fixtures_dir))
    assert hidden.code is not None and hidden.code.startswith("CUDA error 35 = cudaErrorInsufficientDriver")


@pytest.mark.parametrize(
    ("line", "cls", "code"),
    [
        ("nvidia-smi failed with return code 18", C.DRIVER_LIBRARY_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
        ("nvml vram init failure: 9", C.DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED"),
        ("nvmlInit_v2 err: 12", C.DRIVER_NOT_VISIBLE, "NVML_ERROR_LIBRARY_NOT_FOUND"),
        ("cudaSetDevice err: 35", C.DRIVER_TOO_OLD, "cudaErrorInsufficientDriver"),
        ("cuInit err: 999", C.UNKNOWN, "cudaErrorUnknown"),
        ("cuda driver library init failure: 804", C.FORWARD_COMPAT_UNSUPPORTED, "cudaErrorCompatNotSupportedOnDevice"),
    ],
)
def test_numbers_without_words(line: str, cls: TriageClass, code: str) -> None:
    result = triage(f"INFO probing GPUs\n{line}\nINFO done\n")
    assert (result.cls, result.line) == (cls, 2)
    assert result.code is not None and code in result.code and result.code.endswith("read at line 2")


def test_driver_not_visible_names_the_runtime_not_an_upgrade(fixtures_dir: Path) -> None:
    result = triage(_log("device-plugin_could-not-load-NVML_default-runtime_k8s-device-plugin-182.txt", fixtures_dir))
    assert result.cls is C.DRIVER_NOT_VISIBLE
    for words in ("container runtime", "device plugin", "default runtime", "do not upgrade the driver"):
        assert words in result.hint
    assert result.subsystem.startswith("container runtime")


def test_insufficient_driver_beside_a_container_without_one_is_not_an_old_driver(fixtures_dir: Path) -> None:
    # the 35 line decides, but the later "nvidia-smi: command not found" says what it means
    result = triage(_log("deviceQuery_35_nvidia-smi-not-found-in-container_nvidia-docker-180.txt", fixtures_dir))
    assert (result.cls, result.line, result.text) == (C.DRIVER_NOT_VISIBLE, 6, "cudaGetDeviceCount returned 35")
    assert C.DRIVER_TOO_OLD not in [e.cls for e in result.evidence]
    # the same line alone, or beside the driver's version, is an old driver
    assert triage("cudaGetDeviceCount returned 35\n").cls is C.DRIVER_TOO_OLD
    old = triage("| NVIDIA-SMI 390.25   Driver Version: 390.25 |\ncudaGetDeviceCount returned 35\n")
    assert (old.cls, old.line, old.driver_version) == (C.DRIVER_TOO_OLD, 2, "390.25")


def test_cuda_version_na_beside_an_unrelated_error() -> None:
    log = "\n".join(
        [
            "| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: N/A      |",
            "Traceback (most recent call last):",
            "RuntimeError: Expected all tensors to be on the same device",
        ]
    )
    result = triage(log)
    assert (result.cls, result.line) == (C.DRIVER_NOT_VISIBLE, 1)


def test_old_driver_through_a_missing_symbol_after_noise(fixtures_dir: Path) -> None:
    result = triage(_log("ollama_cuCtxCreate_v3-undefined_libcuda-418.74_ollama-5493.txt", fixtures_dir))
    assert (result.cls, result.line) == (C.DRIVER_TOO_OLD, 2)
    # a symbol that resolved is no failure (Ollama prints every dlsym it makes)
    assert not triage("dlsym: cuCtxCreate_v3 - 0x7f928be77120\ncalling cuInit\n").failed


def test_802_with_nvidia_smi_working_still_points_at_the_fabric(fixtures_dir: Path) -> None:
    result = triage(_log("trtllm_banner-802_p4d-8xA100-nvidia-smi-works_trtllm-398.txt", fixtures_dir))
    assert result.cls is C.FABRIC_MANAGER_NOT_READY
    assert "fabric" in result.hint and "nvidia-smi working" in result.hint


def test_a_cuda_warning_before_a_different_cause(fixtures_dir: Path) -> None:
    result = triage(_log("seldon-triton_no-driver-banner-then-invalid-model-dir_seldon-core-4887.txt", fixtures_dir))
    assert result.cls is C.MODEL_NOT_FOUND
    assert [e.cls for e in result.evidence] == [C.MODEL_NOT_FOUND, C.DRIVER_NOT_VISIBLE]
    # a pinned-memory symptom gives way even to a failure of no known class
    caffe = triage(_log("triton_pinned-memory-is-a-warning_caffe2-unsupported_triton-2674.txt", fixtures_dir))
    assert (caffe.cls, caffe.line) == (C.UNKNOWN, 2)
    # a vLLM warning naming CUDA, then a gated model: the model is the cause
    log = (
        "WARNING 08-05 10:00:02 [cuda.py:91] CUDA driver version is insufficient for CUDA runtime version\n"
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url x\n"
    )
    assert (triage(log).cls, triage(log).line) == (C.MODEL_NOT_FOUND, 2)


def test_a_warning_alone_still_names_its_cause() -> None:
    # the verl-omni and 804 fixtures: a UserWarning is the only statement of the cause
    log = "UserWarning: CUDA initialization: CUDA driver version is insufficient\nTraceback (most recent call last):\n"
    assert (triage(log).cls, triage(log).line) == (C.DRIVER_TOO_OLD, 1)


def test_a_gpu_error_before_a_cpu_fallback_is_the_cause_of_what_fails_later() -> None:
    log = "\n".join(
        [
            'time=x level=INFO source=gpu.go:568 msg="unable to load cuda driver library" '
            'error="symbol lookup for cuCtxCreate_v3 failed: undefined symbol: cuCtxCreate_v3"',
            'time=x level=INFO source=gpu.go:386 msg="no compatible GPUs were discovered"',
            "Error: model requires more system memory (164.8 GiB) than is available (62.4 GiB)",
        ]
    )
    result = triage(log)
    assert (result.cls, result.line) == (C.DRIVER_TOO_OLD, 1)
    # without the fallback the quiet INFO line yields to the stated error
    assert triage("\n".join(log.split("\n")[::2])).cls is C.OUT_OF_MEMORY


def test_an_error_after_the_server_is_up(fixtures_dir: Path) -> None:
    result = triage(
        _log("triton_model-not-found-in-any-repository_after-server-up_model-analyzer-786.txt", fixtures_dir)
    )
    assert (result.cls, result.line, result.ready_line) == (C.MODEL_NOT_FOUND, 4, 1)
    assert "up at line 1" in result.hint and "while serving" in result.hint
    # a driver cause keeps its verdict without the note: Ollama finds GPUs after "Listening on"
    ollama = triage(
        'time=x level=INFO source=routes.go:1172 msg="Listening on 127.0.0.1:11434 (version 0.3.9)"\ncuInit err: 802\n'
    )
    assert (ollama.cls, ollama.ready_line) == (C.FABRIC_MANAGER_NOT_READY, None)


@pytest.mark.parametrize(
    "line",
    [
        "[2025-07-02 07:41:59 DP0 TP0] max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.8",
        "RuntimeError: Prefill out of memory. Try to lower your batch size.",
        "RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`.",
        "RuntimeError: No enough gpu memory for kv cache.",
        "[TM][WARNING] `session_len` truncated to 4928 due to limited KV cache memory",
        "llama_kv_cache_init: failed to allocate buffer for kv cache",
        "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 9332334592",
    ],
)
def test_kv_cache_without_memory_in_each_engines_words(line: str) -> None:
    result = triage(f"INFO loading weights\n{line}\nINFO shutting down\n")
    assert (result.cls, result.line) == (C.OUT_OF_MEMORY, 2)


@pytest.mark.parametrize(
    "line",
    [
        "E1107 07:34:03.823179 7 model_repository_manager.cc:1265] failed to poll model 'pipe': model not found in any model repository.",
        "error: failed to get model metadata: Request for unknown model: 'resnet50_netdef' is not found",
        "tritonclient.utils.InferenceServerException: [400] Request for unknown model: 'v2' is not found",
    ],
)
def test_triton_model_missing_from_its_repository(line: str) -> None:
    result = triage(line)
    assert result.cls is C.MODEL_NOT_FOUND and "Not a driver problem" in result.hint


@pytest.mark.parametrize(
    "log",
    [
        # the NGC banner, then the engine's own words for no driver
        "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n"
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU",
        "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n"
        "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
        # nvidia-smi answers without a CUDA version, then 35: libcuda was not injected
        "| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: N/A      |\n"
        "cudaGetDeviceCount returned 35",
    ],
)
def test_no_driver_words_beside_a_container_without_one(log: str) -> None:
    result = triage(log)
    assert (result.cls, result.line) == (C.DRIVER_NOT_VISIBLE, 2)
    assert [e.cls for e in result.evidence] == [C.DRIVER_NOT_VISIBLE]


def test_nvml_unknown_error_in_a_container_is_the_runtime() -> None:
    result = triage("$ kubectl exec gpu-pod -- nvidia-smi\nFailed to initialize NVML: Unknown Error\n")
    assert (result.cls, result.line) == (C.DRIVER_NOT_VISIBLE, 2)


def test_numbers_in_lines_of_other_causes_are_not_read_as_cuda_codes() -> None:
    # a memory line's or a hub line's number is theirs, not a cudaError_t value
    assert triage("RuntimeError: Prefill out of memory, failed with status 100\n").code is None
    assert triage("huggingface_hub.errors.RepositoryNotFoundError: Repository Not Found, status 999\n").code is None
