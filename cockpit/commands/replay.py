"""`cockpit replay SESSION [--cast FILE]`: a saved change window as it unfolded.

Interactive by default (the cockpit's panes driven by the recorded events); with
``--cast FILE`` no UI opens: every moment is rendered to an asciicast v2 file.
Read-only either way: the file is read once and never opened for writing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", type=Path, metavar="SESSION", help="the session file (sessions/<change-id>.toml)")
    parser.add_argument(
        "--cast", type=Path, metavar="FILE", help="write an asciicast v2 file instead of opening the UI"
    )
    parser.add_argument("--width", type=int, default=120, metavar="COLS", help="cast width (default 120)")
    parser.add_argument("--height", type=int, default=40, metavar="ROWS", help="cast height (default 40)")
    parser.add_argument(
        "--max-gap",
        type=float,
        default=2.0,
        metavar="S",
        help="idle gaps longer than this play as this many seconds (default 2)",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="X",
        help="cast: play this many times faster (default 1); interactive: starting speed",
    )


def run(args: argparse.Namespace) -> int:
    from cockpit.changelog.verify import read_verified
    from cockpit.errors import BadInput
    from cockpit.session.judged import judged_integrity
    from cockpit.session.review import session_runbook
    from cockpit.view.inert import inert

    log, verification = read_verified(args.session)  # a newer schema: one line; a damaged log: read past it
    loaded = session_runbook(log.header, args.session)
    integrity = judged_integrity(log, verification, loaded, Path(args.session))
    if args.cast is not None:
        from cockpit.view.cast import write_cast

        summary = write_cast(
            log, loaded.runbook, args.cast, width=args.width, height=args.height, max_gap=args.max_gap, speed=args.speed
        )
        print(inert(f"change log: {integrity}"))
        if log.torn is not None:
            print(inert(f"cockpit: warning: {args.session}: {log.torn.describe()}"), file=sys.stderr)
        print(
            f"wrote {summary.path}: {summary.events} events, {summary.frames} frames, {summary.markers} markers, "
            f"{summary.duration_s:.1f}s (play it with 'asciinema play {summary.path}')"
        )
        return 0
    if args.speed not in (1, 2, 4, 8, 16, 32, 64):
        raise BadInput("--speed for the interactive replay is one of 1, 2, 4, 8, 16, 32, 64")
    from cockpit.commands.terminal import require_terminal

    require_terminal("replay", (f"cockpit replay {args.session} --cast FILE", "a recording"))
    from screens.replay import run_replay

    return run_replay(log, loaded, speed=int(args.speed), max_gap=args.max_gap, integrity=integrity)
