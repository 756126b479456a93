"""`cockpit triage LOGFILE`: the first failing line of a log, its class and a hint.

With ``--driver`` and/or ``--image-cuda`` it also runs the compatibility gate; a
value not given is taken from the log when the log names it (a driver version, a
``cuda>=`` requirement). Exit 0 when the log shows no failing line and the gate (if
asked) is open; 1 when a failing line was found (any class, ``unknown`` included)
or the gate is closed; 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.gpu.compat import CompatVerdict
    from cockpit.gpu.triage import TriageResult


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logfile", metavar="LOGFILE", help="an engine or container log, or - for stdin")
    parser.add_argument("--driver", metavar="VER", help="the node's driver version (580.65.06 or r580)")
    parser.add_argument("--image-cuda", metavar="VER", help="the image's CUDA build (13.0 or cu130)")
    parser.add_argument(
        "--image-inspect",
        metavar="FILE",
        help="docker image inspect output of the image (its NVIDIA_REQUIRE_CUDA / CUDA_VERSION give its CUDA)",
    )
    parser.add_argument(
        "--gpu", metavar="NAME", help="the node's GPU model, for forward compatibility (NVIDIA H100 80GB HBM3)"
    )
    parser.add_argument("--custom-build", action="store_true", help="the image is a self-built one (compat outcome 3)")
    parser.add_argument(
        "--unpinned", action="store_true", help="the image is a floating tag, not a digest (compat outcome 4)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    import json

    from cockpit.commands.parse import read_source
    from cockpit.errors import BadInput
    from cockpit.gpu.compat import compat_outcome, parse_cuda, parse_version
    from cockpit.gpu.image_env import parse_image_inspect
    from cockpit.gpu.triage import triage
    from cockpit.view.inert import inert

    # what is typed is checked before anything is read: a verdict on "banana" would mean nothing
    if args.driver is not None:
        parse_version(args.driver)
    if args.image_cuda is not None:
        parse_cuda(args.image_cuda)
    if args.image_inspect is not None and args.image_inspect == "-" and args.logfile == "-":
        raise BadInput("--image-inspect - and LOGFILE - cannot both read stdin")
    image = parse_image_inspect(read_source(args.image_inspect)) if args.image_inspect is not None else None
    result = triage(read_source(args.logfile))
    verdict = None
    if args.driver or args.image_cuda or args.custom_build or args.unpinned or image is not None:
        driver = args.driver or result.driver_version
        # what is typed wins, then what the image says of itself, then what the log says
        image_cuda = args.image_cuda or (image.cuda if image is not None else None) or result.required_cuda
        if driver is None and image_cuda is not None and not args.unpinned:
            raise BadInput("the compatibility gate needs --driver: the log names no driver version")
        verdict = compat_outcome(
            image_cuda,
            driver,
            custom_build=args.custom_build,
            image_pinned=not args.unpinned,
            gpu=args.gpu,
            image=image,
        )

    if args.json:
        document = result.as_json()
        if verdict is not None:
            document["compat"] = {**verdict.model_dump(mode="json"), "gate_open": verdict.gate_open}
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(inert(render(result, verdict), newlines=True))  # the log lines quoted are hostile text
    return 1 if result.failed or (verdict is not None and not verdict.gate_open) else 0


def render(result: TriageResult, verdict: CompatVerdict | None) -> str:
    lines = [f"class: {result.cls}  ({result.subsystem})"]
    if result.line is None:
        lines.append("line: none")
    else:
        lines.append(f"line {result.line}: {result.text}")
    lines.append(f"hint: {result.hint}")
    if result.code:
        lines.append(f"code: {result.code}")  # a bare status number, named
    for evidence in result.evidence[1:]:
        lines.append(f"also: {evidence.cls} at line {evidence.line}")
    facts = [
        f"{label} {value}"
        for label, value in (
            ("needs CUDA", result.required_cuda),
            ("driver", result.driver_version),
            ("driver CUDA ceiling", result.driver_cuda),
        )
        if value
    ]
    if facts:
        lines.append("facts: " + "; ".join(facts))
    if verdict is not None:
        lines.append(f"compat: {verdict.outcome}: {verdict.reason}")
        if verdict.image_evidence:
            lines.append(f"  image: {verdict.image_evidence}")
        lines.extend(f"  limit: {limit}" for limit in verdict.limits)
        if verdict.forward_compat is not None:
            offered = "offered" if verdict.forward_compat.offered else "not offered"
            lines.append(f"  forward compatibility {offered}: {verdict.forward_compat.reason}")
        lines.append(f"  next: {verdict.next_step}")
        lines.append(f"  note: {verdict.hint}")
    return "\n".join(lines) + "\n"
