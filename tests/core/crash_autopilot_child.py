"""A writer for the crash test: starts or resumes a window on a running `cockpit sim`
and lets the autopilot drive it, printing ``ack SEQ`` once each event is durable.

Usage: python crash_autopilot_child.py SESSIONS_DIR CHANGE_ID SSH_CONFIG HOSTS
"""

from __future__ import annotations

import asyncio
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


if __name__ == "__main__":
    sessions_dir, change, config, spec = sys.argv[1:5]
    sys.exit(asyncio.run(main(Path(sessions_dir), change, Path(config), spec)))
