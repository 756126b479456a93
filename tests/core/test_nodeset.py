"""Node sets: expansion, folding, round trips and the errors an operator may type."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from refusals import one_line_refusal

from cockpit.errors import BadInput
from cockpit.fleet.nodeset import MAX_NODES, expand_nodeset, fold_nodeset, split_nodeset


def test_expand_ranges_lists_and_plain_names() -> None:
    assert expand_nodeset("gpu[01-03,05],login1") == ["gpu01", "gpu02", "gpu03", "gpu05", "login1"]
    assert expand_nodeset("gpu[01-16,20]")[-2:] == ["gpu16", "gpu20"]
    assert len(expand_nodeset("gpu[01-16,20],login1")) == 18


def test_expand_cartesian_keeps_written_order() -> None:
    assert expand_nodeset("rack[1-2]-gpu[01-02]") == [
        "rack1-gpu01",
        "rack1-gpu02",
        "rack2-gpu01",
        "rack2-gpu02",
    ]
    assert len(expand_nodeset("rack[1-2]-gpu[01-08]")) == 16


def test_expand_keeps_padding_and_width_of_first_bound() -> None:
    assert expand_nodeset("n[08-11]") == ["n08", "n09", "n10", "n11"]
    assert expand_nodeset("n[8-11]") == ["n8", "n9", "n10", "n11"]
    assert expand_nodeset("n[098-101]") == ["n098", "n099", "n100", "n101"]


def test_expand_drops_duplicates_keeps_first_position() -> None:
    assert expand_nodeset("b,a,gpu[1-2],a,gpu1") == ["b", "a", "gpu1", "gpu2"]


def test_expand_trims_spaces_around_items() -> None:
    assert expand_nodeset(" gpu[1-2] , login1 ") == ["gpu1", "gpu2", "login1"]
    assert expand_nodeset("gpu[1, 3]") == ["gpu1", "gpu3"]


def test_expand_suffix_after_bracket_and_dotted_names() -> None:
    assert expand_nodeset("gpu[1-2].dc1.example.com") == ["gpu1.dc1.example.com", "gpu2.dc1.example.com"]
    assert expand_nodeset("10.0.0.[1-3]") == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("gpu[05-01]", "backwards"),
        ("gpu[01-03", "never closed"),
        ("gpu01-03]", "without '['"),
        ("gpu[[1-2]]", "nested"),
        ("", "empty"),
        ("   ", "empty"),
        ("gpu1,,gpu2", "empty name"),
        ("gpu[]", "empty range"),
        ("gpu[1,]", "empty range"),
        ("gpu[a-c]", "bad range"),
        ("gpu[1-]", "bad range"),
        ("gpu[1-2-3]", "bad range"),
        (f"gpu[0-{MAX_NODES}]", "larger than"),
        ("a[0-999]b[0-999]", "more than"),
    ],
)
def test_expand_errors_are_one_line_bad_input(spec: str, words: str) -> None:
    assert words in one_line_refusal(expand_nodeset, spec)


def test_fold_compact_form_like_clush() -> None:
    assert fold_nodeset(["gpu01", "gpu02", "gpu03", "gpu05", "login1"]) == "gpu[01-03,05],login1"
    assert fold_nodeset(["gpu03", "gpu01", "gpu02"]) == "gpu[01-03]"
    assert fold_nodeset(["gpu01"]) == "gpu01"
    assert fold_nodeset(["login1", "login2"]) == "login[1-2]"
    assert fold_nodeset([]) == ""


def test_fold_padding_boundaries() -> None:
    assert fold_nodeset(expand_nodeset("n[08-11]")) == "n[08-11]"
    assert fold_nodeset(expand_nodeset("n[8-11]")) == "n[8-11]"
    assert fold_nodeset(["n1", "n01"]) == "n[1,01]"


def test_fold_several_dimensions() -> None:
    names = expand_nodeset("rack[1-2]-gpu[01-08]")
    assert fold_nodeset(names) == "rack[1-2]-gpu[01-08]"
    assert fold_nodeset(["rack1-gpu01", "rack1-gpu02", "rack2-gpu01"]) == "rack1-gpu[01-02],rack2-gpu01"


def test_split_keeps_commas_inside_brackets() -> None:
    assert split_nodeset("gpu[1,2],login1, x") == ["gpu[1,2]", "login1", " x"]


def test_fold_refuses_names_that_would_not_expand_back() -> None:
    with pytest.raises(BadInput):
        fold_nodeset(["gpu[1]"])
    with pytest.raises(BadInput):
        fold_nodeset(["a,b"])


_name = st.builds(
    lambda prefix, num, width, suffix: f"{prefix}{str(num).zfill(width)}{suffix}",
    st.sampled_from(["gpu", "node-", "rack1-gpu", "x"]),
    st.integers(0, 130),
    st.integers(1, 3),
    st.sampled_from(["", ".dc1", "-ib"]),
)


@given(st.lists(_name | st.sampled_from(["login1", "ctl", "a2b3"]), min_size=1, max_size=40))
def test_fold_then_expand_gives_back_the_same_names(names: list[str]) -> None:
    folded = fold_nodeset(names)
    assert sorted(expand_nodeset(folded)) == sorted(set(names))
    assert len(split_nodeset(folded)) <= len(set(names))
