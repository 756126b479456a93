"""`cockpit resume SESSION`: reopen a saved change window exactly where it stopped."""

from __future__ import annotations

import argparse
from pathlib import Path

from cockpit.commands.run import (
    add_connection_arguments,
    add_history_argument,
    add_settings_argument,
    add_signing_key_argument,
)


def configure(parser: argparse.ArgumentParser) -> None:
    add_session_arguments(parser, operator_help="who drives (default: the login name)")
    add_history_argument(parser)


def add_session_arguments(parser: argparse.ArgumentParser, *, operator_help: str) -> None:
    """What every command that reopens a window takes (``resume``, ``end``): the session file,
    the operator, a moved runbook, the signing key and the SSH connection files."""
    parser.add_argument("session", type=Path, metavar="SESSION", help="the session file (sessions/<change-id>.toml)")
    parser.add_argument("--operator", metavar="NAME", help=operator_help)
    parser.add_argument(
        "--runbook",
        type=Path,
        metavar="FILE",
        help="the runbook file, when it moved since the session started (its sha256 must match the recorded one)",
    )
    add_signing_key_argument(parser)
    add_settings_argument(parser)
    add_connection_arguments(parser)


def check_session_files(args: argparse.Namespace) -> None:
    """The session file and a given runbook exist: one line each when not."""
    from cockpit.errors import BadInput

    if not args.session.is_file():
        raise BadInput(f"{args.session}: no such file (expected a session file)")
    if args.runbook is not None and not args.runbook.is_file():
        raise BadInput(f"--runbook {args.runbook}: no such file")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from cockpit.changelog.identity import check_person_name
    from cockpit.commands.run import start_tool_log, transport_for
    from cockpit.commands.terminal import require_terminal
    from cockpit.errors import BadInput
    from cockpit.fleet.backends.base import Backend
    from cockpit.fleet.backends.registry import BackendOptions, backend_class, make_backend
    from cockpit.session.operator import Session, default_operator

    check_session_files(args)
    from cockpit.commands.run import check_refresh
    from cockpit.session.opening import reopen

    check_refresh(args.refresh)
    # read once, folded as it is read (a 100,000-event log is never held whole); the session starts from it
    opened = reopen(args.session, operator=None, runbook=args.runbook)
    log, _, folder = opened
    header = log.header
    if folder.state.ended_at is not None:
        raise BadInput(f"session {header.change_id} has ended; nothing to resume (replay or export it)")
    if header.operator == "demo-operator":
        raise BadInput(
            f"session {header.change_id} ran on the demo's simulated fleet, which is gone; replay or export it instead"
        )
    operator = check_person_name(args.operator or header.operator or default_operator(), "--operator")
    # the engine the window started with (a header without one: ssh), refused now if this build lacks it
    backend = BackendOptions.from_recorded(header.backend, header.backend_options)
    backend_class(backend.name)
    args.ssh_config = connection_file("--ssh-config", args.ssh_config, header.ssh_config)
    args.known_hosts = connection_file("--known-hosts", args.known_hosts, header.known_hosts, must_exist=False)
    require_terminal("resume", (f"cockpit pair --change-id {header.change_id} --no-attach ...", "resumed in tmux"))
    from cockpit.changelog.sshsig import choose_signer
    from cockpit.changelog.trust import load_site_trust

    trust = load_site_trust().with_runbook(opened[1])
    signer = choose_signer(args.signing_key, operator, required=trust.require_for(header))
    from cockpit.commands.run import notifier_for

    notifier = notifier_for(args)
    from cockpit.commands.run import read_history

    history = read_history(args, opened[1], header.change_id)
    start_tool_log(args.log_file)

    async def main() -> int:
        from cockpit.commands.run import drive_window, note_history
        from cockpit.fleet.transport import HostTarget, Transport

        recorded = {t["name"]: HostTarget(**t) for t in header.targets}  # addresses as the window began

        def factory(hosts: list[str]) -> Transport:
            return transport_for(hosts, recorded, dict(header.parameters), args, backend)

        def engine(options: BackendOptions, transport: Transport | None) -> Backend:
            return make_backend(options, transport=transport)

        session = Session.resume(
            args.session, operator=operator, runbook=args.runbook, transport_factory=factory, signer=signer,
            backend_factory=engine, opened=opened,
        )  # fmt: skip
        note_history(session, history)
        if notifier is not None:
            session.notify_with(notifier)
        return await drive_window(session, args.refresh)

    return asyncio.run(main())


def connection_file(flag: str, given: Path | None, recorded: str | None, *, must_exist: bool = True) -> Path | None:
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
