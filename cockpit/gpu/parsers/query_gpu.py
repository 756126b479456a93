"""``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` -> :class:`SmiFacts`.

With a header, columns are mapped by name (``memory.total [MiB]`` is
``memory.total``); without one the caller passes the field list it asked for.
Fields are matched by their canonical names, so ``gpu_uuid`` and ``uuid`` are the
same column. Values keep or lose their units alike (``--format=csv,nounits``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Sequence

from cockpit.gpu.nodestate import GpuState
from cockpit.gpu.parsers.models import ParseError, SmiFacts
from cockpit.gpu.parsers.values import clean, first_line, to_bool, to_float, to_int

#: What the SSH probe asks every node for, in this order.
PROBE_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "persistence_mode",
    "ecc.errors.uncorrected.volatile.total",
    "mig.mode.current",
    "ecc.mode.current",
    "clocks.applications.graphics",
    "clocks.applications.memory",
    "remapped_rows.pending",
    "remapped_rows.failure",
    # the fabric registration and the PCIe link a GPU trained at (a real capture with both:
    # tests/fixtures/csv/query-gpu_H200_580.173.02_full-fields_utkuozdemir-capture.csv)
    "fabric.state",
    "fabric.status",
    "pcie.link.gen.current",
    "pcie.link.width.current",
)

#: Fields without which a probe tells nothing: a driver refusing one of them is not asked again.
CORE_FIELDS: frozenset[str] = frozenset({"index", "uuid", "driver_version"})

# nvidia-smi's words for a field it does not know, exit status 2 (a real capture:
# CoHDI/composable-resource-operator#37, `Field "device_minor" is not a valid field to query.`)
_UNKNOWN_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')

#: nvidia-smi accepts several names for one property (see ``--help-query-gpu``).
_ALIASES: dict[str, str] = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "persistence-mode": "persistence_mode",
}

#: canonical field -> (GpuState attribute, converter)
_GPU_FIELDS: dict[str, tuple[str, Callable[[str | None], object]]] = {
    "name": ("name", clean),
    "uuid": ("uuid", clean),
    "pci.bus_id": ("bus_id", clean),
    "memory.total": ("memory_total_mib", to_int),
    "memory.used": ("memory_used_mib", to_int),
    "utilization.gpu": ("utilization_pct", to_int),
    "temperature.gpu": ("temperature_c", to_int),
    "power.draw": ("power_draw_w", to_float),
    "power.limit": ("power_limit_w", to_float),
    "persistence_mode": ("persistence_mode", to_bool),
    "ecc.errors.uncorrected.volatile.total": ("ecc_uncorrected", to_int),
    "mig.mode.current": ("mig_mode", to_bool),
    "ecc.mode.current": ("ecc_mode", to_bool),
    "clocks.applications.graphics": ("app_clock_graphics_mhz", to_int),
    "clocks.applications.memory": ("app_clock_memory_mhz", to_int),
    "remapped_rows.pending": ("remapped_rows_pending", to_bool),
    "remapped_rows.failure": ("remapped_rows_failure", to_bool),
    "fabric.state": ("fabric_state", clean),
    "fabric.status": ("fabric_status", clean),
    "pcie.link.gen.current": ("pcie_gen", to_int),
    "pcie.link.width.current": ("pcie_width", to_int),
}

# A header cell: a dotted property name, optionally followed by its unit in brackets.
_HEADER_CELL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*(?:\s*\[[^\]]*\])?$")
_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")


def probe_query_command(fields: Sequence[str] = PROBE_FIELDS) -> list[str]:
    """argv for nvidia-smi asking for ``fields`` (default :data:`PROBE_FIELDS`) without header or units."""
    return ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]


def unknown_query_field(text: str) -> str | None:
    """The field an nvidia-smi refused (``Field "X" is not a valid field to query.``), or None."""
    m = _UNKNOWN_FIELD.search(text)
    return m.group(1) if m else None


def canonical_field(name: str) -> str:
    """``"memory.total [MiB]"`` -> ``"memory.total"``; aliases to their main name."""
    bare = _UNIT.sub("", name.strip()).strip().lower()
    return _ALIASES.get(bare, bare)


def _looks_like_header(cells: Sequence[str]) -> bool:
    if not cells or not all(_HEADER_CELL.match(c.strip()) for c in cells):
        return False
    known = {"index", "driver_version", "timestamp", "count", *(_GPU_FIELDS)}
    return any(canonical_field(c) in known for c in cells)


def _rows(text: str) -> list[list[str]]:
    lines = [line for line in text.lstrip("\ufeff").splitlines() if line.strip()]
    try:
        return [[cell.strip() for cell in row] for row in csv.reader(lines, skipinitialspace=True)]
    except csv.Error as exc:
        raise ParseError(f"not nvidia-smi --query-gpu CSV: {exc}", first_line(text)) from None


def parse_query_gpu(text: str, fields: Sequence[str] | None = None) -> SmiFacts:
    """Parse query-gpu CSV. ``fields`` is required when the output has no header.

    Missing columns, short rows and placeholders become ``None`` with a warning
    where data was lost; raises :class:`ParseError` only for text that is not
    query-gpu CSV at all (an NVML error message, a table, no header and no fields).
    """
    rows = _rows(text)
    if not rows:
        return SmiFacts(warnings=["empty output: no GPU rows"])
    if len(rows) == 1 and len(rows[0]) == 1 and rows[0][0].lower().startswith("no devices were found"):
        return SmiFacts(warnings=["nvidia-smi found no devices"])

    if _looks_like_header(rows[0]):
        columns = [canonical_field(c) for c in rows[0]]
        data = rows[1:]  # a header wins over the caller's field list: it says what the columns are
    elif fields is not None:
        columns = [canonical_field(f) for f in fields]
        data = rows
    else:
        raise ParseError(
            f"not nvidia-smi --query-gpu CSV with a header: {first_line(text)!r} "
            "(for --format=csv,noheader pass the field list)",
            first_line(text),
        )

    width = len(columns)
    warnings: list[str] = []
    if width > 1 and data and all(len(r) <= 1 for r in data):
        raise ParseError(f"not nvidia-smi --query-gpu CSV: {first_line(text)!r}", first_line(text))

    gpus: list[GpuState] = []
    drivers: list[str] = []
    for number, row in enumerate(data, start=1):
        if width > 1 and len(row) <= 1:
            warnings.append(f"row {number}: not a CSV row, skipped: {row[0][:80]!r}")
            continue
        if len(row) < width:
            warnings.append(f"row {number}: {len(row)} of {width} columns (truncated); the rest are N/A")
        elif len(row) > width:
            warnings.append(f"row {number}: {len(row)} columns for {width} fields; extra columns ignored")
        values = dict(zip(columns, row, strict=False))
        gpus.append(_gpu(values, position=len(gpus), number=number, warnings=warnings))
        driver = clean(values.get("driver_version"))
        if driver is not None:
            drivers.append(driver)

    if not gpus and data:
        warnings.append("no GPU rows")
    elif not data:
        warnings.append("header only: no GPU rows")
    if len(set(drivers)) > 1:
        warnings.append(f"rows disagree on the driver version: {', '.join(sorted(set(drivers)))}")
    return SmiFacts(driver_version=drivers[0] if drivers else None, gpus=gpus, warnings=warnings)


def _gpu(values: dict[str, str], *, position: int, number: int, warnings: list[str]) -> GpuState:
    facts: dict[str, object] = {}
    for field, (attribute, convert) in _GPU_FIELDS.items():
        raw = values.get(field)
        value = convert(raw)
        if value is None and clean(raw) is not None:
            warnings.append(f"row {number}: {field} {raw!r} is not a valid value")
        facts[attribute] = value
    index = to_int(values.get("index")) if "index" in values else position
    if index is None:
        warnings.append(f"row {number}: no GPU index, using its position {position}")
        index = position
    return GpuState(index=index, **facts)
