"""The ``cockpit`` command line: parse arguments, dispatch to one command module.

Each subcommand lives in ``cockpit/commands/<name>.py`` with two functions:
``configure(parser)`` adds its arguments (importing nothing heavy) and
``run(args) -> int`` does the work, importing what it needs inside. So
``cockpit probe`` never pays for Textual, and only the UI commands import
``screens``. Exit statuses: 0 success, 1 the job ran and found problems,
2 bad input (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from cockpit import __version__
from cockpit.errors import BadInput, CockpitError, error_line

#: subcommand -> one-line help. Order is the order ``--help`` lists them.
COMMANDS: dict[str, str] = {
    "demo": "run the cockpit against the built-in simulated fleet",
    "run": "open a change window against real nodes over SSH",
    "resume": "reopen a saved session where it stopped",
    "end": "end a change window with its outcome (q in the cockpit only pauses it)",
    "watch": "after a window ended, keep its triggers armed on the changed nodes and tell people what fires",
    "pair": "start the cockpit in tmux and print the reviewer's join commands",
    "review": "follow a live session as a reviewer and sign off gates",
    "replay": "replay a saved session as it unfolded",
    "export": "export a change log to a ticket (markdown, jira, jira-adf, servicenow)",
    "verify": "check a change log's hash chain and signatures; exit 0, or 1 naming the first failing seq",
    "check": "validate a runbook; exit 0, or 2 with every problem",
    "probe": "probe nodes headless and print their driver state",
    "parse": "parse pasted nvidia-smi or /proc/driver/nvidia/version output",
    "triage": "find and classify the first failing line of an engine or container log",
    "sim": "run the fleet simulator alone",
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise BadInput(f"{self.prog}: {message}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand, and the arguments of ``command`` (default: of all of them).

    Configuring a subcommand imports its module; parsing one command line needs only
    that one's (``--help`` lists them all from :data:`COMMANDS`)."""
    parser = _Parser(prog="cockpit", description="GPU driver change-window cockpit")
    parser.add_argument("--version", action="version", version=f"cockpit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_text in COMMANDS.items():
        subparser = sub.add_parser(name, help=help_text, description=help_text)
        if command is None or name == command:
            importlib.import_module(f"cockpit.commands.{name}").configure(subparser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    named = next((w for w in words if not w.startswith("-")), None)  # the only options before it take no value
    parser = build_parser(named if named in COMMANDS else None)
    try:
        args = parser.parse_args(words)
        if args.command is None:
            raise BadInput("no command given; 'cockpit --help' lists them")
        module = importlib.import_module(f"cockpit.commands.{args.command}")
        status = int(module.run(args) or 0)
        sys.stdout.flush()  # a reader that went away (| head -1) is seen here, not at exit
        return status
    except BrokenPipeError:
        # the reader of our output closed it (| head -1): its choice, not an error to report;
        # stdout goes to /dev/null so the interpreter's last flush does not fail again
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CockpitError as exc:
        print(error_line(exc), file=sys.stderr)
        return exc.exit_status
    except OSError as exc:
        if exc.filename is None:
            raise
        # a path given by the user that is not what it should be: a file for a folder, no access
        print(f"cockpit: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cockpit: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("COCKPIT_DEBUG"):
            raise
        print(
            f"cockpit: internal error: {type(exc).__name__}: {exc} (set COCKPIT_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 70


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
