"""Placeholders: every filled value stays one shell word; bad values are refused at input."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.errors import BadInput
from cockpit.runbook.loader import load
from cockpit.runbook.model import Parameter, ParamType
from cockpit.runbook.placeholders import (
    fill,
    parse_param_assignment,
    placeholder_names,
    resolve_parameters,
    template_problems,
    validate_host_name,
    validate_param_value,
)

HOSTILE = [
    "; rm -rf /",
    "$(reboot)",
    "`reboot`",
    "a\nreboot",
    "it's",
    'say "hi"',
    "-rf",
    "--delete-everything",
    "a b\tc",
    "x && y || z",
    "*",
    "~root",
    "$HOME",
    "'; reboot; '",
    "",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_value_stays_one_argument(value: str) -> None:
    command = fill("apt-get install -y {driver_package} --then {node}", {"driver_package": value, "node": "gpu01"})
    words = shlex.split(command)
    assert words == ["apt-get", "install", "-y", value, "--then", "gpu01"]


@pytest.mark.parametrize("value", ["$(touch PWNED)", "`touch PWNED`", "; touch PWNED", "a\ntouch PWNED"])
def test_hostile_value_reaches_a_real_shell_as_data(value: str, tmp_path: Path) -> None:
    command = fill("printf '%s' {v}", {"v": value})
    result = subprocess.run(["sh", "-c", command], cwd=str(tmp_path), capture_output=True, text=True, timeout=10)
    assert result.stdout == value
    assert not (tmp_path / "PWNED").exists()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")))
def test_any_text_round_trips_through_quoting(value: str) -> None:
    assert shlex.split(fill("run {x} end", {"x": value})) == ["run", value, "end"]


def test_braces_and_repeats() -> None:
    assert (
        fill("docker inspect --format '{{{{.Id}}}}' {image}", {"image": "img:1"})
        == "docker inspect --format '{{.Id}}' img:1"
    )
    assert fill("{a}-{a}", {"a": "x y"}) == "'x y'-'x y'"
    assert fill("n={n} on={b}", {"n": 3, "b": True}) == "n=3 on=true"
    assert placeholder_names("{a} {{b}} {c} {a}") == ["a", "c"]


def test_missing_value_and_lone_brace_raise() -> None:
    with pytest.raises(BadInput, match=r"no value for placeholder \{node\}"):
        fill("kubectl cordon {node}", {})
    with pytest.raises(BadInput, match="lone '}'"):
        fill("echo {{x}", {})
    assert template_problems("a {b} {{c}}") == []
    assert len(template_problems("a { b }")) == 2


def int_param() -> Parameter:
    return Parameter(type=ParamType.INT, default=4)


def test_validate_param_value_types() -> None:
    assert validate_param_value("wave_size", int_param(), "8") == 8
    assert validate_param_value("ratio", Parameter(type=ParamType.FLOAT), "0.5") == 0.5
    assert validate_param_value("dry", Parameter(type=ParamType.BOOL), "yes") is True
    assert validate_param_value("dry", Parameter(type=ParamType.BOOL), "false") is False
    sched = Parameter(type=ParamType.CHOICE, choices=["kubernetes", "slurm", "none"])
    assert validate_param_value("scheduler", sched, "slurm") == "slurm"
    assert (
        validate_param_value("driver_package", Parameter(), "nvidia-driver-580=580.65.06-1")
        == "nvidia-driver-580=580.65.06-1"
    )


@pytest.mark.parametrize(
    ("param", "raw", "message"),
    [
        (Parameter(type=ParamType.INT), "four", "parameter p: expected an integer, got 'four'"),
        (Parameter(type=ParamType.INT), "4; reboot", "parameter p: expected an integer"),
        (Parameter(type=ParamType.FLOAT), "nan", "parameter p: expected a finite number"),
        (Parameter(type=ParamType.BOOL), "maybe", "parameter p: expected true or false"),
        (
            Parameter(type=ParamType.CHOICE, choices=["kubernetes", "slurm"]),
            "pbs",
            "expected one of kubernetes, slurm, got 'pbs'",
        ),
        (Parameter(), "a\nreboot", "control character U\\+000A"),
        (Parameter(), "a\x00b", "control character U\\+0000"),
        (Parameter(), "a\rb", "control character U\\+000D"),
        (Parameter(), "a\x1b[2Jb", "control character U\\+001B"),
        (Parameter(), "a\u2028b", "control character U\\+2028"),
        (Parameter(), "--purge", "must not start with '-'"),
    ],
)
def test_validate_param_value_refuses(param: Parameter, raw: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        validate_param_value("p", param, raw)


def test_resolve_parameters_against_the_shipped_runbook() -> None:
    runbook = load("driver-upgrade-r580").runbook
    values = resolve_parameters(runbook, {"scheduler": "slurm", "wave_size": "8"})
    assert values["scheduler"] == "slurm" and values["wave_size"] == 8
    assert values["driver_package"] == ""
    with pytest.raises(BadInput, match="unknown parameter wave_sise"):
        resolve_parameters(runbook, {"wave_sise": "8"})
    with pytest.raises(BadInput, match="expected one of kubernetes, slurm, none"):
        resolve_parameters(runbook, {"scheduler": "pbs"})
    assert parse_param_assignment("reason=a=b") == ("reason", "a=b")
    with pytest.raises(BadInput, match="NAME=VALUE"):
        parse_param_assignment("novalue")


@pytest.mark.parametrize(
    "name", ["gpu01", "gpu-01.rack3.example.com", "a", "10.0.0.7", "[fe80::1]", "[::1]", "x" * 63, "N1"]
)
def test_host_names_accepted(name: str) -> None:
    assert validate_host_name(name) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "host name is empty"),
        ("-oProxyCommand=reboot", "must not start with '-'"),
        ("gpu01;reboot", "label 'gpu01;reboot' may hold only letters, digits and inner '-'"),
        ("gpu 01", "may hold only letters"),
        ("gpu01\n", "control character U\\+000A"),
        ("$(reboot)", "may hold only letters"),
        ("gpu-.x", "label 'gpu-' may hold only"),
        ("a..b", "empty label"),
        ("gpu01.", "empty label"),
        ("x" * 64, "longer than 63 characters"),
        (".".join(["abcdefghij"] * 24), "longer than 253 characters"),
        ("999.1.1.1", "not a valid IPv4 address"),
        ("[fe80::zz]", "not a valid IPv6 address"),
        ("gpu_01", "may hold only letters"),
    ],
)
def test_host_names_refused(name: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        validate_host_name(name)
