"""Probing the fleet for a session: probe rounds, the live per-GPU detail kept in memory,
and the probe summaries (and trusted-on-first-use host keys) recorded in the change log."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from cockpit.changelog.events import Event, EventKind
from cockpit.changelog.facts import ProbeFacts
from cockpit.engine.state import SYSTEM_ACTOR
from cockpit.fleet.probes import fact_probes, probe_node
from cockpit.fleet.transport import Transport
from cockpit.gpu.nodestate import NodeState
from cockpit.session.recording import Recorder


def probe_summary(state: NodeState) -> dict[str, Any]:
    """What a probe records of a node (TOML has no null: ``None`` left out)."""
    summary = {k: v for k, v in state.summary().items() if v is not None}
    if state.health_evidence:
        summary["health_evidence"] = state.health_evidence
    if state.error:
        summary["error"] = state.error
    return summary


class Prober:
    """Probes the session's nodes over its transport and records what changed."""

    def __init__(self, recorder: Recorder, transport: Transport | None) -> None:
        self.recorder = recorder
        self.transport = transport
        #: the latest probe of each node, with the per-GPU detail the change log keeps only at step boundaries
        self.live: dict[str, NodeState] = {}
        #: nodes with a step in flight: probe rounds leave them alone
        self.busy: set[str] = set()
        #: probes asked for these nodes, being read now (a step's and a check's may overlap): Next waits for them
        self._reading: Counter[str] = Counter()
        self._round_lock = asyncio.Lock()
        #: told (no arguments) when a probe asked for some nodes starts or ends
        self.listeners: list[Callable[[], None]] = []

    @property
    def probing(self) -> frozenset[str]:
        """The nodes a probe asked for them is reading now: a check that reads it waits for it."""
        return frozenset(node for node, count in self._reading.items() if count > 0)

    async def probe_one(self, node: str, *, platform: bool = False) -> NodeState:
        """One node's probe; ``platform`` (a probe or record step) adds the platform sections
        and the runbook's own facts."""
        assert self.transport is not None
        state = self.recorder.state
        gpus = state.nodes[node].baseline.gpu_count if node in state.nodes else None
        probed = await probe_node(
            self.transport,
            node,
            baseline_gpus=int(gpus) if gpus is not None else None,
            platform=platform,
            facts=fact_probes(self.recorder.runbook) if platform else (),
        )
        self.live[node] = probed
        return probed

    def record_probe(self, node: str, state: NodeState, *, force: bool = False, in_round: bool = False) -> Event | None:
        """Record a probe when its summary changed; ``force`` (a step boundary) records it in full.
        ``in_round``: a probe round's, whose end judges every trigger on every node: the
        triggers judge this node alone meanwhile (a round of 2,000 probes, each judged over
        2,000 nodes, took minutes). What only the fleet as a whole shows (driver versions
        that differ) or the clock alone (another node's reboot timeout) fires at the round's
        end, not between two of its probes."""
        progress = self.recorder.state.nodes.get(node)
        if progress is None:
            return None
        summary = probe_summary(state)
        recorded = {k: v for k, v in progress.probe.to_toml().items() if k not in ("gpus", "mig_layout")}
        if not force and recorded == summary:
            return None
        if force:
            summary["gpus"] = [g.model_dump(exclude_none=True) for g in state.gpus]
            if state.platform is not None and state.platform.mig_layout is not None:
                summary["mig_layout"] = state.platform.mig_layout
        return self.recorder.record(
            EventKind.PROBE,
            actor=SYSTEM_ACTOR,
            node=node,
            facts=ProbeFacts.model_validate(summary),
            judge_only=node if in_round else None,
        )

    def _told(self) -> None:
        for listener in list(self.listeners):
            listener()

    def record_accepted_host_keys(self) -> None:
        """A host key trusted on first use (--accept-new-host-keys) is a fact of the window."""
        accepted = getattr(self.transport, "accepted_host_keys", None)
        while accepted:
            host, line = accepted.popitem()
            self.recorder.record(
                EventKind.NOTE,
                actor=SYSTEM_ACTOR,
                node=host if host in self.recorder.state.nodes else None,
                note=f"new host key accepted for {host}: {line}",
            )

    async def refresh(self, nodes: Sequence[str] | None = None) -> dict[str, NodeState]:
        """One probe round over ``nodes`` (default: every node without a step in flight).

        Rounds never overlap: a caller that finds one running waits for it. Probe
        events are recorded only when a node's summary changed; the triggers are
        evaluated after the round (also for the passing of time).

        A probe asked for some nodes (a step's closing probe, a check read again) is what
        their next check reads: from the call on, until it is recorded, :attr:`probing`
        names them. The fleet-wide rounds do not (a check reads the latest recorded probe;
        a big fleet is always being probed somewhere).
        """
        if self.transport is None:
            return {}
        asked = list(nodes) if nodes is not None else []
        self._reading.update(asked)
        if asked:
            self._told()
        try:
            return await self._round(nodes)
        finally:
            self._reading.subtract(asked)
            for name in asked:
                if self._reading[name] <= 0:
                    self._reading.pop(name, None)
            if asked:
                self._told()

    async def _round(self, nodes: Sequence[str] | None) -> dict[str, NodeState]:
        async with self._round_lock:
            self.recorder.absorb_foreign()
            hosts = self.recorder.state.hosts
            names = list(nodes) if nodes is not None else [n for n in hosts if n not in self.busy]
            results = await asyncio.gather(*(self.probe_one(n) for n in names))
            out = dict(zip(names, results, strict=True))
            self.record_accepted_host_keys()
            for name, state in out.items():
                await self.recorder.pacer.turn()  # a round's records in turns: keys between them
                self.record_probe(name, state, in_round=True)
            await self.recorder.pacer.turn()
            self.recorder.evaluate_triggers()
            return out
