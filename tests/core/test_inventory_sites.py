"""Inventories as sites keep them: group_vars/ and host_vars/ beside the inventory, with
Ansible's precedence; ClusterShell step ranges; the scheduler's node name per host."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.errors import BadInput
from cockpit.fleet.executor import Executor
from cockpit.fleet.inventory import load_inventory, parse_host_spec
from cockpit.fleet.nodeset import MAX_NODES, expand_nodeset
from cockpit.fleet.transport import Transport
from cockpit.runbook.model import NODE_FACTS


def site(tmp_path: Path) -> Path:
    """An INI inventory with group_vars/ (a file and a directory) and host_vars/."""
    (tmp_path / "hosts.ini").write_text(
        "[gpu]\ngpu[01:03]\n\n[hgx:children]\ngpu\n\n[gpu:vars]\nansible_user=fromfile\nansible_port=2200\n"
    )
    gv = tmp_path / "group_vars"
    (gv / "gpu").mkdir(parents=True)
    (gv / "all.yml").write_text("ansible_user: fromall\ncockpit_node_name: should-not-win-everywhere\n")
    (gv / "hgx.yaml").write_text("ansible_user: parent\nansible_port: 2201\n")
    (gv / "gpu" / "10-conn.yml").write_text("ansible_user: child\n")
    (gv / "gpu" / "20-more.json").write_text('{"ansible_port": 2222}')
    (gv / "gpu" / "notes.md").write_text("not: read\n: : :")  # other extensions are skipped, as Ansible does
    hv = tmp_path / "host_vars"
    hv.mkdir()
    (hv / "gpu01.yml").write_text("ansible_host: 10.0.0.1\ncockpit_node_name: gpu01.k8s.example\n")
    (hv / "gpu02").write_text("ansible_user: ops\ncockpit_node_name: node-02\n")
    return tmp_path / "hosts.ini"


def test_group_and_host_vars_follow_ansible_precedence(tmp_path: Path) -> None:
    hosts = load_inventory(site(tmp_path)).hosts
    one, two, three = hosts["gpu01"], hosts["gpu02"], hosts["gpu03"]
    # group_vars/* over the inventory file's [gpu:vars], child group gpu over parent hgx over all
    assert (three.user, three.port) == ("child", 2222)
    # host_vars/* over everything; a file without an extension is read too
    assert (one.address, one.user, one.node_name) == ("10.0.0.1", "child", "gpu01.k8s.example")
    assert (two.user, two.node_name) == ("ops", "node-02")
    assert three.node_name == "should-not-win-everywhere"  # from group_vars/all, the lowest


def test_yaml_inventory_reads_the_directories_too(tmp_path: Path) -> None:
    (tmp_path / "inv.yml").write_text("all:\n  children:\n    gpu:\n      hosts:\n        gpu01:\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu01.yaml").write_text("cockpit_node_name: rack1-gpu01\n")
    assert load_inventory(tmp_path / "inv.yml").hosts["gpu01"].node_name == "rack1-gpu01"


def test_bad_variable_files_are_refused_with_their_path(tmp_path: Path) -> None:
    inventory = site(tmp_path)
    (tmp_path / "host_vars" / "gpu03.yml").write_text("cockpit_node_name: 'gpu03;reboot'\n")
    with pytest.raises(BadInput, match=r"host_vars/gpu03: cockpit_node_name of gpu03"):
        load_inventory(inventory)
    (tmp_path / "host_vars" / "gpu03.yml").write_text("- a list\n")
    with pytest.raises(BadInput, match=r"gpu03\.yml: a variables file is a mapping"):
        load_inventory(inventory)


def test_plain_lists_ignore_the_directories(tmp_path: Path) -> None:
    (tmp_path / "nodes.txt").write_text("gpu[01-02]\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu01.yml").write_text("ansible_user: x\n")
    assert load_inventory(tmp_path / "nodes.txt").hosts["gpu01"].user is None


def test_clustershell_step_ranges() -> None:
    assert expand_nodeset("gpu[01-16/2]") == [f"gpu{n:02d}" for n in range(1, 17, 2)]
    assert expand_nodeset("n[1-10/3,20]") == ["n1", "n4", "n7", "n10", "n20"]
    assert len(expand_nodeset(f"gpu[0-{2 * MAX_NODES - 2}/2]")) == MAX_NODES
    for bad, why in (("gpu[01/2]", "bad range"), ("gpu[1-5/0]", "step below 1"), ("gpu[0-99999/1]", "larger than")):
        with pytest.raises(BadInput, match=why):
            expand_nodeset(bad)
    assert [t.name for t in parse_host_spec("gpu[01-05/2]")] == ["gpu01", "gpu03", "gpu05"]


def test_node_name_fills_the_placeholder_and_defaults_to_the_inventory_name(tmp_path: Path) -> None:
    assert "node_name" in NODE_FACTS
    targets = parse_host_spec("gpu[01-03]", inventory=load_inventory(site(tmp_path)))
    executor = Executor(Transport(targets), {})
    assert executor.values("gpu02", None)["node_name"] == "node-02"
    assert executor.values("gpu01", None)["host"] == "10.0.0.1"
    plain = Executor(Transport(parse_host_spec("gpu09")), {})
    assert plain.values("gpu09", None)["node_name"] == "gpu09"


async def test_the_session_records_the_node_name_and_fills_it_without_a_transport(tmp_path: Path) -> None:
    from cockpit.fleet.targets import HostTarget
    from cockpit.runbook.loader import load
    from cockpit.session.operator import Session

    session = Session.start(
        sessions_dir=tmp_path,
        change_id="CHG-NAMES",
        loaded=load("minimal-driver-upgrade"),
        params={},
        targets=[HostTarget(name="gpu01", node_name="gpu01.cluster.local"), HostTarget(name="gpu02")],
        operator="alice",
        transport=None,
    )
    try:
        assert session.node_facts("gpu01")["node_name"] == "gpu01.cluster.local"
        assert session.node_facts("gpu02")["node_name"] == "gpu02"
        assert 'node_name = "gpu01.cluster.local"' in (tmp_path / "CHG-NAMES.toml").read_text()
    finally:
        await session.close()
