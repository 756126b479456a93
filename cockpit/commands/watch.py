"""`cockpit watch SESSION [--for 72h]`: keep the runbook's triggers armed after the window.

Headless, for a service manager to run (a systemd unit's example is in the docs): it
reopens the ended window's change log, probes the nodes the window changed every
``--period`` (a node away is asked less and less often, up to ``--max-backoff``), appends
what it finds to the same log as its own events, and tells the ``--settings`` webhooks of
each finding. Stopped (SIGTERM, a crash) and started again, it takes the same watch up from
the log. Exit 0 when its time ran out with nothing found (or a finished watch is started
again), 1 when it found something, 2 for bad input. The logic is
:mod:`cockpit.session.watch`'s.
"""

from __future__ import annotations

import argparse
import re
from datetime import timedelta

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, flag: str, *, least_s: float, most_s: float) -> timedelta:
    """``72h``, ``90m``, ``1h30m``, ``3d`` or plain seconds, bounded; one line when not."""
    from cockpit.errors import BadInput

    value = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        seconds = float(value)
    elif value and _DURATION.sub("", value) == "":
        seconds = sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(value))
    else:
        raise BadInput(f"{flag} {text!r}: a duration such as 72h, 90m, 1h30m, 3d or seconds")
    if not least_s <= seconds <= most_s:
        raise BadInput(f"{flag} {text!r}: between {least_s:g} s and {most_s:g} s")
    return timedelta(seconds=seconds)


def configure(parser: argparse.ArgumentParser) -> None:
    from cockpit.commands.resume import add_session_arguments

    add_session_arguments(parser, operator_help="who runs the watch: the window's operator (default: the recorded one)")
    parser.add_argument("--for", dest="duration", default="72h", metavar="DURATION", help="how long (default 72h)")
    parser.add_argument("--period", default="5m", metavar="DURATION", help="between two probes of a node (default 5m)")
    parser.add_argument(
        "--max-backoff",
        default="1h",
        metavar="DURATION",
        help="the longest wait before asking a node that does not answer again (default 1h)",
    )
    parser.add_argument("--again", action="store_true", help="start a new watch when the window's last watch has ended")


def run(args: argparse.Namespace) -> int:
    import asyncio
    import signal
    import sys

    from cockpit.changelog.identity import check_person_name
    from cockpit.changelog.sshsig import choose_signer
    from cockpit.commands.resume import check_session_files, connection_file
    from cockpit.commands.run import notifier_for, start_tool_log, transport_for
    from cockpit.errors import BadInput
    from cockpit.fleet.backends.registry import BackendOptions
    from cockpit.fleet.transport import HostTarget, Transport
    from cockpit.session.opening import reopen
    from cockpit.session.watch import Watch
    from cockpit.view.inert import inert

    check_session_files(args)
    duration = parse_duration(args.duration, "--for", least_s=60, most_s=90 * 86400)
    period = parse_duration(args.period, "--period", least_s=10, most_s=86400)
    backoff = parse_duration(args.max_backoff, "--max-backoff", least_s=10, most_s=86400)
    notifier = notifier_for(args)  # a bad settings file or a missing secret: refused before anything starts
    header = reopen(args.session, operator=None, runbook=args.runbook)[0].header
    if header.operator == "demo-operator":
        raise BadInput(f"session {header.change_id} ran on the demo's simulated fleet, which is gone: nothing to watch")
    operator = check_person_name(args.operator or header.operator, "--operator")
    if operator != header.operator:
        raise BadInput(f"session {header.change_id} belongs to operator {header.operator}, not {operator}")
    signer = choose_signer(args.signing_key, operator, required=header.require_signatures)
    backend = BackendOptions.from_recorded(header.backend, header.backend_options)
    args.ssh_config = connection_file("--ssh-config", args.ssh_config, header.ssh_config)
    args.known_hosts = connection_file("--known-hosts", args.known_hosts, header.known_hosts, must_exist=False)
    recorded = {t["name"]: HostTarget(**t) for t in header.targets}
    start_tool_log(args.log_file)

    def factory(hosts: list[str]) -> Transport:
        return transport_for(hosts, recorded, dict(header.parameters), args, backend)

    def say(line: str) -> None:
        print(inert(line), flush=True)

    async def main() -> int:
        watch = Watch(
            args.session,
            operator=operator,
            runbook=args.runbook,
            transport_factory=factory,
            duration=duration,
            period_s=period.total_seconds(),
            max_backoff_s=backoff.total_seconds(),
            signer=signer,
            notifier=notifier,
            say=say,
            again=args.again,
        )
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        stopped: list[int] = []

        def stop(signum: int) -> None:
            stopped.append(signum)
            if task is not None:
                task.cancel()

        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(signum, stop, signum)
        try:
            result = await watch.run()
        except asyncio.CancelledError:
            if not stopped:
                raise
            say(f"watch of {header.change_id} stopped ({signal.Signals(stopped[0]).name}); started again, it goes on")
            return 0
        # a finished watch started again (a service manager's restart) is no failure: 0, or it restarts forever
        return 1 if result.found_any and not watch.finished else 0

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:  # pragma: no cover - the handler above takes SIGINT
        print("stopped", file=sys.stderr)
        return 0
