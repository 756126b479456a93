"""Platform facts: the parsers (hand-written outputs, each with its source), the probe over
the simulator's SSH, an nvidia-smi that refuses a query field, and recorded facts in
``when`` and placeholders (fold, executor, dry run, checker)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cockpit.changelog.events import BaselineRecordedEvent, Event, ProbeEvent
from cockpit.changelog.facts import BaselineFacts, ProbeFacts
from cockpit.commands.dry_run import plan_text
from cockpit.engine.checks import run_check
from cockpit.engine.fold import fold
from cockpit.fleet.executor import Executor
from cockpit.fleet.platform_probe import FactProbe
from cockpit.fleet.probes import MARK, baseline_of, decide_health, parse_probe_output, probe_node
from cockpit.fleet.transport import Transport, TransportOptions
from cockpit.gpu.nodestate import GPU_SETTINGS, GpuState, Health, NodeState
from cockpit.gpu.parsers import platform as p
from cockpit.gpu.platform import PlatformFacts
from cockpit.runbook.conditions import RECORDED_FACTS, recorded_facts, when_holds
from cockpit.runbook.loader import parse_runbook
from cockpit.runbook.model import Step
from cockpit.sim import SimFleet

pytestmark = pytest.mark.usefixtures("isolated_home")

# -- parsers -------------------------------------------------------------------------------

# os-release(5) of Ubuntu 24.04 (noble) and RHEL 9.4 as the distributions ship them
UBUNTU = 'PRETTY_NAME="Ubuntu 24.04.2 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\n'
RHEL = 'NAME="Red Hat Enterprise Linux"\nVERSION="9.4 (Plow)"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="9.4"\n'


def test_os_release_quotes_and_comments() -> None:
    assert p.parse_os_release(UBUNTU)["VERSION_ID"] == "24.04"
    rhel = p.parse_os_release("# comment\n" + RHEL)
    assert (rhel["ID"], rhel["VERSION_ID"], rhel["ID_LIKE"]) == ("rhel", "9.4", "fedora")


def test_driver_flavour_from_packages_stream_or_license() -> None:
    ubuntu = {"nvidia-driver-580-open": "580.95.05-0ubuntu1", "nvidia-dkms-580-open": "580.95.05-0ubuntu1"}
    assert p.driver_flavour(ubuntu, None, None) == "open"
    assert p.driver_flavour({"nvidia-driver-580-server-open": "x"}, None, None) == "server-open"
    assert p.driver_flavour({"nvidia-driver-580-server": "x"}, None, None) == "server"
    assert p.driver_flavour({"nvidia-driver-575": "x"}, None, None) == "proprietary"
    # `dnf module list --enabled nvidia-driver` on RHEL 9 with the CUDA repository (NVIDIA's
    # driver installation guide: streams "580" and "580-open", profiles default, fm, ks, src)
    listing = (
        "cuda-rhel9-x86_64\nName           Stream        Profiles                   Summary\n"
        "nvidia-driver  580-open [e]  default [d], fm, ks, src  Nvidia driver for 580-open branch\n"
    )
    stream = p.dnf_module_stream(listing)
    assert stream == "580-open"
    assert p.driver_flavour({"nvidia-driver": "3:580.95.05-1.el9"}, None, stream) == "open"
    # no branch package (a .run install): the module's license says it (open modules: Dual MIT/GPL)
    assert p.driver_flavour({}, "Dual MIT/GPL", None) == "open"
    assert p.driver_flavour({}, "NVIDIA", None) == "proprietary"
    assert p.driver_flavour({}, None, None) is None


def test_install_method() -> None:
    pkgs = {"nvidia-driver-580": "580.95.05-0ubuntu1"}
    assert p.driver_install(pkgs, [], cuda_repo=False) == p.DISTRIBUTION
    assert p.driver_install(pkgs, [], cuda_repo=True) == p.CUDA_REPOSITORY
    assert p.driver_install({}, ["/usr/bin/nvidia-uninstall"], cuda_repo=False) == p.RUNFILE
    assert p.driver_install({}, ["/run/nvidia/driver"], cuda_repo=False) == p.GPU_OPERATOR
    assert p.driver_install({}, [], cuda_repo=False) is None


def test_secure_boot_and_the_signer() -> None:
    # mokutil(1) --sb-state; a BIOS boot answers "EFI variables are not supported on this system"
    assert p.secure_boot("SecureBoot enabled\n") is True
    assert p.secure_boot("SecureBoot disabled\nPlatform is in Setup Mode\n") is False
    assert p.secure_boot("EFI variables are not supported on this system\n") is None
    # mokutil --list-enrolled: an openssl-style dump per key, as in mokutil's own output
    mok = (
        "[key 1]\nSHA1 Fingerprint: 5a:2b:...\nCertificate:\n    Data:\n"
        "        Subject: CN=gpu01 Secure Boot Module Signature key\n"
        "            X509v3 Subject Key Identifier: \n                4E:0B:2C:11\n"
    )
    signed = {"signer": "gpu01 Secure Boot Module Signature key", "sig_key": "4E:0B:2C:11"}
    assert p.signer_enrolled(signed, mok, True) is True
    assert p.signer_enrolled({"signer": "someone else", "sig_key": "AA:BB"}, mok, True) is False
    assert p.signer_enrolled({"license": "NVIDIA"}, mok, True) is False  # unsigned under Secure Boot
    assert p.signer_enrolled(signed, mok, False) is None


def test_dkms_holds_kernels_and_unattended() -> None:
    # dkms 3 and dkms 2 formats of `dkms status`
    text = (
        "nvidia/580.95.05, 6.8.0-60-generic, x86_64: installed\nnvidia, 535.54.03, 5.15.0-76-generic, x86_64: built\n"
    )
    assert len(p.dkms_status(text + "zfs/2.2.2, 6.8.0-60-generic, x86_64: installed\n")) == 2
    # `dnf versionlock list` prints NAME-EPOCH:VERSION-RELEASE.* (python3-dnf-plugin-versionlock)
    assert p.package_holds("nvidia-driver-575\n", None) == ["nvidia-driver-575"]
    assert p.package_holds(None, "nvidia-driver-3:580.95.05-1.el9.*\n") == ["nvidia-driver"]
    assert p.package_holds(None, None) is None
    paths = ["/boot/vmlinuz-6.8.0-9-generic", "/boot/vmlinuz-6.8.0-60-generic"]
    assert p.kernel_next("", paths) == "6.8.0-60-generic"
    assert p.kernel_next("/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64\n", paths) == "5.14.0-427.13.1.el9_4.x86_64"
    assert p.unattended_upgrades("enabled\n", 'APT::Periodic::Unattended-Upgrade "1";\n') == "enabled"
    assert p.unattended_upgrades("enabled\n", 'APT::Periodic::Unattended-Upgrade "0";\n') == "disabled"
    assert p.unattended_upgrades("", "") is None


def test_gpu_holders_with_their_units() -> None:
    # psmisc fuser -v (the table on stderr, merged by 2>&1); continuation rows have no file name
    fuser = (
        "                     USER        PID ACCESS COMMAND\n"
        "/dev/nvidia0:        root       2114 F.... nvidia-persiste\n"
        "                     root       3307 F...m dcgm-exporter\n"
        "/dev/nvidiactl:      root       2114 F.... nvidia-persiste\n"
    )
    units = "Id=nvidia-persistenced.service\nMainPID=2114\n\nId=dcgm-exporter.service\nMainPID=3307\n\nId=dcgm.service\nMainPID=0\n"
    assert p.gpu_holders(fuser, units) == [
        "2114 nvidia-persiste (nvidia-persistenced.service)",
        "3307 dcgm-exporter (dcgm-exporter.service)",
    ]
    assert p.gpu_holders("", units) == []
    assert p.gpu_holders(None, units) is None


def test_mig_layout_from_nvidia_smi_list() -> None:
    # `nvidia-smi -L` with MIG enabled (NVIDIA MIG user guide, "Listing MIG devices")
    text = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
        "  MIG 3g.40gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
        "  MIG 3g.40gb     Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)\n"
        "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-11111111-d33d-2b2c-524d-9e3d8d2b8a77)\n"
    )
    assert p.mig_layout(text) == ["GPU 0: MIG 3g.40gb", "GPU 0: MIG 3g.40gb"]
    assert p.mig_layout("") is None


def test_recorded_facts_list_matches_the_baseline_model() -> None:
    fields = set(BaselineFacts.model_fields) - {"labels", "gpus", "facts", "gpu_uuids"}
    assert fields == set(RECORDED_FACTS)
    assert set(PlatformFacts.model_fields) <= set(BaselineFacts.model_fields)


# -- an nvidia-smi that does not know a query field -------------------------------------------

# the real words and exit status 2 (CoHDI/composable-resource-operator#37)
REFUSED = 'Field "remapped_rows.pending" is not a valid field to query.\n\n'


def test_a_refused_query_field_is_not_driver_not_loaded() -> None:
    out = f"{MARK} query-gpu\n{REFUSED}{MARK} rc 2\n{MARK} end\n"
    state = parse_probe_output("gpu01", out)
    health, evidence = decide_health(state)
    assert health is Health.UNKNOWN and "remapped_rows.pending" in evidence


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[tuple[SimFleet, Transport]]:
    fleet = SimFleet(2, "happy", speed=20.0)
    await fleet.start()
    files = fleet.write_client_files(tmp_path / "sim")
    transport = Transport(fleet.targets(), TransportOptions(ssh_config=files.ssh_config))
    yield fleet, transport
    await transport.close()
    await fleet.stop()


async def test_probe_asks_again_without_the_refused_field(sim: tuple[SimFleet, Transport]) -> None:
    fleet, transport = sim
    fleet.nodes["gpu01"].nvidia_smi.unknown_fields = frozenset({"remapped_rows.pending", "clocks.applications.memory"})
    state = await probe_node(transport, "gpu01")
    assert state.health is Health.OK, state.health_evidence
    assert state.gpu_count == 8 and set(state.unknown_query_fields) == {
        "remapped_rows.pending",
        "clocks.applications.memory",
    }
    assert state.gpus[0].remapped_rows_pending is None and state.gpus[0].remapped_rows_failure is False


async def test_simulator_over_ssh_answers_the_platform_probe_and_a_fact_drives_a_step(
    sim: tuple[SimFleet, Transport],
) -> None:
    _fleet, transport = sim
    kver = FactProbe("kernel_series", "uname -r", r"^(\d+\.\d+)")
    state = await probe_node(transport, "gpu01", platform=True, facts=[kver])
    plat = state.platform
    assert plat is not None
    assert (plat.os_id, plat.os_version, plat.package_manager) == ("ubuntu", "24.04", "apt")
    # the simulated node's driver came from NVIDIA's repository (its sources.list.d names it)
    assert (plat.driver_flavour, plat.driver_install, plat.nvswitch) == ("open", "cuda-repository", True)
    assert plat.fabric_manager_version and plat.fabric_manager_version.startswith("575.")
    assert plat.secure_boot is False and plat.package_holds == [] and plat.unattended_upgrades == "enabled"
    assert plat.gpu_holders == ["2114 nvidia-persiste (nvidia-persistenced.service)"]
    assert plat.kernel_next == state.kernel and plat.dkms and plat.container_runtimes == ["docker"]
    assert state.custom_facts == {"kernel_series": "6.8"}
    baseline = BaselineFacts.model_validate(baseline_of(state)).to_toml()  # what the record step writes
    assert baseline["facts"] == {"kernel_series": "6.8"} and len(baseline["gpus"]) == 8
    facts = recorded_facts(baseline)
    executor = Executor(transport, {})
    on_ubuntu = Step(
        id="say",
        title="say",
        run="echo {recorded_os_id} {recorded_kernel_series}",
        when={"recorded_os_id": ["ubuntu", "debian"]},
    )
    done = await executor.execute_step(on_ubuntu, "gpu01", node_facts=facts)
    assert done.ok and done.stdout.strip() == "ubuntu 6.8"
    on_rhel = Step(id="dnf", title="dnf", run="dnf -y install x", when={"recorded_os_id": ["rhel", "rocky"]})
    skipped = await executor.execute_step(on_rhel, "gpu01", node_facts=facts)
    assert skipped.skipped and "recorded_os_id in rhel|rocky" in (skipped.error or "")
    waiting = await executor.execute_step(on_rhel, "gpu01", node_facts={})
    assert not waiting.ok and "waits for the node's baseline" in (waiting.error or "")


# -- when over recorded facts: fold, dry run, checker --------------------------------------------

RUNBOOK = b"""
[runbook]
id = "facts-demo"
title = "facts in when"

[parameters.scheduler]
type = "choice"
choices = ["kubernetes", "slurm"]
default = "slurm"

[facts.bios]
command = "cat /sys/class/dmi/id/bios_version"

[[triggers]]
id = "gpu-missing"
title = "GPU missing"
mode = "auto"
evaluator = "gpu_count_below_baseline"

[[stages]]
id = "arm"
title = "arm"
scope = "window"
arms_triggers = true

[[stages]]
id = "record"
title = "record"
scope = "node"
  [[stages.steps]]
  id = "baseline"
  title = "baseline"
  kind = "record"

[[stages]]
id = "upgrade"
title = "upgrade"
scope = "node"
  [[stages.steps]]
  id = "apt"
  title = "apt"
  run = "apt-get install -y nvidia-driver-580-{recorded_driver_flavour}"
  destructive = true
  when = { recorded_os_id = "ubuntu" }
  [[stages.steps]]
  id = "dnf"
  title = "dnf"
  run = "dnf -y module install nvidia-driver:580-open"
  destructive = true
  when = { recorded_os_id = ["rhel", "rocky"], scheduler = "slurm" }
  [[stages.items]]
  id = "dnf-done"
  text = "dnf installed"
  verify = "step"
  step = "dnf"
"""


def _loaded():
    return parse_runbook(RUNBOOK, "facts-demo.toml")


def _events(baselines: dict[str, dict[str, object]]) -> list[Event]:

    at = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        BaselineRecordedEvent(
            seq=i, ts=at, actor="op", node=node, stage="record", step="baseline", facts=BaselineFacts.model_validate(b)
        )
        for i, (node, b) in enumerate(baselines.items(), start=1)
    ]


@pytest.mark.parametrize(
    ("baseline", "apt", "dnf", "item"),
    [
        (None, "open", "open", "open"),  # pending: not skipped before the baseline
        ({"os_id": "ubuntu", "boot_id": "b"}, "open", "skipped", "skipped"),
        ({"os_id": "rocky", "boot_id": "b"}, "skipped", "open", "open"),
        ({"boot_id": "b"}, "skipped", "skipped", "skipped"),  # a baseline without the fact: nothing matches
    ],
)
def test_fact_conditions_settle_per_node_once_the_baseline_is_recorded(
    baseline: dict[str, object] | None, apt: str, dnf: str, item: str
) -> None:
    runbook = _loaded().runbook
    events = _events({"gpu01": baseline} if baseline is not None else {})
    state = fold(runbook, {}, ["gpu01", "gpu02"], events, operator="op")
    upgrade = state.nodes["gpu01"].stages["upgrade"]
    assert (upgrade.steps["apt"].status, upgrade.steps["dnf"].status, upgrade.items["dnf-done"].status) == (
        apt,
        dnf,
        item,
    )
    other = state.nodes["gpu02"].stages["upgrade"]  # no baseline of its own: still pending
    assert (other.steps["apt"].status, other.steps["dnf"].status) == ("open", "open")


def test_a_parameter_false_skips_whatever_the_facts() -> None:
    when: dict[str, str | list[str]] = {"recorded_os_id": ["rhel"], "scheduler": "slurm"}
    assert when_holds(when, {"scheduler": "kubernetes"}, None) is False
    assert when_holds(when, {"scheduler": "slurm"}, None) is None
    assert when_holds(when, {"scheduler": "slurm"}, {"recorded_os_id": "rhel"}) is True
    assert when_holds(
        {"recorded_container_runtimes": "podman"}, {}, {"recorded_container_runtimes": ["docker", "podman"]}
    )


def _state(node: str, os_id: str) -> NodeState:
    return NodeState(
        host=node, reachable=True, health=Health.OK, boot_id="b", driver_package="nvidia-driver-575=575.57.08-1",
        gpus=[GpuState(index=0)], platform=PlatformFacts(os_id=os_id, driver_flavour="open"),
    )  # fmt: skip


def test_dry_run_skips_a_fact_conditioned_step_for_one_node_and_runs_it_for_another() -> None:
    loaded = _loaded()
    params = loaded.runbook.defaults()
    states = {"gpu01": _state("gpu01", "ubuntu"), "gpu02": _state("gpu02", "rhel")}
    text = plan_text(loaded, params, [["gpu01"], ["gpu02"]], states, Executor(None, params))
    assert "step apt on gpu01 [destructive: asks for confirmation]: apt-get install -y nvidia-driver-580-open" in text
    assert (
        "step dnf on gpu01 [destructive: asks for confirmation]: skipped (runs only when recorded_os_id in rhel|rocky"
        in text
    )
    assert (
        "step dnf on gpu02 [destructive: asks for confirmation]: dnf -y module install nvidia-driver:580-open" in text
    )
    assert (
        "step apt on gpu02 [destructive: asks for confirmation]: skipped (runs only when recorded_os_id=ubuntu)" in text
    )


def test_checker_refuses_unknown_facts_and_bad_fact_tables() -> None:
    bad = RUNBOOK.replace(b'recorded_os_id = "ubuntu"', b'recorded_os_name = "ubuntu"')
    bad = bad.replace(b'command = "cat /sys/class/dmi/id/bios_version"', b'command = "cat {node}"\nregex = "("')
    bad += b'\n[facts.os_id]\ncommand = "true"\n'
    from cockpit.errors import BadInput

    with pytest.raises(BadInput) as refused:
        parse_runbook(bad, "bad.toml")
    problems = getattr(refused.value, "problems", [])  # a runbook refused carries every problem
    text = "\n".join(f"{x.field_path}: {x.message}" for x in problems)
    assert "when.recorded_os_name: names no recorded fact (recorded facts: recorded_bios, " in text
    assert "no {placeholders} in it" in text and "not a valid regular expression" in text
    assert "'os_id' is a built-in recorded fact" in text


def test_gpu_settings_compared_with_the_baseline_after_the_reboot() -> None:
    runbook = _loaded().runbook
    at = datetime(2026, 1, 1, tzinfo=UTC)
    gpu = {"index": 0, "uuid": "GPU-1", "persistence_mode": True, "power_limit_w": 700.0, "ecc_mode": True,
           "mig_mode": False, "remapped_rows_pending": False}  # fmt: skip
    events = _events({"gpu01": {"boot_id": "a", "gpus": [gpu], "mig_layout": []}})

    def probe(seq: int, **changed: object) -> ProbeEvent:
        facts = ProbeFacts(reachable=True, boot_id="b", gpus=[{**gpu, **changed}], mig_layout=[])
        return ProbeEvent(seq=seq, ts=at, actor="cockpit", node="gpu01", facts=facts)

    same = fold(runbook, {}, ["gpu01"], [*events, probe(2)], operator="op")
    assert run_check("gpu_settings_match_baseline", same, "gpu01", {}).ok
    moved = fold(
        runbook,
        {},
        ["gpu01"],
        [*events, probe(2, persistence_mode=False, power_limit_w=500.0, remapped_rows_pending=True)],
        operator="op",
    )
    verdict = run_check("gpu_settings_match_baseline", moved, "gpu01", {})
    assert not verdict.ok
    assert "GPU 0 persistence_mode on -> off" in verdict.evidence and "power_limit_w 700.0 -> 500.0" in verdict.evidence
    assert "remapped rows pending" in verdict.evidence
    assert set(GPU_SETTINGS) >= {"ecc_mode", "mig_mode", "app_clock_graphics_mhz"}
