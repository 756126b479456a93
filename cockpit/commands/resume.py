"""`cockpit resume SESSION`: reopen a saved change window exactly where it stopped."""

from __future__ import annotations

import argparse
from pathlib import Path

from cockpit.commands.run import add_connection_arguments


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", type=Path, metavar="SESSION", help="the session file (sessions/<change-id>.toml)")
    parser.add_argument("--operator", metavar="NAME", help="who drives (default: the login name)")
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from cockpit.changelog.journal import read_session
    from cockpit.commands.run import transport_for
    from cockpit.errors import BadInput
    from cockpit.session.operator import Session, default_operator

    if not args.session.is_file():
        raise BadInput(f"no session file at {args.session}")
    from cockpit.changelog.events import EventKind
    from cockpit.commands.run import check_refresh

    check_refresh(args.refresh)
    log = read_session(args.session)
    header = log.header
    if any(e.kind is EventKind.SESSION_ENDED for e in log.events):
        raise BadInput(f"session {header.change_id} has ended; nothing to resume (replay or export it)")
    if header.operator == "demo-operator":
        raise BadInput(
            f"session {header.change_id} ran on the demo's simulated fleet, which is gone; replay or export it instead"
        )
    operator = args.operator or header.operator or default_operator()

    async def main() -> int:
        from cockpit.commands.run import drive_window
        from cockpit.fleet.transport import HostTarget, Transport

        recorded = {t["name"]: HostTarget(**t) for t in header.targets}  # addresses as the window began

        def factory(hosts: list[str]) -> Transport:
            return transport_for(hosts, recorded, dict(header.parameters), args)

        session = Session.resume(args.session, operator=operator, transport_factory=factory)
        return await drive_window(session, args.refresh)

    return asyncio.run(main())
