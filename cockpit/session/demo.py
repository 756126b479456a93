"""The demo: the whole cockpit against the built-in simulated fleet, in one process.

:func:`demo_session` binds :class:`cockpit.sim.SimFleet`'s ports on loopback, writes
its client files (an ssh_config and a throwaway known_hosts holding the fleet's real
host keys, so host-key checking stays on) to a temporary folder, and opens a
:class:`cockpit.session.operator.Session` on the shipped runbook. The fleet serves
SSH from the first connection on (the first probe round, after the first frame):
asyncssh is imported then, by the fleet and the transport, not before the screen shows.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from cockpit.changelog.events import utcnow
from cockpit.fleet.backends.base import Backend
from cockpit.fleet.backends.registry import BackendOptions
from cockpit.fleet.targets import HostTarget
from cockpit.fleet.transport import Transport
from cockpit.runbook.loader import DEFAULT_RUNBOOK, LoadedRunbook, load
from cockpit.runbook.model import ParamType, Runbook
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.operator import Session
from cockpit.sim import SimFleet
from cockpit.sim.scenarios import SCENARIOS, SPARE_REFERENCE

#: The story the demo tells by default: the canary passes, the second node comes back
#: from its reboot with a GPU missing, the trigger fires, the operator is led to roll back.
DEFAULT_SCENARIO = "gpu-missing"
DEFAULT_NODES = 8


#: The executor's pause between polls for a rebooted node's new boot id, at speed 1.
REBOOT_POLL_S = 2.0


def scaled_timeouts(runbook: Runbook, speed: float) -> dict[str, int]:
    """The runbook's timeouts (``*_timeout_s`` integer parameters) on the simulator's clock.

    The simulated fleet does everything ``speed`` times faster (a reboot takes
    ``REBOOT_DOWN_S / speed``), so the cockpit's patience is scaled alike: a node that
    never comes back fires ``node-not-back`` after ``reboot_timeout_s / speed`` real
    seconds, as late in simulated time as a real node would (never sooner: rounded up).
    """
    return {
        name: max(1, math.ceil(int(p.default) / speed))
        for name, p in runbook.parameters.items()
        if name.endswith("_timeout_s") and p.type is ParamType.INT and isinstance(p.default, int)
    }


def demo_change_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return "DEMO-" + now.strftime("%Y%m%d-%H%M%S")


@asynccontextmanager
async def demo_window(
    *,
    sessions_dir: Path,
    change_id: str | None,
    loaded: LoadedRunbook,
    speed: float,
    params: Mapping[str, ParamValue],
    targets: Sequence[HostTarget],
    operator: str,
    transport: Transport | None,
    clock: Callable[[], datetime],
    backend: Backend | None,
    backend_options: BackendOptions | None,
) -> AsyncIterator[Session]:
    """The window a demo opens on its simulator, as every backend's demo opens it: ``change_id``
    or ``DEMO-<UTC timestamp>``, the runbook's timeouts scaled to ``speed`` under ``params``
    (a demo's own, then a test's); on exit it is paused unless it ended, then closed."""
    session = Session.start(
        sessions_dir=sessions_dir,
        change_id=change_id or demo_change_id(),
        loaded=loaded,
        params={**scaled_timeouts(loaded.runbook, speed), **params},
        targets=targets,
        operator=operator,
        transport=transport,
        clock=clock,
        backend=backend,
        backend_options=backend_options,
    )
    try:
        yield session
    finally:
        if session.state.ended_at is None:
            session.pause()
        await session.close()


@asynccontextmanager
async def demo_session(
    *,
    nodes: int = DEFAULT_NODES,
    scenario: str = DEFAULT_SCENARIO,
    sessions_dir: Path = Path("sessions"),
    change_id: str | None = None,
    operator: str = "demo-operator",
    speed: float = 1.0,
    seed: int = 0,
    runbook: str = DEFAULT_RUNBOOK,
    clock: Callable[[], datetime] = utcnow,
    params: Mapping[str, ParamValue] | None = None,
    backend: Callable[[Transport], Backend] | None = None,
    backend_options: BackendOptions | None = None,
    in_process: bool = False,
) -> AsyncIterator[tuple[Session, SimFleet]]:
    """A live session on a simulated fleet; everything is stopped on exit.

    ``params`` override runbook parameters after the scaled timeouts (a test's shorter
    patience: a cockpit less patient than the runbook is stricter, never kinder).
    ``backend`` makes the engine the window goes through from the fleet's transport (its
    simulator on the fleet's control host), ``backend_options`` what the header records of it;
    neither: ssh, the simulated nodes themselves. ``in_process`` reaches the fleet through
    :class:`cockpit.sim.inprocess.InProcessTransport` (the tests of the logic above the
    transport: the same commands and results, without SSH); else over SSH on loopback."""
    loaded = load(runbook)
    with tempfile.TemporaryDirectory(prefix="cockpit-demo-") as tmp:
        fleet = SimFleet(nodes, scenario, seed=seed, speed=speed)
        try:
            transport: Transport
            if in_process:
                from cockpit.sim.inprocess import InProcessTransport

                fleet.serve_in_process()
                transport = InProcessTransport(fleet, fleet.transport_options(None))
            else:
                fleet.start_on_first_connection()
                files = fleet.write_client_files(Path(tmp))
                transport = Transport(fleet.targets(), fleet.transport_options(files))
            names = set(fleet.node_names)
            targets = [t for t in fleet.targets() if t.name in names]
            async with demo_window(
                sessions_dir=sessions_dir,
                change_id=change_id,
                loaded=loaded,
                speed=speed,
                params={
                    "control_host": "control",
                    # the fabric re-join gate's reference: the fleet's spare node of the same fabric
                    "rejoin_reference": SPARE_REFERENCE,
                    **dict(SCENARIOS[scenario].params),
                    **(params or {}),
                },
                targets=targets,
                operator=operator,
                transport=transport,
                clock=clock,
                backend=backend(transport) if backend is not None else None,
                backend_options=backend_options,
            ) as session:
                session.executor.reboot_poll_s = REBOOT_POLL_S / speed
                yield session, fleet
        finally:
            await fleet.stop()
