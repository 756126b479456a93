"""`cockpit review SESSION --as NAME`: follow a live session as the second person and sign off."""

from __future__ import annotations

import argparse
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


def run(args: argparse.Namespace) -> int:
    from cockpit.errors import BadInput
    from cockpit.session.review import ReviewerSession, default_reviewer

    if not args.session.is_file():
        raise BadInput(f"{args.session}: no such file (expected a session file)")
    from cockpit.changelog.reader import read_header
    from cockpit.changelog.sshsig import choose_signer

    reviewer = default_reviewer() if args.reviewer is None else args.reviewer
    required = read_header(args.session).require_signatures  # the header only: the session reads the log once
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
