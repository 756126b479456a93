"""Log triage over the real captured logs: class, line, facts, exact precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.gpu.triage import PRECEDENCE, TriageClass, triage

C = TriageClass

# (file, class from fixtures/README.md, first line evidencing it, text it starts with)
FIXTURES = [
    (
        "errors/nvml-mismatch_570.124_tinygrad-open-gpu-kernel-modules-47.txt",
        C.DRIVER_LIBRARY_MISMATCH,
        11,
        "Failed to initialize NVML: Driver/library version mismatch",
    ),
    (
        "errors/nvml-mismatch_460-unattended-upgrade_lyulyul-shine-cluster-30.txt",
        C.DRIVER_LIBRARY_MISMATCH,
        2,
        "Failed to initialize NVML: Driver/library version mismatch",
    ),
    (
        "errors/smi-no-driver_lyulyul-shine-cluster-50.txt",
        C.DRIVER_NOT_LOADED,
        2,
        "NVIDIA-SMI has failed because it couldn't communicate",
    ),
    (
        "errors/container-cli_cuda-ge-12.8_driver-550.144.03_tabbyAPI-324.txt",
        C.DRIVER_TOO_OLD,
        4,
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8",
    ),
    (
        "errors/container-cli_cuda-ge-11.0_nvidia-docker-1442.txt",
        C.DRIVER_TOO_OLD,
        1,
        "docker: Error response from daemon",
    ),
    (
        "errors/torch-driver-too-old_11040_nvidia-smi-470.86_Fooocus-1313.txt",
        C.DRIVER_TOO_OLD,
        1,
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040)",
    ),
    (
        "errors/torch-driver-too-old_12080_driver-535-claims-cuda12.8_vllm-0.20.2_verl-omni-133.txt",
        C.DRIVER_TOO_OLD,
        2,
        "/home/yeyuxiao/.conda/envs/verl-omni-py312/lib/python3.12/site-packages/torch/cuda/__init__.py:180: UserWarning",
    ),
    (
        "errors/cuda802_gpu-burn-H100-545.23.08_wilicc-gpu-burn-92.txt",
        C.FABRIC_MANAGER_NOT_READY,
        12,
        "what():  Error (gpu_burn-drv.cpp:298): system not yet initialized",
    ),
    (
        "errors/cuda802_fabric-manager-warmup_H200-single-GPU_huggingface_hub-4134.txt",
        C.FABRIC_MANAGER_NOT_READY,
        9,
        "RuntimeError: Unexpected error from cudaGetDeviceCount()",
    ),
    (
        "errors/cuda803_torch-getDeviceCount_easydiffusion-379.txt",
        C.CUDA_DRIVER_MISMATCH,
        1,
        "/home/drink/Software/stable-diffusion-ui",
    ),
    (
        "errors/cuda804_torch-getDeviceCount_TensorRT-LLM-1806.txt",
        C.FORWARD_COMPAT_UNSUPPORTED,
        1,
        "/root/miniconda3/envs/trt/lib/python3.10/site-packages/torch/cuda/__init__.py:138",
    ),
    (
        "negative/vllm_cuda-oom_torch-OutOfMemoryError-H100-80GB_vllm-21410.txt",
        C.OUT_OF_MEMORY,
        3,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
    ),
    (
        "negative/vllm_model-not-found_invalid-repo-id_vllm-13510.txt",
        C.MODEL_NOT_FOUND,
        4,
        "ValueError: Invalid repository ID or local directory specified",
    ),
]


def test_every_fixture_log_is_listed(fixtures_dir: Path) -> None:
    on_disk = {f"{d}/{p.name}" for d in ("errors", "negative") for p in (fixtures_dir / d).iterdir()}
    assert on_disk == {f for f, *_ in FIXTURES}


@pytest.mark.parametrize(("name", "cls", "line", "start"), FIXTURES, ids=[f[0].split("/")[1][:40] for f in FIXTURES])
def test_fixture_class_and_first_line(fixtures_dir: Path, name: str, cls: TriageClass, line: int, start: str) -> None:
    text = (fixtures_dir / name).read_text()
    result = triage(text)
    assert result.cls is cls
    assert result.line == line
    assert result.text is not None and result.text.startswith(start)
    assert result.text == text.split("\n")[line - 1].strip()
    assert result.failed and result.evidence[0].cls is cls and result.hint


def test_tabby_facts_and_hint(fixtures_dir: Path) -> None:
    result = triage((fixtures_dir / "errors/container-cli_cuda-ge-12.8_driver-550.144.03_tabbyAPI-324.txt").read_text())
    assert result.required_cuda == "12.8"
    assert result.driver_version == "550.144.03"
    assert result.driver_cuda == "12.4"  # the nvidia-smi banner pasted below the error
    assert "needs CUDA 12.8 (driver 570.26 or newer)" in result.hint
    assert "the log shows driver 550.144.03, which supports CUDA up to 12.4" in result.hint


def test_torch_found_version_is_the_driver_ceiling(fixtures_dir: Path) -> None:
    old = triage((fixtures_dir / "errors/torch-driver-too-old_11040_nvidia-smi-470.86_Fooocus-1313.txt").read_text())
    assert (old.driver_cuda, old.driver_version, old.required_cuda) == ("11.4", "470.86", None)
    verl = triage(
        (
            fixtures_dir / "errors/torch-driver-too-old_12080_driver-535-claims-cuda12.8_vllm-0.20.2_verl-omni-133.txt"
        ).read_text()
    )
    assert verl.driver_cuda == "12.8"


def test_driver_mentions(fixtures_dir: Path) -> None:
    burn = triage((fixtures_dir / "errors/cuda802_gpu-burn-H100-545.23.08_wilicc-gpu-burn-92.txt").read_text())
    assert burn.driver_version == "545.23.08"  # from the package name on line 1
    tiny = triage((fixtures_dir / "errors/nvml-mismatch_570.124_tinygrad-open-gpu-kernel-modules-47.txt").read_text())
    assert tiny.driver_version == "570.124.04"  # the .run installer on line 3


def test_oom_fixture_does_not_count_the_nccl_shutdown_warning_as_nccl(fixtures_dir: Path) -> None:
    result = triage(
        (fixtures_dir / "negative/vllm_cuda-oom_torch-OutOfMemoryError-H100-80GB_vllm-21410.txt").read_text()
    )
    assert [e.cls for e in result.evidence] == [C.OUT_OF_MEMORY]


def test_precedence_order_is_the_readme_order() -> None:
    assert [str(c) for c in PRECEDENCE] == [
        "driver-not-visible",
        "driver-too-old",
        "driver-library-mismatch",
        "driver-not-loaded",
        "fabric-manager-not-ready",
        "cuda-driver-mismatch",
        "forward-compat-unsupported",
        "out-of-memory",
        "nccl",
        "model-not-found",
        "unknown",
    ]


def test_concatenated_fixtures_pick_the_higher_class_and_its_first_line(fixtures_dir: Path) -> None:
    oom = (fixtures_dir / "negative/vllm_cuda-oom_torch-OutOfMemoryError-H100-80GB_vllm-21410.txt").read_text()
    mismatch = (fixtures_dir / "errors/nvml-mismatch_460-unattended-upgrade_lyulyul-shine-cluster-30.txt").read_text()
    text = oom + mismatch  # OOM first, mismatch later in the log
    result = triage(text)
    assert result.cls is C.DRIVER_LIBRARY_MISMATCH
    assert result.line == len(oom.split("\n")) - 1 + 2
    assert [e.cls for e in result.evidence] == [C.DRIVER_LIBRARY_MISMATCH, C.OUT_OF_MEMORY]
    assert result.evidence[1].line == 3
