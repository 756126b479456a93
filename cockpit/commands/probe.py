"""`cockpit probe`: not built yet."""

from __future__ import annotations

import argparse

from cockpit.errors import CockpitError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    raise CockpitError("'cockpit probe' is not built yet in this version")
