"""`cockpit review SESSION --as NAME`: follow a live session as the second person and sign off."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session", type=Path, metavar="SESSION", help="the live session file (sessions/<change-id>.toml)"
    )
    parser.add_argument(
        "--as",
        dest="reviewer",
        metavar="NAME",
        help="the reviewer's name as the change log records it (default: the login name); "
        "must differ from the operator's",
    )
    parser.add_argument(
        "--signing-key",
        metavar="FILE",
        help="sign your sign-offs and notes with this SSH private key (default: the ssh-agent's key)",
    )
    parser.add_argument(
        "--pause-on-error",
        action="store_true",
        help="when the view cannot start, say why and wait for Enter before exiting (in a tmux window of "
        "its own, as cockpit pair prints it, the window would close and take the error with it)",
    )


def run(args: argparse.Namespace) -> int:
    from cockpit.errors import CockpitError, error_line

    try:
        return _review(args)
    except CockpitError as exc:
        if not args.pause_on_error or not sys.stdin.isatty():
            raise
        # said here, and held: the window's last words are the reason, until the person reads them
        print(error_line(exc), file=sys.stderr)
        with contextlib.suppress(EOFError, KeyboardInterrupt):
            input("cockpit review did not start; press Enter to close this window ")
        return exc.exit_status


def _review(args: argparse.Namespace) -> int:
    from cockpit.errors import BadInput
    from cockpit.session.review import ReviewerSession, default_reviewer

    if not args.session.is_file():
        raise BadInput(f"{args.session}: no such file (expected a session file)")
    from cockpit.changelog.reader import read_header
    from cockpit.changelog.sshsig import choose_signer
    from cockpit.changelog.trust import trust_for

    reviewer = default_reviewer() if args.reviewer is None else args.reviewer
    header = read_header(args.session)  # the header only: read once
    required = trust_for(header, args.session).require_for(header)
    signer = choose_signer(args.signing_key, reviewer.strip(), required=required)
    review = ReviewerSession(args.session, reviewer, signer=signer)
    from cockpit.commands.terminal import require_terminal

    try:
        require_terminal("review")
    except BadInput:
        review.close()
        raise
    from screens.review import run_review

    return run_review(review)
