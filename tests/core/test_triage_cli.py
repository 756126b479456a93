"""`cockpit triage` as users run it: exit statuses, text and JSON, the compat gate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def cockpit(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cockpit", *args], input=stdin, capture_output=True, text=True, timeout=60
    )


TABBY = "errors/container-cli_cuda-ge-12.8_driver-550.144.03_tabbyAPI-324.txt"


@pytest.mark.binary
def test_failure_found_exit_1_text(fixtures_dir: Path) -> None:
    result = cockpit("triage", str(fixtures_dir / "errors/smi-no-driver_lyulyul-shine-cluster-50.txt"))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "class: driver-not-loaded  (NVIDIA kernel module)"
    assert lines[1].startswith("line 2: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert lines[2].startswith("hint: nvidia-smi cannot reach the kernel driver")


@pytest.mark.binary
def test_json_with_compat_hard_stop(fixtures_dir: Path) -> None:
    result = cockpit("triage", str(fixtures_dir / TABBY), "--driver", "550.144.03", "--image-cuda", "cu130", "--json")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert (doc["class"], doc["line"]) == ("driver-too-old", 4)
    assert doc["text"].startswith("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8")
    assert doc["required_cuda"] == "12.8"
    assert doc["compat"]["outcome"] == "hard-stop" and doc["compat"]["gate_open"] is False
    assert doc["compat"]["min_driver"] == "580.65.06"


@pytest.mark.binary
def test_compat_values_taken_from_the_log(fixtures_dir: Path) -> None:
    # --image-cuda alone: the driver comes from the nvidia-smi banner pasted in the log
    result = cockpit("triage", str(fixtures_dir / TABBY), "--image-cuda", "12.8", "--json")
    doc = json.loads(result.stdout)
    assert doc["compat"]["driver"] == "550.144.03" and doc["compat"]["outcome"] == "hard-stop"


@pytest.mark.binary
def test_clean_log_exit_0_and_compatible_gate(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("INFO starting\nINFO Uvicorn running on http://0.0.0.0:8000\n")
    result = cockpit("triage", str(log), "--driver", "580.95.05", "--image-cuda", "cu130")
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[:2] == ["class: unknown  (not recognised)", "line: none"]
    assert "compat: compatible: driver 580.95.05 meets the minimum 580.65.06 for CUDA 13.0" in result.stdout
    assert "only the driver's ceiling" in result.stdout


@pytest.mark.binary
def test_clean_log_but_unpinned_image_is_exit_1() -> None:
    result = cockpit("triage", "-", "--unpinned", "--image-cuda", "cu130", "--json", stdin="INFO ok\n")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["line"] is None and doc["compat"]["outcome"] == "unpinned-image"


@pytest.mark.binary
def test_unknown_failure_is_exit_1() -> None:
    result = cockpit("triage", "-", "--json", stdin="INFO ok\nKeyError: 'tokenizer'\n")
    assert result.returncode == 1
    assert json.loads(result.stdout)["line"] == 2


@pytest.mark.binary
def test_bad_input_exit_2(tmp_path: Path) -> None:
    missing = cockpit("triage", str(tmp_path / "absent.log"))
    assert missing.returncode == 2 and missing.stderr == f"cockpit: {tmp_path / 'absent.log'}: no such file\n"
    bad_driver = cockpit("triage", "-", "--driver", "latest", "--image-cuda", "13.0", stdin="")
    assert bad_driver.returncode == 2 and bad_driver.stdout == ""
    assert (
        bad_driver.stderr.startswith("cockpit: not a driver version: 'latest'")
        and len(bad_driver.stderr.splitlines()) == 1
    )
    no_driver = cockpit("triage", "-", "--image-cuda", "13.0", stdin="INFO ok\n")
    assert no_driver.returncode == 2
    assert no_driver.stderr == "cockpit: the compatibility gate needs --driver: the log names no driver version\n"


@pytest.mark.binary
def test_a_bare_number_is_named_in_the_text_and_json(fixtures_dir: Path) -> None:
    log = str(fixtures_dir / "causes/ollama_nvmlInit_v2-err-18_545.29.06_ollama-flake-4.txt")
    text = cockpit("triage", log)
    assert text.returncode == 1, text.stderr
    assert (
        text.stdout.splitlines()[0]
        == "class: driver-library-mismatch  (driver install: userspace and kernel module differ)"
    )
    assert "code: NVML return code 18 = NVML_ERROR_LIB_RM_VERSION_MISMATCH" in text.stdout
    doc = json.loads(cockpit("triage", log, "--json").stdout)
    assert (doc["class"], doc["line"], doc["text"]) == ("driver-library-mismatch", 15, "nvmlInit_v2 err: 18")
    assert doc["code"].endswith("read at line 15")


@pytest.mark.binary
def test_driver_not_visible_from_stdin(fixtures_dir: Path) -> None:
    log = (fixtures_dir / "causes/kserve-vllm_NVML-shared-library-not-found_gpu-requested_kserve-4722.txt").read_text()
    result = cockpit("triage", "-", stdin=log)
    assert result.returncode == 1
    assert result.stdout.startswith("class: driver-not-visible  (container runtime:")
    assert "do not upgrade the driver" in result.stdout
