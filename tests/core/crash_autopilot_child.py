"""A writer for the crash test: starts or resumes a window on a running `cockpit sim`
and lets the autopilot drive it, printing ``ack SEQ`` once each event is durable.

Usage: python crash_autopilot_child.py SESSIONS_DIR CHANGE_ID SSH_CONFIG HOSTS

With ``--fork`` before the arguments it is a fork server: for each line ``OUT ERR`` read
from stdin it forks one writer whose stdout goes to the path OUT (a FIFO the test reads)
and stderr to ERR, prints the writer's pid, waits for it and prints ``exit STATUS``. Each
writer is still its own process, killed alone; the fork only spares each of the hundred
lives Python's start and the cockpit's imports, which are most of a life otherwise.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from cockpit.fleet.inventory import parse_host_spec
from cockpit.fleet.transport import HostTarget, Transport, TransportOptions
from cockpit.runbook.loader import load
from cockpit.session.autopilot import drive
from cockpit.session.operator import Session


async def main(sessions: Path, change_id: str, ssh_config: Path, hosts: str) -> int:
    targets = parse_host_spec(hosts)
    options = TransportOptions(ssh_config=ssh_config)

    def transport(names: list[str]) -> Transport:
        return Transport([HostTarget(name=n) for n in [*names, "control"]], options)

    path = sessions / f"{change_id}.toml"
    if path.exists():
        session = Session.resume(path, operator="demo-operator", transport_factory=transport)
    else:
        session = Session.start(
            sessions_dir=sessions,
            change_id=change_id,
            loaded=load(),
            params={"control_host": "control"},
            targets=targets,
            operator="demo-operator",
            transport=transport([t.name for t in targets]),
        )
    session.subscribe(lambda event: print(f"ack {event.seq}", flush=True))
    print(f"ready {session.state.last_seq}", flush=True)
    try:
        result = await drive(session, refresh_s=0.5)
        print(f"outcome {result.outcome} ended {session.state.ended_at is not None}", flush=True)
    finally:
        await session.close()
    return 0


def fork_server(sessions: Path, change_id: str, ssh_config: Path, hosts: str) -> int:
    for line in sys.stdin:
        out, err = line.split()
        pid = os.fork()
        if pid == 0:  # the writer: nothing of the server's loop or buffers runs in it
            os.dup2(os.open(out, os.O_WRONLY), 1)
            os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
            try:
                code = asyncio.run(main(sessions, change_id, ssh_config, hosts))
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            os._exit(code)
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exit {os.waitstatus_to_exitcode(status)}", flush=True)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    run = fork_server if args[0] == "--fork" else None
    sessions_dir, change, config, spec = args[1:5] if run else args[0:4]
    if run is not None:
        sys.exit(run(Path(sessions_dir), change, Path(config), spec))
    sys.exit(asyncio.run(main(Path(sessions_dir), change, Path(config), spec)))
