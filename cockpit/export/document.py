"""The ticket as a small document model, built once from a :class:`ChangeSummary`.

Markdown, Jira wiki markup and Jira ADF render the same blocks, so the three
formats say the same thing in the same order. The order is for an approver with
two minutes: outcome and overrides first, then who/when/what, nodes, triggers,
sign-offs, the decision and the closing checklist; timeline and evidence last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from cockpit.changelog.events import wave_number
from cockpit.export.summary import NOT_STARTED, ChangeSummary, WatchSummary
from cockpit.gpu.nodestate import show
from cockpit.view.inert import inert


@dataclass(frozen=True)
class Span:
    text: str
    strong: bool = False
    code: bool = False
    em: bool = False

    def __post_init__(self) -> None:
        # every word of a ticket passes here: outside text made inert (see cockpit.view.inert)
        object.__setattr__(self, "text", inert(self.text, newlines=True))


Inline = tuple[Span, ...]


def t(text: object) -> Inline:
    return (Span(show(text)),)


def b(text: object) -> Inline:
    return (Span(show(text), strong=True),)


def c(text: object) -> Inline:
    return (Span(show(text), code=True),)


@dataclass(frozen=True)
class Heading:
    level: int
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", inert(self.text))


@dataclass(frozen=True)
class Para:
    spans: Inline


@dataclass(frozen=True)
class Bullets:
    items: tuple[Inline, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[Inline, ...], ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "header", tuple(inert(h) for h in self.header))


@dataclass(frozen=True)
class Code:
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", inert(self.text, newlines=True))


PanelKind = Literal["info", "note", "warning", "success", "error"]


@dataclass(frozen=True)
class Panel:
    kind: PanelKind
    title: str
    blocks: tuple[Block, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "title", inert(self.title))


@dataclass(frozen=True)
class Rule:
    pass


Block = Heading | Para | Bullets | Table | Code | Panel | Rule


def when(ts: datetime | None) -> str:
    """UTC, to the second: ``2026-08-05 22:00:01Z``."""
    return "N/A" if ts is None else ts.strftime("%Y-%m-%d %H:%M:%SZ")


def duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 0:  # an event's time before the start: never a negative window on a ticket
        return "not measurable: the log's clock went back (see its anomalies)"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s"


def _who(actor: str, s: ChangeSummary) -> str:
    return f"{actor} (operator)" if actor == s.operator else actor


def _table_or_note(headers: tuple[str, ...], rows: tuple[tuple[Inline, ...], ...], empty: str) -> Block:
    """The table, or one line saying there is nothing to tabulate."""
    return Table(headers, rows) if rows else Para(t(empty))


def build(s: ChangeSummary) -> list[Block]:
    blocks: list[Block] = [Heading(1, f"Change {s.change_id}: {s.runbook_id} on {len(s.nodes)} node(s) — {s.outcome}")]
    if s.integrity:  # the change log's verification, first: what the rest of the ticket rests on
        blocks.append(Para((Span("Change log: ", strong=True), Span(s.integrity))))
    if s.refused:  # in the log, counted for nothing: the rest of the ticket leaves them out
        lines: list[Inline] = [(Span(f"seq {r.seq} ({r.kind}) by {r.actor}: "), Span(r.why)) for r in s.refused[:10]]
        if len(s.refused) > 10:
            lines.append((Span(f"and {len(s.refused) - 10} more (cockpit verify lists them)", em=True),))
        title = f"Refused: {len(s.refused)} event(s) in the log count for nothing"
        blocks.append(Panel("error", title, (Bullets(tuple(lines)),)))
    if not s.judged:
        said = (
            f"The runbook this session ran (sha256 {s.runbook_sha256[:12]}) was not at hand: "
            "the events are shown as written, none judged by its rules."
        )
        blocks.append(Panel("warning", "Not judged", (Para(t(said)),)))

    if s.torn is not None:
        blocks.append(Panel("error", "Incomplete change log", (Para(t(s.torn.describe())),)))
    if s.clock_went_back:  # the times below are not to be trusted around these
        shown = "; ".join(s.clock_went_back[:10]) + (
            f"; and {len(s.clock_went_back) - 10} more" if len(s.clock_went_back) > 10 else ""
        )
        blocks.append(Panel("warning", "The log's clock went back", (Para(t(shown + ".")),)))
    if s.ended_at is None:
        blocks.append(
            Panel(
                "warning",
                "Session not closed",
                (Para(t(f"No session-ended event; last event at {when(s.last_event_at)}.")),),
            )
        )
    if s.overrides:
        rows = tuple(
            (
                t(o.seq),
                t(when(o.at)),
                t(o.actor),
                c(o.stage),
                t(o.node),
                b(o.reason),
                t(", ".join(o.blocked_by) or None),
            )
            for o in s.overrides
        )
        blocks.append(
            Panel(
                "warning",
                f"Overrides: {len(s.overrides)} gate(s) passed by override",
                (Table(("Seq", "At", "By", "Stage", "Node", "Reason", "Bypassed"), rows),),
            )
        )
    if s.watch is not None and s.watch.findings:  # found after the window: as urgent as a trigger still fired
        blocks.append(
            Panel(
                "error",
                f"Found after the window: {len(s.watch.findings)}",
                (
                    Bullets(
                        tuple(
                            (Span(f.trigger, code=True), Span(f" on {show(f.node)}: {f.evidence}"))
                            for f in s.watch.findings
                        )
                    ),
                ),
            )
        )
    fired_open = [f for f in s.firings if f.cleared_at is None]
    if fired_open:
        blocks.append(
            Panel(
                "error",
                f"Rollback triggers still fired: {len(fired_open)}",
                (
                    Bullets(
                        tuple(
                            (Span(f.trigger, code=True), Span(f" on {show(f.node)}: {f.evidence}")) for f in fired_open
                        )
                    ),
                ),
            )
        )

    blocks.append(Heading(2, "Summary"))
    reviewers = ", ".join(s.reviewers) or "none"
    blocks.append(
        Table(
            ("Field", "Value"),
            (
                (t("Change id"), c(s.change_id)),
                (t("Outcome"), b(s.outcome)),
                (t("Window"), t(f"{when(s.started_at)} → {when(s.ended_at)} ({duration(s.duration)})")),
                (t("Operator"), t(s.operator)),
                (t("Reviewers"), t(reviewers)),
                (t("Runbook"), (Span(s.runbook_id, code=True), Span(" sha256 "), Span(s.runbook_sha256, code=True))),
                (t("Runbook file"), c(s.runbook_path or None)),
                (t("Recorded by"), t(f"cockpit {s.tool_version}, {s.events} events")),
            ),
        )
    )
    if s.parameters:
        blocks.append(
            Para(
                (
                    Span("Parameters: ", strong=True),
                    *_join_spans([(Span(f"{k}={v}", code=True),) for k, v in s.parameters.items()]),
                )
            )
        )

    blocks.append(Heading(2, "Nodes"))
    blocks.append(
        Table(
            ("Node", "Wave", "Driver before", "Driver after", "GPUs", "Last gate", "Outcome"),
            tuple(
                (
                    c(n.node),
                    t(None if n.wave is None else wave_number(n.wave)),
                    t(n.driver_before),
                    t(n.driver_after),
                    # a node never begun: its count as probed, no change claimed from a baseline never taken
                    t(
                        show(n.gpus_after)
                        if n.outcome == NOT_STARTED
                        else f"{show(n.gpus_before)} → {show(n.gpus_after)}"
                    ),
                    t(n.last_stage),
                    b(n.outcome) if n.outcome not in ("upgraded", NOT_STARTED) else t(n.outcome),
                )
                for n in s.nodes
            ),
        )
    )
    failed_rollbacks = [n for n in s.nodes if n.rollback_why]
    if failed_rollbacks:  # why, in plain words, where the table says only FAILED
        blocks.append(
            Bullets(
                tuple(
                    (Span(f"{n.node}: rollback FAILED", strong=True), Span(f": {n.rollback_why}."))
                    for n in failed_rollbacks
                )
            )
        )
    if s.waves:
        blocks.append(
            Bullets(
                tuple(
                    (
                        Span(f"Wave {wave_number(w.wave)}", strong=True),
                        Span(f" started {when(w.started_at)}: {', '.join(w.nodes)}"),
                    )
                    for w in s.waves
                )
            )
        )

    blocks.append(Heading(2, "Rollback triggers"))
    if s.triggers_armed:
        armed = f"Armed {when(s.triggers_armed_at)} by {s.triggers_armed_by}: "
        blocks.append(Para((Span(armed), *_join_spans([c(tid) for tid in s.triggers_armed]))))
    else:
        blocks.append(Para(b("Triggers were never armed.")))
    blocks.append(
        _table_or_note(
            ("Trigger", "Node", "Fired", "Evidence", "Cleared"),
            tuple(
                (
                    (Span(f.trigger, code=True),) + ((Span(f" {f.title}"),) if f.title else ()),
                    t(f.node),
                    t(f"{when(f.at)} (seq {f.seq})"),
                    t(f.evidence or None),
                    t(f"{when(f.cleared_at)} by {f.cleared_by}: {f.cleared_reason}" if f.cleared_at else "NOT cleared"),
                )
                for f in s.firings
            ),
            "No trigger fired.",
        )
    )

    if s.watch is not None:
        blocks.extend(_watch_blocks(s.watch))

    blocks.append(Heading(2, "Sign-offs"))
    blocks.append(
        _table_or_note(
            ("Seq", "At", "Reviewer", "Gate", "Node", "Note"),
            tuple(
                (
                    t(x.seq),
                    t(when(x.at)),
                    t(x.actor),
                    c(f"{x.stage}/{x.item}" if x.item else f"{x.stage} (whole gate)"),
                    t(x.node),
                    t(x.note),
                )
                for x in s.signoffs
            ),
            "No sign-offs recorded.",
        )
    )

    blocks.append(Heading(2, "Path and decision record"))
    if s.path:
        blocks.append(
            Bullets(
                (
                    (Span("Path: ", strong=True), Span(show(s.path.get("path")))),
                    (Span("Owner: ", strong=True), Span(show(s.path.get("owner")))),
                    (Span("Rationale: ", strong=True), Span(show(s.path.get("rationale")))),
                    (
                        Span(
                            f"Chosen {when(s.path.get('at'))} by {s.path.get('actor')} (seq {s.path.get('seq')})",
                            em=True,
                        ),
                    ),
                )
            )
        )
    else:
        blocks.append(Para(t("No recovery path recorded.")))
    if s.decision:
        items: list[Inline] = [(Span("Outcome: ", strong=True), Span(show(s.decision.get("outcome")), strong=True))]
        answers = s.decision.get("answers") or {}
        if isinstance(answers, dict):
            items.extend((Span(f"{k}: ", strong=True), Span(show(v))) for k, v in answers.items())
        items.append(
            (
                Span(
                    f"Recorded {when(s.decision.get('at'))} by {s.decision.get('actor')} (seq {s.decision.get('seq')})",
                    em=True,
                ),
            )
        )
        blocks.append(Bullets(tuple(items)))
    else:
        blocks.append(Para(b("No decision recorded.")))

    blocks.append(Heading(2, "Closing checklist"))
    blocks.append(
        _table_or_note(
            ("Item", "State", "By", "At", "Note"),
            tuple(
                (
                    (Span(e.item, code=True),) + ((Span(f" {e.text}"),) if e.text else ()),
                    b(e.state.upper()) if e.state in ("open", "failed") else t(e.state),
                    t(e.by),
                    t(when(e.at) if e.at else None),
                    t(e.note),
                )
                for e in s.closing
            ),
            "No closing checklist items recorded.",
        )
    )
    if not s.runbook_matched:
        blocks.append(
            Para(
                (
                    Span(
                        "Runbook file not matched (missing or changed since); items nobody touched are not listed.",
                        em=True,
                    ),
                )
            )
        )

    if s.failed_steps:
        blocks.append(Heading(2, "Failed steps"))
        blocks.append(Bullets(tuple((Span(f"{when(f.at)} seq {f.seq}: "), Span(f.text)) for f in s.failed_steps)))

    blocks.append(Heading(2, "Timeline"))
    blocks.append(
        Table(
            ("At", "Seq", "Actor", "Event"),
            tuple((t(when(e.at)), t(e.seq), t(_who(e.actor, s)), t(e.text)) for e in s.timeline),
        )
    )

    blocks.append(Heading(2, "Evidence"))
    if s.artifacts:
        blocks.append(
            Table(
                ("sha256", "Node", "Step", "Output of"),
                tuple((c(a.sha256), t(a.node), c(f"{a.stage}/{a.step}"), c(a.what)) for a in s.artifacts),
            )
        )
        blocks.append(
            Para(
                (
                    Span("Artifacts are stored beside the change log under "),
                    Span(f"{s.change_id}/artifacts/<sha256>", code=True),
                    Span("."),
                )
            )
        )
    else:
        blocks.append(Para(t("No large outputs were stored as artifacts.")))
    blocks.append(Rule())
    blocks.append(
        Para(
            (
                Span(
                    f"Generated from change log {s.change_id} ({s.events} events, last seq {s.events}) "
                    "by cockpit export.",
                    em=True,
                ),
            )
        )
    )
    return blocks


def _watch_blocks(w: WatchSummary) -> list[Block]:
    """After the window: what ``cockpit watch`` saw, and who was told."""
    runs = f", {w.runs} runs" if w.runs > 1 else ""
    state = f"ended {when(w.ended_at)}" if w.ended_at else f"not ended (last event {when(w.last_at)})"
    period = f"every {w.period_s:g} s, " if w.period_s else ""
    said = (
        f"Watched {len(w.nodes)} node(s) from {when(w.started_at)} until {w.until or '?'} "
        f"({period}by {w.started_by}{runs}); {state}."
    )
    out: list[Block] = [Heading(2, "After the window"), Para(t(said))]
    out.append(
        _table_or_note(
            ("Trigger", "Node", "Found", "Evidence", "Told"),
            tuple(
                (
                    (Span(f.trigger, code=True),) + ((Span(f" {f.title}"),) if f.title else ()),
                    t(f.node),
                    t(f"{when(f.at)} (seq {f.seq})"),
                    t(f.evidence or None),
                    t(", ".join(f.told) or "nobody"),
                )
                for f in w.findings
            ),
            "No trigger fired after the window.",
        )
    )
    return out


def _join_spans(parts: list[Inline], sep: str = ", ") -> Inline:
    out: list[Span] = []
    for i, part in enumerate(parts):
        if i:
            out.append(Span(sep))
        out.extend(part)
    return tuple(out)
