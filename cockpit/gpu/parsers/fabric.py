"""The NVLink fabric in the tools' own words: ``nvidia-smi nvlink -s``, NVSwitch ``SXid``
kernel-log lines and ``lsmod`` (for ``nvidia_peermem``).

Real captures in ``tests/fixtures/fabric/`` (their sources in ``tests/fixtures/README.md``).
"""

from __future__ import annotations

import re

from cockpit.gpu.nodestate import NvlinkGpu, SxidEvent

# "GPU 3: Tesla V100-SXM2-32GB (UUID: ...)" then "\t Link 3: <inactive>" / "\t Link 0: 25.781 GB/s"
_GPU = re.compile(r"^GPU (\d+): ")
_LINK = re.compile(r"^\s+Link (\d+): (.+?)\s*$")
_SPEED = re.compile(r"\d+(\.\d+)? GB/s")

# nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt
# nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Fatal, Link 30 LTSSM Fault Up
_SXID = re.compile(r"SXid \((?:PCI:)?(?P<dev>[0-9A-Fa-f:.]+)\): (?P<code>\d+), (?P<rest>.*)$")


def parse_nvlink_status(text: str) -> list[NvlinkGpu]:
    """Each GPU's active and inactive links. A link that shows no speed (``<inactive>``, or
    anything but ``N GB/s``) counts as inactive: a link is up only when it says how fast."""
    # counted in plain lists, the models made once at the end (not a model attribute set
    # per link: 8 GPUs x 18 links in every platform probe of every node of a wave)
    gpus: list[tuple[int, list[int], list[int]]] = []  # (index, [active count], inactive links)
    for line in text.splitlines():
        m = _GPU.match(line)
        if m:
            gpus.append((int(m.group(1)), [0], []))
            continue
        link = _LINK.match(line)
        if link and gpus:
            _, active, inactive = gpus[-1]
            if _SPEED.fullmatch(link.group(2)):
                active[0] += 1
            else:
                inactive.append(int(link.group(1)))
    return [NvlinkGpu(index=index, active=active[0], inactive=inactive) for index, active, inactive in gpus]


def parse_sxids(text: str) -> list[SxidEvent]:
    """One event per (switch, SXid code), fatal as the FM User Guide's SXid appendix splits
    them: the driver writes "Fatal" or "Non-fatal" on one of the lines an SXid logs (the
    others carry its data); a code none of whose lines says which is counted fatal."""
    seen: dict[tuple[str, int], SxidEvent] = {}
    severity: dict[tuple[str, int], bool | None] = {}
    for line in text.splitlines():
        m = _SXID.search(line)
        if not m:
            continue
        key = (m.group("dev"), int(m.group("code")))
        word = m.group("rest").split(",", 1)[0].strip().lower()
        said = True if word == "fatal" else False if word == "non-fatal" else None
        if key not in seen:
            seen[key] = SxidEvent(code=key[1], device=key[0], fatal=True, text=line[m.start() :].strip())
            severity[key] = None
        if said is not None:
            before = severity[key]
            severity[key] = said or bool(before)
            if said:
                seen[key] = seen[key].model_copy(update={"text": line[m.start() :].strip()})
    return [ev.model_copy(update={"fatal": severity[k] is not False}) for k, ev in seen.items()]


def peermem_loaded(text: str) -> bool | None:
    """``lsmod`` filtered to the nvidia modules: whether nvidia_peermem is loaded; None when
    not even ``nvidia`` is listed (no driver loaded, or lsmod unreadable: nothing known)."""
    names = {line.split()[0] for line in text.splitlines() if line.strip()}
    if "nvidia" not in names:
        return None
    return "nvidia_peermem" in names
