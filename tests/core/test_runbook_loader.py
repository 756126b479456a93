"""The loader: finding runbooks (also through importlib.resources), the key-path line
index, and what a valid load returns."""

from __future__ import annotations

import hashlib
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.errors import BadInput
from cockpit.runbook.loader import (
    DEFAULT_RUNBOOK,
    KeyLines,
    Problem,
    RunbookInvalid,
    find_runbook,
    format_loc,
    load,
    load_runbook,
    parse_runbook,
    shipped_runbooks,
)

MALFORMED = Path(__file__).resolve().parent / "malformed_runbooks"


def leaf_paths(node: Any, loc: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(node, dict):
        return [p for key, value in node.items() for p in leaf_paths(value, (*loc, key))]
    if isinstance(node, list):
        return [p for i, value in enumerate(node) for p in leaf_paths(value, (*loc, i))]
    return [loc]


def test_shipped_runbooks_read_through_importlib_resources() -> None:
    root = resources.files("checklists")
    names = sorted(e.name for e in root.iterdir() if e.name.endswith(".toml"))
    assert names == [
        "driver-upgrade-gpu-operator.toml",
        "driver-upgrade-r580.toml",
        "driver-upgrade.toml",
        "minimal-driver-upgrade.toml",
    ]
    assert list(shipped_runbooks()) == [
        "driver-upgrade",
        "driver-upgrade-gpu-operator",
        "driver-upgrade-r580",
        "minimal-driver-upgrade",
    ]
    for stem, entry in shipped_runbooks().items():
        data = entry.read_bytes()  # a Traversable: works from a wheel or a zip as well
        loaded = parse_runbook(data, f"checklists/{entry.name}")
        assert loaded.runbook.id == stem
        assert loaded.sha256 == hashlib.sha256(data).hexdigest()


def test_default_runbook_is_shipped_and_loads() -> None:
    loaded = load()
    assert loaded.runbook.id == DEFAULT_RUNBOOK
    assert find_runbook(DEFAULT_RUNBOOK) is not None


def test_find_runbook_by_path_and_by_name(tmp_path: Path) -> None:
    copy = tmp_path / "mine.toml"
    copy.write_bytes(shipped_runbooks()["minimal-driver-upgrade"].read_bytes())
    assert find_runbook(str(copy)) == copy
    assert load_runbook(copy).path == str(copy)
    with pytest.raises(
        BadInput,
        match=r"no runbook file or shipped runbook named 'nope' \(shipped: driver-upgrade, driver-upgrade-gpu-operator, driver-upgrade-r580, minimal-driver-upgrade\)",
    ):
        find_runbook("nope")
    with pytest.raises(BadInput, match="no such file"):
        load("nope.toml")
    with pytest.raises(BadInput, match="is a directory"):
        load_runbook(tmp_path)


def test_find_runbook_by_id_when_the_stem_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    import cockpit.runbook.loader as loader

    entry = shipped_runbooks()["minimal-driver-upgrade"]
    monkeypatch.setattr(loader, "shipped_runbooks", lambda: {"renamed-file": entry})
    assert loader.find_runbook("minimal-driver-upgrade") == entry
    assert loader.find_runbook("renamed-file") == entry
    with pytest.raises(BadInput, match="shipped: renamed-file"):
        loader.find_runbook("driver-upgrade-r580")


@pytest.mark.parametrize("stem", ["driver-upgrade", "driver-upgrade-r580", "minimal-driver-upgrade"])
def test_key_index_has_a_line_for_every_value(stem: str) -> None:
    text = shipped_runbooks()[stem].read_text(encoding="utf-8")
    index = KeyLines(text)
    lines = text.splitlines()
    paths = leaf_paths(tomllib.loads(text))
    assert len(paths) > 100
    for path in paths:
        assert path in index.lines, path
        key = [p for p in path if isinstance(p, str)][-1]
        assert key in lines[index.lines[path] - 1], (path, lines[index.lines[path] - 1])


def test_key_index_tables_arrays_dotted_and_inline() -> None:
    text = (
        "a = 1\n"  # 1
        "b.c.d = 'x'  # comment [x]\n"  # 2
        "[t]\n"  # 3
        "s = '''\n"  # 4
        "[not.a.table]\n"  # 5
        "k = 1'''\n"  # 6
        'q = """\\"""" \n'  # 7
        "[[arr]]\n"  # 8
        "x = 1\n"  # 9
        "[[arr]]\n"  # 10
        "x = 2\n"  # 11
        "  [[arr.sub]]\n"  # 12
        '  y = { p = 1, "q r" = [1,\n'  # 13
        "    {z = 2}] }\n"  # 14
        "[arr.tab]\n"  # 15
        "w = 2024-01-02 03:04:05Z\n"  # 16
    )
    tomllib.loads(text)  # valid TOML
    index = KeyLines(text)
    assert index.line(("a",)) == 1
    assert index.line(("b", "c", "d")) == 2
    assert index.line(("t", "s")) == 4
    assert ("not", "a", "table") not in index.lines  # inside a multi-line string
    assert index.line(("t", "q")) == 7
    assert index.line(("arr", 0, "x")) == 9
    assert index.line(("arr", 1, "x")) == 11
    assert index.line(("arr", 1, "sub", 0)) == 12
    assert index.line(("arr", 1, "sub", 0, "y", "p")) == 13
    assert index.line(("arr", 1, "sub", 0, "y", "q r", 1, "z")) == 14
    assert index.line(("arr", 1, "tab", "w")) == 16
    assert index.line(("arr", 1, "missing", "deeper")) == 10  # nearest parent
    assert index.line(("nothing",)) == 1


def test_format_loc() -> None:
    assert format_loc(("stages", 2, "steps", 0, "run")) == "stages[2].steps[0].run"
    assert format_loc(("parameters", "Wave Size")) == 'parameters."Wave Size"'


def test_invalid_runbook_carries_every_problem() -> None:
    with pytest.raises(RunbookInvalid) as caught:
        load_runbook(MALFORMED / "several_cross_check_problems.toml")
    problems = caught.value.problems
    assert [(p.line, p.field_path) for p in problems] == [
        (21, "triggers[0].evaluator"),
        (42, "stages[1].steps[0].run"),
        (49, "stages[1].items[0].step"),
    ]
    assert all(isinstance(p, Problem) and p.file.endswith("several_cross_check_problems.toml") for p in problems)
    # as a CockpitError its message is one line, naming the first problem and the count
    message = str(caught.value)
    assert "\n" not in message and "and 2 more" in message and ":21: triggers[0].evaluator:" in message
    assert caught.value.exit_status == 2


def test_problem_str() -> None:
    assert (
        str(Problem("rb.toml", 7, "waves.rest", "expected an integer >= 1"))
        == "rb.toml:7: waves.rest: expected an integer >= 1"
    )
    assert str(Problem("rb.toml", 3, "", "invalid TOML: x")) == "rb.toml:3: invalid TOML: x"


def test_utf8_bom_is_accepted() -> None:
    data = b"\xef\xbb\xbf" + shipped_runbooks()["minimal-driver-upgrade"].read_bytes()
    assert parse_runbook(data, "bom.toml").runbook.id == "minimal-driver-upgrade"


_keys = st.text(alphabet=st.sampled_from("abz_-09 .\"'#[]=é"), min_size=1, max_size=6)
_scalars = st.one_of(
    st.integers(), st.booleans(), st.text(max_size=12), st.floats(allow_nan=False, allow_infinity=False)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_keys, _values, min_size=1, max_size=4), st.booleans())
def test_key_index_follows_any_document_tomli_w_writes(doc: dict[str, Any], multiline: bool) -> None:
    text = tomli_w.dumps(doc, multiline_strings=multiline)
    index = KeyLines(text)
    parsed = tomllib.loads(text)
    for path in leaf_paths(parsed):
        assert path in index.lines or (path[:-1] in index.lines and isinstance(path[-1], int)), (path, text)


def test_the_same_bytes_are_checked_once_and_other_bytes_again(tmp_path: Path) -> None:
    data = resources.files("checklists").joinpath(f"{DEFAULT_RUNBOOK}.toml").read_bytes()
    first = parse_runbook(data, "a.toml")
    assert parse_runbook(bytes(data), "a.toml") is first  # kept: a frozen result, read again
    assert parse_runbook(data, "b.toml").path == "b.toml"  # the name is part of what is kept
    edited = data.replace(b'title = "', b'title = "Edited: ', 1)
    again = parse_runbook(edited, "a.toml")
    assert again is not first and again.sha256 == hashlib.sha256(edited).hexdigest()
    assert again.runbook.runbook.title.startswith("Edited: ")
    # a runbook that does not load is checked again each time: the same problem, raised anew
    broken = data + b"\n[[stages]]\nid = 5\n"
    raised = []
    for _ in range(2):
        with pytest.raises(RunbookInvalid) as caught:
            parse_runbook(broken, "a.toml")
        raised.append(caught.value)
    assert raised[0] is not raised[1] and str(raised[0]) == str(raised[1])
