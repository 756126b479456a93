"""Every malformed runbook under ``malformed_runbooks/`` is refused by ``cockpit check``
with exit 2 and exactly the expected problems, one per line: FILE:LINE: field.path: message.

The expected lines are written out in full (file, line and field path included); the
lists of built-in names are spelled from :mod:`cockpit.runbook.builtins` so the test follows them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.runbook.builtins import CHECKS, TRIGGER_EVALUATORS
from cockpit.runbook.model import NODE_FACTS

HERE = Path(__file__).resolve().parent / "malformed_runbooks"

EVALUATORS = ", ".join(TRIGGER_EVALUATORS)
CHECK_NAMES = ", ".join(CHECKS)
FACTS = ", ".join(sorted(NODE_FACTS))
RECORDED = ", ".join(sorted(f for f in NODE_FACTS if f.startswith("recorded_")))
ID_RULE = "expected an id of lower-case letters, digits, '-' and '_', starting with a letter or digit"

EXPECTED: dict[str, list[str]] = {
    # --- not TOML at all
    "syntax_missing_equals": ["3: invalid TOML: Expected '=' after a key in a key/value pair (column 7)"],
    "syntax_unclosed_string": ["41: invalid TOML: Illegal character '\\n' (column 19)"],
    "syntax_duplicate_key": ["36: invalid TOML: Cannot overwrite a value (column 21)"],
    "syntax_unclosed_array_at_end": ["53: invalid TOML: Invalid value at end of document"],
    "nul_byte": ["41: invalid TOML: Illegal character '\\x00' (column 16)"],
    "date_value": [
        "1: stages: required key is missing",
        "4: runbook.version: a TOML date/time is not a valid value here; quote it if it is text",
    ],
    "not_utf8": ["41: not UTF-8 text: byte 0xe9 at column 18; a runbook is a UTF-8 TOML file"],
    # --- TOML that does not fit the model
    "empty_file": ["1: runbook: required key is missing", "1: stages: required key is missing"],
    "unknown_key_header": ["4: runbook.name: unknown key (expected one of: id, title, version, description)"],
    "unknown_key_step": [
        "42: stages[1].steps[0].command: unknown key "
        "(expected one of: id, title, kind, run, where, timeout_s, destructive, sudo, when, description, action, read_only, ansible)"
    ],
    "unknown_top_table": [
        "17: trigger: unknown key (expected one of: runbook, parameters, facts, waves, triggers, stages, rollback, decision, trust, backends)"
    ],
    "missing_required_keys": [
        "17: triggers[0].mode: required key is missing",
        "22: stages[0].title: required key is missing",
    ],
    "wrong_type_timeout": ["44: stages[1].steps[0].timeout_s: expected int or str, got float 1.5"],
    "wrong_type_bool": ["43: stages[1].steps[0].destructive: expected a valid boolean, got string 'yes'"],
    "bad_scope": ["37: stages[1].scope: expected 'window' or 'node', got string 'cluster'"],
    "bad_identifier": [f"35: stages[1].id: {ID_RULE}, got 'Upgrade Node'"],
    "bad_parameter_name": [f"9: parameters.\"Wave Size\": {ID_RULE}, got 'Wave Size'"],
    "bad_wave_size": ["14: waves.sizes[1]: expected greater than or equal to 1, got integer 0"],
    "inline_table_wrong_type": [
        "50: stages[1].items[0].expect.exit_status: expected a valid integer, got string 'zero'"
    ],
    "several_model_problems": [
        "11: parameters.wave_size.default: expected str or int or float or bool, got array [2]",
        "20: triggers[0].mode: expected 'auto' or 'manual', got string 'automatic'",
        "37: stages[1].scope: expected 'window' or 'node', got string 'nodes'",
    ],
    # --- a valid model that does not hold together
    "duplicate_stage_id": ["35: stages[1].id: duplicate stage id 'upgrade'"],
    "duplicate_step_and_item_ids": [
        "52: stages[1].steps[1].id: duplicate step id 'install' in this stage",
        "57: stages[1].items[1].id: duplicate item id 'installed' in this stage",
    ],
    "duplicate_trigger_id": ["24: triggers[1].id: duplicate trigger id 'gpu-missing'"],
    "dangling_step_reference": ["49: stages[1].items[0].step: names no step of this stage (steps: install)"],
    "step_field_with_wrong_verify": [
        '49: stages[1].items[0].step: is used only with verify = "step" (verify is manual)'
    ],
    "unknown_check": [f"49: stages[1].items[0].check: unknown check 'gpus_ok' (expected one of: {CHECK_NAMES})"],
    "recaps_misused": [
        "51: stages[1].items[0].recaps[1]: names no item 'nope' of stage 'arm'",
        "51: stages[1].items[0].recaps[2]: names no stage 'freeze'",
        '56: stages[1].items[1].recaps: is used only with verify = "check", check = "recorded"',
        '58: stages[1].items[2]: check = "recorded" needs recaps = ["stage/item", ...]: the earlier records it reads',
    ],
    "command_item_without_command": ['45: stages[1].items[0]: verify = "command" needs command = "..."'],
    "bad_regex": [
        "50: stages[1].items[0].expect.stdout_matches: not a valid regular expression: "
        "missing ), unterminated subpattern at position 3"
    ],
    "unknown_evaluator": [
        f"21: triggers[0].evaluator: unknown evaluator 'gpu_missing' (expected one of: {EVALUATORS})"
    ],
    "manual_trigger_with_evaluator": [
        "21: triggers[0].evaluator: a manual trigger is raised by a person: remove evaluator"
    ],
    "auto_trigger_without_evaluator": ['17: triggers[0]: an auto trigger needs evaluator = "<built-in evaluator>"'],
    "command_step_without_run": ['39: stages[1].steps[0]: a command step needs run = "..."'],
    "unknown_placeholder": [
        "42: stages[1].steps[0].run: placeholder {driver_pkg} names no parameter or node fact "
        f"(parameters: driver_package, wave_size; node facts: {FACTS})"
    ],
    "lone_brace": [
        "42: stages[1].steps[0].run: lone '}' at column 31: a placeholder is {name} "
        "(letters, digits, '_'); write {{ or }} for a literal brace"
    ],
    "when_unknown_parameter": [
        "44: stages[1].steps[0].when.scheduler: names no parameter or recorded fact "
        f"(parameters: driver_package, wave_size; recorded facts: {RECORDED})"
    ],
    "when_value_not_a_choice": [
        "49: stages[1].steps[0].when.scheduler: expected one of kubernetes, slurm, none, got 'pbs'"
    ],
    "rest_names_str_parameter": [
        "15: waves.rest: names parameter 'driver_package' of type str, expected an int parameter"
    ],
    "timeout_names_missing_parameter": [
        "44: stages[1].steps[0].timeout_s: names parameter 'install_timeout_s', which is not defined "
        "(expected an integer or the name of an int parameter)"
    ],
    "default_wrong_type": ["11: parameters.wave_size.default: expected a default of type int, got string 'two'"],
    "choice_default_not_listed": ["16: parameters.scheduler.default: expected one of kubernetes, slurm, got 'pbs'"],
    "choice_without_choices": ['13: parameters.scheduler: type = "choice" needs choices = [...]'],
    "parameter_shadows_node_fact": ["13: parameters.node: 'node' is a node fact; a parameter cannot take its name"],
    "destructive_in_window_stage": [
        "33: stages[0].steps[0].destructive: a destructive step belongs in a node stage or in [rollback]"
    ],
    "destructive_before_arming": [
        "33: stages[1]: destructive step before the triggers are armed: "
        "add arms_triggers = true to a window stage listed before this one"
    ],
    "no_node_stages": [
        '23: stages: expected at least one stage with scope = "node" (drain, record, upgrade, reboot, smoke, expand)',
        "43: stages[1].steps[0].destructive: a destructive step belongs in a node stage or in [rollback]",
    ],
    "node_stages_not_consecutive": [
        "31: stages[1].scope: node stages must be consecutive: window stages go before or after them"
    ],
    "several_cross_check_problems": [
        f"21: triggers[0].evaluator: unknown evaluator 'nope' (expected one of: {EVALUATORS})",
        "42: stages[1].steps[0].run: placeholder {pkg} names no parameter or node fact "
        f"(parameters: driver_package, wave_size; node facts: {FACTS})",
        "49: stages[1].items[0].step: names no step of this stage (steps: install)",
    ],
}


def test_every_data_file_has_an_expectation() -> None:
    assert sorted(p.stem for p in HERE.glob("*.toml")) == sorted(EXPECTED)
    assert len(EXPECTED) >= 25


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malformed_runbook_is_refused_with_every_problem(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(HERE)  # problems name the file as given on the command line
    status = main(["check", f"{name}.toml"])
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    assert err.splitlines() == [f"{name}.toml:{line}" for line in EXPECTED[name]]


def test_problem_names_the_path_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    path = HERE / "duplicate_stage_id.toml"
    assert main(["check", str(path)]) == 2
    assert capsys.readouterr().err == f"{path}:35: stages[1].id: duplicate stage id 'upgrade'\n"
    assert os.sep in str(path)
