"""An earlier window's stages lent to the forecast (``--history``): a few of its durations per
stage, so two nodes walked by hand do not pass alone for a stage the running wave has not
been through; read from a real saved window, refused in one line when it cannot serve."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from offline_session import start_minimal, start_offline

from cockpit.cli import main
from cockpit.engine.durations import HISTORY_NODES, history_sample, node_mean_sigma, stage_fits
from cockpit.engine.forecast import StageHistory, forecast
from cockpit.errors import BadInput
from cockpit.session.opening import read_stage_history
from cockpit.session.operator import Session
from screens.waves import wave_lines

T0 = datetime(2026, 12, 5, 22, 0, tzinfo=UTC)
EXAMPLES = Path(__file__).resolve().parents[2] / "sessions" / "examples"
NODE_STAGES = ["drain", "record", "upgrade", "reboot", "smoke", "expand"]
#: an earlier window's reboot: a thousand nodes around 300 s
EARLIER_REBOOT = [300.0 * (0.8 + 0.4 * i / 999) for i in range(1000)]


def test_an_earlier_window_lends_a_few_durations_at_its_quantiles() -> None:
    lent = history_sample(EARLIER_REBOOT)
    assert len(lent) == HISTORY_NODES == 5
    assert lent == sorted(lent) and lent[0] > min(EARLIER_REBOOT) and lent[-1] < max(EARLIER_REBOOT)
    assert lent[2] == pytest.approx(300.0, rel=0.01)  # its median among them
    assert history_sample([120.0]) == [120.0] * 5
    assert history_sample([]) == [] and history_sample([0.0, -1.0]) == []  # nothing measured lends nothing


def test_two_slow_nodes_by_hand_no_longer_pass_for_the_stage_alone() -> None:
    hand = {"drain": [60.0, 62.0], "reboot": [400.0, 430.0]}
    alone = stage_fits(hand)["reboot"].mean
    lent = stage_fits(hand, history_s={"reboot": EARLIER_REBOOT})["reboot"].mean
    assert alone == pytest.approx(415.0)
    assert 300.0 < lent < 360.0  # five of the earlier window's against two of this one's
    # a stage the earlier window never measured is this window's alone
    assert stage_fits(hand, history_s={"reboot": EARLIER_REBOOT})["drain"].mean == pytest.approx(61.0)
    # a stage only the earlier window measured is not one this window forecasts
    assert set(stage_fits(hand, history_s={"smoke": [120.0]})) == {"drain", "reboot"}


def test_the_history_fades_as_this_windows_nodes_come_through() -> None:
    many = {"reboot": [420.0 + (i % 7) for i in range(500)]}
    own = stage_fits(many)["reboot"].mean
    assert stage_fits(many, history_s={"reboot": EARLIER_REBOOT})["reboot"].mean == pytest.approx(own, rel=0.01)
    # the nodes still in the stage count with the history as they do without it
    censored = {"reboot": [200.0] * 100}
    two = {"reboot": [400.0, 430.0]}
    assert (
        stage_fits(two, censored, {"reboot": EARLIER_REBOOT})["reboot"].mean < stage_fits(two, censored)["reboot"].mean
    )


def window_forecast(history: StageHistory | None) -> tuple[float, float]:
    """The forecast of 200 nodes left after the canary and the second node: its seconds left, its band."""
    hand = {"drain": [60.0, 62.0], "upgrade": [180.0, 175.0], "reboot": [400.0, 430.0]}
    ahead = forecast(
        now=T0, stage_s=hand, running_elapsed_s=[], running_pending=0, waves_left=[200], parallel=20, history=history
    )
    return ahead.left_s, ahead.spread_s


def test_the_forecast_names_its_history_and_its_band_holds_what_the_history_moved() -> None:
    earlier = StageHistory("CHG-PREV", {"reboot": EARLIER_REBOOT, "drain": [60.0] * 100, "upgrade": [178.0] * 100})
    alone_s, _ = window_forecast(None)
    lent_s, lent_band = window_forecast(earlier)
    assert lent_s < alone_s  # the reboot is the earlier window's 300 s more than this one's 415
    # how far an earlier window misleads is unknown: the band holds at least what it moved
    assert lent_band >= (alone_s - lent_s) * 0.9
    ahead = forecast(
        now=T0,
        stage_s={"reboot": [400.0]},
        running_elapsed_s=[],
        running_pending=0,
        waves_left=[4],
        parallel=2,
        history=earlier,
    )
    assert "CHG-PREV's stages before them" in ahead.words()
    assert "CHG-PREV" in str(wave_lines(None, ahead)[0])
    assert earlier.nodes == 1000
    # a history that agrees with this window moves nothing and widens nothing
    same = StageHistory("CHG-SAME", {"reboot": [400.0, 430.0] * 50})
    mean_alone, _ = node_mean_sigma({"reboot": [400.0, 430.0]})
    mean_same, _ = node_mean_sigma({"reboot": [400.0, 430.0]}, history_s=same.stage_s)
    assert mean_same == pytest.approx(mean_alone, rel=0.02)


def example(tmp_path: Path) -> Path:
    """The shipped demo window (gpu-missing), copied with its checklists: two nodes through drain."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES / "demo-gpu-missing.toml", tmp_path / "demo-gpu-missing.toml")
    shutil.copytree(EXAMPLES / "checklists", tmp_path / "checklists")
    return tmp_path / "demo-gpu-missing.toml"


def test_a_saved_window_is_read_back_for_its_stages(tmp_path: Path) -> None:
    earlier = read_stage_history(example(tmp_path), NODE_STAGES, window="CHG-NOW")
    assert earlier.change_id == "demo-gpu-missing"
    assert earlier.stage_s["drain"] == [59.0, 59.0] and earlier.stage_s["reboot"] == [183.5]
    # only this runbook's node stages are taken
    assert read_stage_history(example(tmp_path / "b"), ["reboot"], window="CHG-NOW").stage_s == {"reboot": [183.5]}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.toml", "no such file"),
        (lambda d: written(d / "garbage.toml", "not a log\n"), "garbage.toml"),
        (lambda d: start_paused(d, "CHG-EMPTY"), "passed none of this runbook's node stages"),
        (lambda d: start_paused(d, "CHG-NOW"), "own log"),
    ],
)
def test_a_history_that_cannot_serve_is_refused_in_one_line(
    tmp_path: Path, make: Callable[[Path], Path], message: str
) -> None:
    path = make(tmp_path)
    with pytest.raises(BadInput) as refused:
        read_stage_history(path, NODE_STAGES, window="CHG-NOW")
    said = str(refused.value)
    assert said.startswith(f"--history {path}: ") and message in said and "\n" not in said


def written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def start_paused(sessions: Path, change_id: str) -> Path:
    session = start_minimal(sessions, change_id)
    session.journal.close()
    return session.path


def test_resume_takes_the_history_to_the_screen_and_refuses_a_bad_one_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    session = start_offline(tmp_path / "now", ["gpu01", "gpu02"], change_id="CHG-NOW")
    path = session.path
    session.journal.close()
    started: list[Session] = []

    async def drive(session: Session, refresh: float) -> int:
        started.append(session)
        session.journal.close()
        return 0

    monkeypatch.setattr("cockpit.commands.run.drive_window", drive)
    monkeypatch.setattr("cockpit.commands.terminal.require_terminal", lambda *a, **k: None)
    before = path.read_bytes()
    for bad, message in ((tmp_path / "nope.toml", "no such file"), (path, "own log")):
        assert main(["resume", str(path), "--history", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
        assert path.read_bytes() == before  # refused before anything was written
    history = example(tmp_path)
    assert main(["resume", str(path), "--history", str(history)]) == 0, capsys.readouterr().err
    assert started and started[0].history is not None
    assert started[0].history.change_id == "demo-gpu-missing"
    assert started[0].history.stage_s["drain"] == [59.0, 59.0]


def test_history_goes_with_a_window_that_forecasts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = example(tmp_path)
    dry = ["run", "--change-id", "CHG-DRY", "--hosts", "gpu01", "--dry-run", "--history", str(history)]
    assert main(dry) == 2
    assert "a --dry-run has none" in capsys.readouterr().err
    sock = tmp_path / "never.sock"
    pair = ["pair", "--change-id", "CHG-P", "--sessions", str(tmp_path), "--socket", str(sock), "--no-attach"]
    assert main([*pair, "--demo", "--history", str(history)]) == 2
    assert "a demo has no earlier window" in capsys.readouterr().err
    assert main([*pair, "--hosts", "gpu01", "--no-require-signatures", "--history", str(tmp_path / "no.toml")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not sock.exists()
