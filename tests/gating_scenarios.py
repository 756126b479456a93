"""Scenario builders shared by the gating, trigger and check tests (no tests here).

Loaded by those files with :func:`importlib.util.spec_from_file_location` because
pytest runs in importlib mode, where test folders are not packages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cockpit.changelog.events import Event, EventKind, parse_event
from cockpit.changelog.facts import BaselineFacts
from cockpit.engine.actions import (
    Action,
    ActionKind,
    ArmTriggers,
    ChoosePath,
    PassGate,
    RunStep,
    SignOff,
    StartWave,
    TickItem,
    VerifyItem,
)
from cockpit.engine.checks import run_check
from cockpit.engine.fold import Folder
from cockpit.engine.offers import allowed_actions
from cockpit.engine.planner import DEMO_REVIEWER, plan
from cockpit.runbook.model import Runbook

if TYPE_CHECKING:
    from cockpit.session.operator import Session

OP = "alice"
REV = "bob"
T0 = datetime(2026, 8, 5, 22, 0, tzinfo=UTC)


#: One automatic trigger per built-in evaluator: trigger id -> evaluator.
TRIGGER_IDS: dict[str, str] = {
    "gpu-missing": "gpu_count_below_baseline",
    "versions": "driver_versions_inconsistent",
    "reboot-timeout": "reboot_timeout",
    "mismatch": "mismatch_after_reboot",
    "smoke": "smoke_failed",
    "fabric-manager": "fabric_manager_down",
    "xid": "fatal_xid",
    "budget": "wave_failure_budget",
}
AUTO_TRIGGERS = [{"id": t, "title": t, "mode": "auto", "evaluator": e} for t, e in TRIGGER_IDS.items()]


def small_runbook(**waves: Any) -> Runbook:
    def item(iid: str, verify: str = "manual", **kw: Any) -> dict[str, Any]:
        return {"id": iid, "text": f"{iid} holds", "verify": verify, **kw}

    def step(sid: str, **kw: Any) -> dict[str, Any]:
        return {"id": sid, "title": sid, "run": f"echo {sid}", **kw}

    return Runbook.model_validate(
        {
            "runbook": {"id": "test-upgrade", "title": "test"},
            "parameters": {
                "scheduler": {"type": "choice", "choices": ["kubernetes", "slurm"], "default": "kubernetes"},
                "wave_size": {"type": "int", "default": 2},
                "target_branch": {"default": "580"},
                "reboot_timeout_s": {"type": "int", "default": 600},
            },
            "waves": {"sizes": [1, 1], "rest": "wave_size", "max_parallel": 1, "failure_budget": 0, **waves},
            "triggers": [*AUTO_TRIGGERS, {"id": "protected", "title": "protected workload failed", "mode": "manual"}],
            "stages": [
                {
                    "id": "plan",
                    "title": "plan",
                    "scope": "window",
                    "items": [item("path-owner", note_required=True), item("review", "signoff")],
                },
                {
                    "id": "arm",
                    "title": "arm",
                    "scope": "window",
                    "arms_triggers": True,
                    "items": [item("triggers-reviewed", "signoff"), item("armed", "check", check="triggers_armed")],
                },
                {
                    "id": "drain",
                    "title": "drain",
                    "scope": "node",
                    "steps": [step("cordon", where="control"), step("scontrol", when={"scheduler": "slurm"})],
                    "items": [item("cordoned", "step", step="cordon"), item("slurm-drained", "step", step="scontrol")],
                },
                {
                    "id": "record",
                    "title": "record",
                    "scope": "node",
                    "steps": [{"id": "baseline", "title": "baseline", "kind": "record"}],
                    "items": [item("baseline-recorded", "check", check="baseline_recorded")],
                },
                {
                    "id": "upgrade",
                    "title": "upgrade",
                    "scope": "node",
                    "steps": [step("install", destructive=True)],
                    "items": [item("installed", "step", step="install")],
                },
                {
                    "id": "reboot",
                    "title": "reboot",
                    "scope": "node",
                    "steps": [{"id": "reboot", "title": "reboot", "kind": "reboot", "destructive": True}],
                    "items": [item("rebooted", "check", check="boot_id_changed")],
                },
                {
                    "id": "smoke",
                    "title": "smoke",
                    "scope": "node",
                    "steps": [step("container")],
                    "items": [
                        item("container-ok", "step", step="container"),
                        item("gpus", "check", check="gpus_match_baseline"),
                    ],
                },
                {
                    "id": "expand",
                    "title": "expand",
                    "scope": "node",
                    "steps": [step("uncordon", where="control")],
                    "items": [item("uncordoned", "step", step="uncordon")],
                },
                {
                    "id": "close",
                    "title": "close",
                    "scope": "window",
                    "items": [item("all-done", "check", check="all_waves_done"), item("decision")],
                },
            ],
            "rollback": {
                "steps": [
                    step("reinstall", destructive=True),
                    {"id": "reboot", "title": "reboot", "kind": "reboot", "destructive": True},
                ]
            },
        }
    )


class Log:
    """Appends well-formed events, one minute apart."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, kind: EventKind, actor: str = OP, **kw: Any) -> Event:
        seq = len(self.events) + 1
        event = parse_event(dict(seq=seq, ts=T0 + timedelta(minutes=seq), actor=actor, kind=kind, **kw))
        self.events.append(event)
        return event

    def probed(self, node: str, boot: str, **facts: Any) -> Event:
        """The cockpit's probe of ``node``: :func:`probe` facts for that boot id."""
        return self.add(EventKind.PROBE, actor="cockpit", node=node, facts=probe(boot, **facts))

    @contextmanager
    def running(self, stage: str, step: str, node: str | None = None, exit_status: int = 0) -> Iterator[None]:
        """A step started and finished with ``exit_status``; events added inside come between."""
        self.add(EventKind.STEP_STARTED, stage=stage, step=step, node=node)
        yield
        self.add(
            EventKind.STEP_FINISHED,
            stage=stage,
            step=step,
            node=node,
            facts={"exit_status": exit_status, "ok": exit_status == 0},
        )

    def step(self, stage: str, step: str, node: str | None = None, exit_status: int = 0) -> None:
        with self.running(stage, step, node, exit_status):
            pass

    def gate(self, stage: str, node: str | None = None, verified: str | None = None) -> None:
        """Pass the gate of ``stage``, after verifying its item ``verified`` (when named)."""
        if verified is not None:
            self.add(EventKind.ITEM_VERIFIED, stage=stage, item=verified, node=node, facts={"ok": True})
        self.add(EventKind.GATE_PASSED, stage=stage, node=node)

    def open_window(self, *more_triggers: str) -> None:
        """Plan and arm stages passed, triggers armed (the runbook's, and ``more_triggers``)."""
        self.add(EventKind.SESSION_STARTED, facts={"operator": OP})
        self.add(EventKind.ITEM_TICKED, stage="plan", item="path-owner", note="upgrade path, owner alice")
        self.add(EventKind.SIGNOFF, actor=REV, stage="plan", item="review")
        self.add(EventKind.GATE_PASSED, stage="plan")
        self.add(EventKind.SIGNOFF, actor=REV, stage="arm", item="triggers-reviewed")
        self.add(EventKind.TRIGGERS_ARMED, facts={"triggers": [*TRIGGER_IDS, "protected", *more_triggers]})
        self.add(EventKind.ITEM_VERIFIED, stage="arm", item="armed", facts={"ok": True, "evidence": "armed"})
        self.add(EventKind.GATE_PASSED, stage="arm")

    def node_through(
        self,
        node: str,
        gpus: int = 8,
        until: str = "expand",
        driver: str = "580.65.06",
        fabric_manager: str | None = None,
    ) -> None:
        """Take a started node through its stages, passing each gate, up to ``until``."""
        self.step("drain", "cordon", node)
        self.gate("drain", node)
        if until == "drain":
            return
        with self.running("record", "baseline", node):
            self.probed(node, f"{node}-old", gpus=gpus, driver="575.57.08", fabric_manager=fabric_manager)
            self.add(
                EventKind.BASELINE_RECORDED,
                node=node,
                facts={
                    "driver_package": "nvidia-driver-575=575.57.08-1",
                    "driver_version": "575.57.08",
                    "kernel_module_version": "575.57.08",
                    "boot_id": f"{node}-old",
                    "gpu_count": gpus,
                    "labels": {},
                    "fabric_manager": fabric_manager,
                },
            )
        self.gate("record", node, verified="baseline-recorded")
        if until == "record":
            return
        self.step("upgrade", "install", node)
        self.gate("upgrade", node)
        if until == "upgrade":
            return
        with self.running("reboot", "reboot", node):
            self.probed(node, f"{node}-new", gpus=gpus, driver=driver, fabric_manager=fabric_manager)
        self.gate("reboot", node, verified="rebooted")
        if until == "reboot":
            return
        self.step("smoke", "container", node)
        self.gate("smoke", node, verified="gpus")
        if until == "smoke":
            return
        self.step("expand", "uncordon", node)
        self.gate("expand", node)


def probe(boot: str, gpus: int = 8, driver: str = "580.65.06", health: str = "ok", **kw: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "reachable": True,
        "health": health,
        "boot_id": boot,
        "driver_version": driver,
        "kernel_module_version": driver,
        "kernel_module_flavour": "open",
        "cuda_version": "13.0",
        "driver_package": None,
        "fabric_manager": None,
        "gpu_count": gpus,
        "xid_codes": [],
        "kernel_log": "journal",
    }
    facts.update(kw)
    return facts


HOSTS = ["gpu01", "gpu02", "gpu03", "gpu04"]


#: the order a clean window takes the actions the engine allows, first what unblocks most
CLEAN_ORDER = [
    ActionKind.CHOOSE_PATH,  # once, first: the path's items are checked against the recorded choice
    ActionKind.SIGN_OFF,
    ActionKind.RUN_STEP,
    ActionKind.VERIFY_ITEM,
    ActionKind.TICK_ITEM,
    ActionKind.ARM_TRIGGERS,
    ActionKind.PASS_GATE,
    ActionKind.START_WAVE,
]


class CleanWindow:
    """Plays a runbook only through actions the engine allows, every step and check succeeding.

    ``live(node, boot)`` gives the probe facts of ``node`` after ``boot`` reboots; each
    event is ``seconds_apart`` after the one before. Shared by the gating test and the
    gating benchmark, so both play the same window.
    """

    def __init__(
        self,
        runbook: Runbook,
        hosts: list[str],
        live: Callable[[str, int], dict[str, Any]],
        seconds_apart: float = 10,
    ) -> None:
        self.runbook = runbook
        self.folder = Folder(runbook, {}, hosts)
        self.events: list[Event] = []
        self.boots = dict.fromkeys(hosts, 0)
        self.live = live
        self.seconds_apart = seconds_apart

    def add(self, kind: EventKind, actor: str = OP, **kw: Any) -> None:
        ts = T0 + timedelta(seconds=self.seconds_apart * len(self.events))
        event = parse_event(dict(seq=len(self.events) + 1, ts=ts, actor=actor, kind=kind, **kw))
        self.events.append(event)
        self.folder.apply(event)

    def probe(self, node: str) -> None:
        self.add(EventKind.PROBE, actor="cockpit", node=node, facts=self.live(node, self.boots[node]))

    def _stage(self, a: RunStep | VerifyItem) -> Any:
        state = self.folder.state
        if a.stage in state.window:
            return state.window[a.stage]
        assert a.node is not None
        return state.nodes[a.node].stages[a.stage]

    def next_action(self) -> Action | None:
        """The first allowed action, by :data:`CLEAN_ORDER`, that is not already done."""
        state, rb = self.folder.state, self.runbook
        acts = [
            a
            for a in allowed_actions(state, rb, REV, OP) + allowed_actions(state, rb, OP, OP)
            if a.kind in CLEAN_ORDER
            and not (isinstance(a, RunStep) and self._stage(a).steps[a.step].status == "done")
            and not (isinstance(a, VerifyItem) and self._stage(a).items[a.item].status == "done")
            and not (isinstance(a, ChoosePath) and state.path is not None)
        ]
        return min(acts, key=lambda a: CLEAN_ORDER.index(a.kind)) if acts else None

    def perform(self, a: Action) -> None:
        """Record ``a`` as it goes in a clean window: steps exit 0, checks hold (asserted)."""
        if isinstance(a, SignOff):
            self.add(EventKind.SIGNOFF, actor=REV, stage=a.stage, node=a.node, item=a.item)
        elif isinstance(a, RunStep):
            kw: dict[str, Any] = {"stage": a.stage, "node": a.node, "step": a.step}
            kind = self._stage(a).steps[a.step].kind
            self.add(EventKind.STEP_STARTED, **kw)
            if a.node and kind == "reboot":
                self.boots[a.node] += 1
            if a.node and kind in ("reboot", "probe", "record"):
                self.probe(a.node)
            if a.node and kind == "record":
                facts = {**baseline_of(self.live(a.node, self.boots[a.node])), **CLEAN_PLATFORM}
                self.add(EventKind.BASELINE_RECORDED, node=a.node, facts=facts)
            self.add(EventKind.STEP_FINISHED, facts={"ok": True, "exit_status": 0}, **kw)
        elif isinstance(a, VerifyItem):
            state = self.folder.state
            item = self._stage(a).items[a.item]
            specs = [i for st in self.runbook.stages if st.id == a.stage for i in st.items if i.id == a.item]
            recaps = specs[0].recaps if specs else []  # what a "recorded" check reads
            res = run_check(item.check, state, a.node, state.params, recaps=recaps) if item.check else None
            assert res is None or res.ok, res
            facts = {"ok": True, "evidence": res.evidence if res else "ok"}
            self.add(EventKind.ITEM_VERIFIED, stage=a.stage, node=a.node, item=a.item, facts=facts)
        elif isinstance(a, TickItem):
            self.add(EventKind.ITEM_TICKED, stage=a.stage, node=a.node, item=a.item, note="seen and recorded")
        elif isinstance(a, ArmTriggers):
            self.add(EventKind.TRIGGERS_ARMED, facts={"triggers": [t.id for t in self.runbook.triggers]})
        elif isinstance(a, PassGate):
            self.add(EventKind.GATE_PASSED, stage=a.stage, node=a.node)
        elif isinstance(a, StartWave):
            self.add(EventKind.WAVE_STARTED, wave=a.wave)
        elif isinstance(a, ChoosePath):
            facts = {"path": "upgrade-driver", "rationale": "the driver is the blocker", "owner": OP}
            self.add(EventKind.PATH_CHOSEN, facts=facts)
        else:
            raise AssertionError(f"a clean window takes no {a.kind}")

    def play(self, limit: int = 3000) -> Iterator[Action]:
        """Perform the next action until none is left (or ``limit``), yielding each after it is recorded."""
        for _ in range(limit):
            action = self.next_action()
            if action is None:
                return
            self.perform(action)
            yield action


#: What a clean node's record step learns of its platform (the shipped runbook checks it is there).
CLEAN_PLATFORM: dict[str, Any] = {
    "driver_package": "nvidia-driver-575",
    "os_id": "ubuntu",
    "os_version": "24.04",
    "package_manager": "apt",
    "driver_flavour": "open",
    # what the pre-change gate asks of a clean node: packages, headers for the next kernel, no Secure Boot
    "driver_install": "distribution",
    "kernel_next": "6.8.0-60-generic",
    "kernel_headers": ["6.8.0-60-generic"],
    "secure_boot": False,
    "gpu_holders": [],
    # the GPUs run either kernel module flavour (record/modules-fit-gpus)
    "gpu_models": ["NVIDIA H100 80GB HBM3"],
}


def baseline_of(probe_facts: dict[str, Any]) -> dict[str, Any]:
    """The part of a probe's facts a baseline records (a baseline has no health or XIDs)."""
    return {k: v for k, v in probe_facts.items() if k in BaselineFacts.model_fields}


async def perform_as_demo(session: Session, action: Action) -> None:
    """Perform ``action`` as the demo's people would: the demo reviewer signs off, and a
    step is confirmed with its node's name (or its stage's, for a window step)."""
    actor = DEMO_REVIEWER if action.kind is ActionKind.SIGN_OFF else None
    confirm = (action.node or action.stage) if action.kind is ActionKind.RUN_STEP else None
    await session.perform(action, actor=actor, confirmation=confirm)


async def take_planned(session: Session) -> Action:
    """Perform the planner's next action (see :func:`perform_as_demo`); fails when none is planned."""
    planned = plan(session.state, session.runbook, session.operator, reviewer=DEMO_REVIEWER)
    action = planned.action
    assert action is not None, f"the window stalled: {planned.text}"
    await perform_as_demo(session, action)
    return action


async def take_planned_until(session: Session, stage: str, step: str) -> RunStep:
    """Take Next until Next is running ``stage``/``step``; return that action, not taken."""
    for _ in range(400):
        action = session.next_action()
        if isinstance(action, RunStep) and (action.stage, action.step) == (stage, step):
            return action
        await take_planned(session)
    raise AssertionError(f"Next never reached {stage}/{step}")
