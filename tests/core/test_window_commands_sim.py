"""The r580 window stages' commands on a simulated node: what they prove there, answered as the
real tools answer (curl to the node's own vLLM server, iproute2's brief listing, pgrep), and
failing where a real node would fail."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from sim_nodes import quick_node, sh

from cockpit.runbook.loader import load
from cockpit.runbook.model import Item
from cockpit.runbook.placeholders import fill
from cockpit.sim.node import SimNode
from cockpit.sim.scenarios import SCENARIOS

RUNBOOK = load("driver-upgrade-r580").runbook


def item(stage: str, ident: str) -> Item:
    return next(i for i in RUNBOOK.stage(stage).items if i.id == ident)


async def holds(node: SimNode, stage: str, ident: str) -> tuple[bool, str]:
    """Whether the item's command holds on the node (its exit status and output pattern)."""
    spec = item(stage, ident)
    assert spec.command is not None and spec.expect is not None and spec.expect.stdout_matches is not None
    status, out, err = await sh(node, fill(spec.command, RUNBOOK.defaults()))
    ok = status == spec.expect.exit_status and re.search(spec.expect.stdout_matches, out) is not None
    return ok, out + err


async def upgraded() -> SimNode:
    node = quick_node("gpu01", 0, SCENARIOS["happy"])
    status, _, err = await sh(
        node, "apt-get install -y nvidia-driver-580-open nvidia-fabricmanager=580.95.05-1 libnvidia-nscq=580.95.05-1"
    )
    assert status == 0, err
    node.reboot_now()
    return node


async def test_the_capacity_checks_reach_the_serving_engine_only_once_it_serves() -> None:
    # on r575 the cu130 engine cannot start: nothing listens, curl is refused as a real one is
    before = quick_node("gpu01", 0, SCENARIOS["happy"])
    ok, said = await holds(before, "capacity", "load-1-model")
    assert not ok and "curl: (7) Failed to connect to 127.0.0.1 port 8000" in said
    assert not (await holds(before, "capacity", "load-2-short"))[0]
    node = await upgraded()
    ok, said = await holds(node, "capacity", "load-1-model")
    assert ok, said
    assert '"id":"moonshotai/Kimi-K3"' in said and '"max_model_len":131072' in said
    ok, said = await holds(node, "capacity", "load-2-short")
    assert ok and '"finish_reason":"length"' in said, said
    # a request for another model is the server's 404, as vLLM answers it
    status, out, _ = await sh(
        node,
        "curl -sS --fail --max-time 5 -H 'Content-Type: application/json' "
        """-d '{"model":"other","prompt":"hi"}' http://127.0.0.1:8000/v1/completions""",
    )
    assert status == 22 and out == ""


async def test_the_parameter_cause_reads_the_real_process_and_its_last_flag() -> None:
    node = await upgraded()
    assert (await holds(node, "prefix-cache", "cause-parameter"))[0]
    spec = item("prefix-cache", "cause-parameter")
    assert spec.expect is not None and spec.expect.stdout_matches is not None
    pattern = spec.expect.stdout_matches
    # the flag turned off again later on the command line (the last one wins): it does not hold
    overridden = "48213 vllm serve m --enable-prefix-caching --no-enable-prefix-caching\n"
    assert re.search(pattern, overridden) is None
    assert re.search(pattern, "48213 vllm serve m --no-enable-prefix-caching\n") is None
    assert not (await holds(quick_node("gpu01", 0, SCENARIOS["happy"]), "prefix-cache", "cause-parameter"))[0]


async def test_ip_brief_lists_the_interfaces_as_iproute2_does() -> None:
    node = quick_node("gpu03", 2, SCENARIOS["happy"])
    status, out, _ = await sh(node, "ip -brief address")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "lo               UNKNOWN        127.0.0.1/8 ::1/128 "
    assert lines[1] == "eno1" + " " * 13 + "UP" + " " * 13 + "10.0.0.13/16 fe80::3/64 "
    assert (await sh(node, "ip -br a"))[1] == out
    status, _, err = await sh(node, "ip route")  # not simulated: refused, never made up
    assert status == 1 and "only `ip -brief address`" in err


def _brief_columns(line: str) -> tuple[str, str, list[str]]:
    """A brief line read by iproute2's layout: the name in 16 columns and a space, the state
    in 14 and a space, then each address followed by a space."""
    assert len(line) >= 32 and line[16] == " " and line[31] == " ", repr(line)
    assert line.endswith(" "), repr(line)
    return line[:16].rstrip(), line[17:31].rstrip(), line[32:].split()


async def test_ip_brief_is_laid_out_as_the_real_ip_lays_it_out_here() -> None:
    # the real iproute2 on this machine answers: its loopback line, and every line's columns
    if shutil.which("ip") is None:
        message = "needs iproute2's ip (Debian: iproute2)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    real = subprocess.run(["ip", "-brief", "address"], capture_output=True, text=True, check=True).stdout
    real_lines = real.splitlines()
    for line in real_lines:
        _brief_columns(line)
    simulated = (await sh(quick_node("gpu03", 2, SCENARIOS["happy"]), "ip -brief address"))[1].splitlines()
    for line in simulated:
        _brief_columns(line)
    real_lo = next(line for line in real_lines if line.startswith("lo "))
    name, state, addresses = _brief_columns(real_lo)
    assert (name, state) == ("lo", "UNKNOWN") and "127.0.0.1/8" in addresses
    # the simulated loopback is the real one's line (IPv6 on, as on the fleet's nodes)
    if "::1/128" in addresses:
        assert simulated[0] == real_lo
