"""`cockpit probe` end to end: a real subprocess against the simulator on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.commands.probe import render_folded
from cockpit.fleet.transport import Transport, TransportOptions
from cockpit.gpu.nodestate import Health, NodeState
from cockpit.sim import SimFleet

pytestmark = pytest.mark.ssh  # the simulator's SSH server: tests/conftest.py SLOW_MARKS


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    environ = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    environ["HOME"] = str(home)
    return environ


async def cockpit(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """Run the CLI while this test's event loop keeps serving the simulated fleet."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cockpit", *args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_probe_folds_identical_nodes_and_flags_the_odd_one(tmp_path: Path, env: dict[str, str]) -> None:
    async with SimFleet(3, "gpu-missing", speed=20.0) as fleet:
        files = fleet.write_client_files(tmp_path / "sim")
        rc, out, err = await cockpit(env, "probe", "gpu[01-03]", "--ssh-config", str(files.ssh_config))
        assert rc == 0, err
        assert out.startswith(
            "---------------\ngpu[01-03] (3)\n---------------\nhealth      ok: 8 GPUs, driver 575.57.08 (CUDA 12.9)"
        )
        assert "package     nvidia-driver-575-open=575.57.08-0ubuntu1" in out

        async with Transport(fleet.targets(), TransportOptions(ssh_config=files.ssh_config)) as t:
            assert (
                await t.run(
                    "gpu02",
                    "apt-get install -y nvidia-driver-580-open nvidia-fabricmanager=580.95.05-1 libnvidia-nscq=580.95.05-1 && systemctl reboot",
                )
            ).ok
        await asyncio.sleep(0.5)  # the simulated reboot takes 0.2 s at this speed
        rc, out, err = await cockpit(
            env, "probe", "gpu[01-03]", "--ssh-config", str(files.ssh_config), "--expect-gpus", "8"
        )
        assert rc == 1, out + err
        blocks = out.split("---------------\n")
        assert blocks[1] == "gpu02\n" and "gpu-missing: 7 GPUs visible, baseline 8" in out  # worst first
        assert "gpu[01,03] (2)" in out
        assert "xid         1 since boot (codes 79)" in out

        rc, out, err = await cockpit(env, "probe", "gpu02", "--ssh-config", str(files.ssh_config), "--json")
        doc = json.loads(out)
        node = doc["nodes"][0]
        for key in (
            "host",
            "reachable",
            "health",
            "health_evidence",
            "driver_version",
            "kernel_module_version",
            "cuda_version",
            "boot_id",
            "gpus",
            "error",
        ):
            assert key in node
        assert (node["host"], node["driver_version"], node["cuda_version"], len(node["gpus"])) == (
            "gpu02",
            "580.95.05",
            "13.0",
            7,
        )
        assert {"index", "name", "uuid", "memory_total_mib"} <= set(node["gpus"][0])
        assert rc == 0  # no baseline given: 7 GPUs is what this node has


async def test_unknown_host_key_makes_the_node_unreachable(tmp_path: Path, env: dict[str, str]) -> None:
    async with SimFleet(1, speed=20.0) as fleet:
        files = fleet.write_client_files(tmp_path / "sim")
        empty = tmp_path / "empty_known_hosts"
        empty.write_text("")
        rc, out, _ = await cockpit(
            env, "probe", "gpu01", "--ssh-config", str(files.ssh_config), "--known-hosts", str(empty)
        )
        assert rc == 1 and "unreachable: host key for [127.0.0.1]:" in out and "--accept-new-host-keys" in out
        rc, out, _ = await cockpit(
            env,
            "probe",
            "gpu01",
            "--ssh-config",
            str(files.ssh_config),
            "--known-hosts",
            str(empty),
            "--accept-new-host-keys",
        )
        assert rc == 0 and empty.read_text().startswith("[127.0.0.1]:")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["probe"], "give a host SPEC"),
        (["probe", "gpu[01-"], "gpu[01-"),
        (["probe", "gpu01", "--timeout", "0"], "--timeout"),
        (["probe", "gpu01", "--ssh-config", "/nonexistent/ssh_config"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_local_probe_json_without_a_gpu_and_without_textual(env: dict[str, str]) -> None:
    code = (
        "import sys, json, io, contextlib\n"
        "from cockpit.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['probe', '--local', '--json'])\n"
        "doc = json.loads(buf.getvalue())\n"
        "print(rc, doc['nodes'][0]['health'], any(m == 'textual' or m.startswith('textual.') for m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    rc, health, textual = result.stdout.split()
    assert textual == "False"
    assert (rc, health) in (("1", "driver-not-loaded"), ("0", "ok"))  # ok only on a machine with a working GPU


def test_render_folded_strips_host_names_from_shared_errors() -> None:
    states = [
        NodeState(
            host=h, health=Health.UNREACHABLE, health_evidence=f"{h}: cannot connect to 10.0.0.9:22: connection refused"
        )
        for h in ("gpu05", "gpu06", "gpu07")
    ]
    out = render_folded(states)
    assert "gpu[05-07] (3)" in out and "unreachable: cannot connect to 10.0.0.9:22: connection refused" in out
