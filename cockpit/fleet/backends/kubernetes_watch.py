"""What the Kubernetes backend has seen of a wave's nodes while it waits, and who hears of it.

A :class:`WaveTracker` keeps, for each node of the wave, its latest Node document, driver
and validator pods and the Kubernetes events seen so far (of the node and of its driver
pod), turns them into an :class:`Observation` whenever one changes and hands every
observation that differs from the node's last one to the callback, so the change log
gets each label transition and each event as it happens. When the wait is over it judges
each node's :class:`ReleaseResult` from the same view, for both modes
(:mod:`.kubernetes`, :mod:`.kubernetes_cockpit`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cockpit.fleet.backends import kubernetes_states as ks
from cockpit.fleet.backends.base import Observation, ObservationCallback, ObservedStage, ReleaseRequest, ReleaseResult

JsonObject = dict[str, Any]


@dataclass
class NodeView:
    node: JsonObject
    driver_pod: JsonObject | None = None
    validators: list[JsonObject] = field(default_factory=list)
    events: list[str] = field(default_factory=list)  # one line each, oldest first
    seen_events: set[str] = field(default_factory=set)
    last: Observation | None = None


@dataclass
class WaveTracker:
    operator_managed: bool
    baselines: Mapping[str, int | None]
    callback: ObservationCallback | None
    target_version: str | None = None
    views: dict[str, NodeView] = field(default_factory=dict)
    history: list[Observation] = field(default_factory=list)

    def observation(self, name: str, *, reason: str | None = None) -> Observation:
        view = self.views[name]
        return ks.observe_node(
            view.node,
            driver_pod=view.driver_pod,
            validators=view.validators,
            baseline_gpus=self.baselines.get(name),
            released=True,
            operator_managed=self.operator_managed,
            reason=reason if reason is not None else (view.last.reason if view.last else None),
            events=view.events,
            target_version=self.target_version,
        )

    def _emit(self, name: str, obs: Observation) -> None:
        view = self.views[name]
        if obs.changed_from(view.last):
            self.history.append(obs)
            if self.callback is not None:
                self.callback(obs)
        view.last = obs

    def node(self, doc: JsonObject) -> None:
        """A new version of a wave node's object (from the watch or a list)."""
        name = ks.node_name(doc)
        if name not in self.views:
            self.views[name] = NodeView(node=doc)
        else:
            self.views[name].node = doc
        self._emit(name, self.observation(name))

    def pods(self, name: str, pods: Iterable[JsonObject]) -> None:
        view = self.views[name]
        live = [p for p in pods if ks.is_driver(p) and not ks.terminating(p)]
        view.driver_pod = live[0] if live else None
        view.validators = [p for p in pods if ks.pod_app(p) == ks.VALIDATOR_APP and not ks.terminating(p)]
        self._emit(name, self.observation(name))

    def events(self, name: str, events: Iterable[JsonObject]) -> None:
        """New Kubernetes events of the node or its pods, each an observation with the event as its reason."""
        view = self.views[name]
        fresh = [e for e in events if ks.event_key(e) not in view.seen_events]
        fresh.sort(
            key=lambda e: (str(e.get("lastTimestamp") or ""), int(e.get("metadata", {}).get("resourceVersion") or 0))
        )
        for event in fresh:
            view.seen_events.add(ks.event_key(event))
            line = ks.event_line(event)
            view.events.append(line)
            self._emit(name, self.observation(name, reason=line))

    def last(self, name: str) -> Observation | None:
        return self.views[name].last if name in self.views else None

    def result(
        self,
        name: str,
        request: ReleaseRequest,
        started: float,
        extra: Mapping[str, str],
        *,
        cancelled: bool,
        error: str | None = None,
        through: frozenset[ObservedStage] = frozenset({ObservedStage.DONE}),
    ) -> ReleaseResult:
        """How ``request`` ended for ``name``, judged on what was seen of it (both modes judge alike):
        ``error`` when a step already said why, else cancelled, the operator's failure, or the timeout;
        ``through``: the stages the action ends in (a drain ends DRAINED)."""
        final = self.last(name)
        waited = round(time.monotonic() - started, 3)
        timed_out = bool(error and error.startswith("timed out"))
        evidence = {**(final.evidence if final else {}), **extra}
        if error is None and cancelled:
            error = "cancelled by the operator"
        elif error is None and final is not None and final.stage is ObservedStage.FAILED:
            warnings = [e for e in self.views[name].events if e.startswith("Warning")]
            error = f"the GPU Operator set {final.native_state}" + (f": {warnings[-1]}" if warnings else "")
        elif error is None and (final is None or final.stage not in through):
            where = final.native_state if final else "no state seen"
            error = f"timed out after {request.timeout_s:g}s in {where}"
            timed_out = True
        return ReleaseResult(
            node=name,
            action=request.action,
            ok=error is None,
            final=final,
            error=error,
            waited_s=waited,
            timed_out=timed_out,
            evidence=evidence,
        )
