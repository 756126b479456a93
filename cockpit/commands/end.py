"""`cockpit end SESSION --outcome TEXT`: a person ends a change window.

``q`` in the cockpit only pauses a window (for ``cockpit resume``); this writes
``session-ended`` with the outcome the person gives, so the ticket reads the window as
ended, not "Session not closed". It opens the log as its operator (refused while the
cockpit holds it: quit it first), lets the window's engine put back what it changed for
the window (a GPU Operator's ClusterPolicy: then the connection options apply, as for
``resume``), records the end, removes the lock file and prints where the log is and the
command that writes its ticket. The logic is the core's
(:meth:`cockpit.session.operator.Session.end_by_person`); a key on the live screen is the
UI's to add.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # configure() imports nothing heavy
    from cockpit.changelog.journal import SessionHeader
    from cockpit.fleet.backends.base import Backend
    from cockpit.fleet.backends.registry import BackendOptions
    from cockpit.fleet.transport import Transport

    TransportFactory = Callable[[list[str]], Transport]
    BackendFactory = Callable[[BackendOptions, Transport | None], Backend]

#: The engines that change nothing of the site's for a window: ending one needs no connection.
NOTHING_TO_PUT_BACK = frozenset({None, "ssh"})


def configure(parser: argparse.ArgumentParser) -> None:
    from cockpit.commands.resume import add_session_arguments

    add_session_arguments(parser, operator_help="the window's operator (default: the one recorded)")
    parser.add_argument(
        "--outcome",
        required=True,
        metavar="OUTCOME",
        help="how the window ended: one of the runbook's outcomes (its decision's, else completed or abandoned; "
        "roll-back for one that went wrong)",
    )
    parser.add_argument("--note", metavar="TEXT", help="why, in the ticket's timeline")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from cockpit.changelog.identity import check_person_name
    from cockpit.changelog.sshsig import choose_signer
    from cockpit.changelog.trust import load_site_trust
    from cockpit.commands.resume import check_session_files
    from cockpit.errors import BadInput
    from cockpit.export.summary import left_mid_change
    from cockpit.session.opening import reopen
    from cockpit.session.operator import Session, ending_outcome

    check_session_files(args)
    if not args.outcome.strip():
        raise BadInput("--outcome: say how the window ended")
    opened = reopen(args.session, operator=None, runbook=args.runbook)
    log, loaded, folder = opened
    header = log.header
    if folder.state.ended_at is not None:
        raise BadInput(f"session {header.change_id} has already ended (export it: cockpit export {args.session})")
    # the outcomes the screen's end dialog offers, before the lock is taken or anything reached
    args.outcome = ending_outcome(loaded.runbook, args.outcome)
    operator = check_person_name(args.operator or header.operator, "--operator")
    signer = choose_signer(
        args.signing_key, operator, required=load_site_trust().with_runbook(opened[1]).require_for(header)
    )
    # a demo's simulated fleet is gone, and the SSH engine changed nothing of the site's: no
    # connection needed; another engine is reached as resume reaches it, to put back its changes
    reach = header.operator != "demo-operator" and header.backend not in NOTHING_TO_PUT_BACK
    from cockpit.commands.run import notifier_for

    notifier = notifier_for(args)  # the window-ended notice

    async def main() -> int:
        factory: TransportFactory | None = None
        engine: BackendFactory | None = None
        if reach:
            factory, engine = _engine(args, header)
        session = Session.resume(
            args.session, operator=operator, runbook=args.runbook, transport_factory=factory, signer=signer,
            backend_factory=engine, opened=opened,
        )  # fmt: skip
        if notifier is not None:
            session.notify_with(notifier)
            session.notify_drain_s = 30.0  # a command, not a screen: the window-ended notice may take its retries
        # said before it ends, as the screen's end dialog says it: the window still ends (a
        # person must be able to end one that went wrong), the nodes are for a person to take
        for line in left_mid_change(session.state):
            print(f"warning: {line}", flush=True)
        try:
            ended = await session.end_by_person(args.outcome, note=args.note)
        finally:
            await session.close()  # refused (a bad outcome): the lock is released all the same
        for line in ended.words():
            print(line)
        return 0

    return asyncio.run(main())


def _engine(args: argparse.Namespace, header: SessionHeader) -> tuple[TransportFactory, BackendFactory]:
    """The transport and engine factories of ``cockpit resume``, for an engine that put
    something on the site's configuration for the window."""
    from cockpit.commands.resume import connection_file
    from cockpit.commands.run import transport_for
    from cockpit.fleet.backends.registry import BackendOptions, make_backend
    from cockpit.fleet.transport import HostTarget

    backend = BackendOptions.from_recorded(header.backend, header.backend_options)
    args.ssh_config = connection_file("--ssh-config", args.ssh_config, header.ssh_config)
    args.known_hosts = connection_file("--known-hosts", args.known_hosts, header.known_hosts, must_exist=False)
    recorded = {t["name"]: HostTarget(**t) for t in header.targets}

    def factory(hosts: list[str]) -> Transport:
        return transport_for(hosts, recorded, dict(header.parameters), args, backend)

    def engine(options: BackendOptions, transport: Transport | None) -> Backend:
        return make_backend(options, transport=transport)

    return factory, engine
