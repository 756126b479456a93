"""The change log's block reader (rtoml) agrees with tomllib: same values, same refusals."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime

import pytest
import rtoml
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.changelog.blocks import loads_block

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


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values, max_size=6))
def test_reader_matches_tomllib_on_what_tomli_w_writes(doc: dict) -> None:
    text = tomli_w.dumps({"events": {"000001": {"seq": 1, "facts": doc}}})
    assert loads_block(text) == tomllib.loads(text)


def test_typical_event_reads_as_tomllib_reads_it() -> None:
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
    got = loads_block(text)
    assert got == tomllib.loads(text)
    assert got["events"]["000042"]["ts"].utcoffset().total_seconds() == 0


@pytest.mark.parametrize(
    "text",
    [
        'a = "x\\/y"\n',  # JSON escape TOML lacks
        'a = "\\ud800"\n',  # lone surrogate
        'a = "x\x01"\n',  # raw control character
        'a = "x" "y"\n',
        "[t]\n[t]\n",
        "a = 1\na = 2\n",
        "a = 01\n",
    ],
)
def test_what_tomllib_refuses_the_reader_refuses(text: str) -> None:
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    with pytest.raises(rtoml.TomlParsingError):
        loads_block(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab=[]\"\\.\n 1{},#'", max_size=30))
def test_arbitrary_text_reads_alike_or_is_refused_alike(text: str) -> None:
    try:
        expected = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        with pytest.raises(rtoml.TomlParsingError):
            loads_block(text)
        return
    assert loads_block(text) == expected
