"""A real signed session (keys made by the real ssh-keygen), then forged blocks appended to
it by hand, each well chained and, where the forger holds a key, validly signed: the fold
judges every event as the live session would have (the rules, and the signatures the
session requires), so none of them moves the window; each is named by the fold, the
readers, ``cockpit verify`` and the ticket's first lines."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ssh_keys import clock, keygen

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import Journal
from cockpit.changelog.sshsig import Signer, signer_from_key_file
from cockpit.cli import main
from cockpit.engine.actions import ActionRefused, StartWave
from cockpit.engine.state import recorded
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import load
from cockpit.session.opening import Trust, reopen
from cockpit.session.operator import Session
from cockpit.session.review import ReviewerSession
from cockpit.view.model import header_view

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")

TRIGGERS = ["gpu-missing", "protected-workload-failed"]


@dataclass(frozen=True)
class Window:
    path: Path
    allowed: Path  # the site's allowed_signers
    keys: dict[str, Path]
    signers: dict[str, Signer]
    tick: Callable[[], datetime]


@pytest.fixture
def window(tmp_path: Path) -> Window:
    """alice's window on the minimal runbook, signatures required: the arm stage needs bob's
    sign-off, so her live arm and pass are refused and nothing is written for them."""
    keys = {name: keygen(tmp_path, name) for name in ("alice", "bob")}
    allowed = tmp_path / "allowed_signers"
    allowed.write_text("".join(f"{n} {' '.join(keys[n].with_suffix('.pub').read_text().split()[:2])}\n" for n in keys))
    signers = {n: signer_from_key_file(k, n) for n, k in keys.items()}
    tick = clock()
    session = Session.start(
        sessions_dir=tmp_path / "sessions",
        change_id="CHG-HOSTILE",
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01"), HostTarget(name="gpu02")],
        operator="alice",
        transport=None,
        clock=tick,
        trust=Trust(require_signatures=True, allowed_signers=str(allowed), signer=signers["alice"]),
    )
    for refused in (session.arm_triggers, lambda: session.pass_gate("arm")):
        with pytest.raises(ActionRefused, match="needs sign-off by a second person"):
            refused()
    assert not session.state.refused  # what the live session wrote, it allowed
    asyncio.run(session.close())
    return Window(session.path, allowed, keys, signers, tick)


def append(w: Window, actor: str, signer: str | None, kind: EventKind, **fields: object) -> int:
    """A block appended by hand: well chained, signed with ``signer``'s key (None: unsigned)."""
    key = w.signers[signer] if signer else None
    with Journal.open_for_append(w.path, actor, exclusive=False, clock=w.tick, signer=key) as journal:
        return journal.append(kind, **fields).seq  # type: ignore[arg-type]


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(["verify", *args])
    out = capsys.readouterr()
    return status, out.out + out.err


def ticket(w: Window, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["export", str(w.path), "--format", "markdown"]) == 0
    return capsys.readouterr().out


def test_the_operators_own_signed_arm_and_pass_of_a_two_person_gate_count_for_nothing(
    window: Window, capsys: pytest.CaptureFixture[str]
) -> None:
    w = window
    armed = append(w, "alice", "alice", EventKind.TRIGGERS_ARMED, facts={"triggers": TRIGGERS})
    passed = append(w, "alice", "alice", EventKind.GATE_PASSED, stage="arm")

    # the fold (what resume reads): the gate is shut, the triggers not armed, both refused
    _log, _loaded, folder = reopen(w.path, operator=None, runbook=None)
    state = folder.state
    assert state.window["arm"].status == "active" and not state.armed
    assert [(r.seq, r.kind) for r in state.refused] == [(armed, "triggers-armed"), (passed, "gate-passed")]
    assert all("needs sign-off by a second person" in r.why for r in state.refused), state.refused
    assert any(a.startswith(f"seq {passed} (gate-passed): REFUSED") for a in state.anomalies)

    # verify: every signature holds, and still it fails, naming the first refused event
    status, out = verify(capsys, str(w.path), "--allowed-signers", str(w.allowed))
    assert status == 1, out
    assert "0 unsigned, 0 invalid" in out
    assert f"FAILED at seq {armed}: refused (triggers-armed by alice)" in out, out
    assert f"also seq {passed}: refused (gate-passed by alice)" in out

    # the ticket says it first, before anything else
    first = "\n".join(ticket(w, capsys).splitlines()[:6])
    assert f"REFUSED 2 event(s) the rules do not allow, first seq {armed} (triggers-armed) by alice" in first, first

    # resumed, the window is where the rules left it: no wave may start
    resumed = Session.resume(w.path, signer=w.signers["alice"], clock=w.tick)
    try:
        assert not resumed.state.armed
        # every screen's header (live, review, replay) says it, in red
        header = header_view(resumed.state, change_id="CHG-HOSTILE", runbook_id="r", operator="alice",
                             now=datetime(2026, 8, 6, tzinfo=UTC))  # fmt: skip
        assert header.alarm and f"⚠ 2 REFUSED EVENTS (first seq {armed} triggers-armed)" in header.fit(60)
        verdict = resumed.verdict(StartWave(wave=0))
        assert not verdict.allowed and "window stage 'arm' has not passed" in verdict.reasons
    finally:
        asyncio.run(resumed.close())

    # the reviewer's view names them on its first line
    review = ReviewerSession(w.path, reviewer="bob", signer=w.signers["bob"])
    try:
        review.poll()
        assert f"REFUSED 2 event(s) the rules do not allow, first seq {armed}" in review.integrity()
    finally:
        review.close()


def test_a_reviewers_unsigned_blocks_in_the_cockpits_name_count_for_nothing(
    window: Window, capsys: pytest.CaptureFixture[str]
) -> None:
    w = window
    # bob signs the arm stage for real, then writes, unsigned, in the cockpit's name
    signed = append(w, "bob", "bob", EventKind.SIGNOFF, stage="arm", item="triggers-reviewed", note="read them")
    probe = append(w, "cockpit", None, EventKind.PROBE, node="gpu01", facts={"reachable": True, "gpu_count": 8})
    forged = append(w, "cockpit", None, EventKind.TRIGGER_FIRED, trigger="gpu-missing", node="gpu01",
                    facts={"evidence": "forged"})  # fmt: skip
    # and signs one in the cockpit's name with his own key: the cockpit signs with the operator's only
    his = append(w, "cockpit", "bob", EventKind.NOTE, note="a host key accepted")
    state = reopen(w.path, operator=None, runbook=None)[2].state
    assert state.window["arm"].items["triggers-reviewed"].status == "done"  # bob's signed sign-off counts
    assert not recorded(state.nodes["gpu01"].probe) and not state.fired()
    assert {r.seq for r in state.refused} == {probe, forged, his}
    words = {r.seq: r.why for r in state.refused}
    assert "no valid signature from an allowed key" in words[probe]
    assert "signed with bob's key, not alice's" in words[his] or "no valid signature" in words[his], words[his]
    status, out = verify(capsys, str(w.path), "--allowed-signers", str(w.allowed))
    assert status == 1 and f"FAILED at seq {probe}: unsigned event by cockpit" in out, out
    assert signed not in {r.seq for r in state.refused}


#: forged forms, each appended alone to the real window (arm gate shut: bob has not signed):
#: (name, actor, whose key signs it, kind, fields, words the refusal holds)
FORGED: list[tuple[str, str, str, EventKind, dict[str, object], str]] = [
    ("a wave started past a shut gate", "alice", "alice", EventKind.WAVE_STARTED, {"wave": 0},
     "window stage 'arm' has not passed"),
    ("a step run on a node not started", "alice", "alice", EventKind.STEP_STARTED,
     {"stage": "drain", "step": "cordon", "node": "gpu01"}, "gpu01 has not started"),
    ("a verdict in the cockpit's name, signed", "cockpit", "alice", EventKind.ITEM_VERIFIED,
     {"stage": "record", "item": "secure-boot", "node": "gpu01", "facts": {"ok": True, "evidence": "forged"}},
     "gpu01 has not started"),
    ("a reviewer's sign-off of a node's stage not started", "bob", "bob", EventKind.SIGNOFF,
     {"stage": "upgrade", "node": "gpu01"}, "gpu01 has not started"),
    ("a decision the runbook does not have", "alice", "alice", EventKind.DECISION,
     {"facts": {"outcome": "ship it", "halt_rollout": True}}, "is not one of the runbook's"),
    ("a rollback of a node never changed", "alice", "alice", EventKind.ROLLBACK_STARTED,
     {"node": "gpu01", "reason": "forged rollback"}, "nothing to roll back"),
    ("a trigger cleared that never fired", "alice", "alice", EventKind.TRIGGER_CLEARED,
     {"trigger": "gpu-missing", "reason": "nothing to see here"}, "not fired"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "actor", "key", "kind", "fields", "why"), FORGED, ids=[f[0] for f in FORGED])
def test_each_forged_form_is_refused_by_the_fold_every_reader_verify_and_the_ticket(
    window: Window,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    name: str,
    actor: str,
    key: str,
    kind: EventKind,
    fields: dict[str, object],
    why: str,
) -> None:
    w = window
    seq = append(w, actor, key, kind, **fields)
    state = reopen(w.path, operator=None, runbook=None)[2].state
    assert [(r.seq, r.kind) for r in state.refused] == [(seq, str(kind))], (name, state.refused)
    assert why in state.refused[0].why, (name, state.refused[0].why)
    assert state.current_wave is None and state.decision is None and not state.halted
    assert all(p.current == "pending" for p in state.nodes.values()), name
    status, out = verify(capsys, str(w.path), "--allowed-signers", str(w.allowed))
    assert status == 1 and f"FAILED at seq {seq}: refused ({kind} by {actor})" in out, (name, out)
    assert "0 unsigned, 0 invalid" in out  # every signature holds: the rules alone refuse it
    first = "\n".join(ticket(w, capsys).splitlines()[:6])
    assert f"REFUSED 1 event(s) the rules do not allow, first seq {seq} ({kind}) by {actor}" in first, first
    cast = tmp_path / "window.cast"
    assert main(["replay", str(w.path), "--cast", str(cast)]) == 0
    assert f"first seq {seq} ({kind})" in capsys.readouterr().out.splitlines()[0]
    review = ReviewerSession(w.path, reviewer="carol", signer=None)
    try:
        assert f"first seq {seq} ({kind})" in review.integrity()
    finally:
        review.close()


def test_a_resume_with_the_signatures_checked_by_workers_folds_what_a_plain_read_folds(
    window: Window, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big log's resume has every signature checked by forked workers while the next chunk
    is read, each chunk folded once its checks are in: the state is the plain read's."""
    import os

    from cockpit.changelog import reader

    w = window
    append(w, "alice", "alice", EventKind.TRIGGERS_ARMED, facts={"triggers": TRIGGERS})
    append(w, "bob", "bob", EventKind.SIGNOFF, stage="arm", item="triggers-reviewed", note="read them all")
    append(w, "cockpit", None, EventKind.PROBE, node="gpu01", facts={"reachable": True, "gpu_count": 8})
    append(w, "alice", "alice", EventKind.TRIGGERS_ARMED, facts={"triggers": TRIGGERS})
    append(w, "alice", "alice", EventKind.GATE_PASSED, stage="arm")
    append(w, "bob", "alice", EventKind.NOTE, note="written with the operator's key")
    plain = reopen(w.path, operator=None, runbook=None)[2].state
    assert [r.kind for r in plain.refused] == ["triggers-armed", "probe", "note"] and plain.window["arm"].closed
    monkeypatch.setattr(reader, "PIPELINE_FROM_BYTES", 1)
    monkeypatch.setattr(reader, "SCAN_CHUNK_BYTES", 600)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    taken: list[int] = []
    pipelined = reader._read_pipelined

    def counted(*args: Any) -> None:
        taken.append(1)
        pipelined(*args)

    monkeypatch.setattr(reader, "_read_pipelined", counted)
    assert reopen(w.path, operator=None, runbook=None)[2].state == plain
    assert taken == [1]  # the workers' path, not the plain one


def test_an_unsigned_hand_written_gate_pass_in_an_unsigned_session_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No signatures required (the demo's way): the rules still judge every event, so a
    block appended by hand over a shut gate counts for nothing and every reader says so."""
    tick = clock()
    session = Session.start(
        sessions_dir=tmp_path / "sessions",
        change_id="CHG-UNSIGNED",
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01"), HostTarget(name="gpu02")],
        operator="alice",
        transport=None,
        clock=tick,
        trust=Trust(require_signatures=False),
    )
    with pytest.raises(ActionRefused, match="needs sign-off by a second person"):
        session.pass_gate("arm")  # live: refused, nothing written
    path = session.path
    asyncio.run(session.close())
    with Journal.open_for_append(path, "alice", exclusive=False, clock=tick) as journal:
        passed = journal.append(EventKind.GATE_PASSED, stage="arm").seq

    # the fold every reader shares: the gate stays shut, the block is refused by the rule it breaks
    state = reopen(path, operator=None, runbook=None)[2].state
    assert state.window["arm"].status == "active"
    assert [(r.seq, r.kind, r.actor) for r in state.refused] == [(passed, "gate-passed", "alice")]
    assert "needs sign-off by a second person" in state.refused[0].why
    # verify: the chain holds, no signature is asked for, and still it fails at that seq
    status, out = verify(capsys, str(path))
    assert status == 1, out
    assert "chain: ok" in out and f"FAILED at seq {passed}: refused (gate-passed by alice)" in out, out
    assert "rules: 1 event(s) refused" in out
    # the ticket's first line, the replay's, the reviewer's integrity line
    assert main(["export", str(path), "--format", "markdown"]) == 0
    first = capsys.readouterr().out.splitlines()[:6]
    assert any(f"REFUSED 1 event(s) the rules do not allow, first seq {passed} (gate-passed) by alice" in line
               for line in first), first  # fmt: skip
    assert main(["replay", str(path), "--cast", str(tmp_path / "w.cast")]) == 0
    assert f"first seq {passed} (gate-passed)" in capsys.readouterr().out.splitlines()[0]
    # the cast's frames carry the header every screen shares, the refusal in it
    assert f"1 REFUSED EVENT (first seq {passed} gate-passed)" in (tmp_path / "w.cast").read_text()
    review = ReviewerSession(path, reviewer="bob", signer=None)
    try:
        review.poll()
        assert f"first seq {passed} (gate-passed)" in review.integrity()
    finally:
        review.close()
    # resumed, the window is where the rules left it, and its header says why in red
    resumed = Session.resume(path, clock=tick)
    try:
        assert resumed.state.window["arm"].status == "active"
        header = header_view(resumed.state, change_id="CHG-UNSIGNED", runbook_id="r", operator="alice",
                             now=datetime(2026, 8, 6, tzinfo=UTC))  # fmt: skip
        assert header.alarm and f"⚠ 1 REFUSED EVENT (first seq {passed} gate-passed)" in header.fit(60)
    finally:
        asyncio.run(resumed.close())
