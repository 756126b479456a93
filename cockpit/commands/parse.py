"""`cockpit parse KIND FILE|-`: turn pasted nvidia-smi or /proc output into node facts.

Prints a readable summary, or with ``--json`` one JSON document. Exit 0 when the
text parsed (warnings go to stderr), 2 when the file is missing or the text is not
that format at all (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.gpu.parsers import KernelModuleFacts, SmiFacts

KINDS = ("query-gpu", "smi-xml", "smi-table", "proc-version", "smi-version")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=KINDS, metavar="KIND", help=f"the output's format: {', '.join(KINDS)}")
    parser.add_argument("file", metavar="FILE", help="the captured output, or - for stdin")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--fields",
        metavar="LIST",
        help="query-gpu without a header (csv,noheader): the comma-separated --query-gpu field list",
    )


def read_source(path: str) -> str:
    """The text of FILE, or of stdin for ``-``; :class:`BadInput` if it cannot be read."""
    from pathlib import Path

    from cockpit.errors import read_user_file

    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    return read_user_file(Path(path), "a capture file").decode("utf-8", errors="replace")


def run(args: argparse.Namespace) -> int:
    import json

    from cockpit.errors import BadInput
    from cockpit.gpu.parsers.proc_version import parse_proc_version
    from cockpit.gpu.parsers.query_gpu import parse_query_gpu
    from cockpit.gpu.parsers.smi_table import parse_smi_table
    from cockpit.gpu.parsers.smi_version import parse_smi_version
    from cockpit.gpu.parsers.smi_xml import parse_smi_xml
    from cockpit.view.inert import inert

    if args.fields is not None and args.kind != "query-gpu":
        raise BadInput("--fields applies to query-gpu only")
    text = read_source(args.file)
    label = "stdin" if args.file == "-" else args.file
    try:
        if args.kind == "query-gpu":
            fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
            facts: SmiFacts | KernelModuleFacts = parse_query_gpu(text, fields)
        elif args.kind == "smi-xml":
            facts = parse_smi_xml(text)
        elif args.kind == "smi-table":
            facts = parse_smi_table(text)
        elif args.kind == "smi-version":
            facts = parse_smi_version(text)
        else:
            facts = parse_proc_version(text)
    except BadInput as exc:
        raise BadInput(f"{label}: {exc}") from None

    if args.json:
        document: dict[str, object] = {"kind": args.kind, "source": label, **facts.model_dump(mode="json")}
        if hasattr(facts, "gpus"):
            document["gpu_count"] = len(facts.gpus)
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(inert(render(facts), newlines=True))
        for warning in facts.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    return 0


def render(facts: SmiFacts | KernelModuleFacts) -> str:
    """A plain-text summary: one header line, then one row per GPU."""
    from cockpit.gpu.nodestate import show
    from cockpit.gpu.parsers import KernelModuleFacts

    if isinstance(facts, KernelModuleFacts):
        lines = [
            f"kernel module {show(facts.version)} ({show(facts.flavour)})",
            f"  build {show(facts.build_info)}",
            f"  gcc   {show(facts.gcc)}",
        ]
        return "\n".join(lines) + "\n"

    def pair(a: object, b: object) -> str:
        return "N/A" if a is None and b is None else f"{show(a)} / {show(b)}"

    def flag(value: bool | None) -> str:
        return "N/A" if value is None else ("on" if value else "off")

    head = (
        f"driver {show(facts.driver_version)}  CUDA {show(facts.cuda_version)} (the driver's ceiling)  "
        f"GPUs {len(facts.gpus)}"
    )
    if not facts.gpus:
        return head + "\n"
    columns = (
        "GPU",
        "name",
        "bus id",
        "memory MiB used/total",
        "util %",
        "temp C",
        "power W draw/limit",
        "persist",
        "ECC",
        "MIG",
    )
    rows = [
        (
            str(g.index),
            show(g.name),
            show(g.bus_id),
            pair(g.memory_used_mib, g.memory_total_mib),
            show(g.utilization_pct),
            show(g.temperature_c),
            pair(g.power_draw_w, g.power_limit_w),
            flag(g.persistence_mode),
            show(g.ecc_uncorrected),
            flag(g.mig_mode),
        )
        for g in facts.gpus
    ]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in (columns, *rows)]
    return "\n".join([head, *table]) + "\n"
