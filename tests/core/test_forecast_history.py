"""An earlier window's stages lent to the forecast (``--history``): a few of its durations per
stage, so two nodes walked by hand do not pass alone for a stage the running wave has not
been through; read from a real saved window, refused in one line when it cannot serve."""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from offline_session import start_minimal, start_offline

from cockpit.changelog.events import EventKind
from cockpit.changelog.journal import read_session
from cockpit.cli import main
from cockpit.commands import pair as pair_command
from cockpit.commands import resume as resume_command
from cockpit.commands import run as run_command
from cockpit.engine.durations import stage_fits
from cockpit.engine.forecast import Forecast, StageHistory, forecast
from cockpit.errors import BadInput
from cockpit.session.opening import read_stage_history
from cockpit.session.operator import Session
from screens.waves import wave_lines

T0 = datetime(2026, 12, 5, 22, 0, tzinfo=UTC)
EXAMPLES = Path(__file__).resolve().parents[2] / "sessions" / "examples"
NODE_STAGES = ["drain", "record", "upgrade", "reboot", "smoke", "expand"]
#: an earlier window's reboot: a thousand nodes around 300 s
EARLIER_REBOOT = tuple(300.0 * (0.8 + 0.4 * i / 999) for i in range(1000))


def test_an_earlier_windows_mean_is_weighed_as_five_of_its_nodes_at_most() -> None:
    hand = {"drain": [60.0, 62.0], "reboot": [400.0, 430.0]}
    alone = stage_fits(hand)["reboot"]
    lent = stage_fits(hand, history_s={"reboot": EARLIER_REBOOT})["reboot"]
    assert alone.mean == pytest.approx(415.0)
    assert 300.0 < lent.mean < 360.0  # five of the earlier window's nodes against two of this one's
    # one node of an earlier window weighs as one node, not five
    one = stage_fits(hand, history_s={"reboot": [300.0]})["reboot"]
    assert lent.mean < one.mean < alone.mean
    assert one.mean == pytest.approx(math.exp((2 * math.log(415.0) + math.log(300.0)) / 3), rel=0.03)
    # two nodes say little of a stage's spread: the earlier window's nodes say it instead, and
    # how far the two windows are apart is no spread among the nodes (a slower history, same spread)
    earlier_cv = statistics.stdev(EARLIER_REBOOT) / statistics.fmean(EARLIER_REBOOT)
    assert lent.sd / lent.mean == pytest.approx(earlier_cv)
    slower = stage_fits(hand, history_s={"reboot": tuple(1.4 * d for d in EARLIER_REBOOT)})["reboot"]
    assert slower.sd / slower.mean == pytest.approx(earlier_cv)
    # four nodes of an earlier window do not pin a spread: the pooled one holds
    few = stage_fits(hand, history_s={"reboot": (250.0, 300.0, 350.0, 400.0)})["reboot"]
    assert few.sd / few.mean == pytest.approx(alone.sd / alone.mean)
    # a stage the earlier window never measured is this window's alone
    assert stage_fits(hand, history_s={"reboot": EARLIER_REBOOT})["drain"] == stage_fits(hand)["drain"]
    # a stage only the earlier window measured is not one this window forecasts
    assert set(stage_fits(hand, history_s={"smoke": [120.0]})) == {"drain", "reboot"}
    # durations of nothing lend nothing
    assert stage_fits(hand, history_s={"reboot": [0.0, -1.0]})["reboot"] == alone


def test_the_history_fades_as_this_windows_nodes_come_through_or_stay_in() -> None:
    many = {"reboot": [420.0 + (i % 7) for i in range(500)]}
    own = stage_fits(many)["reboot"].mean
    assert stage_fits(many, history_s={"reboot": EARLIER_REBOOT})["reboot"].mean == pytest.approx(own, rel=0.01)
    # nodes still in the stage, longer than the two through it, count with a history as without
    two = {"reboot": [400.0, 430.0]}
    still_in = {"reboot": [500.0] * 100}
    with_them = stage_fits(two, still_in, {"reboot": EARLIER_REBOOT})["reboot"].mean
    assert with_them > stage_fits(two, None, {"reboot": EARLIER_REBOOT})["reboot"].mean
    assert with_them > 500.0  # a hundred nodes past 500 s outweigh five of the earlier window's


def window_forecast(history: StageHistory | None, hand: dict[str, list[float]] | None = None) -> Forecast:
    """The forecast of 200 nodes left after the canary and the second node."""
    hand = hand or {"drain": [60.0, 62.0], "upgrade": [180.0, 175.0], "reboot": [400.0, 430.0]}
    return forecast(
        now=T0, stage_s=hand, running_elapsed_s=[], running_pending=0, waves_left=[200], parallel=20, history=history
    )


def test_the_forecast_names_its_history_and_its_band_holds_what_the_history_moved() -> None:
    earlier = StageHistory("CHG-PREV", {"reboot": EARLIER_REBOOT, "drain": (60.0,) * 100, "upgrade": (178.0,) * 100})
    alone, lent = window_forecast(None), window_forecast(earlier)
    assert lent.left_s < alone.left_s  # the reboot is the earlier window's 300 s more than this one's 415
    # how far an earlier window misleads is unknown: the band holds at least what it moved
    assert lent.spread_s >= alone.left_s - lent.left_s > 0
    assert "CHG-PREV's stages before them" in lent.words() and "before them" not in alone.words()
    assert "1 wave, 2 nodes measured" in alone.words()  # (it said "1 waves")
    assert "CHG-PREV" in str(wave_lines(None, lent)[0])
    # a history that agrees with this window moves nothing and widens nothing
    same = window_forecast(StageHistory("CHG-SAME", {"reboot": (400.0, 430.0) * 50, "drain": (61.0,) * 9}))
    assert same.left_s == pytest.approx(alone.left_s, rel=0.01)
    assert same.spread_s == pytest.approx(alone.spread_s, rel=0.1)
    # stages that took no time (a zero mean) with a history: a forecast, not a division by zero
    zero = window_forecast(earlier, {"drain": [0.0]})
    assert zero.spread_s == 0.0 and zero.left_s == 0.0  # (a stage at 0 s is not lent to: no log of it)


def example(tmp_path: Path) -> Path:
    """The shipped demo window (gpu-missing), copied with its checklists: two nodes through drain."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES / "demo-gpu-missing.toml", tmp_path / "demo-gpu-missing.toml")
    shutil.copytree(EXAMPLES / "checklists", tmp_path / "checklists")
    return tmp_path / "demo-gpu-missing.toml"


def test_a_saved_window_is_read_back_for_its_stages(tmp_path: Path) -> None:
    earlier = read_stage_history(example(tmp_path), NODE_STAGES, window="CHG-NOW")
    assert earlier.change_id == "demo-gpu-missing"
    assert earlier.stage_s["drain"] == (59.0, 59.0) and earlier.stage_s["reboot"] == (183.5,)
    # only this runbook's node stages are taken
    assert read_stage_history(example(tmp_path / "b"), ["reboot"], window="CHG-NOW").stage_s == {"reboot": (183.5,)}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.toml", "no such file"),
        (lambda d: written(d / "garbage.toml", "not a log\n"), "not a cockpit change log"),
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
    assert said.count(str(path)) == 1  # the file named once


def written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def start_paused(sessions: Path, change_id: str) -> Path:
    session = start_minimal(sessions, change_id)
    session.journal.close()
    return session.path


def history_notes(path: Path) -> list[str]:
    return [
        e.note or "" for e in read_session(path).events if e.kind is EventKind.NOTE and "--history" in (e.note or "")
    ]


def test_resume_takes_the_history_to_the_screen_and_refuses_a_bad_one_before_writing(
    tmp_path: Path, driven: list[Session], capsys: pytest.CaptureFixture[str]
) -> None:
    session = start_offline(tmp_path / "now", ["gpu01", "gpu02"], change_id="CHG-NOW")
    path = session.path
    session.journal.close()
    before = path.read_bytes()
    for bad, message in ((tmp_path / "nope.toml", "no such file"), (path, "own log")):
        assert main(["resume", str(path), "--history", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
        assert path.read_bytes() == before  # refused before anything was written
    history = example(tmp_path)
    assert main(["resume", str(path), "--history", str(history)]) == 0, capsys.readouterr().err
    assert driven and driven[0].history is not None
    assert driven[0].history.change_id == "demo-gpu-missing"
    assert driven[0].history.stage_s["drain"] == (59.0, 59.0)
    # the log says which earlier window the forecast shown came from
    assert history_notes(path) == ["the forecast starts from the stages of earlier window demo-gpu-missing (--history)"]


def test_run_takes_the_history_and_refuses_a_bad_one_before_a_log_exists(
    tmp_path: Path, driven: list[Session], capsys: pytest.CaptureFixture[str]
) -> None:
    history = example(tmp_path)
    sessions = tmp_path / "sessions"
    run = ["run", "--change-id", "CHG-RUN", "--hosts", "gpu01", "--no-require-signatures", "--sessions", str(sessions)]
    assert main([*run, "--history", str(written(tmp_path / "bad.toml", "x = 1\n"))]) == 2
    assert "not a cockpit change log" in capsys.readouterr().err
    assert not (sessions / "CHG-RUN.toml").exists()  # refused before the window's log was begun
    assert main([*run, "--history", str(history)]) == 0, capsys.readouterr().err
    assert driven[0].history is not None and driven[0].history.stage_s["reboot"] == (183.5,)
    assert len(history_notes(sessions / "CHG-RUN.toml")) == 1


def test_history_goes_with_a_window_that_forecasts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = example(tmp_path)
    dry = ["run", "--change-id", "CHG-DRY", "--hosts", "gpu01", "--dry-run", "--history", str(history)]
    assert main(dry) == 2
    assert "a --dry-run has none" in capsys.readouterr().err
    sock = tmp_path / "never.sock"
    pair = ["pair", "--change-id", "CHG-P", "--sessions", str(tmp_path), "--socket", str(sock), "--no-attach"]
    assert main([*pair, "--demo", "--history", str(history)]) == 2
    assert "a demo has no earlier window" in capsys.readouterr().err
    # what run would refuse, refused before tmux starts (a refusal in its pane reads "did not start")
    real = [*pair, "--hosts", "gpu01", "--no-require-signatures"]
    for bad, message in ((tmp_path / "no.toml", "no such file"), (written(tmp_path / "g.toml", "x"), "not a cockpit")):
        assert main([*real, "--history", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert not sock.exists()


def test_pair_hands_the_history_to_the_cockpit_it_starts_or_resumes(tmp_path: Path) -> None:
    history = example(tmp_path)
    parser = argparse.ArgumentParser()
    pair_command.configure(parser)
    args = parser.parse_args(["--change-id", "S1", "--hosts", "gpu01", "--history", str(history.name)])
    for resume, command in ((False, run_command), (True, resume_command)):
        argv = pair_command._passthrough(args, demo=False, resume=resume)
        target = argparse.ArgumentParser()
        command.configure(target)
        head = ["--change-id", "S1"] if command is run_command else ["S1.toml"]
        # an absolute path: the pane's cockpit may start in another folder
        assert target.parse_args([*head, *argv]).history == Path(history.name).resolve()
