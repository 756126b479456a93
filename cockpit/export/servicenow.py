"""ServiceNow: the fields of a ``change_request`` record, as plain text.

Dates are ServiceNow's ``YYYY-MM-DD HH:MM:SS`` in UTC; ``close_code`` uses the
out-of-the-box choice values (``successful``, ``successful_issues``, ``unsuccessful``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cockpit.changelog.events import wave_number
from cockpit.export import document as doc
from cockpit.export.render import plain
from cockpit.export.summary import ChangeSummary
from cockpit.gpu.nodestate import show
from cockpit.view.inert import inert


def _date(ts: datetime | None) -> str:
    return "" if ts is None else ts.strftime("%Y-%m-%d %H:%M:%S")


def close_code(s: ChangeSummary) -> str:
    """``successful`` only when every node upgraded and nothing was overridden or left fired."""
    outcomes = {n.outcome for n in s.nodes}
    if outcomes == {"upgraded"} and not s.overrides and not s.firings and not s.torn:
        return "successful"
    if "upgraded" in outcomes:
        return "successful_issues"
    return "unsuccessful"


def change_request(s: ChangeSummary, blocks: list[doc.Block]) -> dict[str, Any]:
    nodes = ", ".join(s.hosts)
    short = f"GPU driver change {s.change_id}: {s.runbook_id} on {len(s.nodes)} node(s) - {s.outcome}"
    params = ", ".join(f"{k}={v}" for k, v in s.parameters.items()) or "defaults"
    waves = (
        "\n".join(f"Wave {wave_number(w.wave)} ({doc.when(w.started_at)}): {', '.join(w.nodes)}" for w in s.waves)
        or "No wave started."
    )
    implementation = (
        f"Runbook {s.runbook_id} (sha256 {s.runbook_sha256}), parameters: {params}.\n"
        "Per node, one at a time within each wave: drain -> record baseline -> upgrade -> reboot -> smoke -> expand.\n"
        "Canary node first, then a second node, then waves; each stage's exit gate must hold before the next.\n"
        f"Nodes: {nodes}\n{waves}"
    )
    armed = ", ".join(s.triggers_armed) or "none"
    rolled = [n.node for n in s.nodes if n.outcome == "rolled back"]
    failed = [n.node for n in s.nodes if n.outcome == "rollback FAILED"]
    backout = (
        f"Rollback triggers armed before the first change ({doc.when(s.triggers_armed_at)}): {armed}.\n"
        "On a fired trigger: stop the rollout, reinstall the driver package recorded in the node's baseline, "
        "reboot, re-run smoke.\n"
        f"Rollbacks executed: {', '.join(rolled) if rolled else 'none'}."
        + (f" Rollbacks FAILED: {', '.join(failed)}." if failed else "")
    )
    closing = "\n".join(f"[{e.state}] {e.item}{': ' + e.text if e.text else ''}" for e in s.closing) or "none recorded"
    test_plan = (
        "Per node after reboot: GPU visibility (count against the recorded baseline), driver/library versions match, "
        "fabric manager, no fatal XID, container smoke test on the target driver.\n"
        f"Closing checklist:\n{closing}"
    )
    node_lines = "\n".join(f"{n.node}: {show(n.driver_before)} -> {show(n.driver_after)}: {n.outcome}" for n in s.nodes)
    overrides = "\n".join(f"OVERRIDE {o.stage} on {show(o.node)} by {o.actor}: {o.reason}" for o in s.overrides)
    decision = s.decision or {}
    close_notes = "\n".join(
        part
        for part in (
            f"Outcome: {s.outcome}",
            f"Decision by {decision.get('actor')}: {decision.get('outcome')}" if decision else "No decision recorded.",
            node_lines,
            overrides,
            s.torn.describe() if s.torn else "",
        )
        if part
    )
    work_notes = "\n".join(f"{doc.when(e.at)} [{e.seq}] {e.actor}: {e.text}" for e in s.timeline)
    fields = {
        "short_description": inert(short[:160]),
        "description": plain(blocks),
        "implementation_plan": implementation,
        "backout_plan": backout,
        "test_plan": test_plan,
        "start_date": _date(s.started_at),
        "end_date": _date(s.ended_at or s.last_event_at),
        "close_code": close_code(s),
        "close_notes": close_notes,
        "work_notes": work_notes,
    }
    # names, notes and evidence came from outside: inert in every field, as in the other formats
    return {"change_request": {key: inert(value, newlines=True) for key, value in fields.items()}}
