"""The executor on the jump host itself (where = "local"): real `sh -c` processes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from processes import alive

from cockpit.fleet.executor import (
    Executor,
    UnsupportedStepKind,
    kernel_module_version,
)
from cockpit.fleet.redact import REDACTED
from cockpit.fleet.results import ErrorKind
from cockpit.runbook.conditions import when_holds
from cockpit.runbook.model import Expect, Item, Step, StepKind, Where

HOSTILE = [
    "$(touch {marker})",
    "`touch {marker}`",
    "x; touch {marker}",
    "x && touch {marker}",
    "x | touch {marker}",
    "'; touch {marker}; '",
    '"; touch {marker}; "',
    "x\ntouch {marker}",
    "--help",
    "*",
]


def local(run: str, **kw: object) -> Step:
    return Step(id="s", title="t", run=run, where=Where.LOCAL, **kw)


async def test_command_runs_and_reports(tmp_path: Path) -> None:
    outcome = await Executor(transport=None, params={"name": "gpu01"}).execute_step(
        local("printf 'hello %s\\n' {name}; echo oops >&2; exit 3")
    )
    assert outcome.target == "local"
    assert outcome.command == "printf 'hello %s\\n' gpu01; echo oops >&2; exit 3"
    assert (outcome.exit_status, outcome.ok) == (3, False)
    assert outcome.stdout == "hello gpu01\n" and outcome.stderr == "oops\n"
    assert outcome.error_kind is None and outcome.duration_s >= 0
    facts = outcome.facts()
    assert facts["where"] == "local" and facts["exit_status"] == 3 and facts["ok"] is False


@pytest.mark.parametrize("template", HOSTILE)
async def test_hostile_values_stay_one_literal_argument(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "pwned"
    value = template.format(marker=marker)
    outcome = await Executor(transport=None, params={"value": value}).execute_step(
        local("printf '<%s>' {value}; printf '[%s]' \"$#\"")
    )
    assert outcome.ok, outcome
    assert outcome.stdout == f"<{value}>[0]"
    assert not marker.exists()


async def test_node_facts_fill_placeholders(tmp_path: Path) -> None:
    executor = Executor(transport=None, params={"target_branch": "580"}, facts={"change_id": "CHG-1"})
    outcome = await executor.execute_step(
        local("echo {node} {host} {change_id} {target_branch} {recorded_boot_id}"),
        "gpu07",
        node_facts={"recorded_boot_id": "b-1"},
    )
    assert outcome.stdout == "gpu07 gpu07 CHG-1 580 b-1\n"


async def test_when_not_matching_skips_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    step = local(f"touch {marker}", when={"scheduler": "slurm"})
    outcome = await Executor(transport=None, params={"scheduler": "kubernetes"}).execute_step(step, "gpu01")
    assert outcome.skipped and outcome.ok and outcome.command is None
    assert "scheduler=slurm" in (outcome.error or "")
    assert not marker.exists()
    ran = await Executor(transport=None, params={"scheduler": "slurm"}).execute_step(step, "gpu01")
    assert ran.ok and not ran.skipped and marker.exists()


def test_when_holds_booleans_and_missing() -> None:
    assert when_holds({"dry": "true"}, {"dry": True})
    assert when_holds({"dry": "true"}, {"dry": False}) is False
    assert when_holds({"x": "1"}, {}) is False
    assert when_holds({}, {})


async def test_timeout_stops_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    step = local(f"sh -c 'echo $$ > {pidfile}; exec sleep 30' & wait", timeout_s=1)
    started = time.monotonic()
    outcome = await Executor(transport=None, params={}).execute_step(step)
    assert time.monotonic() - started < 6
    assert outcome.error_kind is ErrorKind.TIMEOUT and not outcome.ok
    assert "timed out after 1 s" in (outcome.error or "")
    child = int(pidfile.read_text())
    await asyncio.sleep(0.2)
    assert not alive(child)  # the grandchild sleep is gone too


async def test_timeout_from_parameter(tmp_path: Path) -> None:
    outcome = await Executor(transport=None, params={"t": 1}).execute_step(local("sleep 5", timeout_s="t"))
    assert outcome.error_kind is ErrorKind.TIMEOUT


async def test_cancellation_stops_the_process_and_raises(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    task = asyncio.create_task(
        Executor(transport=None, params={}).execute_step(local(f"echo $$ > {pidfile}; exec sleep 30"))
    )
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int(pidfile.read_text())
    await asyncio.sleep(0.1)
    assert not alive(pid)


async def test_output_streams_redacted_line_by_line() -> None:
    seen: list[tuple[str, str]] = []
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    step = local(f"printf 'pulling\\n'; sleep 0.1; printf 'token={token}\\n'; printf 'err\\n' >&2; printf 'tail'")
    outcome = await Executor(transport=None, params={}).execute_step(step, on_output=lambda s, t: seen.append((s, t)))
    streamed = "".join(t for s, t in seen if s == "stdout")
    assert streamed == outcome.stdout == f"pulling\ntoken={REDACTED}\ntail"
    assert "".join(t for s, t in seen if s == "stderr") == "err\n"
    assert token not in str(seen)


async def test_secret_in_parameter_is_redacted_in_recorded_command() -> None:
    outcome = await Executor(transport=None, params={"tok": "password=hunter2"}).execute_step(
        local("echo {tok} >/dev/null")
    )
    assert outcome.ok
    assert "hunter2" not in (outcome.command or "")


@pytest.mark.parametrize(
    ("step", "params", "words"),
    [
        (local("echo {missing}"), {}, "no value for placeholder {missing}"),
        (local("echo {"), {}, "lone"),
        (local("echo", timeout_s="nope"), {}, "timeout_s"),
        (
            Step(id="s", title="t", run="kubectl get nodes", where=Where.CONTROL),
            {"control_host": "ctl;reboot"},
            "ctl;reboot",
        ),
        (Step(id="s", title="t", run="kubectl get nodes", where=Where.CONTROL), {}, "control_host has no value"),
        (Step(id="s", title="t", run="uptime"), {}, "no node was given"),
        (Step(id="s", title="t", kind=StepKind.REBOOT, where=Where.LOCAL), {}, "a reboot runs on a node"),
    ],
)
async def test_bad_input_refused_before_anything_runs(step: Step, params: dict[str, object], words: str) -> None:
    outcome = await Executor(transport=None, params=params).execute_step(step)  # type: ignore[arg-type]  # no transport: refused before one is needed
    assert outcome.error_kind is ErrorKind.BAD_INPUT and not outcome.ok
    assert words in (outcome.error or "")
    assert outcome.exit_status is None


async def test_control_step_without_transport_is_an_envelope_not_an_exception() -> None:
    step = Step(id="s", title="t", run="kubectl get nodes", where=Where.CONTROL)
    outcome = await Executor(transport=None, params={"control_host": "ctl1"}).execute_step(step, "gpu01")
    assert outcome.target == "ctl1" and outcome.error_kind is ErrorKind.BAD_INPUT


@pytest.mark.parametrize("kind", [StepKind.PROBE, StepKind.RECORD])
async def test_probe_and_record_are_the_sessions_job(kind: StepKind) -> None:
    with pytest.raises(UnsupportedStepKind, match="run by the session"):
        await Executor(transport=None, params={}).execute_step(Step(id="s", title="t", kind=kind), "gpu01")


@pytest.mark.parametrize(
    ("command", "expect", "ok", "words"),
    [
        ("echo 'Driver Version: 580.95.05'", Expect(stdout_matches=r"Driver Version: 58\d"), True, "matched"),
        ("echo 'Driver Version: 575.57.08'", Expect(stdout_matches=r"Driver Version: 58\d"), False, "does not match"),
        ("exit 1", Expect(exit_status=1), True, "exit status 1"),
        ("echo boom >&2; exit 2", None, False, "expected exit status 0, got 2: boom"),
        ("true", Expect(stdout_matches="("), False, "bad stdout_matches"),
        ("sleep 5", None, False, "timed out"),
    ],
)
async def test_verify_item_command(command: str, expect: Expect | None, ok: bool, words: str) -> None:
    item = Item(id="i", text="check", verify="command", command=command, where=Where.LOCAL, expect=expect)
    executor = Executor(transport=None, params={}, item_timeout_s=1)
    check = await executor.verify_item_command(item)
    assert check.ok is ok
    assert words in check.evidence
    assert check.outcome.command == command


async def test_verify_item_command_fills_placeholders() -> None:
    item = Item(
        id="i",
        text="on target",
        verify="command",
        command="echo {target_branch}",
        where=Where.LOCAL,
        expect=Expect(stdout_matches="^580$"),
    )
    check = await Executor(transport=None, params={"target_branch": "580"}).verify_item_command(item)
    assert check.ok, check.evidence


def test_kernel_module_version_from_real_outputs(fixtures_dir: Path) -> None:
    texts = {p.name: p.read_text() for p in (fixtures_dir / "proc_version").iterdir()}
    versions = sorted(str(kernel_module_version(t)) for t in texts.values())
    assert versions == ["515.76", "565.57.01"]
    assert kernel_module_version("cat: /proc/driver/nvidia/version: No such file or directory") is None
