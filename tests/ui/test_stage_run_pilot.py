"""On the live screen, a person walks the opening with `n`, then runs the canary's stages
with one key each (S): the drain stage (its service changes confirmed by typing the node's
name once) runs to its gate and stops there, the gate passed with g; the upgrade stage,
destructive, is refused while the name typed is wrong and runs nothing when the dialog is
closed, then runs up to the manual item a person attests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import Button, Input

from cockpit.changelog.events import EventKind
from cockpit.engine.actions import PassGate
from cockpit.engine.state import CockpitState
from cockpit.runbook.placeholders import ParamValue
from cockpit.session.demo import demo_session
from screens.app import build_app
from screens.modals import ConfirmDestructive

PARAMS: dict[str, ParamValue] = {"reboot_timeout_s": 5, "drain_timeout_s": 3}


async def dialog_of(app: object, timeout: float = 10.0) -> ConfirmDestructive:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        screen = app.screen  # type: ignore[attr-defined]
        if isinstance(screen, ConfirmDestructive) and screen.query(Input):
            return screen
        await asyncio.sleep(0.01)
    raise AssertionError("no confirmation dialog opened")


@pytest.mark.timeout(300)
@pytest.mark.slow  # a pilot walk through the opening stages, ~10 s of CPU
async def test_one_key_runs_a_stage_of_the_canary_and_stops_at_its_gate(ui, tmp_path: Path) -> None:
    async with demo_session(nodes=2, scenario="happy", sessions_dir=tmp_path, speed=100.0, params=PARAMS) as (
        session,
        _fleet,
    ):
        app = build_app(session, refresh_s=0, reviewer=ui.DEMO_REVIEWER)
        async with app.run_test(size=(120, 40)) as pilot:

            def canary_at_drain(st: CockpitState) -> bool:
                return st.nodes["gpu01"].current == "drain"

            await ui.press_next_until(pilot, canary_at_drain, limit=300)
            drain = session.state.nodes["gpu01"].stages["drain"]
            assert all(s.status in ("open", "skipped") for s in drain.steps.values())
            started = app.main.actions_started

            # S: the drain stage's cordon and drain take the node out of service: the node's
            # name typed once for both, then every step and check of the stage, and no more
            await ui.press(pilot, "S")
            assert app.main.actions_started == started + 1  # one person action
            drain = session.state.nodes["gpu01"].stages["drain"]
            ran = [s for s in drain.steps.values() if s.status != "skipped"]
            assert ran and all(s.status == "done" for s in ran)
            assert all(i.status in ("done", "skipped") for i in drain.items.values())
            assert session.state.nodes["gpu01"].current == "drain"  # stopped at its gate
            assert session.next_action() == PassGate(stage="drain", node="gpu01")
            log = ui.events(session)
            assert not any(e.kind is EventKind.GATE_PASSED and e.node == "gpu01" for e in log)
            await ui.press(pilot, "g")  # the gate is the person's
            assert session.state.nodes["gpu01"].current == "record"
            await ui.press(pilot, "S")  # record: read-only steps and checks, no dialog
            assert session.state.nodes["gpu01"].current == "record"
            await ui.press(pilot, "g")
            assert session.state.nodes["gpu01"].current == "upgrade"

            # the upgrade stage is destructive: a wrong name keeps the dialog shut to it, and
            # closing the dialog runs nothing
            seq = session.state.last_seq
            app.simulate_key("S")
            dialog = await dialog_of(app)
            assert dialog.expected == "gpu01" and "install" in str(dialog.query_one("#confirm-command").render())
            field = dialog.query_one(Input)
            field.value = "gpu02"
            await pilot.pause()
            assert dialog.query_one("#ok", Button).disabled
            field.focus()
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen is dialog  # refused: it wants exactly gpu01
            await pilot.press("escape")
            for _ in range(200):
                if not isinstance(app.screen, ConfirmDestructive) and not app.main._actions:
                    break
                await asyncio.sleep(0.01)
            assert session.state.last_seq == seq  # nothing ran, nothing written
            assert session.state.nodes["gpu01"].stages["upgrade"].steps["install"].status == "open"

            # typed right: the stage runs up to the attestation a person writes
            await ui.press(pilot, "S")
            upgrade = session.state.nodes["gpu01"].stages["upgrade"]
            assert upgrade.steps["install"].status == "done"
            assert upgrade.items["official-procedure"].status == "open"
            assert session.state.nodes["gpu01"].current == "upgrade"
