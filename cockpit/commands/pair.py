"""`cockpit pair --change-id ID ...`: the operator's cockpit inside tmux, and the join commands.

Takes the options of ``cockpit run`` (or ``--demo`` and the demo's options): starts
the cockpit in the tmux session ``cockpit-<change-id>`` on an explicit socket, or joins
that session if it already runs, prints how a second person watches read-only and
opens their own reviewer window, then attaches (unless ``--no-attach``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cockpit.commands.run import add_connection_arguments, add_history_argument, add_signing_arguments


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--change-id", required=True, metavar="ID", help="the change ticket id (names the session)")
    parser.add_argument("--demo", action="store_true", help="pair on the simulated demo fleet instead of real hosts")
    parser.add_argument("--hosts", metavar="SPEC", help="gpu[01-16],login1 or @inventory[:group] (not with --demo)")
    parser.add_argument(
        "--inventory", type=Path, metavar="FILE", help="Ansible INI/YAML inventory for names in --hosts"
    )
    parser.add_argument("--runbook", default=None, metavar="FILE", help="runbook file or shipped id")
    parser.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="set a runbook parameter (repeatable)"
    )
    parser.add_argument("--sessions", type=Path, default=Path("sessions"), metavar="DIR", help="where change logs go")
    parser.add_argument("--operator", metavar="NAME", help="who drives (default: the login name)")
    add_connection_arguments(parser)
    add_history_argument(parser)
    signing = parser.add_argument_group("signatures (as cockpit run; not with --demo)")
    add_signing_arguments(signing, require_default=None)
    demo = parser.add_argument_group("with --demo")
    demo.add_argument("--nodes", type=int, metavar="N", help="simulated GPU nodes (default 8)")
    demo.add_argument("--scenario", metavar="NAME", help="fault scenario (default gpu-missing)")
    demo.add_argument("--speed", type=float, metavar="X", help="simulator time scale")
    demo.add_argument("--seed", type=int, help="simulator seed")
    demo.add_argument("--autopilot", action="store_true", help="let the demo autopilot drive")
    tmux = parser.add_argument_group("tmux")
    tmux.add_argument(
        "--socket",
        type=Path,
        metavar="PATH",
        help="tmux server socket (default $TMUX_TMPDIR or /tmp: cockpit-pair-UID/<change-id>.sock); its folder "
        "must be yours and not writable by others",
    )
    tmux.add_argument(
        "--reviewer",
        metavar="NAME",
        help='name to print in the reviewer\'s command (default: their login name, "$USER")',
    )
    tmux.add_argument("--no-attach", action="store_true", help="start or find the session, print, do not attach")


def _passthrough(args: argparse.Namespace, *, demo: bool, resume: bool) -> list[str]:
    out: list[str] = []

    def opt(flag: str, value: object) -> None:
        if value is not None and value is not False:
            out.extend([flag] if value is True else [flag, str(value)])

    if demo:
        for flag, value in (
            ("--nodes", args.nodes),
            ("--scenario", args.scenario),
            ("--speed", args.speed),
            ("--seed", args.seed),
            ("--runbook", args.runbook),
            ("--autopilot", args.autopilot),
        ):
            opt(flag, value)
        opt("--refresh", args.refresh)
        return out
    opt("--operator", args.operator)
    if not resume:
        opt("--hosts", args.hosts)
        opt("--inventory", args.inventory.resolve() if args.inventory else None)
        opt("--runbook", args.runbook)
        for assignment in args.param:
            opt("--param", assignment)
        if args.require_signatures is not None:  # run's default (on) holds unless said
            out.append("--require-signatures" if args.require_signatures else "--no-require-signatures")
        opt("--allowed-signers", Path(args.allowed_signers).resolve() if args.allowed_signers else None)
    opt("--signing-key", Path(args.signing_key).resolve() if args.signing_key else None)
    opt("--ssh-config", args.ssh_config.resolve() if args.ssh_config else None)
    opt("--known-hosts", args.known_hosts.resolve() if args.known_hosts else None)
    opt("--accept-new-host-keys", args.accept_new_host_keys)
    opt("--refresh", args.refresh)
    opt("--log-file", args.log_file.resolve() if args.log_file else None)
    opt("--history", args.history.resolve() if args.history else None)
    return out


def _check_history(args: argparse.Namespace, session_file: Path, *, resume: bool) -> None:
    """``--history`` read as the cockpit will read it, before tmux starts: a refusal in its pane
    is only seen as "did not start" (read twice, then: once here, once there)."""
    if args.history is None:
        return
    from cockpit.changelog.reader import read_header
    from cockpit.changelog.runbook_of import session_runbook
    from cockpit.commands.run import read_history
    from cockpit.runbook.loader import DEFAULT_RUNBOOK, load

    if resume:  # the runbook the window started with, as resume finds it
        loaded = session_runbook(read_header(session_file), session_file)
    else:
        loaded = load(args.runbook or DEFAULT_RUNBOOK)
    read_history(args, loaded, args.change_id)


def _check_signing(args: argparse.Namespace, *, resume: bool) -> None:
    """What cockpit run or resume would refuse about signing, refused here, before tmux starts
    (a cockpit that fails in its pane is only seen as "did not start")."""
    from cockpit.errors import BadInput

    if resume and (args.require_signatures is not None or args.allowed_signers):
        raise BadInput(
            f"session {args.change_id} exists: it resumes with the signers its header recorded "
            "(leave out --require-signatures and --allowed-signers; --signing-key is yours to give)"
        )
    for flag, value in (("--allowed-signers", args.allowed_signers), ("--signing-key", args.signing_key)):
        if value and not Path(value).is_file():
            raise BadInput(f"{flag} {value}: no such file")
    if not resume and args.require_signatures is not False and not args.allowed_signers:
        raise BadInput(
            "signatures are required (the default for run): give --allowed-signers FILE naming the reviewers' keys, "
            "or --no-require-signatures"
        )


def run(args: argparse.Namespace) -> int:
    import shlex
    import subprocess

    from cockpit.changelog.identity import check_person_name, same_person
    from cockpit.changelog.reader import read_header, read_session_folding
    from cockpit.errors import BadInput
    from cockpit.session.pair import (
        Tmux,
        check_socket,
        cockpit_command,
        default_socket,
        find_tmux,
        installed_cockpit,
        join_commands,
        operator_argv,
        session_name,
        wait_until_started,
    )

    tmux_bin = find_tmux()
    name = session_name(args.change_id)
    if args.demo and (args.hosts or args.inventory or args.param or args.operator):
        raise BadInput("--demo pairs on the simulated fleet: leave out --hosts, --inventory, --param and --operator")
    if not args.demo and (args.nodes or args.scenario or args.speed or args.seed is not None or args.autopilot):
        raise BadInput("--nodes, --scenario, --speed, --seed and --autopilot go with --demo")
    signing = args.require_signatures is not None or args.allowed_signers or args.signing_key
    if args.demo and signing:
        raise BadInput(
            "--require-signatures, --allowed-signers and --signing-key go with real hosts (a demo is unsigned)"
        )
    if args.history is not None and args.demo:
        raise BadInput(f"--history {args.history}: goes with real hosts (a demo has no earlier window)")
    if args.operator is not None:
        check_person_name(args.operator, "--operator")
    if args.reviewer is not None:
        check_person_name(args.reviewer, "--reviewer", demo=args.demo)
        if args.operator is not None and same_person(args.reviewer, args.operator):
            raise BadInput(f"--reviewer {args.reviewer}: that is the operator; a reviewer is a second person")
    sessions = args.sessions.resolve()
    session_file = sessions / f"{args.change_id}.toml"
    socket = (args.socket or default_socket(args.change_id)).resolve()
    check_socket(socket, private_folder=args.socket is None)  # never another user's server, or a replaceable one
    tmux = Tmux(tmux_bin, socket)

    if tmux.has_session(name):
        kept = " (it keeps the forecast it started with: --history not taken)" if args.history else ""
        print(f"cockpit pair: {name} is already running on {socket}: joining it{kept}")
    else:
        resume = session_file.exists()
        if resume and args.demo:
            raise BadInput(
                f"session {args.change_id} already exists at {session_file} and a demo cannot be resumed; "
                "pick another --change-id"
            )
        if not resume and not args.demo and not args.hosts:
            raise BadInput("--hosts is required (or --demo to pair on the simulated fleet)")
        if not args.demo:
            _check_signing(args, resume=resume)
            _check_history(args, session_file, resume=resume)
        argv = operator_argv(
            installed_cockpit(),  # never a cockpit.py in the cwd the pane starts in
            demo=args.demo,
            change_id=args.change_id,
            sessions=sessions,
            resume=resume,
            passthrough=_passthrough(args, demo=args.demo, resume=resume),
        )
        # where the log ends now (its events are not kept: a big one would sit here while the pair waits)
        before = read_session_folding(session_file, lambda _header, _events: None) if resume else None
        tmux.new_session(name, argv, cwd=Path.cwd())
        # success is reported only once the cockpit has written its start to the change log
        failed = wait_until_started(tmux, name, session_file, before)
        if failed is not None:
            tmux.kill_session(name)
            print(f"cockpit pair: the cockpit for {args.change_id} did not start: {failed}", file=sys.stderr)
            return 1
        verb = "resumed" if resume else "started"
        print(f"cockpit pair: {verb} the cockpit for {args.change_id} in tmux session {name} (socket {socket})")

    # what `cockpit review` will ask of them (a session joined by name may log elsewhere: then nothing)
    signatures = session_file.is_file() and read_header(session_file).require_signatures
    cmds = join_commands(
        tmux_bin,
        socket,
        name,
        session_file,
        reviewer=args.reviewer,
        cockpit=cockpit_command(),
        signatures=signatures,
    )
    print()
    print("A second person on this host joins with one of these:")
    print()
    print("  watch the operator's screen, read-only (their keys never reach the cockpit):")
    print(f"  {cmds.watch}")
    print()
    print("  open their own reviewer view (sign-offs, manual triggers, notes) on their own tmux server,")
    print("  which cannot reach the operator's window:")
    print(f"  {cmds.review}")
    print()
    print("  (--as is the name the change log records; it must differ from the operator's.)")
    if signatures:
        print(
            "  (This change log requires signed sign-offs: --signing-key is the private key whose public half "
            "the allowed signers file names for them; with an ssh-agent holding it, leave --signing-key out.)"
        )
    print(f"  Another Unix user needs read-only access to the socket first; the operator runs: {cmds.access}")
    print()
    sys.stdout.flush()
    if args.no_attach:
        return 0
    attach = tmux.argv("attach", "-t", name)
    if os.environ.get("TMUX"):
        print(f"cockpit pair: you are inside tmux; attach from a plain terminal: {shlex.join(attach)}")
        return 0
    if not sys.stdin.isatty():
        print(f"cockpit pair: not a terminal; attach with: {shlex.join(attach)}")
        return 0
    return subprocess.run(attach).returncode
