"""How a runbook step becomes an Ansible module task: the step's own declaration, checked on load.

The pure half (no Ansible run): the runbook model and cross-checks refuse a mapping that
cannot work, :func:`play_tasks` fills a module's arguments per node as the SSH executor fills
a command, and the generated playbook calls the module the step names, with a read-only
command reported unchanged and run in check mode too. tests/core/test_ansible_modules.py
runs these playbooks for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cockpit.fleet.backends import ansible_play as play
from cockpit.fleet.backends.ansible import play_tasks
from cockpit.fleet.backends.ansible_play import SshSettings
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.loader import RunbookInvalid, load, parse_runbook
from cockpit.runbook.model import AnsibleModuleName, AnsibleTask, ServiceState, Step

MINIMAL = Path(__file__).resolve().parents[2] / "checklists" / "minimal-driver-upgrade.toml"
#: (play_tasks fills any value; the window's target_* facts are computed from the node's record)
INSTALL = AnsibleTask(module=AnsibleModuleName.APT, packages=["{driver_spec}", "{fabric_spec}"])


def problems_with_install(ansible: str, extra: str = "") -> list[str]:
    """The minimal runbook with the install step's ``ansible`` table (and ``extra`` lines) replaced."""
    text = MINIMAL.read_text()
    start = text.index('  ansible = { module = "apt"')
    end = text.index("\n", start)
    text = text[:start] + ansible + extra + text[end:]
    with pytest.raises(RunbookInvalid) as caught:
        parse_runbook(text.encode(), "rb.toml")
    return [str(p).split(": ", 1)[1] for p in caught.value.problems]


def test_the_minimal_runbook_declares_its_upgrade_steps_modules() -> None:
    steps = {s.id: s for s in load("minimal-driver-upgrade").runbook.stage("upgrade").steps}
    assert steps["install"].ansible is not None and steps["install"].ansible.module is AnsibleModuleName.APT
    rollback = steps["save-rollback"].ansible
    assert rollback is not None and rollback.creates == "/var/cache/cockpit/{change_id}/rollback-saved"
    assert steps["via-ansible"].when == {"backend": "ansible"}


@pytest.mark.parametrize(
    ("ansible", "expected"),
    [
        (
            'ansible = { module = "apt", creates = "/x" }',
            "stages[3].steps[1].ansible.creates: module apt does not take creates (it takes: packages, update_cache)",
        ),
        (
            'ansible = { module = "apt" }',
            "stages[3].steps[1].ansible: module apt needs packages = [...] or update_cache",
        ),
        (
            'ansible = { module = "systemd_service", unit = "x" }',
            "stages[3].steps[1].ansible: module systemd_service needs unit",
        ),
        (
            'ansible = { module = "apt", packages = ["{nope}"] }',
            "stages[3].steps[1].ansible.packages[0]: placeholder {nope} names no parameter or node fact",
        ),
        ('ansible = { module = "yum", packages = ["x"] }', "stages[3].steps[1].ansible.module: "),
    ],
)
def test_a_mapping_that_cannot_work_is_refused_with_its_field(ansible: str, expected: str) -> None:
    problems = problems_with_install(ansible)
    assert any(p.startswith(expected) for p in problems), problems


def test_read_only_is_refused_on_a_destructive_step_and_with_changed_if() -> None:
    problems = problems_with_install('ansible = { module = "apt", packages = ["x"] }', "\n  read_only = true")
    assert problems == [
        "stages[3].steps[1].read_only: a destructive step changes the node: it cannot be read_only",
    ]
    text = MINIMAL.read_text().replace(
        '  destructive = true\n  when = { not_backend = "ansible" }\n  ansible',
        '  when = { not_backend = "ansible" }\n  ansible',
        1,
    )
    start = text.index('  ansible = { module = "apt"')
    text = (
        text[:start]
        + "  read_only = true\n  ansible = { module = \"command\", changed_if = '^x' }"
        + text[text.index("\n", start) :]
    )
    with pytest.raises(RunbookInvalid) as caught:
        parse_runbook(text.encode(), "rb.toml")
    assert [str(p).split(": ", 1)[1] for p in caught.value.problems] == [
        "stages[3].steps[1].read_only: a read-only step never changes the node: remove ansible.changed_if"
    ]


def test_changed_if_must_be_a_regular_expression() -> None:
    (problem,) = problems_with_install("ansible = { module = \"command\", changed_if = '(unclosed' }")
    assert problem.startswith("stages[3].steps[1].ansible.changed_if: not a valid regular expression")


def test_changed_if_judges_the_commands_output_and_a_read_only_module_step_is_its_check_mode() -> None:
    unhold = Step(
        id="unhold",
        title="unhold",
        run="apt-mark unhold x",
        ansible=AnsibleTask(module=AnsibleModuleName.COMMAND, changed_if="(?m)^Canceled hold on "),
    )
    dry = Step(id="dry", title="dry", run="apt-get install -s x", read_only=True, ansible=INSTALL)
    tasks = play_tasks([unhold, dry], [HostTarget(name="n1")], {"driver_spec": "x", "fabric_spec": ""})
    (document,) = play.playbook_document("t", tasks)
    assert document["vars"] == {"cockpit_changed_if": {"unhold": "(?m)^Canceled hold on "}}  # data, !unsafe
    first, second = document["tasks"]
    assert first["register"] == "cockpit_result"
    assert first["changed_when"] == "cockpit_result.stdout is search(cockpit_changed_if['unhold'])"
    assert "!unsafe '(?m)^Canceled hold on '" in play.dump_yaml(document)
    assert (second["check_mode"], second["changed_when"]) == (True, False)  # the apt module's prediction, always


def test_module_arguments_are_filled_per_node_and_a_node_with_nothing_to_install_is_left_out() -> None:
    step = Step(id="install", title="install", run="apt-get install -y {driver_spec}", ansible=INSTALL)
    targets = [HostTarget(name="n1"), HostTarget(name="n2")]
    facts = {
        "n1": {"driver_spec": "nvidia-driver-580-server=580.95.05*", "fabric_spec": ""},
        "n2": {"driver_spec": "", "fabric_spec": ""},
    }
    (task,) = play_tasks([step], targets, {}, node_facts=facts)
    assert task.args == {"n1": {"name": ["nvidia-driver-580-server=580.95.05*"]}}  # an empty value is no package
    assert set(task.commands) == {"n1"}  # n2: the module would have nothing to do, so the task skips it
    assert task.options == {"state": "present", "update_cache": False}
    (entry,) = play.playbook_document("t", [task])[0]["tasks"]
    assert entry["ansible.builtin.apt"] == {
        "name": "{{ cockpit_args['install']['name'] }}",
        "state": "present",
        "update_cache": False,
    }
    assert "changed_when" not in entry and "check_mode" not in entry  # the module says and predicts itself


def test_a_read_only_command_reports_unchanged_and_runs_in_check_mode() -> None:
    reads = Step(id="holds", title="holds", run="apt-mark showhold", read_only=True)
    writes = Step(
        id="save",
        title="save",
        run="save {change_id}",
        ansible=AnsibleTask(module=AnsibleModuleName.COMMAND, creates="/var/cache/cockpit/{change_id}/saved"),
    )
    reading, writing = play_tasks([reads, writes], [HostTarget(name="n1")], {"change_id": "CHG-1"})
    first, second = play.playbook_document("t", [reading, writing])[0]["tasks"]
    assert first["ansible.builtin.command"] == {"argv": "{{ cockpit_argv['holds'] }}"}
    assert (first["changed_when"], first["check_mode"]) == (False, False)
    assert first["ignore_errors"] == "{{ ansible_check_mode }}"  # what it reads may not be there in check mode
    assert second["ansible.builtin.command"] == {
        "argv": "{{ cockpit_argv['save'] }}",
        "creates": "{{ cockpit_args['save']['creates'] }}",
    }
    assert "changed_when" not in second and "check_mode" not in second  # Ansible skips it under --check
    hosts = play.inventory_document([HostTarget(name="n1")], SshSettings(), [reading, writing])["all"]["hosts"]
    assert hosts["n1"]["cockpit_args"] == {"save": {"creates": "/var/cache/cockpit/CHG-1/saved"}}


def test_a_filled_package_stays_data_for_ansible() -> None:
    from ansible.parsing.yaml.loader import AnsibleLoader
    from ansible.template import is_trusted_as_template

    step = Step(id="install", title="install", run="true", ansible=INSTALL)
    (task,) = play_tasks(
        [step], [HostTarget(name="n1")], {"driver_spec": "{{ lookup('pipe', 'id') }}", "fabric_spec": ""}
    )
    text = play.dump_yaml(play.inventory_document([HostTarget(name="n1")], SshSettings(), [task]))
    (name,) = yaml.load(text, Loader=AnsibleLoader)["all"]["hosts"]["n1"]["cockpit_args"]["install"]["name"]
    assert name == "{{ lookup('pipe', 'id') }}" and not is_trusted_as_template(name)


def test_the_recap_names_every_count_and_zero_says_nothing_changed() -> None:
    stats = {"ok": {"n1": 2}, "changed": {}, "failures": {}}
    assert play.recap(stats, "n1") == {
        "ok": 2, "changed": 0, "failures": 0, "dark": 0, "skipped": 0, "rescued": 0, "ignored": 0,
    }  # fmt: skip
    assert play.recap(stats, "n9") == {}  # the play never reached it


def test_a_service_step_is_the_systemd_service_module_and_a_dnf_step_the_dnf_module() -> None:
    """Written as the module documents its arguments. The shipped runbooks' dnf steps run on a
    namespaced RHEL node in test_ansible_dnf.py; the systemd_service module runs in no test."""
    start = Step(
        id="fm",
        title="start fabric manager",
        run="systemctl start {unit}",
        ansible=AnsibleTask(module=AnsibleModuleName.SYSTEMD_SERVICE, unit="{unit}", state=ServiceState.STARTED),
    )
    refresh = Step(
        id="makecache", title="refresh", run="dnf -y makecache", ansible=AnsibleTask(module="dnf", update_cache=True)
    )
    switch = Step(
        id="switch",
        title="switch",
        run="dnf -y module switch-to {spec} --allowerasing",
        ansible=AnsibleTask(module="dnf", packages=["@{spec}"], allowerasing=True),
    )
    values = {"unit": "nvidia-fabricmanager.service", "spec": "nvidia-driver:580/fm"}
    service, dnf, switched = play_tasks([start, refresh, switch], [HostTarget(name="n1")], values)
    assert service.args == {"n1": {"name": "nvidia-fabricmanager.service"}}
    first, second = play.playbook_document("t", [service, dnf])[0]["tasks"]
    assert first["ansible.builtin.systemd_service"] == {"name": "{{ cockpit_args['fm']['name'] }}", "state": "started"}
    assert dnf.args == {"n1": {"name": []}}  # a refresh alone: no package
    assert second["ansible.builtin.dnf"] == {
        "name": "{{ cockpit_args['makecache']['name'] }}",
        "state": "present",
        "update_cache": True,
    }
    # a module stream: the placeholder fills inside the word; allowerasing only where asked
    assert switched.args == {"n1": {"name": ["@nvidia-driver:580/fm"]}}
    assert switched.options == {"state": "present", "update_cache": False, "allowerasing": True}


def test_ansible_python_names_an_absolute_path_for_the_ansible_backend_only() -> None:
    import argparse

    from cockpit.commands.backend_flags import backend_options
    from cockpit.errors import BadInput

    chosen = backend_options(argparse.Namespace(backend="ansible", ansible_python="/usr/bin/python3"))
    assert chosen.ansible.python_interpreter == "/usr/bin/python3"
    assert chosen.recorded() == {"python_interpreter": "/usr/bin/python3"}  # the session header keeps it
    with pytest.raises(BadInput, match=r"^--ansible-python: String should match pattern"):
        backend_options(argparse.Namespace(backend="ansible", ansible_python="python3 -E"))
    with pytest.raises(BadInput, match="--ansible-python is a setting of --backend ansible, not of --backend ssh"):
        backend_options(argparse.Namespace(backend="ssh", ansible_python="/usr/bin/python3"))
