"""`cockpit demo`: the whole cockpit against the built-in simulated fleet.

With ``--autopilot --headless`` no terminal UI opens: the autopilot drives the window
end to end through the same session engine, printing each action, and the exit
status says whether the window ended as the scenario intends.

``--backend kubernetes`` runs the window through the GPU Operator backend (operator-managed)
against a simulated Kubernetes API and GPU Operator (:mod:`cockpit.session.kube_demo`),
with its own scenarios (:data:`KUBE_EXPECTED_OUTCOME`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:  # configure() imports nothing heavy: the engine loads when the demo runs
    from contextlib import AbstractAsyncContextManager

    from cockpit.engine.actions import Action
    from cockpit.session.autopilot import AutopilotResult
    from cockpit.session.operator import Session

#: How each scenario's window is meant to end when driven by the autopilot.
EXPECTED_OUTCOME = {
    "happy": "keep-upgraded-path",
    "slow": "keep-upgraded-path",
    "flaky-link": "keep-upgraded-path",
    "gpu-missing": "roll-back",
    "no-return": "roll-back",
    "fabric-manager": "roll-back",
    "mismatch": "roll-back",
    "xid": "roll-back",
    "smoke-false-pass": "roll-back",
    "hgx-lockstep": "stopped-before-change",
    "held-packages": "keep-upgraded-path",
    "rollback-repo-gone": "roll-back",
    "rhel9": "keep-upgraded-path",
    "rhel9-precompiled": "keep-upgraded-path",
    "non-root": "keep-upgraded-path",
    "sudo-password": "stopped-before-change",
    "secure-boot": "stopped-before-change",
    "gpu-holders": "keep-upgraded-path",
    "containerd-only": "keep-upgraded-path",
    "ubuntu-archive-hgx": "keep-upgraded-path",
    "precompiled-rollback": "roll-back",
    "r590-rename": "keep-upgraded-path",
    "open-only-gpu": "stopped-before-change",
    "fabric-incomplete": "roll-back",
    "nvlink-down": "roll-back",
    "sxid": "roll-back",
    "xid-94": "roll-back",
    "xid-95": "roll-back",
    "xid-143": "roll-back",
    "xid-149": "roll-back",
    "gpu-missing-no-xid": "roll-back",
    "pcie-downtrained": "roll-back",
    "peermem-missing": "roll-back",
    "rejoin-slow": "roll-back",
    "podman": "keep-upgraded-path",
    "cdi-stale": "roll-back",
    "k8s-holders": "keep-upgraded-path",
    "flavour-flip": "roll-back",
    "imex": "keep-upgraded-path",
    "dcgm-old": "roll-back",
    "mig-lost": "roll-back",
    "load-ecc": "roll-back",
    "imex-skew": "stopped-before-change",
}

#: scenarios whose right end is a person's decision: Next stops at this failed step, before anything changed
STOPPED_BY = {
    "hgx-lockstep": "upgrade/target-downloadable on gpu02 failed",
    # the evidence freeze's first docker step is the first that needs root, on the canary
    "sudo-password": "freeze/image-inspect failed (sudo -n on gpu01 asks for a password",
    # the pre-change item record/secure-boot, before the upgrade: its evidence, as both say it
    "secure-boot": "gpu02: Secure Boot on and the module's signer (DKMS module signing key) is not an enrolled key",
    # the pre-change item record/modules-fit-gpus: a Blackwell GPU and a proprietary target
    "open-only-gpu": "gpu02: NVIDIA B200 runs only the open GPU kernel modules",
    # the pinned dry run: the mirror has no nvidia-imex at the target driver's version
    "imex-skew": "upgrade/target-downloadable on gpu02 failed",
}


#: kubernetes: how each scenario of the simulated GPU Operator cluster (cockpit.session.kube_demo.KUBE_SCENARIOS)
#: ends under the autopilot: every node through (the runbook has no closing stages, its last wave
#: ends it), or stopped for a person
KUBE_EXPECTED_OUTCOME = {
    "happy": "window-through",
    "upgrade-failed": "stopped",
    "canary-rollback": "stopped",
    "precompiled": "window-through",
    "gitops-revert": "stopped",
}
#: kubernetes scenarios whose right end is a person's decision: Next stops on these words
KUBE_STOPPED_BY = {
    # the second node crash-loops on any driver: its rollback fails too, the trigger stays for a person
    "upgrade-failed": "trigger 'engine-reported-failure' fired on gpu02",
    # the canary rolled back to the recorded driver: the wave's failure budget stops the rollout
    "canary-rollback": "1 rolled back (gpu01)",
    # refused before any change: a GitOps controller keeps the ClusterPolicy
    "gitops-revert": "is kept by Argo CD application gpu-operator",
}
#: the scenario each backend's demo tells without --scenario
DEFAULT_SCENARIO = {"ssh": "gpu-missing", "kubernetes": "upgrade-failed"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nodes", type=int, default=8, metavar="N", help="simulated GPU nodes (default 8, up to 4096; kubernetes 64)"
    )
    parser.add_argument(
        "--scenario",
        default=None,
        metavar="NAME",
        help="fault scenario: "
        + ", ".join(EXPECTED_OUTCOME)
        + " (default gpu-missing); with --backend kubernetes: "
        + ", ".join(KUBE_EXPECTED_OUTCOME)
        + " (default upgrade-failed)",
    )
    parser.add_argument(
        "--sessions",
        type=Path,
        default=Path("sessions"),
        metavar="DIR",
        help="where the change log is written (default ./sessions)",
    )
    parser.add_argument("--change-id", metavar="ID", help="change id (default DEMO-<UTC timestamp>)")
    parser.add_argument("--autopilot", action="store_true", help="let the demo autopilot drive the window")
    parser.add_argument("--headless", action="store_true", help="no terminal UI (needs --autopilot)")
    parser.add_argument("--speed", type=float, default=1.0, help="simulator time scale: 2 = twice as fast")
    parser.add_argument("--seed", type=int, default=0, help="simulator seed")
    parser.add_argument("--refresh", type=float, default=2.0, metavar="S", help="fleet refresh period in the UI")
    parser.add_argument(
        "--runbook",
        default=None,
        metavar="FILE",
        help="runbook file or shipped id (default driver-upgrade-r580; kubernetes: driver-upgrade-gpu-operator)",
    )
    from cockpit.commands.backend_flags import add_backend_arguments

    add_backend_arguments(parser, settings=False)  # the simulated engine needs no settings


#: backend -> the simulator that plays its engine for the demo (ssh: the simulated nodes themselves);
#: each backend's simulator adds itself here
#: (kubernetes: the simulated Kubernetes API and GPU Operator, cockpit.sim.kube)
#: (slurm: a real local Slurm the demo starts, cockpit.session.slurm_demo)
DEMO_BACKENDS: frozenset[str] = frozenset({"ssh", "kubernetes", "slurm"})


def run(args: argparse.Namespace) -> int:
    import asyncio

    from cockpit.errors import BadInput

    backend = getattr(args, "backend", "ssh")
    from cockpit.commands.backend_flags import BACKENDS

    if backend == "kubernetes":
        return _run_kubernetes(args)
    if args.scenario is None:
        args.scenario = DEFAULT_SCENARIO["ssh"]
    if args.scenario not in EXPECTED_OUTCOME:
        raise BadInput(f"unknown scenario {args.scenario!r}; known: {', '.join(EXPECTED_OUTCOME)}")
    from cockpit.sim.fleet import MAX_NODES, open_files_needed, raise_open_file_limit

    if not 1 <= args.nodes <= MAX_NODES:
        raise BadInput(f"--nodes must be between 1 and {MAX_NODES}")
    if backend == "slurm":
        from cockpit.session.slurm_demo import SLURM_MAX_NODES, why_not

        if not 1 <= args.nodes <= SLURM_MAX_NODES:
            raise BadInput(f"--nodes must be between 1 and {SLURM_MAX_NODES} with --backend slurm (a slurmd each)")
        missing = why_not()
        if missing:
            raise BadInput(missing)
    try:
        raise_open_file_limit(open_files_needed(args.nodes, clients_too=True))
    except ValueError as exc:
        raise BadInput(f"--nodes {args.nodes}: {exc}") from None
    _check_common(args)
    if args.nodes < 2 and EXPECTED_OUTCOME[args.scenario] == "roll-back":
        raise BadInput(f"scenario {args.scenario} needs at least 2 nodes (its fault hits the second)")

    if backend not in BACKENDS:
        raise BadInput(f"--backend {backend}: unknown backend (expected one of: {', '.join(BACKENDS)})")
    if backend == "ansible":  # the generated playbook's command and reboot tasks are modules: Python on the node
        raise BadInput(
            "cockpit demo --backend ansible: its playbook runs Ansible modules, which need Python on the "
            "targets, and the simulated nodes have none"
        )
    if backend not in DEMO_BACKENDS:
        raise BadInput(f"cockpit demo --backend {backend}: this build has no simulated {backend} to show it with yet")
    _check_window(args)
    return asyncio.run(_demo(args))


def _check_common(args: argparse.Namespace) -> None:
    from cockpit.errors import BadInput

    if args.speed <= 0:
        raise BadInput("--speed must be positive")
    if not args.refresh > 0:
        raise BadInput("--refresh must be a positive number of seconds")


def _check_window(args: argparse.Namespace) -> None:
    """What every backend's demo checks last: the autopilot, the change id, the terminal."""
    from cockpit.errors import BadInput

    if args.headless and not args.autopilot:
        raise BadInput("--headless needs --autopilot (nobody would be at the controls)")
    if args.change_id is not None:
        from cockpit.changelog.journal import validate_change_id

        try:
            validate_change_id(args.change_id)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    if not args.headless:
        from cockpit.commands.terminal import require_terminal

        require_terminal("demo", ("cockpit demo --autopilot --headless", ""))


def _run_kubernetes(args: argparse.Namespace) -> int:
    """``--backend kubernetes``: the window through the GPU Operator backend on the simulated cluster,
    its runbook checked against the backend as ``cockpit run --backend kubernetes`` checks it."""
    import asyncio

    from cockpit.commands.backend_flags import backend_options, check_runbook_backend
    from cockpit.errors import BadInput
    from cockpit.runbook.loader import load
    from cockpit.session.kube_demo import KUBE_MAX_NODES, KUBE_RUNBOOK

    if args.scenario is None:
        args.scenario = DEFAULT_SCENARIO["kubernetes"]
    if args.scenario not in KUBE_EXPECTED_OUTCOME:
        raise BadInput(
            f"unknown scenario {args.scenario!r} for --backend kubernetes; known: {', '.join(KUBE_EXPECTED_OUTCOME)}"
        )
    if not 1 <= args.nodes <= KUBE_MAX_NODES:
        raise BadInput(f"--nodes must be between 1 and {KUBE_MAX_NODES} with --backend kubernetes")
    _check_common(args)
    if args.nodes < 2 and args.scenario in KUBE_STOPPED_BY:
        raise BadInput(f"scenario {args.scenario} needs at least 2 nodes (its fault hits the second)")
    args.runbook = args.runbook or KUBE_RUNBOOK
    check_runbook_backend(load(args.runbook).runbook, backend_options(args))
    _check_window(args)
    return asyncio.run(_demo(args))


async def _demo(args: argparse.Namespace) -> int:
    backend = getattr(args, "backend", "ssh")
    async with _demo_session(args, backend) as (session, _simulator):
        if args.headless:
            return await _headless(session, args.scenario, backend=backend)
        from cockpit.commands.run import drive_window

        return await drive_window(session, args.refresh, autopilot=args.autopilot)


class _WindowFlags(TypedDict):
    """What every backend's demo session takes from the same flags."""

    nodes: int
    scenario: str
    sessions_dir: Path
    change_id: str | None
    speed: float


def _demo_session(args: argparse.Namespace, backend: str) -> AbstractAsyncContextManager[tuple[Session, object]]:
    """The window on ``backend``'s simulator (ssh: the simulated nodes; kubernetes: the cluster)."""
    flags = _WindowFlags(
        nodes=args.nodes, scenario=args.scenario, sessions_dir=args.sessions, change_id=args.change_id, speed=args.speed
    )
    if backend == "kubernetes":
        from cockpit.session.kube_demo import kube_demo_session

        return kube_demo_session(**flags, runbook=args.runbook)
    if backend == "slurm":
        from cockpit.session.slurm_demo import slurm_demo_session

        return slurm_demo_session(**flags, seed=args.seed, runbook=args.runbook)
    from cockpit.session.demo import demo_session

    return demo_session(**flags, seed=args.seed, **({"runbook": args.runbook} if args.runbook else {}))


async def _headless(session: object, scenario: str, *, backend: str = "ssh") -> int:
    """The autopilot drives; SIGTERM or SIGHUP pauses the window and stops it (exit 128+N)."""
    import asyncio

    from cockpit.commands.terminal import pause_on_signals, paused_by_signal
    from cockpit.session.operator import Session

    assert isinstance(session, Session)
    driving = asyncio.current_task()
    assert driving is not None
    with pause_on_signals(session, lambda _signum: driving.cancel()) as received:
        try:
            return await drive_and_report(session, scenario, backend)
        except asyncio.CancelledError:
            if not received:
                raise
            return paused_by_signal(session, received[0])


async def drive_and_report(session: Session, scenario: str, backend: str = "ssh") -> int:
    """The autopilot drives the window; what it did and how the window ended, printed.

    0 when it ended as the scenario intends."""
    import time

    from cockpit.changelog.events import wave_number
    from cockpit.engine.actions import StartWave
    from cockpit.session.autopilot import drive

    started = time.monotonic()
    through = "" if backend == "ssh" else f" through the {backend} backend"
    print(
        f"cockpit demo: change {session.change_id}, {len(session.state.hosts)} simulated nodes{through}, "
        f"scenario {scenario}; log {session.path}",
        flush=True,
    )

    def show(action: Action) -> None:
        fields = action.model_dump()  # the kinds differ in what they name; print what this one does
        what = " ".join(
            x for x in (fields.get("stage"), fields.get("step") or fields.get("item"), fields.get("node")) if x
        )
        if isinstance(action, StartWave):  # the wave as the screen and the ticket number it, from 1
            what = f"wave {wave_number(action.wave)}"
        print(f"[{time.monotonic() - started:6.1f}s] {action.kind.value:<15} {what}", flush=True)

    result = await drive(session, on_action=show)
    st = session.state
    for trig in st.fired():
        print(f"trigger fired: {trig.id}: {trig.evidence}")
    if backend == "kubernetes":
        return _kube_outcome(session, result, scenario, time.monotonic() - started)
    expected = EXPECTED_OUTCOME[scenario]
    print(
        f"outcome: {result.outcome} (expected {expected}); {result.actions} actions in "
        f"{time.monotonic() - started:.1f}s"
    )
    if result.stuck_on:
        print(f"stopped: {result.stuck_on}")
    print(f"session file: {session.path}")
    if scenario in STOPPED_BY:  # a person's decision is its right end: stopped there, and said so
        stopped_right = result.stuck_on is not None and STOPPED_BY[scenario] in result.stuck_on
        return 0 if stopped_right and result.outcome == expected else 1
    return 0 if result.outcome == expected and st.ended_at is not None else 1


def _kube_outcome(session: Session, result: AutopilotResult, scenario: str, took_s: float) -> int:
    """Whether the Kubernetes demo's window ended as its scenario intends: every node done with
    Next saying the window is through, or Next stopped on the scenario's words for a person."""
    from cockpit.engine.planner import WINDOW_THROUGH

    through = (
        result.stuck_on is None
        and session.next_plan().person_must == WINDOW_THROUGH
        and all(p.current == "done" for p in session.state.nodes.values())
    )
    outcome = "window-through" if through else "stopped" if result.stuck_on is not None else result.outcome
    expected = KUBE_EXPECTED_OUTCOME[scenario]
    print(f"outcome: {outcome} (expected {expected}); {result.actions} actions in {took_s:.1f}s")
    if result.stuck_on:
        print(f"stopped: {result.stuck_on}")
    print(f"session file: {session.path}")
    if scenario in KUBE_STOPPED_BY:
        return 0 if result.stuck_on is not None and KUBE_STOPPED_BY[scenario] in result.stuck_on else 1
    return 0 if outcome == expected else 1
