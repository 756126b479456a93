"""Which kernel module flavour a node's GPUs can run, from their model names.

NVIDIA's statement ("NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules",
developer.nvidia.com/blog, July 2024, "Supported GPUs"): Grace Hopper and Blackwell run
only the open GPU kernel modules, the proprietary ones are unsupported there; Maxwell,
Pascal and Volta are not supported by the open modules; Turing, Ampere, Ada Lovelace and
Hopper run either. A node whose GPUs need both has no flavour that serves all of them.

The names are matched as ``nvidia-smi -L`` prints them; a model matched by neither list
needs nothing of the flavour (an unknown model is not refused on a guess).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

OPEN = "open"
PROPRIETARY = "proprietary"

#: Blackwell (B100, B200, B300, GB200, GB300, RTX PRO Blackwell, GeForce RTX 50) and Grace Hopper (GH200)
_OPEN_ONLY = re.compile(r"\b(?:G?B[123]00|GH200|RTX PRO \d{4} Blackwell|RTX 50\d0)\b", re.IGNORECASE)
#: Maxwell (M-series Tesla, GTX 9xx), Pascal (P100, P40, P4, GTX 10xx, TITAN X/Xp), Volta (V100, TITAN V, GV100)
_PROPRIETARY_ONLY = re.compile(
    r"\b(?:Tesla M\d+|M\d{2}|GTX 9\d0|P100|P40|P4|P6|GTX 10\d0|TITAN Xp?|V100S?|TITAN V|GV100|Quadro [MP]\d+)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class FlavourNeed:
    """What the GPUs ask of the kernel modules: ``open``, ``proprietary``, either (None), or
    nothing at all (``conflict``: one GPU needs each), with the models that decided it."""

    required: str | None
    models: tuple[str, ...] = ()
    conflict: bool = False


def flavour_need(models: Iterable[str]) -> FlavourNeed:
    names = [m for m in models if m]
    open_only = tuple(m for m in names if _OPEN_ONLY.search(m))
    proprietary_only = tuple(m for m in names if _PROPRIETARY_ONLY.search(m) and m not in open_only)
    if open_only and proprietary_only:
        return FlavourNeed(None, open_only + proprietary_only, conflict=True)
    if open_only:
        return FlavourNeed(OPEN, open_only)
    if proprietary_only:
        return FlavourNeed(PROPRIETARY, proprietary_only)
    return FlavourNeed(None)


def is_open(flavour: str | None) -> bool | None:
    """Whether a driver flavour (proprietary, open, server, server-open) loads the open modules."""
    if not flavour:
        return None
    return flavour.endswith("open")
