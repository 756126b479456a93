"""`cockpit demo`: the cockpit against the built-in simulated fleet (UI not built yet)."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    print("cockpit demo: the terminal UI and the fleet simulator are not built yet in this version.")
    print("What works today: cockpit check, parse and triage (see README.md).")
    return 0
