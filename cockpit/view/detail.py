"""The view model of the node detail pane: the selected node's facts, its GPUs, and the
last (or running) command, in words with tones like the rest of :mod:`cockpit.view.model`."""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.changelog.facts import BaselineFacts
from cockpit.engine.state import NodeProgress, recorded
from cockpit.fleet.backends.base import ObservedStage
from cockpit.fleet.executor import RebootProgress, StepOutcome
from cockpit.gpu.nodestate import Health, NodeState, show
from cockpit.view.lines import Line, duration
from cockpit.view.model import health_tone

GPU_COLUMNS: tuple[str, ...] = ("#", "name", "memory MiB", "util", "temp", "power W", "ECC")
#: What the screen shows from the live probe or a running command and the change log does not
#: hold (per-GPU load, a step's progress): said on screen, so no one takes it for the record.
LIVE_NOT_RECORDED = "live, not recorded"


@dataclass(frozen=True, slots=True)
class GpuTableView:
    """One row per GPU in :data:`GPU_COLUMNS` order, or, when there is none to show, why."""

    rows: tuple[tuple[str, ...], ...]
    empty: Line | None  # None: the rows are the table


def observation_lines(progress: NodeProgress | None) -> list[Line]:
    """The window's engine's last word on the node: its own state word and the cockpit's for it."""
    if progress is None or not recorded(progress.observation):
        return []
    seen = progress.observation
    native, stage = show(seen.native_state), str(seen.stage or ObservedStage.UNKNOWN)
    tone = (
        "alarm"
        if stage == ObservedStage.FAILED
        else ("warning" if stage in (ObservedStage.DOWN, ObservedStage.UNKNOWN) else "dim")
    )
    runs: list[tuple[str, str]] = [(f"{seen.backend or 'engine'}: ", "dim"), (native, tone)]
    if stage != native:
        runs.append((f" ({stage})", tone))
    if seen.driver_version:
        runs.append((f"  driver {seen.driver_version}", "dim"))
    if seen.reason:
        runs.append((f"  {seen.reason}", "dim"))
    return [Line(tuple(runs))]


def node_facts(node: str, progress: NodeProgress | None, live: NodeState | None) -> tuple[Line, ...]:
    if live is None:
        return (Line(((node, ""), ("  (no live probe yet)", "dim")), "bold"), *observation_lines(progress))
    health = str(live.health)
    first: list[tuple[str, str]] = [(node, ""), (f"  {health}", health_tone(live.health))]
    if live.health_evidence and live.health != Health.OK:
        first.append((f" ({live.health_evidence})", "dim"))
    lines = [
        Line(tuple(first), "bold"),
        Line.of(f"boot {show(live.boot_id)}  up {duration(live.uptime_s)}  kernel {show(live.kernel)}"),
        Line.of(f"package {show(live.driver_package)}  fabric-manager {show(live.fabric_manager)}"),
    ]
    if live.xid_errors:
        lines.append(Line.of("Xid " + ", ".join(str(x.code) for x in live.xid_errors), "alarm"))
    if progress is not None and recorded(progress.baseline):
        base = progress.baseline
        lines.append(Line.of(f"baseline {show(base.driver_package)}, {show(base.gpu_count)} GPUs", "dim"))
        lines += platform_lines(base)
        lines += login_lines(base)
    lines += observation_lines(progress)
    return tuple(lines)


def login_lines(base: BaselineFacts) -> list[Line]:
    """Who the SSH login is and whether it may escalate (none for a baseline recorded before it was probed)."""
    if base.uid is None:
        return []
    uid, sudo = base.uid, base.sudo
    if uid == 0:
        return [Line.of(f"login {show(base.ssh_user)} (root): steps run as it, no sudo", "dim")]
    # a login that cannot escalate will have its first step that needs root refused
    tone = "dim" if sudo == "passwordless" else "warning"
    return [Line.of(f"login {show(base.ssh_user)} (uid {uid}): sudo {show(sudo)}", tone)]


def platform_lines(base: BaselineFacts) -> list[Line]:
    """The main platform facts of a baseline (none for one recorded before they were probed)."""
    if base.os_id is None:
        return []

    def flag(value: object) -> str:
        return "N/A" if value is None else ("on" if value else "off")

    def count(value: object) -> str:
        return "N/A" if not isinstance(value, list) else str(len(value))

    runtimes = base.container_runtimes
    shown_runtimes = ", ".join(map(str, runtimes)) if isinstance(runtimes, list) and runtimes else "none"
    return [
        Line.of(
            f"{base.os_id} {show(base.os_version)} ({show(base.package_manager)})  "
            f"{show(base.driver_flavour)} driver, {show(base.driver_install)}  runtimes {shown_runtimes}",
            "dim",
        ),
        Line.of(
            f"nvswitch {flag(base.nvswitch)}  fabric-manager {show(base.fabric_manager_version)}  "
            f"nscq {show(base.nscq_version)}  Secure Boot {flag(base.secure_boot)}  "
            f"holds {count(base.package_holds)}  GPU holders {count(base.gpu_holders)}",
            "dim",
        ),
    ]


def gpu_table(live: NodeState | None) -> GpuTableView:
    if live is None:
        return GpuTableView((), Line.of("not probed yet", "dim"))
    if not live.gpus:
        return GpuTableView((), Line.of(live.error or live.health_evidence or "no GPU reported", "warning"))
    rows = []
    for g in live.gpus:
        mem = "N/A" if g.memory_total_mib is None else f"{show(g.memory_used_mib)}/{g.memory_total_mib}"
        power = "N/A" if g.power_draw_w is None else f"{g.power_draw_w:.0f}/{show(g.power_limit_w)}"
        rows.append(
            (
                str(g.index),
                show(g.name),
                mem,
                f"{show(g.utilization_pct)}%",
                f"{show(g.temperature_c)}C",
                power,
                show(g.ecc_uncorrected),
            )
        )
    return GpuTableView(tuple(rows), None)


def outcome_lines(outcome: StepOutcome | None, running: str | None, tick: RebootProgress | None) -> tuple[Line, ...]:
    """The command running on the node (with a reboot's progress), else the last one's result."""
    if running is not None:
        runs: list[tuple[str, str]] = [(f"running: {running}", "")]
        if tick is not None:
            runs.append(
                (f"  reboot {tick.phase} {tick.elapsed_s:.0f}s / {tick.timeout_s:.0f}s (poll {tick.attempts})", "")
            )
            runs.append((f"  ({LIVE_NOT_RECORDED})", "dim"))
        return (Line(tuple(runs), "running"),)
    if outcome is None:
        return (Line.of("no command run on this node yet", "dim"),)
    result = "ok" if outcome.ok else (outcome.error or f"exit {outcome.exit_status}")
    last = f"last: {outcome.step} on {show(outcome.target)}: "
    lines = [Line(((last, ""), (result, "ok" if outcome.ok else "alarm")), "bold")]
    if outcome.command:
        lines.append(Line.of(f"$ {outcome.command}", "dim"))
    return tuple(lines)
