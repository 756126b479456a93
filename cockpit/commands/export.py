"""`cockpit export SESSION --format markdown|jira|jira-adf|servicenow [-o FILE | --to jira|servicenow]`.

Writes a ticket for a change log. The runbook the session recorded (its path and
sha256 are in the header) is looked up to show trigger titles and the full closing
checklist; when it is missing or changed, the ticket says so and shows only what
the events hold. A torn final block is reported in the ticket as a banner. A damaged
log (a block deleted, moved or edited) is read past its damage: the ticket shows all
that can be read, the verification and every damaged seq in its first line, and the
exit status is 1.

``--to jira|servicenow`` sends the ticket instead (:mod:`cockpit.commands.ticket_api`):
it creates the change's Jira issue or ServiceNow change request, or updates it when an
export made it before, with the chain head and the verification in a comment or work note.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the subcommand imports its machinery only when it runs
    from cockpit.changelog.journal import SessionLog
    from cockpit.changelog.verify import Verification
    from cockpit.runbook.loader import LoadedRunbook

FORMATS = ("markdown", "jira", "jira-adf", "servicenow")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="the change log (sessions/<change-id>.toml)")
    parser.add_argument("--format", "-f", choices=FORMATS, default="markdown", help="ticket format (default: markdown)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    parser.add_argument(
        "--to",
        choices=("jira", "servicenow"),
        help="create or update the change's issue (Jira, COCKPIT_JIRA_*) or change request (ServiceNow, "
        "COCKPIT_SNOW_*) instead of writing a file; a second export updates the same one",
    )
    parser.add_argument(
        "--runbook",
        metavar="FILE",
        help="the runbook file the session used (default: the path recorded in the session)",
    )


def _find_runbook(log: SessionLog, session: Path, given: str | None) -> LoadedRunbook | None:
    """The runbook the ticket is folded over: ``--runbook``, else where the session's runbook
    may be (the one with the recorded sha256 first, as replay finds it).

    A found runbook edited since the window still lends its titles, but the fold over it is
    not judged and the ticket says so; a ``--runbook`` other than the recorded one is refused
    by :func:`run`."""
    from cockpit.errors import BadInput
    from cockpit.runbook.loader import find_runbook, load_runbook
    from cockpit.session.review import runbook_candidates

    if given:
        return load_runbook(find_runbook(given))  # a path or a shipped runbook's id, as elsewhere
    first: LoadedRunbook | None = None
    for candidate in runbook_candidates(log.header.runbook_path, log.header.runbook_id, session):
        try:
            loaded = load_runbook(candidate)
        except BadInput:
            continue
        if loaded.sha256 == log.header.runbook_sha256:
            return loaded  # the one the session ran: the events are judged by its rules
        first = first or loaded
    return first


def run(args: argparse.Namespace) -> int:
    from cockpit.changelog.verify import read_verified
    from cockpit.errors import BadInput
    from cockpit.export import summarise, ticket_text

    session = Path(args.session)
    log, verification = read_verified(session)  # read once; a damaged log: read past it, each seq named
    runbook = _find_runbook(log, session, args.runbook)
    if args.runbook and runbook is not None and runbook.sha256 != log.header.runbook_sha256:
        raise BadInput(
            f"--runbook {args.runbook} is not the runbook this session ran "
            f"(sha256 {runbook.sha256[:12]}, recorded {log.header.runbook_sha256[:12]})"
        )
    if args.to is not None:
        return _send(args, session, log, runbook, verification)
    # one fold: the first line's refused events and the ticket's body are the same state's
    summary = summarise(log, runbook, verification.summary(), signatures=_signatures(log, verification))
    text = ticket_text(summary, args.format)
    if log.torn is not None:
        print(f"cockpit: warning: {session}: {log.torn.describe()}", file=sys.stderr)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise BadInput(f"cannot write {args.output}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    return _damage_status(session, verification)


def _signatures(log: SessionLog, verification: Verification) -> dict[int, str] | None:
    """The sign-offs' verified signatures when the site (or the header) requires them, else None:
    what the fold judges sign-offs by (as ``cockpit verify`` and replay do)."""
    from cockpit.changelog.trust import load_site_trust

    return verification.signed if load_site_trust().require_for(log.header) else None


def _send(
    args: argparse.Namespace, session: Path, log: SessionLog, runbook: LoadedRunbook | None, verification: Verification
) -> int:
    """The ticket sent to the change board's system: created, or updated when it exists."""
    from cockpit.commands.ticket_api import send
    from cockpit.errors import BadInput
    from cockpit.export import document, summarise

    if args.output:
        raise BadInput("--to sends the ticket; -o writes a file: give one of them")
    summary = summarise(log, runbook, verification.summary(), signatures=_signatures(log, verification))
    from cockpit.changelog.files import session_paths

    folder = session_paths(session)[1]
    head, line = verification.head_words(), verification.summary()
    print(send(args.to, summary, document.build(summary), head, line, folder=folder))
    if log.torn is not None:
        print(f"cockpit: warning: {session}: {log.torn.describe()}", file=sys.stderr)
    return _damage_status(session, verification)


def _damage_status(session: Path, verification: Verification) -> int:
    """1 when the log is damaged (a block missing, moved or edited, a broken link), said on
    stderr: the ticket was written from what could be read, and a script must notice."""
    from cockpit.view.inert import inert

    broken = None if verification.chain is None else verification.chain.broken_at
    seqs = sorted({seq for seq, _ in verification.damaged} | ({broken} if broken is not None else set()))
    if not seqs:
        return 0
    print(
        inert(
            f"cockpit: {session}: damaged change log (seq {', '.join(map(str, seqs))}): written from what could be read"
        ),
        file=sys.stderr,
    )
    return 1
