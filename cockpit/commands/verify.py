"""`cockpit verify SESSION [--allowed-signers FILE] [--head SEQ:HASH | --anchor FILE] [--dump-seq N --out DIR]
[--repair --as NAME]`.

Checks the change log's hash chain and every signature against the site's trust root
(:mod:`cockpit.changelog.trust`: its settings file and ``--allowed-signers``, never the
log's header alone), every event against the window's rules (signed or not),
and the heads ``--head`` or ``--anchor`` hold: exit 0 when all hold, 1 naming the first
failing seq and why, 2 on bad input. ``--dump-seq`` writes one event's signed
bytes and its armored signature so ``ssh-keygen -Y verify`` can check them on its own.
``--repair`` is a person's decision about a damaged log: everything from the first
failing block on is moved aside (kept in the session folder), and the log records who
did it and what was removed; its seqs are never used again.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.changelog.spread import SpreadChecks
    from cockpit.engine.state import RefusedEvent


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="the change log (sessions/<change-id>.toml)")
    parser.add_argument(
        "--allowed-signers",
        metavar="FILE",
        help="the site's OpenSSH allowed_signers file (default: the site's settings, else the one the log names)",
    )
    parser.add_argument("--head", metavar="SEQ:HASH", help="a head an export printed: the log must still reach it")
    parser.add_argument(
        "--anchor",
        metavar="FILE",
        help="an anchor file (or a ticket): the log must still reach the latest head it holds for this change",
    )
    parser.add_argument("--dump-seq", type=int, metavar="N", help="write event N's signed bytes and signature")
    parser.add_argument("--out", metavar="DIR", help="where --dump-seq writes (required with it)")
    parser.add_argument("--repair", action="store_true", help="move a damaged tail aside and record it in the log")
    parser.add_argument("--as", dest="actor", metavar="NAME", help="who decides the repair (required with --repair)")
    parser.add_argument("--signing-key", metavar="FILE", help="sign the repair's record with this key")


def run(args: argparse.Namespace) -> int:
    from cockpit.changelog.spread import SpreadChecks, read_log_bytes
    from cockpit.errors import BadInput

    session = Path(args.session)
    if args.dump_seq is not None and not args.out:
        raise BadInput("--dump-seq needs --out DIR")
    # a big log's signatures are checked by forked workers from its bytes while this process
    # imports the reader and reads the log (they need neither)
    data = read_log_bytes(session)
    with contextlib.ExitStack() as stack:
        spread = SpreadChecks.start(data)
        if spread is not None:
            stack.enter_context(spread)
        return _run(args, session, data, spread)


def _run(args: argparse.Namespace, session: Path, data: bytes, spread: SpreadChecks | None) -> int:
    from cockpit.changelog.reader import read_header
    from cockpit.changelog.sshsig import read_allowed_signers
    from cockpit.changelog.trust import header_differences, load_site_trust, trust_for
    from cockpit.changelog.verify import Anchors, actor_of, dump_signed, parse_anchor, verify_file
    from cockpit.errors import BadInput
    from cockpit.session.judged import JudgedFold

    anchor: Anchors = parse_anchor(args.head) if args.head else None
    # the trust root is the site's (its settings file, --allowed-signers), never the log's header
    header = read_header(session, data)
    # ... with the [trust] table of the runbook the log names merged in: it can only add
    site = trust_for(header, session, load_site_trust().with_signers(args.allowed_signers))
    if args.anchor:
        from cockpit.changelog.anchor import read_anchors  # its sinks import urllib: only when asked

        if anchor is not None:
            raise BadInput("give --head or --anchor, not both")
        held = read_anchors(args.anchor, header.change_id)
        seq, head = held[-1]
        print(f"anchor: {seq}:{head}, the latest of {len(held)} head(s) {args.anchor} holds for {header.change_id}")
        anchor = held
    require = site.require_for(header)
    allowed_path = site.signers_path_for(header)
    allowed = read_allowed_signers(allowed_path) if allowed_path else None
    # the window's rules over every event as the log is read once (its signatures checked by
    # other processes meanwhile), signed or not, as the readers fold it: when the signatures
    # all hold, judging them too refuses nothing more
    judged = JudgedFold(session)
    verdict, log, data = verify_file(
        session,
        allowed,
        anchor,
        keep_blocks=args.dump_seq is not None,
        require=require,
        fold=judged,
        spread=spread,
    )
    if args.repair:
        return _repair(args, session, verdict.first_failure)
    if args.dump_seq is not None:
        if log is None:
            raise BadInput(f"{session}: damaged; nothing can be dumped until it is repaired")
        data_path, sig_path = dump_signed(log, data, args.dump_seq, Path(args.out))
        print(f"wrote {data_path}" + (f" and {sig_path}" if sig_path else " (the event is not signed)"))
        if sig_path is not None:
            actor = actor_of(log, data, args.dump_seq)
            print(
                f"check: ssh-keygen -Y verify -f ALLOWED_SIGNERS -I {actor} -n cockpit-changelog "
                f"-s {sig_path} < {data_path}"
            )
    print(f"{session}: {verdict.events} events")
    print(verdict.chain_words())
    print(verdict.signature_words())
    print(verdict.head_words())
    failures = list(verdict.failures)
    if site.allowed_signers is None and allowed_path:
        print(
            f"trust: checked against {allowed_path}, the allowed_signers the log's own header names (the site "
            "names none: give --allowed-signers or a settings file)"
        )
    failures += [(0, f"trust: {words}") for words in header_differences(header, site)]
    if log is not None:
        if judged.folder is None and judged.unjudged is None:
            judged(log.header, [])  # a log with no event: its runbook still looked for
        outcome = (judged.refused, judged.unjudged)
        failures += _refused(outcome, session, data, verdict.signed if require and verdict.failures else None)
    failures.sort(key=lambda f: f[0])
    if failures:
        seq, why = failures[0]
        print(f"FAILED at seq {seq}: {why}", file=sys.stderr)
        for other_seq, other in failures[1:5]:
            print(f"  also seq {other_seq}: {other}", file=sys.stderr)
        return 1
    if not verdict.ok:  # an unchained log: nothing failed, nothing proven
        print("nothing to check: the log was written before the chain")
    return 0


def _refused(
    judged: tuple[list[RefusedEvent], str | None], session: Path, data: bytes, signatures: dict[int, str] | None
) -> list[tuple[int, str]]:
    """The events the window's rules refuse (``judged``: a fold that judged each by the rules
    alone), as failures; the fold needs the runbook: when it is not found, that is said, and
    it is not a failure. When every signature held, judging them too refuses nothing more
    (each event is signed by its actor's key, the cockpit's by the operator's); when some
    did not, the fold is done again judging them (``signatures``), as the readers fold it."""
    from cockpit.session.judged import judged_refusals

    refused, unjudged = judged if signatures is None else judged_refusals(data, session, signatures)
    if unjudged is not None:
        print(unjudged)
    else:
        print(f"rules: {len(refused)} event(s) refused" if refused else "rules: every event allowed when written")
    return [(r.seq, f"refused ({r.kind} by {r.actor}): {r.why}") for r in refused]


def _repair(args: argparse.Namespace, session: Path, failure: tuple[int, str] | None) -> int:
    from cockpit.changelog.identity import check_person_name
    from cockpit.changelog.repair import repair
    from cockpit.changelog.sshsig import signer_from_key_file
    from cockpit.errors import BadInput

    if not args.actor:
        raise BadInput("--repair needs --as NAME: the person who decides what is removed")
    actor = check_person_name(args.actor, "--as")
    if failure is None:
        print(f"{session}: nothing to repair (the log verifies)")
        return 0
    signer = signer_from_key_file(args.signing_key, actor) if args.signing_key else None
    print(repair(session, failure[0], actor, signer))
    return 0
