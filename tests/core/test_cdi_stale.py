"""A stale CDI spec: podman takes GPUs through CDI only, and a spec generated for the old driver
that the smoke's regeneration does not replace is caught by the container smoke, naming the
old driver's library.

The simulated nodes are the real simulator parts driven through their shells; the shipped
runbook's own step and item commands are filled and run.
"""

from __future__ import annotations

import re

from sim_nodes import quick_node, sh

from cockpit.runbook.loader import load
from cockpit.runbook.placeholders import fill
from cockpit.sim.node import SimNode
from cockpit.sim.platform import PROFILES
from cockpit.sim.scenarios import SCENARIOS

RUNBOOK = load("driver-upgrade-r580").runbook
SMOKE = RUNBOOK.stage("smoke")


async def upgraded(scenario: str) -> SimNode:
    """The scenario's target on its own profile, moved to 580 and rebooted."""
    sc = SCENARIOS[scenario]
    assert sc.target_profile is not None
    n = quick_node("gpu02", 1, sc, PROFILES[sc.target_profile])
    status, _, err = await sh(
        n, "apt-get install -y nvidia-driver-580-open nvidia-fabricmanager=580.95.05-1 libnvidia-nscq=580.95.05-1"
    )
    assert status == 0, err
    n.reboot_now()
    return n


def command(item_or_step: str) -> str:
    found = next((s.run for s in SMOKE.steps if s.id == item_or_step), None)
    found = found or next((i.command for i in SMOKE.items if i.id == item_or_step), None)
    assert found is not None
    return fill(found, {**RUNBOOK.defaults(), "recorded_gpu_count": 8})


def passes(item_id: str, status: int, stdout: str) -> bool:
    item = next(i for i in SMOKE.items if i.id == item_id)
    assert item.expect is not None and item.expect.stdout_matches is not None
    return status == item.expect.exit_status and re.search(item.expect.stdout_matches, stdout) is not None


async def test_the_platform_probe_sees_where_the_spec_lives() -> None:
    run_cdi = quick_node("gpu02", 1, SCENARIOS["cdi-stale"], PROFILES["ubuntu-24.04-hgx-podman-run-cdi"])
    status, out, _ = await sh(run_cdi, "ls -d /etc/cdi/* /var/run/cdi/* 2>/dev/null")
    assert out.split() == ["/var/run/cdi/nvidia.yaml"] and status == 2
    spec = run_cdi.files["/var/run/cdi/nvidia.yaml"]
    assert "kind: nvidia.com/gpu" in spec and "hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.575.57.08" in spec


async def test_a_refreshed_etc_spec_lets_podman_run_the_smoke() -> None:
    n = await upgraded("podman")
    # before the refresh the spec names 575's libraries: podman cannot start the container
    status, out, err = await sh(n, command("container-cuda-podman"))
    assert status == 126 and "libnvidia-ml.so.575.57.08" in err and not passes("container-cuda-podman", status, out)
    assert (await sh(n, command("cdi-refresh")))[0] == 0
    status, out, err = await sh(n, command("container-cuda-podman"))
    assert passes("container-cuda-podman", status, out), err


async def test_a_stale_var_run_spec_shadows_the_refreshed_one_and_the_smoke_names_it() -> None:
    n = await upgraded("cdi-stale")
    status, _, err = await sh(n, command("cdi-refresh"))
    assert status == 0, err  # the runbook's regeneration succeeds, into /etc/cdi ...
    assert "libnvidia-ml.so.580.95.05" in n.files["/etc/cdi/nvidia.yaml"]
    # ... but the CDI registry prefers /var/run/cdi: the container gets the old driver's files
    status, out, err = await sh(n, command("container-cuda-podman"))
    assert status == 126 and not passes("container-cuda-podman", status, out)
    assert "cannot stat `/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.575.57.08`" in err
    # regenerating the spec where the node keeps it is the fix
    assert (await sh(n, "nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml"))[0] == 0
    status, out, err = await sh(n, command("container-cuda-podman"))
    assert passes("container-cuda-podman", status, out), err
