"""``nvidia-smi -q -x`` (XML, DTD v10 to v13) -> :class:`SmiFacts`.

Parsed with :mod:`xml.etree.ElementTree` through a pull parser, so a capture cut
short still yields the GPUs read so far (with a warning). The ``DOCTYPE`` line
names an external DTD; expat never fetches it, and text declaring entities is
refused outright (nvidia-smi never declares any; entity expansion is the usual
way hostile XML hurts a parser).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from cockpit.gpu.nodestate import GpuState
from cockpit.gpu.parsers.models import ParseError, SmiFacts
from cockpit.gpu.parsers.values import clean, first_line, to_bool, to_float, to_int

_ENTITY = re.compile(r"<!ENTITY", re.IGNORECASE)
_ROOT = "nvidia_smi_log"


def _text(element: ET.Element | None, *paths: str) -> str | None:
    """The first path under ``element`` that holds a value (not a placeholder)."""
    if element is None:
        return None
    for path in paths:
        found = element.find(path)
        if found is not None and clean(found.text) is not None:
            return found.text
    return None


def _ecc_uncorrected(gpu: ET.Element) -> int | None:
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None
    # DTD v10 and older: single_bit/double_bit blocks with a total each
    double_bit = to_int(_text(volatile, "double_bit/total"))
    if double_bit is not None:
        return double_bit
    # v11+: per memory kind; the *_parity/_secded children split sram_uncorrectable, so not summed
    parts = [to_int(_text(volatile, name)) for name in ("sram_uncorrectable", "dram_uncorrectable")]
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


def _gpu(element: ET.Element, index: int) -> GpuState:
    power = element.find("gpu_power_readings")
    if power is None:
        power = element.find("power_readings")  # DTD v11 and older
    return GpuState(
        index=index,
        name=clean(_text(element, "product_name")),
        uuid=clean(_text(element, "uuid")),
        bus_id=clean(_text(element, "pci/pci_bus_id")) or clean(element.get("id")),
        memory_total_mib=to_int(_text(element, "fb_memory_usage/total")),
        memory_used_mib=to_int(_text(element, "fb_memory_usage/used")),
        utilization_pct=to_int(_text(element, "utilization/gpu_util")),
        temperature_c=to_int(_text(element, "temperature/gpu_temp")),
        power_draw_w=to_float(_text(power, "power_draw", "instant_power_draw", "average_power_draw")),
        power_limit_w=to_float(_text(power, "current_power_limit", "power_limit", "enforced_power_limit")),
        persistence_mode=to_bool(_text(element, "persistence_mode")),
        ecc_uncorrected=_ecc_uncorrected(element),
        mig_mode=to_bool(_text(element, "mig_mode/current_mig")),
    )


def _elements(parser: ET.XMLPullParser[ET.Element]) -> list[tuple[str, ET.Element]]:
    """The queued start/end events (only those are asked for, so each carries an element)."""
    queued: list[tuple[str, ET.Element]] = []
    for entry in parser.read_events():
        if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], ET.Element):
            queued.append((str(entry[0]), entry[1]))
    return queued


def _drain(parser: ET.XMLPullParser[ET.Element]) -> list[tuple[str, ET.Element]]:
    """Events still queued after an error (normally none)."""
    try:
        return _elements(parser)
    except ET.ParseError:
        return []


def parse_smi_xml(text: str) -> SmiFacts:
    """Parse ``nvidia-smi -q -x``; raise :class:`ParseError` if it is not that XML."""
    if not text.strip():
        return SmiFacts(warnings=["empty output: no GPU rows"])
    if _ENTITY.search(text):
        raise ParseError("refusing XML that declares entities (nvidia-smi never does)", first_line(text))

    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    root: ET.Element | None = None
    gpus: list[ET.Element] = []
    complete: set[int] = set()  # ids of <gpu> elements whose end tag was read
    warnings: list[str] = []
    events: list[tuple[str, ET.Element]] = []
    broken = ""
    try:
        # the pull parser queues a syntax error among the events; read up to it
        parser.feed(text.lstrip("\ufeff"))
        events.extend(_elements(parser))
        parser.close()
        events.extend(_elements(parser))
    except ET.ParseError as exc:
        broken = str(exc)
        events.extend(_drain(parser))
    for event, element in events:
        if root is None and event == "start":
            root = element
            if element.tag != _ROOT:
                raise ParseError(f"not nvidia-smi -q -x output: root element <{element.tag}>", first_line(text))
        elif event == "start" and element.tag == "gpu" and root is not None and element in list(root):
            gpus.append(element)
        elif event == "end" and element.tag == "gpu":
            complete.add(id(element))
    if root is None:
        raise ParseError(f"not nvidia-smi -q -x output: {broken or 'no XML element'}", first_line(text))
    if broken:
        warnings.append(f"XML cut short or malformed ({broken}); kept what was read, the rest is N/A")
        for number, gpu in enumerate(gpus):
            if id(gpu) not in complete:
                warnings.append(f"GPU {number}: its block is incomplete")

    facts = [_gpu(gpu, number) for number, gpu in enumerate(gpus)]
    attached = to_int(_text(root, "attached_gpus"))
    if attached is not None and attached != len(facts) and not broken:
        warnings.append(f"attached_gpus says {attached} but {len(facts)} <gpu> blocks are present")
    return SmiFacts(
        driver_version=clean(_text(root, "driver_version")),
        cuda_version=clean(_text(root, "cuda_version")),
        gpus=facts,
        warnings=warnings,
    )
