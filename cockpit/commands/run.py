"""`cockpit run`: open a change window against real nodes over SSH, in the cockpit UI."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.commands.backend_flags import add_backend_arguments
from cockpit.runbook.placeholders import ParamValue

if TYPE_CHECKING:  # the subcommand imports its machinery only when it runs
    from cockpit.engine.forecast import StageHistory
    from cockpit.fleet.backends.registry import BackendOptions
    from cockpit.fleet.transport import HostTarget, Transport
    from cockpit.notify.delivery import Notifier
    from cockpit.runbook.loader import LoadedRunbook
    from cockpit.session.opening import Trust
    from cockpit.session.operator import Session


def add_ssh_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by every command that reaches nodes over SSH (``probe`` too)."""
    parser.add_argument("--ssh-config", type=Path, metavar="FILE", help="OpenSSH client config (default ~/.ssh/config)")
    parser.add_argument(
        "--known-hosts",
        type=Path,
        metavar="FILE",
        help="known_hosts file (default from ssh_config, else ~/.ssh/known_hosts)",
    )
    parser.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="record host keys seen for the first time, like OpenSSH accept-new (changed keys are always refused)",
    )


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``run``, ``resume`` and ``pair``: how nodes are reached, and the log of it."""
    add_ssh_arguments(parser)
    parser.add_argument("--refresh", type=float, default=2.0, metavar="S", help="fleet refresh period (default 2 s)")
    parser.add_argument(
        "--log-file",
        type=Path,
        metavar="FILE",
        help="write the cockpit's own diagnostics (connections, retries, timings) here, apart from the change log",
    )


def add_settings_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--settings``, shared by ``run``, ``resume``, ``end`` and ``watch``: the notification sinks."""
    parser.add_argument(
        "--settings",
        type=Path,
        metavar="FILE",
        help="settings file (TOML) naming the webhooks to notify (default: $COCKPIT_SETTINGS; their URLs and "
        "tokens come from the environment or a file, never from it)",
    )


def notifier_for(args: argparse.Namespace) -> Notifier | None:
    """The notifier of ``--settings`` (or ``$COCKPIT_SETTINGS``), None without sinks; a bad
    file or a missing secret is refused in one line before anything starts."""
    from cockpit.notify.delivery import Notifier
    from cockpit.notify.settings import sinks_from

    sinks = sinks_from(getattr(args, "settings", None))
    return Notifier(sinks) if sinks else None


def add_history_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--history``, shared by ``run``, ``resume`` and ``pair``: the forecast's earlier window."""
    parser.add_argument(
        "--history",
        type=Path,
        metavar="LOG",
        help="an earlier window's session file on the same fleet: the forecast of this window's end learns "
        "from what its stages took (read only)",
    )


def read_history(args: argparse.Namespace, loaded: LoadedRunbook, change_id: str) -> StageHistory | None:
    """``--history``: the earlier window's stages, for window ``change_id``'s forecast; read
    before anything starts, so a bad file is refused in one line with nothing written."""
    if args.history is None:
        return None
    from cockpit.session.opening import read_stage_history

    size = args.history.stat().st_size if args.history.is_file() else 0
    if size >= HISTORY_SAYS_FROM_BYTES:  # a few seconds of reading before the screen: said
        print(f"cockpit: reading {args.history} ({size / 2**20:.0f} MB) for the forecast", file=sys.stderr)
    stages = [stage.id for stage in loaded.runbook.node_stages]
    return read_stage_history(args.history, stages, window=change_id)


#: a history log this big is read with a line saying so (a 100,000-event log takes seconds)
HISTORY_SAYS_FROM_BYTES = 8 * 2**20


def note_history(session: Session, history: StageHistory | None) -> None:
    """Give the session its earlier window, and say so in its log: the forecast shown came from
    it (a replay or a resume without ``--history`` forecasts from this window alone)."""
    if history is None:
        return
    session.history = history
    session.note(f"the forecast starts from the stages of earlier window {history.change_id} (--history)")


def add_signing_key_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--signing-key``, shared by ``run``, ``resume`` and ``pair``."""
    parser.add_argument(
        "--signing-key", metavar="FILE", help="sign your events with this SSH private key (default: the ssh-agent's)"
    )


def add_signing_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, require_default: bool | None
) -> None:
    """``--require-signatures``, ``--allowed-signers`` and ``--signing-key``, for ``run`` and ``pair``.

    ``pair`` passes None: it forwards ``--require-signatures`` only when given, so run's default holds."""
    default = "default: on" if require_default else "run's default: on"
    parser.add_argument(
        "--require-signatures",
        action=argparse.BooleanOptionalAction,
        default=require_default,
        help=f"two-person sign-offs count only when signed by a second person's allowed key ({default})",
    )
    parser.add_argument(
        "--allowed-signers", metavar="FILE", help="OpenSSH allowed_signers file: who may sign, with which key"
    )
    add_signing_key_argument(parser)
    add_settings_argument(parser)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--change-id", required=True, metavar="ID", help="the change ticket id (names the session file)"
    )
    parser.add_argument("--hosts", required=True, metavar="SPEC", help="gpu[01-16],login1 or @inventory[:group]")
    parser.add_argument(
        "--inventory", type=Path, metavar="FILE", help="Ansible INI/YAML inventory for names in --hosts"
    )
    parser.add_argument(
        "--runbook", default=None, metavar="FILE", help="runbook file or shipped id (default driver-upgrade-r580)"
    )
    parser.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="set a runbook parameter (repeatable)"
    )
    parser.add_argument("--sessions", type=Path, default=Path("sessions"), metavar="DIR", help="where change logs go")
    parser.add_argument("--operator", metavar="NAME", help="who drives (default: the login name)")
    add_signing_arguments(parser, require_default=True)
    parser.add_argument(
        "--local", action="store_true", help="this host only, probed through NVML (not supported by run yet)"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print every command each node and stage would run, filled in, and the gate items; "
        "nothing runs but a read-only probe and no change log is written",
    )
    add_history_argument(parser)
    add_connection_arguments(parser)
    add_backend_arguments(parser)


def check_refresh(seconds: float) -> None:
    from cockpit.errors import BadInput

    if not seconds > 0:
        raise BadInput(f"--refresh must be a positive number of seconds, got {seconds:g}")


def transport_for(
    hosts: list[str],
    targets_by_name: Mapping[str, HostTarget],
    params: Mapping[str, ParamValue],
    args: argparse.Namespace,
    backend: BackendOptions | None = None,
) -> Transport:
    """An SSH transport to the nodes plus the control host the runbook's control steps use
    (and the one the backend's tools run on, when its settings name one)."""
    from cockpit.fleet.transport import HostTarget, Transport, TransportOptions
    from cockpit.runbook.placeholders import validate_host_name

    targets = [targets_by_name.get(h) or HostTarget(name=h) for h in hosts]
    control = params.get("control_host")
    if control and str(params.get("scheduler", "none")) != "none" and control not in hosts:
        targets.append(HostTarget(name=validate_host_name(str(control))))
    engine_host = backend.control_host() if backend is not None else None
    if engine_host and engine_host not in {t.name for t in targets}:
        targets.append(targets_by_name.get(engine_host) or HostTarget(name=engine_host))
    options = TransportOptions(
        ssh_config=args.ssh_config, known_hosts=args.known_hosts, accept_new_host_keys=args.accept_new_host_keys
    )
    return Transport(targets, options)


async def drive_window(session: Session, refresh_s: float, *, autopilot: bool = False) -> int:
    """Run the cockpit on ``session``; however it ends, pause the window unless it closed.

    SIGTERM or SIGHUP pauses it at once (see :func:`~cockpit.commands.terminal.pause_on_signals`)
    and ends the app; the session is then closed, which releases the operator lock."""
    from cockpit.commands.terminal import pause_on_signals, paused_by_signal
    from screens.app import build_app

    app = build_app(session, refresh_s=refresh_s, autopilot=autopilot)
    try:
        with pause_on_signals(session, lambda signum: app.exit_for_sure(128 + signum)) as received:
            result = await app.run_async()
        if received:
            return paused_by_signal(session, received[0])
        if session.ended is not None:  # a person ended it on the screen (E): where the log is, the ticket
            for line in session.ended.words():
                print(line)
        return 0 if result is None else int(result)
    finally:
        from cockpit.engine.planner import WINDOW_THROUGH

        if session.state.ended_at is None and session.next_plan().person_must == WINDOW_THROUGH:
            # the window is through: the engine puts back what it changed for it (a window left
            # unfinished keeps its record on the cluster, for cockpit resume to go on with)
            from cockpit.fleet.backends.base import BackendError

            try:
                await session.end_window()
            except BackendError as exc:  # the record stays on the cluster: said, for a person to act on
                session.note(f"putting back the engine's changes failed: {exc}")
                print(f"cockpit: putting back the engine's changes failed: {exc}", file=sys.stderr)
        if session.state.ended_at is None:
            session.pause()
        await session.close()


def start_tool_log(path: Path | None) -> None:
    """``--log-file``: the cockpit's own diagnostics (python logging, DEBUG and up) go to ``path``;
    nothing of them reaches the terminal or the change log."""
    if path is None:
        return
    import logging

    from cockpit.errors import BadInput

    try:
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--log-file {path}: {exc.strerror or exc}") from None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("cockpit")
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    root.propagate = False  # stderr belongs to the UI
    root.info("cockpit started: %s", " ".join(sys.argv))


def window_trust(args: argparse.Namespace, operator: str, loaded: LoadedRunbook | None = None) -> Trust:
    """The signing setup ``--require-signatures`` (default on), ``--allowed-signers`` and
    ``--signing-key`` (or the agent) ask for; refused in one line when it cannot hold. The
    site's settings and the runbook's ``[trust]`` table (``loaded``) can only add to it."""
    from cockpit.changelog.sshsig import choose_signer, read_allowed_signers
    from cockpit.changelog.trust import load_site_trust
    from cockpit.errors import BadInput
    from cockpit.session.opening import Trust

    site = load_site_trust().with_runbook(loaded)  # the site's and the runbook's word hold over the command line's
    if site.site_requires and not args.require_signatures:
        raise BadInput(f"this site requires signatures ({site.source}): --no-require-signatures is not allowed")
    if site.require_signatures and not args.require_signatures:
        raise BadInput(f"{site.who_requires()} requires signatures: --no-require-signatures is not allowed")
    if not args.allowed_signers and site.allowed_signers:
        args.allowed_signers = site.allowed_signers
    if args.require_signatures and not args.allowed_signers:
        raise BadInput(
            "signatures are required (the default for run): give --allowed-signers FILE naming the reviewers' keys, "
            "or --no-require-signatures"
        )
    if args.allowed_signers:
        read_allowed_signers(args.allowed_signers)  # a bad file is refused now, not at the first sign-off
    signer = choose_signer(args.signing_key, operator, required=args.require_signatures)
    return Trust(require_signatures=args.require_signatures, allowed_signers=args.allowed_signers, signer=signer)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from cockpit.changelog.identity import check_person_name
    from cockpit.changelog.journal import validate_change_id
    from cockpit.commands.backend_flags import backend_options, check_runbook_backend
    from cockpit.commands.terminal import require_terminal
    from cockpit.errors import BadInput
    from cockpit.fleet.backends.registry import make_backend
    from cockpit.fleet.inventory import load_inventory, parse_host_spec
    from cockpit.fleet.nodeset import NameBudget
    from cockpit.fleet.targets import ConnectionSource
    from cockpit.runbook.loader import DEFAULT_RUNBOOK, check_parameter_values, load
    from cockpit.runbook.placeholders import parse_param_assignment, resolve_parameters
    from cockpit.session.operator import Session, default_operator

    if args.local:
        raise BadInput("cockpit run --local is not supported yet; use 'cockpit probe --local' to read this host")
    try:
        validate_change_id(args.change_id)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if args.ssh_config is not None and not args.ssh_config.is_file():
        raise BadInput(f"--ssh-config {args.ssh_config}: no such file")
    budget = NameBudget()  # one cap on names over --inventory and --hosts together
    inventory = load_inventory(args.inventory, budget=budget) if args.inventory else None
    targets = parse_host_spec(args.hosts, inventory=inventory, budget=budget)
    loaded = load(args.runbook or DEFAULT_RUNBOOK)
    params = resolve_parameters(loaded.runbook, dict(parse_param_assignment(p) for p in args.param), os.environ)
    check_parameter_values(loaded.runbook, params)
    backend = backend_options(args)
    check_runbook_backend(loaded.runbook, backend, params)
    check_refresh(args.refresh)
    if args.dry_run and args.history is not None:
        raise BadInput("--history goes with a window's forecast; a --dry-run has none")
    operator = check_person_name(default_operator() if args.operator is None else args.operator, "--operator")
    if not args.dry_run:
        require_terminal(
            "run",
            ("cockpit run --dry-run ...", "a read-only look"),
            ("cockpit pair --no-attach ...", "the window in tmux"),
        )
    trust = None if args.dry_run else window_trust(args, operator, loaded)
    notifier = None if args.dry_run else notifier_for(args)
    history = read_history(args, loaded, args.change_id)
    start_tool_log(args.log_file)

    if args.dry_run:
        from cockpit.commands.dry_run import dry_run

        async def rehearse() -> int:
            merged = {**loaded.runbook.defaults(), **params}
            transport = transport_for([t.name for t in targets], {t.name: t for t in targets}, merged, args, backend)
            engine = make_backend(backend, transport=transport)  # asked nothing: its steps are shown
            return await dry_run(args.change_id, loaded, params, targets, operator, transport, engine)

        return asyncio.run(rehearse())

    async def main() -> int:
        transport = transport_for([t.name for t in targets], {t.name: t for t in targets}, params, args, backend)
        engine = make_backend(backend, transport=transport)
        connection = ConnectionSource(
            ssh_config=args.ssh_config, known_hosts=args.known_hosts, host_spec=args.hosts, inventory=args.inventory
        )
        session = Session.start(
            sessions_dir=args.sessions,
            change_id=args.change_id,
            loaded=loaded,
            params=params,
            targets=targets,
            operator=operator,
            transport=transport,
            connection=connection,
            trust=trust,
            backend=engine,
            backend_options=backend,
        )
        note_history(session, history)
        if notifier is not None:
            session.notify_with(notifier)
        return await drive_window(session, args.refresh)

    return asyncio.run(main())
