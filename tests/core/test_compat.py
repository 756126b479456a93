"""CUDA/driver table, version helpers and the four compatibility-gate outcomes."""

from __future__ import annotations

import pytest

from cockpit.errors import BadInput
from cockpit.gpu.compat import (
    CEILING_HINT,
    CUDA_MIN_DRIVER,
    CompatOutcome,
    branch,
    compat_outcome,
    cuda_ceiling_ok,
    driver_supports,
    max_cuda_for,
    min_driver_for,
    parse_cuda,
    parse_version,
)


@pytest.mark.parametrize(
    ("cuda", "driver"),
    [
        ("12.0", "525.60.13"),
        ("12.1", "530.30.02"),
        ("12.2", "535.54.03"),
        ("12.3", "545.23.06"),
        ("12.4", "550.54.14"),
        ("12.5", "555.42.02"),
        ("12.6", "560.28.03"),
        ("12.8", "570.26"),
        ("12.9", "575.51.03"),
        ("13.0", "580.65.06"),
        ("13.1", "590.44.01"),
        ("13.2", "595.45.04"),
    ],
)
def test_minimum_driver_table(cuda: str, driver: str) -> None:
    assert CUDA_MIN_DRIVER[cuda] == driver
    assert min_driver_for(cuda) == driver
    assert driver_supports(driver, cuda)  # the minimum itself is enough
    lower = parse_version(driver)
    one_below = ".".join(str(p) for p in (*lower[:-1], lower[-1] - 1))
    assert not driver_supports(one_below, cuda)


def test_version_parsing_and_order() -> None:
    assert parse_version("580.65.06") == (580, 65, 6)
    assert parse_version(" r575 ") == (575,)
    assert parse_version("570.26") < parse_version("570.26.01")
    assert parse_version("580.9.1") < parse_version("580.65.06")  # numeric, not text order
    assert branch("580.173.02") == "580" and branch("r575") == "575"
    for bad in ("", "latest", "580.65.06-1ubuntu1", "5.8.0.1"):
        with pytest.raises(BadInput):
            parse_version(bad)


@pytest.mark.parametrize(
    ("text", "cuda"),
    [
        ("13.0", "13.0"),
        ("13", "13.0"),
        ("12.8.1", "12.8"),
        ("cu130", "13.0"),
        ("cu129", "12.9"),
        ("cu118", "11.8"),
        ("CUDA 12.8", "12.8"),
        ("cuda>=12.8", "12.8"),
        ("12080", "12.8"),
        ("11040", "11.4"),
    ],
)
def test_parse_cuda_spellings(text: str, cuda: str) -> None:
    assert parse_cuda(text) == cuda


def test_parse_cuda_refuses_nonsense() -> None:
    for bad in ("", "cuda", "cu", "thirteen", "13.0.0.0.1x"):
        with pytest.raises(BadInput):
            parse_cuda(bad)


def test_unknown_cuda_is_refused_not_guessed() -> None:
    assert min_driver_for("12.7") is None  # there was no CUDA 12.7
    with pytest.raises(BadInput, match=r"no minimum driver known for CUDA 13\.9"):
        driver_supports("600.1.1", "13.9")


def test_branch_only_driver() -> None:
    assert driver_supports("r580", "13.0") and not driver_supports("r575", "13.0")
    assert driver_supports("r575", "12.9")


def test_max_cuda_for_driver() -> None:
    assert max_cuda_for("575.57.08") == "12.9"
    assert max_cuda_for("580.173.02") == "13.0"
    assert max_cuda_for("550.144.03") == "12.4"  # the tabbyAPI node: 12.4, not 12.8
    assert max_cuda_for("470.86") == "11.4"
    assert max_cuda_for("440.64") is None


def test_ceiling() -> None:
    assert cuda_ceiling_ok("13.0", "cu130")
    assert cuda_ceiling_ok("12.10", "12.9")  # numeric minor order
    assert not cuda_ceiling_ok("12.9", "13.0")
    assert "ceiling" in CEILING_HINT and "does not prove" in CEILING_HINT


def test_outcome_hard_stop_cu130_on_r575() -> None:
    verdict = compat_outcome("cu130", "575.57.08")
    assert verdict.outcome is CompatOutcome.HARD_STOP
    assert not verdict.gate_open
    assert verdict.min_driver == "580.65.06" and verdict.image_cuda == "13.0"
    assert "needs driver 580.65.06 or newer (r580 family)" in verdict.reason
    assert "r575 supports CUDA up to 12.9" in verdict.reason
    assert verdict.next_step.startswith("stop tuning launch flags")
    assert verdict.hint == CEILING_HINT


def test_outcome_compatible_cu130_on_r580() -> None:
    verdict = compat_outcome("13.0", "580.95.05")
    assert verdict.outcome is CompatOutcome.COMPATIBLE and verdict.gate_open
    assert "image integrity, model revision, GPU visibility and topology" in verdict.next_step


def test_outcome_custom_build() -> None:
    verdict = compat_outcome("cu129", "575.57.08", custom_build=True)
    assert verdict.outcome is CompatOutcome.CUSTOM_BUILD and verdict.gate_open
    for record in ("source commit", "PyTorch build", "compiler", "kernel package"):
        assert record in verdict.next_step


def test_custom_build_that_the_driver_cannot_run_is_still_a_hard_stop() -> None:
    assert compat_outcome("cu130", "575.57.08", custom_build=True).outcome is CompatOutcome.HARD_STOP


def test_outcome_unpinned_comes_first() -> None:
    assert compat_outcome("cu130", "575.57.08", image_pinned=False).outcome is CompatOutcome.UNPINNED_IMAGE
    unknown = compat_outcome(None, None)
    assert unknown.outcome is CompatOutcome.UNPINNED_IMAGE and not unknown.gate_open
    assert "pinned image digest" in unknown.next_step


def test_unknown_driver_is_bad_input() -> None:
    with pytest.raises(BadInput, match="driver version is unknown"):
        compat_outcome("cu130", None)
    with pytest.raises(BadInput, match="not a driver version"):
        compat_outcome("cu130", "latest")


def test_outcome_values_are_stable_strings() -> None:
    assert [str(o) for o in CompatOutcome] == ["hard-stop", "compatible", "custom-build", "unpinned-image"]
