"""What the Ansible-module tests on a namespaced sshd node share (tests/core/test_ansible_modules.py
for apt, tests/core/test_ansible_dnf.py for dnf): the mount namespace's set-up script, the record
probe's nvidia-smi, and reading a release's observations and the change log back."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cockpit.fleet.backends.ansible import AnsibleBackend
from cockpit.fleet.backends.base import BackendAction, Observation, ReleaseRequest, ReleaseResult
from cockpit.fleet.targets import HostTarget, TransportOptions
from cockpit.session.operator import Session

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: the system interpreter, which has python3-apt and python3-dnf (Debian's packages): the modules need them
NODE_PYTHON = "/usr/bin/python3"


def need(ok: bool, why: str) -> None:
    """Skip without what the test needs; fail instead under CI=true, where .ci/run installs it."""
    if not ok:
        if CI:
            pytest.fail(f"{why} but CI=true: .ci/run installs it")
        pytest.skip(why)


def can_unshare() -> bool:
    """Whether this process may make a mount namespace (root, and a kernel that allows it)."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    return subprocess.run([unshare, "--mount", "true"], capture_output=True).returncode == 0


def transport_options(server: Any) -> TransportOptions:
    """How the cockpit reaches the node's sshd (tests/sshd_fixture.py's files)."""
    return TransportOptions(
        ssh_config=server.ssh_config,
        known_hosts=server.known_hosts,
        client_keys=[server.client_key],
        connect_timeout_s=30,
    )


def ansible_backend(target: HostTarget, server: Any, workdir: Path, *, check: bool = False) -> AnsibleBackend:
    """The backend ``cockpit run --backend ansible`` makes (the registry's), on the node's Python."""
    from cockpit.fleet.backends.registry import AnsibleSettings, BackendOptions, make_backend
    from cockpit.fleet.transport import Transport

    options = BackendOptions(name="ansible", ansible=AnsibleSettings())
    backend = make_backend(options, transport=Transport([target], transport_options(server)))
    assert isinstance(backend, AnsibleBackend)
    backend.workdir = workdir
    backend.ssh = backend.ssh.model_copy(update={"python_interpreter": NODE_PYTHON})
    backend.check = check
    return backend


#: a real H200's ``--query-gpu`` answer with every field (a header naming them, then one row)
QUERY_CAPTURE = "csv/query-gpu_H200_580.173.02_full-fields_utkuozdemir-capture.csv"
#: ``nvidia-smi`` for the record step's probe: ``--query-gpu=FIELDS`` answered with those columns
#: of the real capture (units off, as ``nounits`` asks), nvidia-smi's own words for a field the
#: capture lacks (the probe asks again without it); anything else prints the fixture's table
NVIDIA_SMI_STUB = """#!{python}
import sys
args = sys.argv[1:]
query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
if query is None:
    sys.stdout.write(open("{table}").read())
    sys.exit(0)
header, row = open("{capture}").read().splitlines()[:2]
names = [h.strip().split(" [")[0] for h in header.split(",")]
units = [" [" in h for h in header.split(",")]
values = dict(zip(names, [(v.strip().split(" ")[0] if u else v.strip()) for v, u in zip(row.split(","), units)]))
for field in query.split(","):
    if field not in values:
        print('Field "%s" is not a valid field to query.' % field)
        sys.exit(2)
print(", ".join(values[field] for field in query.split(",")))
"""


def namespace_script(path: Path, binds: dict[str, Path], *, first: Sequence[str] = ()) -> Path:
    """A shell script that runs ``first`` (more mounts) and binds ``binds`` (the node's folder -> a
    scratch one) in the mount namespace it runs in, then execs its arguments; any failed mount
    stops it before sshd runs."""
    lines = ["#!/bin/sh", "set -eu", *first]
    lines += [f"mount --bind '{source}' '{target}'" for target, source in binds.items()]
    lines.append('exec "$@"')
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


async def release(backend: AnsibleBackend, context: dict[str, str]) -> tuple[ReleaseResult, list[Observation]]:
    """One upgrade release of gpu01: its result and every observation heard."""
    seen: list[Observation] = []
    request = ReleaseRequest(BackendAction.UPGRADE, ("gpu01",), reason="CHG r580", timeout_s=600, context=context)
    (result,) = await backend.release(request, seen.append)
    return result, seen


def first_run_changes(session: Session) -> dict[str, str]:
    """Each task's changed flag as the change log holds it (the window's via-ansible step)."""
    from cockpit.changelog.events import EventKind
    from cockpit.changelog.journal import read_session

    facts = [e.facts for e in read_session(session.path).events if e.kind is EventKind.NODE_OBSERVED]
    return {
        f.evidence["task"].split(":", 1)[0]: f.evidence["changed"]
        for f in facts
        if f.evidence and "changed" in f.evidence and "task" in f.evidence
    }


def open_window(session: Session) -> None:
    """The window stages before the first node: a second person signs off the arming stage's
    items and the triggers are armed; the evidence and compatibility stages before it (the r580
    runbook's freeze, compat and path) have no incident here, and the operator says so."""
    from cockpit.runbook.model import Verify

    runbook = session.runbook
    arming = next(s for s in runbook.opening_stages if s.arms_triggers)
    for stage in runbook.opening_stages:
        if stage is arming:
            break
        session.override(stage.id, reason="test window: no incident to freeze evidence of, the paths are known")
    for item in arming.items:
        if item.verify is Verify.SIGNOFF:
            session.sign_off(arming.id, item.id, actor="bob")
    session.arm_triggers()
    session.pass_gate(arming.id)


def context_of(session: Session) -> dict[str, str]:
    """What the executor hands the backend for gpu01 (its placeholder values, as text)."""
    return {k: str(v) for k, v in session.executor.values("gpu01", session.node_facts("gpu01")).items()}


def by_task(seen: list[Observation]) -> dict[str, dict[str, str]]:
    """Each task's observation evidence, by the step id the task is named after."""
    tasks = {}
    for o in seen:
        if o.native_state.startswith("runner_on_") and o.evidence:
            tasks[o.evidence["task"].split(":", 1)[0]] = dict(o.evidence)
    return tasks


def recap(seen: list[Observation]) -> dict[str, str]:
    (ended,) = [o for o in seen if o.native_state.startswith("playbook_on_stats")]
    return dict(ended.evidence or {})
