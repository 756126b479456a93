"""Triage in the serving engines' own words: real logs from vLLM, SGLang, TGI, TensorRT-LLM,
Ollama, huggingface_hub and the Docker registry (tests/fixtures/engines, provenance in the
fixtures README), each classified with the first line that evidences its class."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.gpu.triage import TriageClass, triage

C = TriageClass
OOM, MNF = C.OUT_OF_MEMORY, C.MODEL_NOT_FOUND

# (file under engines/, class, first line evidencing it, text it starts with)
ENGINE_LOGS = [
    (
        "vllm_v0-no-cache-blocks_Qwen2.5-0.5B_vllm-10439.txt",
        OOM,
        2,
        'vllm-1  | ERROR 11-18 18:07:28 engine.py:366]     raise ValueError("No available memory',
    ),
    ("vllm_v1-no-cache-blocks_gpt-oss-120b-H100_vllm-27508.txt", OOM, 7, "(EngineCore_DP0 pid=223840) ERROR"),
    ("vllm_kv-cache-larger-than-available_tpu-inference-223.txt", OOM, 5, "ValueError: To serve at least one request"),
    ("vllm_max-seq-len-over-kv-cache_RTX3090_vllm-10517.txt", OOM, 5, "The model's max seq len (29000) is larger"),
    ("sglang_mem-fraction-static_L40S_sglang-4330.txt", OOM, 3, "2. Run sglang with --mem-fraction-static 0.84"),
    (
        "tgi_warmup-prefill-tokens_Llama-2-70B-GPTQ_tgi-755.txt",
        OOM,
        1,
        'Error: Warmup(Generation("Not enough memory to handle 4096',
    ),
    ("tgi_warmup-allocation-exceeds_tgi-563.txt", OOM, 1, "thread 'main' panicked at 'Unable to warmup model"),
    (
        "trtllm_executor-insufficient-gpu-memory_8xH200_trtllm-5872.txt",
        OOM,
        1,
        "[07/08/2025-19:47:15] [TRT-LLM] [RANK 1] [E]",
    ),
    (
        "trtllm_cudaMallocAsync-out-of-memory_A100-40GB_trtllm-401.txt",
        OOM,
        3,
        "[TensorRT-LLM][ERROR] [TensorRT-LLM][ERROR] CUDA runtime error",
    ),
    (
        "ollama_system-memory_deepseek-v2.5_ollama-10920.txt",
        OOM,
        11,
        "Error: model requires more system memory (164.8 GiB)",
    ),
    ("ollama_pull-manifest-not-found_ollama-5499.txt", MNF, 3, "Error: pull model manifest: file does not exist"),
    ("hf_gated-repo-401_FLUX.1-dev_PuLID-97.txt", MNF, 1, "raise _format(GatedRepoError, message, response)"),
    ("transformers_gated-repo-oserror_sglang-14644.txt", MNF, 6, "OSError: You are trying to access a gated repo."),
    (
        "docker_manifest-unknown_ovos-docker-21.txt",
        MNF,
        1,
        "Error response from daemon: manifest for smartgic/ovos-base:latest",
    ),
    ("vllm_nccl-unhandled-system-error_TP8_vllm-7800.txt", C.NCCL, 1, "(VllmWorkerProcess pid=232) ERROR"),
]


def test_every_engine_log_is_listed_and_in_the_readme(fixtures_dir: Path) -> None:
    on_disk = {p.name for p in (fixtures_dir / "engines").iterdir()}
    assert on_disk == {name for name, *_ in ENGINE_LOGS}
    readme = (fixtures_dir / "README.md").read_text()
    for name in on_disk:
        assert f"engines/{name}" in readme, f"{name} has no provenance row in tests/fixtures/README.md"


@pytest.mark.parametrize(("name", "cls", "line", "start"), ENGINE_LOGS, ids=[e[0][:40] for e in ENGINE_LOGS])
def test_engine_log_class_and_first_line(
    fixtures_dir: Path, name: str, cls: TriageClass, line: int, start: str
) -> None:
    text = (fixtures_dir / "engines" / name).read_text()
    result = triage(text)
    assert result.cls is cls, result.evidence
    assert result.line == line
    assert result.text is not None and result.text.startswith(start)
    assert result.text == text.split("\n")[line - 1].strip()


def test_the_hints_name_the_engines_knobs(fixtures_dir: Path) -> None:
    oom = triage((fixtures_dir / "engines/sglang_mem-fraction-static_L40S_sglang-4330.txt").read_text())
    assert "--mem-fraction-static" in oom.hint and "--gpu-memory-utilization" in oom.hint
    gated = triage((fixtures_dir / "engines/hf_gated-repo-401_FLUX.1-dev_PuLID-97.txt").read_text())
    assert "HF_TOKEN" in gated.hint and "Not a driver problem" in gated.hint


@pytest.mark.parametrize(
    ("line", "cls"),
    [
        # vLLM v1 worker/utils.py request_memory, as real logs quote it
        (
            "ValueError: Free memory on device cuda:0 (45.89/79.19 GiB) on startup is less than desired GPU "
            "memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
            "other processes.",
            OOM,
        ),
        ("huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. Repository Not Found for url: x", MNF),
        ("ollama._types.ResponseError: pull model manifest: file does not exist (status code: 500)", MNF),
        # not failures: the words alone in ordinary lines
        ("INFO writing manifest", None),
        ("INFO Memory profiling results: total_gpu_memory=23.58GiB gpu_memory_utilization=0.90", None),
    ],
)
def test_engine_phrasings(line: str, cls: TriageClass | None) -> None:
    result = triage(f"INFO starting\n{line}\n")
    if cls is None:
        assert not result.failed
    else:
        assert (result.cls, result.line) == (cls, 2)
