"""The Kubernetes demo: a window through the GPU Operator backend against a simulated cluster.

:func:`kube_demo_session` serves the Kubernetes API emulator (:mod:`cockpit.sim.kube`) on
127.0.0.1 with the simulated GPU Operator beside it, ``autoUpgrade`` on (the backend's
operator-managed mode), writes a kubeconfig reaching it to a temporary folder, and opens a
:class:`~cockpit.session.operator.Session` on ``driver-upgrade-gpu-operator`` with the
backend made from the options ``cockpit run --backend kubernetes --kubeconfig FILE
--kube-context emulator --gpu-operator-mode operator`` gives (through
:func:`~cockpit.fleet.backends.registry.make_backend`). Nothing goes over SSH: the runbook's
one step is the engine's, and probes read the nodes' labels and allocatable GPUs through the API.

The simulated upgrade controller is the one the backend's tests run against, as strict: it
walks k8s-operator-libs' state sequence one state per node per pass, every
:data:`TICK_S` seconds at speed 1 (``speed`` times more often at ``speed``), and the
cockpit's patience (the runbook's ``*_timeout_s``) is scaled alike, never kinder, and so is the
backend's pause between its polls of the nodes' pods and events (as the SSH demo scales the
executor's reboot polling): a crash-looping driver's ``BackOff`` events are seen between its
restarts, as a real kubelet's back-off leaves seconds to minutes between them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from tempfile import TemporaryDirectory

from cockpit.changelog.events import utcnow
from cockpit.fleet.backends.base import BackendName
from cockpit.fleet.backends.kubernetes import KubernetesBackend
from cockpit.fleet.backends.registry import BackendOptions, KubernetesSettings, make_backend
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.demo import demo_window
from cockpit.session.operator import Session
from cockpit.sim.fleet import node_names
from cockpit.sim.kube.api import KubeStore
from cockpit.sim.kube.cluster import NODE_DRIVER, served_cluster
from cockpit.sim.kube.gpu_operator import SimCluster

#: the runbook the demo walks: canary first, then waves, each released to the operator
KUBE_RUNBOOK = "driver-upgrade-gpu-operator"
#: the kubeconfig context the demo's backend is pointed at (the emulator's token)
KUBE_CONTEXT = "emulator"
#: seconds between the simulated controllers' passes at speed 1
TICK_S = 0.5
DEFAULT_NODES = 8
#: every controller pass reads the whole cluster: the demo keeps it to a cluster it can show
KUBE_MAX_NODES = 64


@dataclass(frozen=True)
class KubeScenario:
    description: str
    #: the second node's driver container crash-loops, on any version (BackOff, restarts past 10:
    #: upgrade-failed; its rollback fails the same way)
    second_fails: bool = False
    #: the canary's driver crash-loops at the target version only (its rollback brings it back)
    canary_fails_at_target: bool = False
    #: how the operator deploys the driver (cockpit.sim.kube.objects.ClusterObjects.flavor)
    flavor: str = "default"
    #: the ClusterPolicy is an Argo CD application's, which reverts any change to it (selfHeal)
    gitops: bool = False


KUBE_SCENARIOS: dict[str, KubeScenario] = {
    "happy": KubeScenario("every node through the operator's upgrade, wave by wave"),
    "upgrade-failed": KubeScenario(
        "the canary passes; the second node's new driver container crash-loops, the operator "
        "says upgrade-failed, engine-reported-failure fires, its rollback crash-loops too and the "
        "window stops for a person",
        second_fails=True,
    ),
    "canary-rollback": KubeScenario(
        "the canary's new driver crash-loops (upgrade-failed); the trigger rolls it back: the "
        "ClusterPolicy pinned to the recorded version, the node walked back through, the rollout halted",
        canary_fails_at_target=True,
    ),
    "precompiled": KubeScenario(
        "precompiled drivers (usePrecompiled: a DaemonSet per kernel and OS); every node through",
        flavor="precompiled",
    ),
    "gitops-revert": KubeScenario(
        "an Argo CD application keeps the ClusterPolicy and reverts any change to it: the cockpit "
        "refuses before changing anything and the window stops for a person",
        gitops=True,
    ),
}
DEFAULT_KUBE_SCENARIO = "upgrade-failed"


def demo_backend_options(kubeconfig: Path) -> BackendOptions:
    """The options ``cockpit run --backend kubernetes`` takes from its flags, for the demo's cluster."""
    return BackendOptions(
        name=BackendName.KUBERNETES,
        kubernetes=KubernetesSettings(kubeconfig=kubeconfig, context=KUBE_CONTEXT, mode="operator"),
    )


@asynccontextmanager
async def kube_demo_session(
    *,
    nodes: int = DEFAULT_NODES,
    scenario: str = DEFAULT_KUBE_SCENARIO,
    sessions_dir: Path = Path("sessions"),
    change_id: str | None = None,
    operator: str = "demo-operator",
    speed: float = 1.0,
    runbook: str = KUBE_RUNBOOK,
    clock: Callable[[], datetime] = utcnow,
    params: Mapping[str, ParamValue] | None = None,
) -> AsyncIterator[tuple[Session, SimCluster]]:
    """A live session through the Kubernetes backend on a simulated GPU Operator cluster of
    ``nodes`` nodes (``gpu01``..), all at the captured node's driver; everything stops on exit.

    ``params`` override runbook parameters after the scaled timeouts (a test's shorter
    patience: stricter, never kinder)."""
    story = KUBE_SCENARIOS[scenario]
    loaded = load(runbook)
    names = node_names(nodes)
    fail = {names[1]} if story.second_fails and len(names) > 1 else set()
    target = str((params or {}).get("target_version") or loaded.runbook.defaults().get("target_version") or "")
    sim = SimCluster(
        KubeStore(),
        version=NODE_DRIVER,
        tick_s=TICK_S / speed,
        fail={names[0]} if story.canary_fails_at_target else fail,
        fail_version=target if story.canary_fails_at_target else None,
        flavor=story.flavor,
        gitops=story.gitops,
    )
    with TemporaryDirectory(prefix="cockpit-demo-kube-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        async with served_cluster(sim, names, kubeconfig, context=KUBE_CONTEXT):
            options = demo_backend_options(kubeconfig)
            engine = make_backend(options, transport=None)
            if isinstance(engine, KubernetesBackend):  # its polls on the simulator's clock
                engine.poll_interval_s /= speed
            async with demo_window(
                sessions_dir=sessions_dir,
                change_id=change_id,
                loaded=loaded,
                speed=speed,
                params=params or {},
                targets=[HostTarget(name=n) for n in names],
                operator=operator,
                transport=None,
                clock=clock,
                backend=engine,
                backend_options=options,
            ) as session:
                yield session, sim
