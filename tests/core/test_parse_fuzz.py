"""Every parser, on any text or any cut of a real capture: facts or ParseError, nothing else."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.gpu.parsers import KernelModuleFacts, ParseError, SmiFacts
from cockpit.gpu.parsers.proc_version import parse_proc_version
from cockpit.gpu.parsers.query_gpu import PROBE_FIELDS, parse_query_gpu
from cockpit.gpu.parsers.smi_table import parse_smi_table
from cockpit.gpu.parsers.smi_version import parse_smi_version
from cockpit.gpu.parsers.smi_xml import parse_smi_xml

# as tests/conftest.py finds them (a test cannot import conftest in importlib mode)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

PARSERS: dict[str, tuple[Callable[[str], SmiFacts | KernelModuleFacts], str]] = {
    "query-gpu": (parse_query_gpu, "csv/query-gpu_H200_580.173.02_full-fields_utkuozdemir-capture.csv"),
    "query-gpu-noheader": (
        lambda t: parse_query_gpu(t, PROBE_FIELDS),
        "csv/query-gpu_H200_580.173.02_full-fields_utkuozdemir-capture.csv",
    ),
    "smi-xml": (parse_smi_xml, "xml/a100-sxm4-80gb_MIG_535.54.03_cuda12.2_telegraf-a100-sxm4-v12.xml"),
    "smi-table": (parse_smi_table, "table/nvidia-smi_8xH100-SXM_565.57.01_thamada-nvsim.txt"),
    "proc-version": (parse_proc_version, "proc_version/open-565.57.01_ubuntu24.04_nixGL-186.txt"),
    "smi-version": (parse_smi_version, "misc/nvidia-smi--version_H200_580.173.02_utkuozdemir-capture.txt"),
}


def _outcome(parse: Callable[[str], SmiFacts | KernelModuleFacts], text: str) -> None:
    try:
        facts = parse(text)
    except ParseError as exc:
        assert str(exc) and "\n" not in str(exc)  # one line for the CLI
    else:
        assert isinstance(facts, SmiFacts | KernelModuleFacts)


@pytest.mark.parametrize("name", list(PARSERS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text())
def test_any_text(name: str, text: str) -> None:
    _outcome(PARSERS[name][0], text)


@pytest.mark.parametrize("name", list(PARSERS))
@settings(max_examples=60, deadline=None)
@given(cut=st.floats(min_value=0.0, max_value=1.0), junk=st.text(max_size=20))
def test_any_cut_of_a_real_capture(name: str, cut: float, junk: str) -> None:
    parse, fixture = PARSERS[name]
    text = (FIXTURES / fixture).read_text()
    _outcome(parse, text[: int(len(text) * cut)] + junk)
