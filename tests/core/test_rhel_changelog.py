"""On RHEL 9 HGX nodes (scenario rhel9) the window runs through the runbook's dnf steps:
every package step that ran used dnf or rpm, none apt or dpkg, the rollback packages were
saved before the install, and the fabric manager and nscq moved in lockstep with the driver.

Real parts: the demo fleet called in process (InProcessTransport), the session, the autopilot taking Next; the
assertions read the change log written on disk.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from walk_expectations import IN_PROCESS_WALK_SPEED

from cockpit.changelog.events import ItemVerifiedEvent, StepFinishedEvent, StepStartedEvent
from cockpit.changelog.reader import read_session
from cockpit.session.autopilot import drive
from cockpit.session.demo import demo_session

APT = {"apt-get", "apt", "apt-mark", "apt-cache", "dpkg", "dpkg-query"}
DNF = {"dnf", "yum", "rpm"}


def _tools(command: str) -> set[str]:
    """The command names a command line runs (the word after each operator)."""
    words = shlex.split(command.replace("|", " | ").replace("&&", " && ").replace("||", " || "))
    names, head = set(), True
    for word in words:
        if word in ("|", "&&", "||", "!", ";"):
            head = True
        elif head and "=" not in word:
            names.add(word)
            head = word in ("xargs", "-r", "env", "sudo")
    return names | ({w for w in words if w in APT | DNF} & (APT | DNF))


@pytest.mark.timeout(120)
async def test_every_package_step_on_rhel_nodes_used_dnf_and_moved_in_lockstep(tmp_path: Path) -> None:
    async with demo_session(
        in_process=True, nodes=2, scenario="rhel9", sessions_dir=tmp_path, speed=IN_PROCESS_WALK_SPEED
    ) as (
        session,
        fleet,
    ):
        result = await drive(session)
        assert result.outcome == "keep-upgraded-path" and session.state.ended_at is not None
        path = session.path
        for sim in fleet.nodes.values():
            assert sim.dnf is not None and sim.dnf.stream == "580-dkms" and sim.dnf.profiles == {"fm"}
    events = read_session(path).events
    ran = [e for e in events if isinstance(e, StepFinishedEvent) and e.node and e.node.startswith("gpu")]
    package_steps = [e for e in ran if _tools(e.facts.command or "") & (APT | DNF)]
    assert {e.step for e in package_steps} >= {
        "packages-rpm",
        "dnf-makecache",
        "dnf-holds",
        "dnf-save-rollback",
        "dnf-unlock",
        "dnf-target-downloadable",
        "dnf-install",
        "dnf-relock",
    }
    for e in package_steps:
        assert not _tools(e.facts.command or "") & APT, f"{e.node} {e.stage}/{e.step} ran apt: {e.facts.command}"
        assert e.facts.ok, f"{e.node} {e.stage}/{e.step} failed"
    for node in ("gpu01", "gpu02"):
        mine = [e for e in events if getattr(e, "node", None) == node]
        saved = next(e for e in mine if isinstance(e, StepFinishedEvent) and e.step == "dnf-save-rollback")
        install = next(e for e in mine if isinstance(e, StepStartedEvent) and e.step == "dnf-install")
        assert saved.seq < install.seq
        for rpm in (
            "nvidia-driver-575.57.08-1.el9.x86_64",
            "nvidia-fabric-manager-575.57.08-1.x86_64",
            "libnvidia-nscq-575-575.57.08-1.x86_64",
            # the proprietary DKMS stream kept: 575-dkms -> 580-dkms; NVIDIA builds the DKMS kmod noarch
            # (the real dnf saves kmod-nvidia-latest-dkms-575.57.08-1.el9.noarch.rpm: test_dnf_differential.py)
            "kmod-nvidia-latest-dkms-575.57.08-1.el9.noarch",
        ):
            assert f"{rpm}.rpm" in (saved.facts.stdout or "")
        verified = {e.item: e for e in mine if isinstance(e, ItemVerifiedEvent)}
        assert verified["target-available-dnf"].facts.ok
        lockstep = verified["lockstep-dnf"]
        assert lockstep.facts.ok and (lockstep.facts.evidence or "").count(" 580.95.05") == 3
        switched = next(e for e in mine if isinstance(e, StepFinishedEvent) and e.step == "dnf-install")
        assert switched.facts.command == "dnf -y module switch-to nvidia-driver:580-dkms/fm --allowerasing"
        assert verified["fabric-manager"].facts.ok
        assert "lockstep" not in verified and "rollback-saved" not in verified  # the apt items did not apply
