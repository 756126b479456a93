"""Split a fleet into the runbook's waves: canary first, then the fixed sizes, then ``rest``.

A runbook whose ``rest`` is 0 has only its fixed waves; a fleet larger than their sum
is refused here, at plan time, rather than silently leaving nodes out of the change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from cockpit.errors import BadInput
from cockpit.runbook.model import Waves

_INT_TEXT = re.compile(r"-?[0-9]+")


def resolve_int(value: int | str, params: Mapping[str, object], what: str = "value") -> int:
    """``value`` itself, or the value of the int parameter it names.

    A parameter given on the command line may still be its text (``"4"``); digits are
    accepted, anything else is refused with :class:`BadInput` naming ``what``.
    """
    if isinstance(value, bool):
        raise BadInput(f"{what}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if value not in params:
        raise BadInput(f"{what}: names parameter {value!r}, which has no value")
    resolved = params[value]
    if isinstance(resolved, str) and _INT_TEXT.fullmatch(resolved.strip()):
        return int(resolved.strip())
    if isinstance(resolved, bool) or not isinstance(resolved, int):
        raise BadInput(f"{what}: parameter {value} must be an integer, got {resolved!r}")
    return resolved


def plan_waves(hosts: Sequence[str], waves: Waves, params: Mapping[str, object]) -> list[list[str]]:
    """The hosts in wave order: ``waves.sizes`` first, then chunks of ``waves.rest``.

    Raises :class:`BadInput` for an empty fleet, a host listed twice, a ``rest`` that is
    not a positive size when nodes remain, or a fleet the waves do not cover.
    """
    if not hosts:
        raise BadInput("no hosts to plan: give at least one node")
    seen: set[str] = set()
    for host in hosts:
        if host in seen:
            raise BadInput(f"host {host} is listed twice")
        seen.add(host)
    plan: list[list[str]] = []
    pos = 0
    for size in waves.sizes:
        if pos >= len(hosts):
            break
        plan.append(list(hosts[pos : pos + size]))
        pos += size
    remaining = len(hosts) - pos
    if remaining > 0:
        rest = resolve_int(waves.rest, params, "waves.rest")
        if rest < 1:
            covered = sum(waves.sizes)
            raise BadInput(
                f"{len(hosts)} hosts but this runbook's waves cover only {covered} "
                f"(sizes {waves.sizes}, no later waves): give at most {covered} hosts or set waves.rest"
            )
        while pos < len(hosts):
            plan.append(list(hosts[pos : pos + rest]))
            pos += rest
    return plan
