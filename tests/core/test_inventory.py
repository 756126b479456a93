"""Inventories and host specs: INI, YAML, plain lists, node sets, and hostile names."""

from __future__ import annotations

from pathlib import Path

import pytest
from refusals import one_line_refusal

from cockpit.errors import BadInput
from cockpit.fleet.inventory import (
    expand_ansible_range,
    load_inventory,
    parse_host_spec,
    sniff_format,
)
from cockpit.fleet.targets import HostTarget

INI = """\
# cluster inventory
login1 ansible_host=10.0.0.5

[canary]
gpu01 ansible_host=10.0.1.1 ansible_user=ops

[gpu]
gpu[01:04]  # comment after a host range
gpu05:2222

[gpu:vars]
ansible_user=admin
ansible_port=2201

[control]
ctl1 ansible_ssh_host=ctl1.mgmt.example.com ansible_ssh_user=k8s

[cluster:children]
gpu
control

[all:vars]
ansible_user=root
"""

YAML = """\
all:
  vars:
    ansible_user: root
  hosts:
    login1:
      ansible_host: 10.0.0.5
  children:
    gpu:
      vars:
        ansible_port: 2201
      hosts:
        gpu[01:03]:
        gpu04:
          ansible_host: 10.0.1.4
          ansible_port: 22
      children:
        canary:
          hosts:
            gpu01:
              ansible_user: ops
    control:
      hosts:
        ctl1:
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def by_name(targets: list[HostTarget]) -> dict[str, HostTarget]:
    return {t.name: t for t in targets}


# --- host specs without files --------------------------------------------------------


def test_spec_comma_list_and_nodesets_in_order_without_duplicates() -> None:
    targets = parse_host_spec("gpu[01-03],login1,gpu02,gpu[03-04]")
    assert [t.name for t in targets] == ["gpu01", "gpu02", "gpu03", "login1", "gpu04"]
    assert all(t.address is None and t.port is None and t.user is None for t in targets)


def test_spec_accepts_ipv4_and_bracketed_ipv6() -> None:
    assert [t.name for t in parse_host_spec("10.0.0.1,[fe80::1]")] == ["10.0.0.1", "[fe80::1]"]


@pytest.mark.parametrize(
    ("spec", "bad"),
    [
        ("gpu01;reboot", "gpu01;reboot"),
        ("gpu01,-oProxyCommand=x", "-oProxyCommand=x"),
        ("$(x)", "$(x)"),
        ("gpu01,`id`", "`id`"),
        ("gpu 01", "gpu 01"),
        ("gpu01\nreboot", "gpu01\\nreboot"),
        ("a..b", "a..b"),
        ("999.1.1.1", "999.1.1.1"),
    ],
)
def test_spec_refuses_hostile_names_naming_them(spec: str, bad: str) -> None:
    message = one_line_refusal(parse_host_spec, spec)
    assert bad in message
    assert message.startswith("--hosts")


@pytest.mark.parametrize("spec", ["", "  ", "gpu01,,gpu02", "gpu[05-01]", "gpu[01-03", "@"])
def test_spec_syntax_errors(spec: str) -> None:
    with pytest.raises(BadInput):
        parse_host_spec(spec)


# --- INI -------------------------------------------------------------------------------


def test_ini_hosts_groups_ranges_and_vars(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "hosts", INI))
    assert list(inv.hosts) == ["login1", "gpu01", "gpu02", "gpu03", "gpu04", "gpu05", "ctl1"]
    hosts = inv.hosts
    assert hosts["login1"] == HostTarget(name="login1", address="10.0.0.5", user="root")
    # host var beats group var; group var beats all:vars
    assert hosts["gpu01"] == HostTarget(name="gpu01", address="10.0.1.1", port=2201, user="ops")
    assert hosts["gpu03"] == HostTarget(name="gpu03", port=2201, user="admin")
    assert hosts["gpu05"].port == 2222  # host:port shorthand beats the group's port
    assert hosts["ctl1"] == HostTarget(name="ctl1", address="ctl1.mgmt.example.com", user="k8s")
    assert inv.groups["canary"] == ["gpu01"]
    assert inv.groups["cluster"] == ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05", "ctl1"]
    assert inv.groups["ungrouped"] == ["login1"]


def test_spec_file_and_group_reference(tmp_path: Path) -> None:
    write(tmp_path, "hosts.ini", INI)
    assert [t.name for t in parse_host_spec("@hosts.ini:canary", base_dir=tmp_path)] == ["gpu01"]
    targets = parse_host_spec("@hosts.ini:control,gpu09,@hosts.ini:gpu", base_dir=tmp_path)
    assert [t.name for t in targets] == ["ctl1", "gpu09", "gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
    assert by_name(targets)["gpu01"].address == "10.0.1.1"
    assert len(parse_host_spec(f"@{tmp_path / 'hosts.ini'}")) == 7


def test_spec_with_inventory_resolves_groups_and_host_vars(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "hosts.ini", INI))
    targets = parse_host_spec("canary,gpu0[2-3],new1,control", inventory=inv)
    assert [t.name for t in targets] == ["gpu01", "gpu02", "gpu03", "new1", "ctl1"]
    assert by_name(targets)["gpu01"].user == "ops"
    assert by_name(targets)["new1"] == HostTarget(name="new1")


def test_unknown_group_and_missing_file(tmp_path: Path) -> None:
    write(tmp_path, "hosts.ini", INI)
    with pytest.raises(BadInput, match="no group 'nope'"):
        parse_host_spec("@hosts.ini:nope", base_dir=tmp_path)
    with pytest.raises(BadInput, match="not found"):
        parse_host_spec("@missing.ini", base_dir=tmp_path)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[gpu]\ngpu01;reboot\n", "line 2: host name 'gpu01;reboot'"),
        ("[gpu]\n$(touch /tmp/x)\n", "line 2: host name '$(touch"),
        ("gpu01 ansible_host=-oProxyCommand=x\n", "ansible_host of gpu01"),
        ("gpu01 ansible_host='a b'\n", "ansible_host of gpu01"),
        ("gpu01 ansible_user='root;id'\n", "user 'root;id'"),
        ("gpu01 ansible_user=-oX\n", "user '-oX'"),
        ("gpu01 ansible_port=99999\n", "port"),
        ("gpu01 ansible_port=22x\n", "port"),
        ("[gpu\n", "bad section header"),
        ("gpu01 novalue\n", "expected key=value"),
        ("[gpu]\ngpu[08:01]\n", "backwards"),
        ("[gpu]\ngpu[01:8]\n", "same width"),
        ("[gpu]\ngpu[01-08]\n", "bad host range"),
        ("[a:children]\nb\n[b:children]\na\n", "loop"),
        ("gpu01 x='unclosed\n", "line 1"),
    ],
)
def test_ini_errors_name_file_line_and_value(tmp_path: Path, text: str, words: str) -> None:
    path = write(tmp_path, "bad.ini", text)
    with pytest.raises(BadInput) as info:
        load_inventory(path)
    assert words in str(info.value)
    assert "bad.ini" in str(info.value)


# --- YAML ------------------------------------------------------------------------------


def test_yaml_inventory(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "inv.yml", YAML))
    assert list(inv.hosts) == ["login1", "gpu01", "gpu02", "gpu03", "gpu04", "ctl1"]
    assert inv.hosts["gpu01"] == HostTarget(name="gpu01", port=2201, user="ops")
    assert inv.hosts["gpu04"] == HostTarget(name="gpu04", address="10.0.1.4", port=22, user="root")
    assert inv.hosts["ctl1"] == HostTarget(name="ctl1", user="root")
    assert inv.groups["gpu"] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert inv.groups["canary"] == ["gpu01"]


def test_yaml_sniffed_without_suffix_and_other_top_groups(tmp_path: Path) -> None:
    path = write(tmp_path, "inventory", "gpu:\n  hosts:\n    gpu[1:3]:\n")
    assert sniff_format(path, path.read_text()) == "yaml"
    assert [t.name for t in parse_host_spec(f"@{path}")] == ["gpu1", "gpu2", "gpu3"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("all:\n  hosts:\n    'gpu01;reboot':\n", "gpu01;reboot"),
        ("all:\n  hosts:\n    gpu01:\n      ansible_host: $(x)\n", "ansible_host of gpu01"),
        ("all:\n  hosts: [gpu01]\n", "must be a mapping"),
        ("all:\n  hostz:\n    gpu01:\n", "unknown key 'hostz'"),
        ("all:\n  hosts:\n    gpu01: [1\n", "line"),
        ("- gpu01\n", "mapping of groups"),
    ],
)
def test_yaml_errors(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(BadInput) as info:
        load_inventory(write(tmp_path, "bad.yaml", text))
    assert words in str(info.value)


# --- plain -----------------------------------------------------------------------------


def test_plain_list_with_comments_blanks_and_nodesets(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.txt", "# canary first\ngpu07\n\n  gpu[01-02]  # then these\nlogin1\ngpu07\n")
    assert sniff_format(path, path.read_text()) == "plain"
    assert [t.name for t in load_inventory(path).targets()] == ["gpu07", "gpu01", "gpu02", "login1"]


def test_plain_list_bad_name_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.txt", "gpu01\ngpu02 && reboot\n")
    with pytest.raises(BadInput, match=r"nodes.txt line 2: host name 'gpu02 && reboot'"):
        parse_host_spec(f"@{path}")


# --- Ansible ranges ---------------------------------------------------------------------


def test_ansible_ranges() -> None:
    assert expand_ansible_range("gpu[01:03]") == ["gpu01", "gpu02", "gpu03"]
    assert expand_ansible_range("db-[a:c]-node") == ["db-a-node", "db-b-node", "db-c-node"]
    assert expand_ansible_range("n[1:9:4]") == ["n1", "n5", "n9"]
    assert expand_ansible_range("n[:2]") == ["n0", "n1", "n2"]
    assert expand_ansible_range("r[1:2]g[1:2]") == ["r1g1", "r1g2", "r2g1", "r2g2"]
    assert expand_ansible_range("plain") == ["plain"]
