"""The default ``nvidia-smi`` table -> :class:`SmiFacts`.

Handles the wide layout (drivers 530 and later, 89 columns) and the older
79-column one alike by splitting each row on ``|`` into its three cells; a GPU
is two rows (name/bus/ECC, then fan/temp/power/memory/utilisation) plus, from
driver 450 on, a third with the MIG mode. A table cut short keeps what it shows
and says what is missing in ``warnings``. Processes and MIG device tables are not
node facts and are skipped.
"""

from __future__ import annotations

import re

from cockpit.gpu.nodestate import GpuState
from cockpit.gpu.parsers.models import ParseError, SmiFacts
from cockpit.gpu.parsers.values import clean, first_line, to_bool, to_float, to_int

_BANNER = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+Driver Version:\s*(?P<driver>\S+)(?:\s+CUDA Version:\s*(?P<cuda>[^\s|]+))?"
)
_SEPARATOR = re.compile(r"^\s*[+|][-=+| ]*$")
_HEADER_END = re.compile(r"^\s*\|=+[+|]")
# first row of a GPU: "   0  NVIDIA H200                    On  " (name may be cut to "A100-SXM...")
_ROW1_LEFT = re.compile(r"^\s*(?P<index>\d+)\s+(?P<name>.*?)\s+(?P<persistence>On|Off|N/A)\s*$")
_ROW1_MIDDLE = re.compile(
    r"^\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*(?P<disp>\S+)?\s*$"
)
# second row: "N/A   37C    P0             85W /  700W"
_ROW2_LEFT = re.compile(r"^\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<draw>\S+)\s*/\s*(?P<cap>\S+)\s*$")
_ROW2_MIDDLE = re.compile(r"^\s*(?P<used>\S+)\s*/\s*(?P<total>\S+)\s*$")
_ROW2_RIGHT = re.compile(r"^\s*(?P<util>\S+)(?:\s+(?P<compute>\S.*?))?\s*$")


def _cells(line: str) -> list[str]:
    """``| a | b | c |`` -> ``[" a ", " b ", " c "]``; a row cut short gives fewer cells."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return body.split("|")


def _match(pattern: re.Pattern[str], cells: list[str], position: int) -> re.Match[str] | None:
    return pattern.match(cells[position]) if position < len(cells) else None


class _Gpu:
    """A GPU block being read, row by row."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.facts: dict[str, object] = {}
        self.rows = 0

    def first(self, cells: list[str], left: re.Match[str]) -> None:
        self.rows = 1
        self.facts["name"] = clean(left["name"])
        self.facts["persistence_mode"] = to_bool(left["persistence"])
        middle = _match(_ROW1_MIDDLE, cells, 1)
        self.facts["bus_id"] = middle["bus"] if middle else None
        self.facts["ecc_uncorrected"] = to_int(cells[2]) if len(cells) > 2 else None

    def second(self, cells: list[str]) -> None:
        self.rows = 2
        left = _match(_ROW2_LEFT, cells, 0)
        if left:
            self.facts["temperature_c"] = to_int(left["temp"])
            self.facts["power_draw_w"] = to_float(left["draw"])
            self.facts["power_limit_w"] = to_float(left["cap"])
        middle = _match(_ROW2_MIDDLE, cells, 1)
        if middle:
            self.facts["memory_used_mib"] = to_int(middle["used"])
            self.facts["memory_total_mib"] = to_int(middle["total"])
        right = _match(_ROW2_RIGHT, cells, 2)
        if right:
            self.facts["utilization_pct"] = to_int(right["util"])

    def third(self, cells: list[str]) -> None:
        self.rows = 3
        self.facts["mig_mode"] = to_bool(cells[2]) if len(cells) > 2 else None

    def state(self) -> GpuState:
        return GpuState(index=self.index, **self.facts)


def parse_smi_table(text: str) -> SmiFacts:
    """Parse the default ``nvidia-smi`` table; :class:`ParseError` if it is not one."""
    lines = text.lstrip("\ufeff").splitlines()
    if not any(line.strip() for line in lines):
        return SmiFacts(warnings=["empty output: no GPU rows"])
    if first_line(text).lower().startswith("no devices were found"):
        return SmiFacts(warnings=["nvidia-smi found no devices"])

    driver = cuda = None
    banner_at = None
    for number, line in enumerate(lines):
        found = _BANNER.search(line)
        if found:
            driver, cuda, banner_at = clean(found["driver"]), clean(found["cuda"]), number
            break
    start = next((n + 1 for n, line in enumerate(lines) if _HEADER_END.match(line)), None)
    if banner_at is None and start is None:
        raise ParseError(f"not an nvidia-smi table: {first_line(text)!r}", first_line(text))

    warnings: list[str] = []
    if start is None:
        warnings.append("table cut short before the GPU rows")
        return SmiFacts(driver_version=driver, cuda_version=cuda, warnings=warnings)

    gpus: list[_Gpu] = []
    current: _Gpu | None = None
    closed = False
    for line in lines[start:]:
        if not line.strip() or not line.lstrip().startswith(("|", "+")):
            closed = True  # the GPU table ends at the blank line before Processes/MIG devices
            break
        if _SEPARATOR.match(line):
            current = None
            continue
        cells = _cells(line)
        left = _ROW1_LEFT.match(cells[0])
        if left and (current is None or current.rows >= 2):
            current = _Gpu(int(left["index"]))
            current.first(cells, left)
            gpus.append(current)
        elif current is not None and current.rows == 1:
            current.second(cells)
        elif current is not None and current.rows == 2 and not cells[0].strip():
            current.third(cells)
        else:
            warnings.append(f"unexpected row in the GPU table: {line.strip()[:80]!r}")

    if not closed:
        last = lines[-1].strip() if lines else ""
        if not _SEPARATOR.match(last) or not last.startswith("+"):
            warnings.append("table cut short inside the GPU rows; missing values are N/A")
    for gpu in gpus:
        if gpu.rows < 2:
            warnings.append(f"GPU {gpu.index}: only its first row is present")
        name = gpu.facts.get("name")
        if isinstance(name, str) and name.endswith("..."):
            warnings.append(f"GPU {gpu.index}: the table cut its name to {name!r}")
    if not gpus:
        warnings.append("no GPU rows in the table")
    return SmiFacts(driver_version=driver, cuda_version=cuda, gpus=[g.state() for g in gpus], warnings=warnings)
