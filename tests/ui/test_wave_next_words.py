"""While a wave runs itself, the Next line says what the person has (never `n`, which the
wave takes for its nodes): what the wave needs of them first, with its key; else that it
runs, and the keys that pause and kill it."""

from __future__ import annotations

from cockpit.engine.actions import TickItem
from cockpit.engine.waverun import NeedsYou
from cockpit.session.waves import WaveStatus
from screens.waves import wave_next_words


def test_the_wave_says_what_it_needs_of_the_person_first() -> None:
    tick = TickItem(stage="expand", item="baseline-workloads", node="gpu04")
    status = WaveStatus(
        wave=2,
        running=["gpu03"],
        needs_you=[NeedsYou("gpu05", "check 'dcgm' failed", failed=True), NeedsYou("gpu04", "tick it", action=tick)],
    )
    words = wave_next_words(status)
    # the one it can act on (a failed node's is a person's judgement, shown in the pane)
    assert words == "wave 3 needs you (1): gpu04: tick it; Y does it, P pauses, K kills"
    assert "[n]" not in words


def test_a_running_or_paused_wave_names_its_keys() -> None:
    assert wave_next_words(WaveStatus(wave=3, running=["gpu05"])) == (
        "wave 4 runs itself, 1 node at work; P pauses, K kills"
    )
    assert wave_next_words(WaveStatus(wave=3, running=["a", "b"])).startswith("wave 4 runs itself, 2 nodes at work")
    assert wave_next_words(WaveStatus(wave=3, paused=True)) == "wave 4 is paused; P resumes it, K kills it"
