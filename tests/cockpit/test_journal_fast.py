"""The fast event reader agrees with tomllib, or steps aside (NotFast) and lets tomllib decide."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit import toml_fast

keys = st.text(alphabet=st.characters(codec="utf-8", categories=["L", "N", "P", "Z"]), min_size=1, max_size=8)
scalars = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
    | st.datetimes(timezones=st.just(UTC))
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values, max_size=6))
def test_fast_reader_matches_tomllib_on_what_tomli_w_writes(doc: dict) -> None:
    text = tomli_w.dumps({"events": {"000001": {"seq": 1, "facts": doc}}})
    expected = tomllib.loads(text)
    try:
        got = toml_fast.loads(text)
    except toml_fast.NotFast:
        return
    assert got == expected


def test_typical_event_takes_the_fast_path() -> None:
    text = tomli_w.dumps(
        {
            "events": {
                "000042": {
                    "seq": 42,
                    "ts": datetime(2026, 8, 5, 22, 0, 1, 250000, tzinfo=UTC),
                    "kind": "step-finished",
                    "facts": {"stdout": 'a\tb\n"c" \\ ü', "ok": True, "codes": [79, 48], "empty": [], "d": 1.5e-07},
                }
            }
        }
    )
    assert toml_fast.loads(text) == tomllib.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        'a = "x\\/y"\n',  # JSON escape TOML lacks
        'a = "\\ud800"\n',  # lone surrogate
        'a = "x\x01"\n',  # raw control character
        "a = 'literal'\n",
        "a = 1 # comment\n",
        'a = "x" "y"\n',
        "a.b = 1\n",
        '"quoted" = 1\n',
        "[t]\n[t]\n",
        "a = 1\na = 2\n",
        "a = [\n    [\n        1,\n    ],\n]\n",
        "a = [{ x = 1 }]\n",
        "[[aot]]\nx = 1\n",
        "a = 2026-08-05T22:00:00Z\n",
        "a = 0x10\n",
        "a = 01\n",
        "a = inf\n",
    ],
)
def test_outside_the_subset_steps_aside(text: str) -> None:
    with pytest.raises(toml_fast.NotFast):
        toml_fast.loads(text)
