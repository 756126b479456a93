"""NVIDIA's compatibility rules: minor-version compatibility, forward compatibility, and the
image's CUDA read from real ``docker image inspect`` environments (tests/fixtures/inspect)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.errors import BadInput
from cockpit.gpu.compat import (
    CompatOutcome,
    Mode,
    compat_outcome,
    forward_compat,
    gpu_is_datacenter,
    minor_version_ok,
)
from cockpit.gpu.image_env import parse_image_inspect, parse_require

CU129 = "inspect/vllm-openai_v0.16.0_cu129_env.json"
CU130 = "inspect/vllm_v0.24.0_cu130_env.json"


def test_minor_version_compatibility_within_a_major() -> None:
    # any 13.x on any r580+, any 12.x on r525+ (CUDA Compatibility, Table 1)
    assert minor_version_ok("580.65.06", "13.2") and minor_version_ok("r580", "13.1")
    assert minor_version_ok("535.230.02", "12.9") and minor_version_ok("525.60.13", "12.8")
    assert not minor_version_ok("575.57.08", "13.0")  # never across a major
    assert not minor_version_ok("520.61.05", "12.0")  # below the 12.x floor
    assert not minor_version_ok("580.65.06", "12.9")  # r580 runs 12.9 natively, not by this rule
    assert not minor_version_ok("470.86", "12.0")


def test_gate_opens_a_cu129_image_on_r535_with_its_limits_stated(fixtures_dir: Path) -> None:
    image = parse_image_inspect((fixtures_dir / CU129).read_text())
    verdict = compat_outcome(None, "535.230.02", gpu="NVIDIA H100 80GB HBM3", image=image)
    assert verdict.outcome is CompatOutcome.COMPATIBLE and verdict.gate_open
    assert verdict.mode is Mode.MINOR_VERSION
    assert "minor-version compatibility" in verdict.reason and "525.60.13" in verdict.reason
    assert any("cudaErrorCallRequiresNewerDriver" in limit for limit in verdict.limits)
    assert any("PTX" in limit for limit in verdict.limits)
    native = compat_outcome("12.9", "575.57.08")
    assert native.mode is Mode.NATIVE and native.limits == []


def test_the_container_runtime_refuses_what_its_requirement_does_not_admit(fixtures_dir: Path) -> None:
    # the image not read: taken to declare cuda>=12.9 like every nvidia/cuda image (stricter)
    unread = compat_outcome("cu129", "535.230.02", gpu="NVIDIA H100 80GB HBM3")
    assert unread.outcome is CompatOutcome.HARD_STOP
    assert "container runtime refuses" in unread.reason and "cuda>=12.9" in unread.reason
    assert "driver 535.230.02 reports CUDA 12.2" in unread.reason
    # a GeForce: the image's brand= terms name r535 for data center and RTX brands only
    image = parse_image_inspect((fixtures_dir / CU129).read_text())
    geforce = compat_outcome(None, "535.230.02", gpu="NVIDIA GeForce RTX 4090", image=image)
    assert geforce.outcome is CompatOutcome.HARD_STOP and "for NVIDIA GeForce RTX 4090" in geforce.reason
    workstation = compat_outcome(None, "535.230.02", gpu="NVIDIA RTX A6000", image=image)
    assert workstation.outcome is CompatOutcome.COMPATIBLE  # brand=nvidiartx,driver>=535 admits it
    # an image with no requirement (torch wheels on a plain base): minor-version compatibility
    plain = parse_image_inspect('[{"Config": {"Env": ["PATH=/usr/bin"]}}]')
    assert compat_outcome("12.9", "535.230.02", image=plain).mode is Mode.MINOR_VERSION


def test_a_cuda_minor_newer_than_the_table_still_runs_on_its_major() -> None:
    plain = parse_image_inspect('[{"Config": {"Env": ["NVIDIA_DISABLE_REQUIRE=true"]}}]')
    verdict = compat_outcome("13.5", "580.173.02", image=plain)
    assert verdict.outcome is CompatOutcome.COMPATIBLE and verdict.mode is Mode.MINOR_VERSION
    assert verdict.min_driver is None and "not in the table" in verdict.reason
    with pytest.raises(BadInput, match=r"no minimum driver known for CUDA 14\.0"):
        compat_outcome("14.0", "580.173.02")


def test_gpu_classes() -> None:
    for name in (
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H200",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA L40S",
        "Tesla T4",
        "NVIDIA A10G",
    ):
        assert gpu_is_datacenter(name) is True, name
    for name in ("NVIDIA GeForce RTX 5090", "NVIDIA RTX A6000", "Quadro RTX 8000", "NVIDIA TITAN RTX"):
        assert gpu_is_datacenter(name) is False, name
    assert gpu_is_datacenter("Some Accelerator") is None


def test_forward_compat_is_offered_only_where_it_applies(fixtures_dir: Path) -> None:
    image = parse_image_inspect((fixtures_dir / CU130).read_text())
    offer = forward_compat("13.0", "535.230.02", gpu="NVIDIA H100 80GB HBM3", image=image)
    assert offer.offered and offer.package == "cuda-compat-13-0"
    assert "LTSB" in offer.reason and any("804" in limit for limit in offer.limits)
    geforce = forward_compat("13.0", "535.230.02", gpu="NVIDIA GeForce RTX 4090", image=image)
    assert not geforce.offered and "error 804" in geforce.reason
    nfb = forward_compat("13.0", "560.35.03", gpu="NVIDIA H100 80GB HBM3")
    assert not nfb.offered and "not a branch with forward compatibility support" in nfb.reason
    # r595 is supported, but this image's cuda-compat terms do not name it
    not_named = forward_compat("13.0", "595.45.04", gpu="NVIDIA H100 80GB HBM3", image=image)
    assert not not_named.offered and "r535, r550, r565, r570, r575" in not_named.reason
    assert not forward_compat("13.0", "535.230.02").offered  # GPU unknown: nothing offered


def test_hard_stop_names_forward_compat_as_a_tested_way_out(fixtures_dir: Path) -> None:
    image = parse_image_inspect((fixtures_dir / CU130).read_text())
    verdict = compat_outcome(None, "535.230.02", gpu="NVIDIA H100 80GB HBM3", image=image)
    assert verdict.outcome is CompatOutcome.HARD_STOP and not verdict.gate_open
    assert verdict.image_cuda == "13.0" and "580.65.06" in verdict.reason
    assert verdict.forward_compat is not None and verdict.forward_compat.offered
    assert "forward compatibility: cuda-compat-13-0" in verdict.next_step
    consumer = compat_outcome(None, "535.230.02", gpu="NVIDIA GeForce RTX 4090", image=image)
    assert consumer.outcome is CompatOutcome.HARD_STOP and "cuda-compat" not in consumer.next_step
    assert consumer.image_evidence is not None and "CUDA_VERSION=13.0.3" in consumer.image_evidence


def test_real_cu129_image_env(fixtures_dir: Path) -> None:
    image = parse_image_inspect((fixtures_dir / CU129).read_text())
    assert image.image == "vllm/vllm-openai:v0.16.0"
    assert (image.cuda_version, image.required_cuda, image.cuda) == ("12.9.1", "12.9", "12.9")
    assert image.forward_compat_branches() == [535, 550, 560, 565, 570]
    assert not image.disable_require
    # the capture's node: 2x L40S on 580.119.02 runs it natively
    verdict = compat_outcome(None, "580.119.02", gpu="NVIDIA L40S", image=image)
    assert verdict.outcome is CompatOutcome.COMPATIBLE and verdict.mode is Mode.NATIVE


def test_real_cu130_image_env(fixtures_dir: Path) -> None:
    image = parse_image_inspect((fixtures_dir / CU130).read_text())
    assert (image.cuda_version, image.cuda) == ("13.0.3", "13.0")
    assert image.forward_compat_branches() == [535, 550, 565, 570, 575]
    assert "cuda-compat branches r535, r550, r565, r570, r575" in image.evidence()
    # the capture's node: GeForce RTX 5090 on 580.95.05, natively
    assert compat_outcome(None, "580.95.05", gpu="NVIDIA GeForce RTX 5090", image=image).mode is Mode.NATIVE
    assert compat_outcome(None, "575.57.08", image=image).outcome is CompatOutcome.HARD_STOP


def test_requirement_language_and_bad_input() -> None:
    required, terms = parse_require("cuda>=12.4 driver>=525")
    assert required == "12.4" and terms == []
    required, terms = parse_require("cuda>=11.0 brand=tesla,driver>=418,driver<419")
    assert required == "11.0" and [(t.brand, t.branch) for t in terms] == [("tesla", 418)]
    with pytest.raises(BadInput, match="cannot read the condition"):
        parse_require("cuda>=12.0 gpu!=5")
    with pytest.raises(BadInput, match="not JSON"):
        parse_image_inspect("Error: No such image: vllm/vllm-openai:nope")
    with pytest.raises(BadInput, match="empty list"):
        parse_image_inspect("[]")
    no_cuda = parse_image_inspect('[{"Id": "sha256:ab", "Config": {"Env": ["PATH=/usr/bin"]}}]')
    assert no_cuda.cuda is None and no_cuda.image == "sha256:ab"
    assert compat_outcome(None, "580.65.06", image=no_cuda).outcome is CompatOutcome.UNPINNED_IMAGE
    disabled = parse_image_inspect('[{"Config": {"Env": ["CUDA_VERSION=12.8.1", "NVIDIA_DISABLE_REQUIRE=1"]}}]')
    assert disabled.disable_require and disabled.cuda == "12.8"
