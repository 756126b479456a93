"""The main screen's panes. Each is render-only: ``show(...)`` takes values computed by
:mod:`screens.view` and assigns them; none reads the network, a file, or decides a rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Log, Static

from cockpit.engine.state import (
    CockpitState,
    NodeProgress,
    StageState,
)
from cockpit.fleet.executor import RebootProgress, StepOutcome
from cockpit.gpu.nodestate import NodeState, show
from screens import view


class CockpitHeader(Static):
    """Change id, runbook, operator, reviewers, elapsed time, wave; red when a trigger fired."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._view: view.HeaderView | None = None

    def show_view(self, header: view.HeaderView) -> None:
        if header != self._view:
            self._view = header
            self.set_class(header.alarm, "alarm")
            self.refresh()

    def render(self) -> Text:
        if self._view is None:
            return Text("")
        return Text(self._view.fit(max(self.size.width - 2, 20)), no_wrap=True, overflow="ellipsis")


class ProgressStrip(Static):
    """Window stages, node stages with counts (``smoke 1/8``), closing stages; fitted to width."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._segments: list[view.Segment] = []

    def show_segments(self, segments: list[view.Segment]) -> None:
        if segments != self._segments:
            self._segments = segments
            self.refresh()

    def render(self) -> Text:
        return view.progress_text(self._segments, max(self.size.width, 20))


class NextBar(Static):
    """The "Next:" line that leads the operator, plus the state of a running step."""


class FleetTable(DataTable[Text]):
    """One row per node; rows are updated cell by cell, never rebuilt."""

    def __init__(self, **kw: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)  # type: ignore[arg-type]
        self._rows: dict[str, tuple[str, ...]] = {}
        self.cell_updates = 0  # counted for the benchmark: rows change in place

    def on_mount(self) -> None:
        for key, label in view.FLEET_COLUMNS:
            self.add_column(label, key=key)

    @staticmethod
    def _cell(column: str, value: str) -> Text:
        if column == "health":
            return Text(value, style=view.health_style(value))
        if column == "stage" and "✗" in value:
            return Text(value, style="bold red")
        return Text(value)

    def sync(self, nodes: Mapping[str, NodeProgress], live: Mapping[str, NodeState], now: datetime) -> None:
        keys = [k for k, _ in view.FLEET_COLUMNS]
        for name, progress in nodes.items():
            row = view.fleet_row(progress, live.get(name), now)
            old = self._rows.get(name)
            if old is None:
                self.add_row(*(self._cell(k, v) for k, v in zip(keys, row, strict=True)), key=name)
            else:
                for key, new, prev in zip(keys, row, old, strict=True):
                    if new != prev:
                        self.update_cell(name, key, self._cell(key, new))
                        self.cell_updates += 1
            self._rows[name] = row

    @property
    def selected_node(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:
            return None
        return None if key.value is None else str(key.value)


class StageTable(DataTable[Text]):
    """The focused stage's steps and items; the cursor picks what Enter acts on."""

    def __init__(self, **kw: object) -> None:
        super().__init__(cursor_type="row", show_header=False, **kw)  # type: ignore[arg-type]
        self._shown: list[view.StageRow] = []
        self._stage_key: tuple[str, str | None] | None = None
        self._shown_widths: tuple[int, int] = (0, 0)

    def on_mount(self) -> None:
        self.add_column("s", key="symbol", width=2)
        self.add_column("what", key="label")
        self.add_column("detail", key="detail")

    def _widths(self) -> tuple[int, int]:
        width = self.size.width or 80
        usable = max(width - 8, 24)  # symbol column, cell padding, scrollbar
        label = max(16, int(usable * 0.75))
        return label, max(usable - label, 6)

    def _cells(self, row: view.StageRow) -> tuple[Text, Text, Text]:
        lw, dw = self._widths()
        label = Text(row.label, no_wrap=True)
        label.truncate(lw, overflow="ellipsis")
        detail = Text(row.detail, style="dim", no_wrap=True)
        detail.truncate(dw, overflow="ellipsis")
        return Text(row.symbol, style=view.STYLE.get(row.status, "")), label, detail

    def on_resize(self) -> None:
        if self._widths() != self._shown_widths:
            rows, key = self._shown, self._stage_key
            self._stage_key = ("", "resize")  # forces a rebuild at the new width
            self.show_rows(key, rows, keep_cursor=True)

    def show_rows(
        self, stage_key: tuple[str, str | None] | None, rows: Sequence[view.StageRow], *, keep_cursor: bool = False
    ) -> None:
        rows = list(rows)
        if stage_key == self._stage_key and rows == self._shown:
            return
        same_stage = stage_key == self._stage_key and [r.key for r in rows] == [r.key for r in self._shown]
        if same_stage:
            for new, old in zip(rows, self._shown, strict=True):
                if new != old:
                    for col, cell in zip(("symbol", "label", "detail"), self._cells(new), strict=True):
                        self.update_cell(new.key, col, cell)
        else:
            cursor = self.cursor_row
            self.clear()
            for row in rows:
                self.add_row(*self._cells(row), key=row.key)
            first_open = next((i for i, r in enumerate(rows) if r.status in ("open", "failed", "needs-signoff")), 0)
            if rows:
                self.move_cursor(row=min(cursor, len(rows) - 1) if keep_cursor else first_open)
        self._shown = rows
        self._stage_key = stage_key
        self._shown_widths = self._widths()

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:
            return None
        return None if key.value is None else str(key.value)


class StagePane(Vertical):
    """Title, rows and the gate in words for whichever stage is current."""

    def compose(self) -> ComposeResult:
        yield Static(id="stage-title")
        yield StageTable(id="stage-table")
        yield Static(id="gate-line")

    def show_stage(self, state: CockpitState, stage: StageState | None, node: str | None) -> None:
        title = self.query_one("#stage-title", Static)
        gate = self.query_one("#gate-line", Static)
        table = self.query_one(StageTable)
        if stage is None:
            title.update(Text("No stage in progress", style="bold"))
            table.show_rows(None, [])
            gate.update(Text(view.idle_stage_text(state)))
            return
        title.update(Text(view.stage_title(stage), style="bold", no_wrap=True, overflow="ellipsis"))
        table.show_rows((stage.id, node), view.stage_rows(stage))
        gate.update(view.gate_line(stage))


class TriggerPanel(Static):
    """Every rollback trigger, always on screen; red when one has fired."""

    plain = ""

    def show_triggers(self, state: CockpitState, *, compact: bool = False) -> None:
        """``compact`` (short terminals): one line per fired trigger, the rest on one line."""
        lines = view.trigger_lines(state)
        fired = [ln for ln in lines if ln.status in ("fired", "cleared")]
        quiet = [ln for ln in lines if ln.status not in ("fired", "cleared")]
        out: list[Text] = [Text(view.trigger_summary(state), style="bold", no_wrap=compact, overflow="ellipsis")]
        for ln in fired:
            out.append(
                Text(ln.text, style="bold red" if ln.status == "fired" else "dim", no_wrap=compact, overflow="ellipsis")
            )
        if any(ln.status == "fired" for ln in fired):
            out.append(
                Text(
                    "Rollback: select the node, press b; then n runs the rollback steps",
                    style="bold",
                    no_wrap=compact,
                    overflow="ellipsis",
                )
            )
        if quiet:
            out.append(
                Text(
                    "  ".join(ln.text for ln in quiet),
                    style="dim" if not state.armed else "",
                    no_wrap=compact,
                    overflow="ellipsis",
                )
            )
        self.plain = "\n".join(t.plain for t in out)  # what the panel says, for tests and captures
        self.update(Group(*out))
        self.set_class(bool(state.fired()), "fired")


def gpu_table(live: NodeState | None) -> Table | Text:
    if live is None:
        return Text("not probed yet", style="dim")
    if not live.gpus:
        return Text(live.error or live.health_evidence or "no GPU reported", style="yellow")
    table = Table(box=None, pad_edge=False, expand=False, header_style="bold")
    for col in ("#", "name", "memory MiB", "util", "temp", "power W", "ECC"):
        table.add_column(col, no_wrap=True)
    for g in live.gpus:
        mem = "N/A" if g.memory_total_mib is None else f"{show(g.memory_used_mib)}/{g.memory_total_mib}"
        power = "N/A" if g.power_draw_w is None else f"{g.power_draw_w:.0f}/{show(g.power_limit_w)}"
        table.add_row(
            str(g.index),
            show(g.name),
            mem,
            f"{show(g.utilization_pct)}%",
            f"{show(g.temperature_c)}C",
            power,
            show(g.ecc_uncorrected),
        )
    return table


def facts_text(node: str, progress: NodeProgress | None, live: NodeState | None) -> Text:
    text = Text(node, style="bold")
    if live is None:
        text.append("  (no live probe yet)", style="dim")
        return text
    text.append(f"  {live.health}", style=view.health_style(str(live.health)))
    if live.health_evidence and str(live.health) != "ok":
        text.append(f" ({live.health_evidence})", style="dim")
    text.append(f"\nboot {show(live.boot_id)}  up {view.duration(live.uptime_s)}  kernel {show(live.kernel)}")
    text.append(f"\npackage {show(live.driver_package)}  fabric-manager {show(live.fabric_manager)}")
    if live.xid_errors:
        text.append("\nXid " + ", ".join(str(x.code) for x in live.xid_errors), style="bold red")
    if progress is not None and progress.baseline:
        base = progress.baseline
        text.append(f"\nbaseline {show(base.get('driver_package'))}, {show(base.get('gpu_count'))} GPUs", style="dim")
    return text


def outcome_text(outcome: StepOutcome | None, running: str | None, tick: RebootProgress | None) -> Text:
    if running is not None:
        text = Text(f"running: {running}", style="yellow")
        if tick is not None:
            text.append(f"  reboot {tick.phase} {tick.elapsed_s:.0f}s / {tick.timeout_s:.0f}s (poll {tick.attempts})")
        return text
    if outcome is None:
        return Text("no command run on this node yet", style="dim")
    state = "ok" if outcome.ok else (outcome.error or f"exit {outcome.exit_status}")
    text = Text(f"last: {outcome.step} on {show(outcome.target)}: ", style="bold")
    text.append(state, style="green" if outcome.ok else "bold red")
    if outcome.command:
        text.append(f"\n$ {outcome.command}", style="dim")
    return text


class NodeDetail(Vertical):
    """The selected node: facts, per-GPU table, the last command and its output."""

    def compose(self) -> ComposeResult:
        yield Static(id="node-facts")
        yield Static(id="node-gpus")
        yield Static(id="node-last")
        yield Log(id="node-log", max_lines=400, auto_scroll=True)

    def on_mount(self) -> None:
        self._log_source: tuple[str, int, str | None] | None = None  # (what, lines written, last line)

    def show_node(
        self,
        node: str | None,
        progress: NodeProgress | None,
        live: NodeState | None,
        outcome: StepOutcome | None,
        running: str | None,
        lines: Sequence[str],
        tick: RebootProgress | None,
        source: str,
    ) -> None:
        if node is None:
            self.query_one("#node-facts", Static).update(Text("no node selected", style="dim"))
            return
        self.query_one("#node-facts", Static).update(facts_text(node, progress, live))
        self.query_one("#node-gpus", Static).update(gpu_table(live))
        self.query_one("#node-last", Static).update(outcome_text(outcome, running, tick))
        self.show_lines(source, lines)

    def show_lines(self, source: str, lines: Sequence[str]) -> None:
        """Append only what is new while the same output grows; rewrite when it was trimmed."""
        log = self.query_one(Log)
        shown = self._log_source
        last = lines[-1] if lines else None
        if shown is not None and shown[0] == source and shown[1] == len(lines) and shown[2] == last:
            return
        if shown is not None and shown[0] == source and 0 < shown[1] < len(lines) and lines[shown[1] - 1] == shown[2]:
            new = list(lines[shown[1] :])
        else:
            log.clear()
            new = list(lines)
        if new:
            log.write_lines(new)
        self._log_source = (source, len(lines), last)
