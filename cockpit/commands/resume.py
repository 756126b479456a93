"""`cockpit resume SESSION`: reopen a saved change window exactly where it stopped."""

from __future__ import annotations

import argparse
from pathlib import Path

from cockpit.commands.run import add_connection_arguments


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", type=Path, metavar="SESSION", help="the session file (sessions/<change-id>.toml)")
    parser.add_argument("--operator", metavar="NAME", help="who drives (default: the login name)")
    parser.add_argument(
        "--runbook",
        type=Path,
        metavar="FILE",
        help="the runbook file, when it moved since the session started (its sha256 must match the recorded one)",
    )
    parser.add_argument(
        "--signing-key", metavar="FILE", help="sign your events with this SSH private key (default: the ssh-agent's)"
    )
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from cockpit.changelog.identity import check_person_name
    from cockpit.changelog.journal import read_session
    from cockpit.commands.run import start_tool_log, transport_for
    from cockpit.commands.terminal import require_terminal
    from cockpit.errors import BadInput
    from cockpit.fleet.backends.base import Backend
    from cockpit.fleet.backends.registry import BackendOptions, backend_class, make_backend
    from cockpit.session.operator import Session, default_operator

    if not args.session.is_file():
        raise BadInput(f"{args.session}: no such file (expected a session file)")
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
    operator = check_person_name(args.operator or header.operator or default_operator(), "--operator")
    if args.runbook is not None:
        from cockpit.runbook.loader import load_runbook

        if not args.runbook.is_file():
            raise BadInput(f"--runbook {args.runbook}: no such file")
        if load_runbook(args.runbook).sha256 != header.runbook_sha256:  # Session.resume checks again
            raise BadInput(
                f"--runbook {args.runbook}: not the runbook session {header.change_id} started with "
                f"(recorded sha256 {header.runbook_sha256[:12]})"
            )
    # the engine the window started with (a header without one: ssh), refused now if this build lacks it
    backend = BackendOptions.from_recorded(header.backend, header.backend_options)
    backend_class(backend.name)
    args.ssh_config = _connection_file("--ssh-config", args.ssh_config, header.ssh_config)
    args.known_hosts = _connection_file("--known-hosts", args.known_hosts, header.known_hosts, must_exist=False)
    require_terminal(
        "resume", headless=f"cockpit pair --change-id {header.change_id} --no-attach ... to resume in tmux"
    )
    from cockpit.changelog.sshsig import choose_signer

    signer = choose_signer(args.signing_key, operator, required=header.require_signatures)
    start_tool_log(args.log_file)

    async def main() -> int:
        from cockpit.commands.run import drive_window
        from cockpit.fleet.transport import HostTarget, Transport

        recorded = {t["name"]: HostTarget(**t) for t in header.targets}  # addresses as the window began

        def factory(hosts: list[str]) -> Transport:
            return transport_for(hosts, recorded, dict(header.parameters), args, backend)

        def engine(options: BackendOptions, transport: Transport | None) -> Backend:
            return make_backend(options, transport=transport)

        session = Session.resume(
            args.session, operator=operator, runbook=args.runbook, transport_factory=factory, signer=signer,
            backend_factory=engine,
        )  # fmt: skip
        return await drive_window(session, args.refresh)

    return asyncio.run(main())


def _connection_file(flag: str, given: Path | None, recorded: str | None, *, must_exist: bool = True) -> Path | None:
    """The file given on the command line, else the one the session was started with (absolute)."""
    from cockpit.errors import BadInput

    if given is not None:
        if must_exist and not given.is_file():
            raise BadInput(f"{flag} {given}: no such file")
        return given
    if recorded is None:
        return None
    path = Path(recorded)
    if must_exist and not path.is_file():
        raise BadInput(f"the session was started with {flag} {path}, which is gone; give {flag} FILE")
    return path
