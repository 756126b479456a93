"""Probe nodes over SSH: one batched command per node, parsed into a NodeState.

The batch is plain POSIX sh, with every section introduced by a marker line and
closed by its exit status, so one round trip answers everything the cockpit shows
and the trigger evaluators need. The verdict (:func:`decide_health`) is a pure
function of the parsed facts and names the line that decided it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shlex
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cockpit.fleet.platform_probe import FACT_PREFIX, FactProbe, custom_value, platform_facts, sections_text
from cockpit.fleet.results import CommandResult, ErrorKind
from cockpit.fleet.transport import Transport
from cockpit.gpu.nodestate import GPU_SETTINGS, LINK_SETTINGS, Health, NodeState, XidEvent, fabric_incomplete
from cockpit.gpu.parsers.fabric import parse_nvlink_status, parse_sxids, peermem_loaded
from cockpit.gpu.parsers.models import ParseError
from cockpit.gpu.parsers.proc_version import parse_proc_version
from cockpit.gpu.parsers.query_gpu import (
    CORE_FIELDS,
    PROBE_FIELDS,
    parse_query_gpu,
    probe_query_command,
    unknown_query_field,
)
from cockpit.gpu.parsers.smi_version import parse_smi_version

if TYPE_CHECKING:  # a probe needs no runbook models loaded (a cold `cockpit probe` starts faster)
    from cockpit.runbook.model import Runbook

log = logging.getLogger(__name__)

MARK = "@@cockpit-probe"
DEFAULT_PROBE_TIMEOUT_S = 30.0

MISMATCH_TEXT = "Driver/library version mismatch"
NOT_LOADED_TEXT = "couldn't communicate with the NVIDIA driver"

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+),")


#: XIDs since boot: the journal if it shows this boot's kernel messages, else the ring buffer
#: (also since boot), and which one was read on a line of its own. An unreadable log must not
#: read as "no XID": journalctl -k -q shows a user outside the adm/systemd-journal groups
#: nothing at all (journalctl(1)), and dmesg under kernel.dmesg_restrict=1 prints "dmesg: read
#: kernel buffer failed: Operation not permitted" and exits 1 (dmesg(1)), so both are tested
#: for readability first and the failure is reported with dmesg's own words. A login that is not
#: root (and not in adm) reads them through ``sudo -n`` after the plain reads failed, so a root
#: login never touches sudo and a refused sudo leaves the log unreadable, never empty.
#: The NVSwitch driver's SXid lines come from the same log ("nvidia-nvswitchN: SXid (PCI:...): CODE,
#: Fatal|Non-fatal, ..."; tests/fixtures/fabric/), so one read serves both.
XID_SECTION = (
    "{ journalctl -k -b 0 -q -n 1 --no-pager 2>/dev/null | grep -q . && echo 'kernel-log: journal'"
    " && { journalctl -k -b 0 --no-pager -q -g 'NVRM: Xid|SXid' 2>/dev/null; true; }; }"
    " || { dmesg >/dev/null 2>&1 && echo 'kernel-log: dmesg'"
    " && { dmesg 2>/dev/null | grep -E 'NVRM: Xid|SXid'; true; }; }"
    # a login that is not root reads them through sudo -n where it may (never a prompt)
    " || { sudo -n journalctl -k -b 0 -q -n 1 --no-pager 2>/dev/null | grep -q . && echo 'kernel-log: journal'"
    " && { sudo -n journalctl -k -b 0 --no-pager -q -g 'NVRM: Xid|SXid' 2>/dev/null; true; }; }"
    " || { sudo -n dmesg >/dev/null 2>&1 && echo 'kernel-log: dmesg'"
    " && { sudo -n dmesg 2>/dev/null | grep -E 'NVRM: Xid|SXid'; true; }; }"
    " || { echo 'kernel-log: unreadable'; dmesg 2>&1 | head -n 1; }"
)
KERNEL_LOG_LINE = "kernel-log: "


#: the package names the "nvidia-packages" section asks about; the toolkit's lines are told apart
TOOLKIT_PACKAGE = "nvidia-container-toolkit"
#: nvidia-imex (GB200 NVL) is asked for too: it must stay at the driver's version
IMEX_PACKAGE = "nvidia-imex"
#: DCGM: its 4.x packages name the CUDA major of their diagnostics (datacenter-gpu-manager-4-cuda12)
DCGM_PACKAGE = "datacenter-gpu-manager"
_DCGM_CUDA = re.compile(r"^[ih]i datacenter-gpu-manager-\d+-cuda(\d+)=")
_DCGMI_VERSION = re.compile(r"^dcgmi\s+version:\s*(\S+)", re.MULTILINE)
PACKAGES_QUERY = (
    f"dpkg-query -W -f='${{db:Status-Abbrev}}${{Package}}=${{Version}}\\n' 'nvidia-driver-*' {TOOLKIT_PACKAGE}"
    f" '{IMEX_PACKAGE}*' '{DCGM_PACKAGE}*' 2>/dev/null || rpm -qa --qf 'ii %{{NAME}}=%{{VERSION}}-%{{RELEASE}}\\n'"
    f" 'nvidia-driver*' 'cuda-drivers*' {TOOLKIT_PACKAGE} '{IMEX_PACKAGE}*' '{DCGM_PACKAGE}*' 2>/dev/null"
)


def _section(name: str, command: str) -> str:
    return f"echo '{MARK} {name}'; {command}; echo \"{MARK} rc $?\""


def probe_command(
    *, platform: bool = False, facts: Sequence[FactProbe] = (), fields: Sequence[str] = PROBE_FIELDS
) -> str:
    """The one shell command line a probe runs on a node (no operator's values in it).

    ``platform`` adds the platform sections (a record or probe step; routine rounds stay
    lean), ``facts`` a runbook's own read-only fact commands, ``fields`` the query fields
    (fewer when this node's nvidia-smi refused one)."""
    query = shlex.join(probe_query_command(fields))
    sections = [
        _section("query-gpu", f"{query} 2>&1"),
        _section("smi-version", "nvidia-smi --version 2>&1"),
        _section("proc-version", "cat /proc/driver/nvidia/version 2>&1"),
        _section("boot-id", "cat /proc/sys/kernel/random/boot_id"),
        _section("uptime", "cat /proc/uptime"),
        _section("kernel", "uname -r"),
        # the installed driver packages as apt pins (name=version; rpm: name=version-release)
        # and the container toolkit, from ONE package query: the package database is read
        # once per probe, not once per fact. dpkg-query prints what matched and exits 1 if a
        # pattern matched nothing (dpkg-query(1)); rpm is asked then, as before (absent on
        # apt systems: 127, nothing printed)
        _section("nvidia-packages", PACKAGES_QUERY),
        _section("fabric-manager", "systemctl show -p LoadState,ActiveState nvidia-fabricmanager 2>/dev/null"),
        _section("imex", "systemctl show -p LoadState,ActiveState nvidia-imex 2>/dev/null"),
        _section("xid", XID_SECTION),
        # each GPU's NVLinks, up (its speed) or <inactive>; compared with the baseline's count
        _section("nvlink", "nvidia-smi nvlink -s 2>&1"),
        # nvidia_peermem (GPUDirect RDMA) beside the nvidia module: kept loaded where it was
        _section("modules", "lsmod 2>/dev/null | grep -E '^nvidia(_peermem)? '"),
        # DCGM's version ("dcgmi  version: 4.4.2"), held to the driver's CUDA major by the smoke
        _section("dcgm", "dcgmi --version 2>/dev/null"),
    ]
    if platform:
        sections += [_section(name, command) for name, command in sections_text(tuple(facts))]
    return "; ".join(sections) + f"; echo '{MARK} end'"


@dataclass(frozen=True)
class Section:
    text: str
    status: int | None  # None: the section never finished (output cut short)


def split_sections(output: str) -> dict[str, Section]:
    """Cut the batch output at the marker lines: section name -> (text, exit status)."""
    sections: dict[str, Section] = {}
    name: str | None = None
    lines: list[str] = []
    for line in output.splitlines():
        if not line.startswith(MARK + " "):
            if name is not None:
                lines.append(line)
            continue
        word = line[len(MARK) + 1 :].strip()
        if word.startswith("rc "):
            if name is not None:
                rc = word[3:].strip()
                sections[name] = Section("\n".join(lines), int(rc) if rc.lstrip("-").isdigit() else None)
            name, lines = None, []
        elif word == "end":
            break
        else:
            if name is not None:  # previous section lost its rc line
                sections[name] = Section("\n".join(lines), None)
            name, lines = word, []
    if name is not None:
        sections[name] = Section("\n".join(lines), None)
    return sections


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def parse_probe_output(
    host: str,
    output: str,
    *,
    now: datetime | None = None,
    fields: Sequence[str] = PROBE_FIELDS,
    facts: Sequence[FactProbe] = (),
) -> NodeState:
    """Turn one batch's stdout into the facts of a NodeState (health not yet decided)."""
    return parse_sections(host, split_sections(output), now=now, fields=fields, facts=facts)


def parse_sections(
    host: str,
    sections: Mapping[str, Section],
    *,
    now: datetime | None = None,
    fields: Sequence[str] = PROBE_FIELDS,
    facts: Sequence[FactProbe] = (),
) -> NodeState:
    """:func:`parse_probe_output` of output already cut at its markers."""
    state = NodeState(host=host, reachable=True, probed_at=now or datetime.now(UTC))
    errors: list[str] = []

    smi = sections.get("query-gpu")
    if smi is not None:
        error = _read_query(state, smi, fields)
        if error:
            errors.append(error)

    version = sections.get("smi-version")
    if version is not None and version.status == 0:
        try:
            smi_version = parse_smi_version(version.text)
        except ParseError:
            pass  # an old nvidia-smi without --version: the CUDA ceiling stays N/A
        else:
            state.cuda_version = smi_version.cuda_version
            state.driver_version = state.driver_version or smi_version.driver_version
    proc = sections.get("proc-version")
    if proc is not None and proc.status == 0 and proc.text.strip():
        try:
            module = parse_proc_version(proc.text)
            state.kernel_module_version, state.kernel_module_flavour = module.version, module.flavour
        except ParseError as exc:
            errors.append(f"/proc/driver/nvidia/version not understood: {exc}")
    state.boot_id = _first_line(sections["boot-id"].text) or None if "boot-id" in sections else None
    if "uptime" in sections:
        try:
            state.uptime_s = float(_first_line(sections["uptime"].text).split()[0])
        except (IndexError, ValueError):
            state.uptime_s = None
    if "kernel" in sections:
        state.kernel = _first_line(sections["kernel"].text) or None
    if "nvidia-packages" in sections:
        text = sections["nvidia-packages"].text
        imex = [ln for ln in text.splitlines() if ln[3:].startswith(f"{IMEX_PACKAGE}=")]
        held_or_not = [ln.split("=", 1)[1].strip() for ln in imex if ln.startswith(("ii ", "hi "))]
        state.imex_version = held_or_not[0] if held_or_not else None
        state.dcgm_cuda_majors = sorted({int(m.group(1)) for ln in text.splitlines() if (m := _DCGM_CUDA.match(ln))})
        rest = "\n".join(ln for ln in text.splitlines() if ln not in imex and not ln[3:].startswith(DCGM_PACKAGE))
        state.driver_package, state.container_toolkit_version = split_packages(rest)
    if "driver-package" in sections:  # the two queries of earlier probes
        state.driver_package = pick_driver_package(sections["driver-package"].text)
    if "toolkit" in sections:
        state.container_toolkit_version = _toolkit_version(sections["toolkit"].text)
    if "fabric-manager" in sections:
        state.fabric_manager = parse_fabric_manager(sections["fabric-manager"].text)
    if "imex" in sections:
        state.imex = parse_fabric_manager(sections["imex"].text)  # the same systemctl show
    if "xid" in sections:
        state.kernel_log = parse_kernel_log(sections["xid"].text)
        state.xid_errors = parse_xids(sections["xid"].text)
        state.sxid_errors = parse_sxids(sections["xid"].text)
    nvlink = sections.get("nvlink")
    if nvlink is not None and nvlink.status == 0 and state.gpus:
        state.nvlink = parse_nvlink_status(nvlink.text)
    if "dcgm" in sections:
        said = _DCGMI_VERSION.search(sections["dcgm"].text)
        state.dcgm_version = said.group(1) if said else None
    if "modules" in sections:
        state.peermem_loaded = peermem_loaded(sections["modules"].text)
    state.platform = platform_facts({k: (v.text, v.status) for k, v in sections.items()})
    for fact in facts:
        found = sections.get(FACT_PREFIX + fact.name)
        state.custom_facts[fact.name] = custom_value(fact, found.text, found.status) if found else None
    if errors:
        state.error = errors[0]
    return state


def _read_query(state: NodeState, smi: Section, fields: Sequence[str]) -> str | None:
    """Fill the GPUs from the query-gpu section; the error in words when there are none."""
    if smi.status != 0:
        return _smi_error(smi)
    try:
        facts = parse_query_gpu(smi.text, fields)
    except ParseError as exc:
        return f"nvidia-smi output not understood: {exc}"
    state.gpus = list(facts.gpus)
    state.driver_version = facts.driver_version
    return None


#: What a probe says when this node's nvidia-smi refuses a query field it cannot do without.
REFUSED_FIELD_TEXT = "nvidia-smi refuses query field"


def _smi_error(section: Section) -> str:
    text = section.text
    if section.status == 127 or ("not found" in text and "nvidia-smi" in text):
        return "nvidia-smi: not found (no NVIDIA driver userspace installed)"
    refused = unknown_query_field(text)
    if refused is not None:
        return f"{REFUSED_FIELD_TEXT} {refused!r} (an older nvidia-smi?)"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " ".join(lines[:2]) if lines else f"nvidia-smi failed with exit status {section.status}"


def split_packages(text: str) -> tuple[str | None, str | None]:
    """The "nvidia-packages" section: (driver package as an apt pin, container toolkit version)."""
    toolkit = f"{TOOLKIT_PACKAGE}="
    lines = text.splitlines()
    drivers = [ln for ln in lines if not ln[3:].startswith(toolkit)]
    toolkits = [ln[:3] + ln[3 + len(toolkit) :] for ln in lines if ln[3:].startswith(toolkit)]
    return pick_driver_package("\n".join(drivers)), _toolkit_version("\n".join(toolkits))


def _toolkit_version(text: str) -> str | None:
    """Installed ("ii ") toolkit lines give the version; anything else (rc, not installed) none."""
    installed = [ln[3:].strip() for ln in text.splitlines() if ln.startswith("ii ")]
    return installed[0] if installed else None


def pick_driver_package(text: str) -> str | None:
    """The installed driver package as ``name=version`` (an apt pin), the branch package first."""
    # "ii " installed, "hi " installed and held (`apt-mark hold`): both are the installed package
    installed = [ln[3:].strip() for ln in text.splitlines() if ln.startswith(("ii ", "hi ")) and "=" in ln]
    installed = [p for p in installed if not p.endswith("=")]
    if not installed:
        return None
    branch = [p for p in installed if re.match(r"nvidia-driver-\d+", p)]
    return (branch or installed)[0]


def parse_fabric_manager(text: str) -> str | None:
    """``systemctl show -p LoadState,ActiveState``: None when the unit does not exist."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    if not values or values.get("LoadState") in (None, "not-found", "masked"):
        return None
    return values.get("ActiveState") or None


def parse_kernel_log(text: str) -> str:
    """Which kernel log the XID section read ("journal", "dmesg"), or "unreadable: <why>"."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    source = next((ln[len(KERNEL_LOG_LINE) :] for ln in lines if ln.startswith(KERNEL_LOG_LINE)), "")
    if source in ("journal", "dmesg"):
        return source
    why = next((ln for ln in lines if not ln.startswith(KERNEL_LOG_LINE)), "")
    return f"unreadable: {why}" if why else "unreadable"


def parse_xids(text: str) -> list[XidEvent]:
    events = []
    for line in text.splitlines():
        m = _XID.search(line)
        if m:
            events.append(XidEvent(code=int(m.group("code")), bus_id=m.group("bus"), text=line[m.start() :].strip()))
    return events


def decide_health(state: NodeState, *, baseline_gpus: int | None = None) -> tuple[Health, str]:
    """The verdict on a reachable node and the one line of evidence behind it."""
    err = state.error or ""
    if NOT_LOADED_TEXT in err or (state.kernel_module_version is None and "not found" in err):
        return Health.DRIVER_NOT_LOADED, err or "no NVIDIA kernel module loaded"
    if MISMATCH_TEXT in err:
        module = state.kernel_module_version or "unknown"
        return Health.DRIVER_LIBRARY_MISMATCH, f"{err} (loaded kernel module {module}; reboot pending?)"
    if state.kernel_module_version and state.driver_version and state.kernel_module_version != state.driver_version:
        return (
            Health.DRIVER_LIBRARY_MISMATCH,
            f"kernel module {state.kernel_module_version} != userspace driver {state.driver_version}",
        )
    if REFUSED_FIELD_TEXT in err and not state.gpus:
        return Health.UNKNOWN, err  # the driver answered: the probe asked what it cannot say
    if err and not state.gpus:
        return Health.DRIVER_NOT_LOADED, err
    if baseline_gpus is not None and state.gpu_count < baseline_gpus:
        return Health.GPU_MISSING, f"{state.gpu_count} GPUs visible, baseline {baseline_gpus}"
    if state.fabric_manager is not None and state.fabric_manager != "active":
        return Health.FABRIC_MANAGER_DOWN, f"nvidia-fabricmanager is {state.fabric_manager}"
    return (
        Health.OK,
        f"{state.gpu_count} GPUs, driver {state.driver_version or 'N/A'} (CUDA {state.cuda_version or 'N/A'}), "
        f"kernel module {state.kernel_module_version or 'N/A'}",
    )


def fact_probes(runbook: Runbook) -> tuple[FactProbe, ...]:
    """A runbook's own facts (``[facts.NAME]``) as probe sections."""
    return tuple(FactProbe(name, spec.command, spec.regex) for name, spec in runbook.facts.items())


def baseline_of(state: NodeState) -> dict[str, Any]:
    """What a record step keeps of a probe (the baseline's keys, ``None`` left out: TOML has
    no null); the dry run shows the same facts for ``{recorded_*}`` and ``when``."""
    baseline: dict[str, Any] = {
        "driver_package": state.driver_package,
        "driver_version": state.driver_version,
        "kernel_module_version": state.kernel_module_version,
        "kernel_module_flavour": state.kernel_module_flavour,
        "cuda_version": state.cuda_version,
        "boot_id": state.boot_id,
        "gpu_count": state.gpu_count,
        "fabric_manager": state.fabric_manager,
        "container_toolkit_version": state.container_toolkit_version,
        "kernel": state.kernel,
        "gpu_uuids": [g.uuid for g in state.gpus if g.uuid],
        "nvlink_active": None if state.nvlink is None else [g.active for g in state.nvlink],
        "peermem_loaded": state.peermem_loaded,
        "imex": state.imex,
        "imex_version": state.imex_version,
        "dcgm_version": state.dcgm_version,
        "fabric_completed": None if fabric_incomplete(state.gpus) is None else not fabric_incomplete(state.gpus),
    }
    if state.platform is not None:
        baseline.update(state.platform.model_dump())
    if state.gpus:
        baseline["gpus"] = [gpu_settings(g.model_dump()) for g in state.gpus]
    custom = {k: v for k, v in state.custom_facts.items() if v is not None}
    if custom:
        baseline["facts"] = custom
    return {k: v for k, v in baseline.items() if v is not None}


def gpu_settings(gpu: dict[str, Any]) -> dict[str, Any]:
    """One GPU's identity and the settings compared after the reboot (None left out)."""
    keys = ("index", "uuid", "bus_id", *GPU_SETTINGS, *LINK_SETTINGS)
    return {k: gpu[k] for k in keys if gpu.get(k) is not None}


def state_from_failure(
    host: str, result: CommandResult, *, rebooting: bool = False, now: datetime | None = None
) -> NodeState:
    """A node the probe could not reach: unreachable, or rebooting when the caller issued one."""
    now = now or datetime.now(UTC)
    transport_kinds = (ErrorKind.CONNECT_FAILED, ErrorKind.CONNECTION_LOST, ErrorKind.TIMEOUT)
    if rebooting and result.error_kind in transport_kinds:
        return NodeState(
            host=host,
            reachable=False,
            health=Health.REBOOTING,
            probed_at=now,
            health_evidence=f"reboot in progress: {result.error}",
            error=result.error,
        )
    return NodeState(
        host=host,
        reachable=False,
        health=Health.UNREACHABLE,
        probed_at=now,
        health_evidence=result.error or "unreachable",
        error=result.error,
    )


async def probe_node(
    transport: Transport,
    host: str,
    *,
    baseline_gpus: int | None = None,
    rebooting: bool = False,
    timeout: float | None = DEFAULT_PROBE_TIMEOUT_S,
    platform: bool = False,
    facts: Sequence[FactProbe] = (),
) -> NodeState:
    """Probe one node over SSH: one round trip, parsed, with a health verdict.

    ``rebooting`` says a reboot was issued to this node, so a refused or dropped
    connection means REBOOTING rather than UNREACHABLE. ``platform`` and ``facts``
    add the platform sections and a runbook's own facts (see :func:`probe_command`).
    An nvidia-smi that refuses a query field (an older driver) is asked again without
    it, one more round trip per refused field, so the node is not read as driverless.
    """
    fields = PROBE_FIELDS
    command = probe_command(platform=platform, facts=facts)
    result = await transport.run(host, command, timeout=timeout)
    if result.error_kind is not None:
        return state_from_failure(host, result, rebooting=rebooting)
    sections = split_sections(result.stdout)  # cut once: the parse and the refused-field retry read it
    state = parse_sections(host, sections, fields=fields, facts=facts)
    refused: list[str] = []
    smi = sections.get("query-gpu")
    while smi is not None and smi.status != 0:
        field = unknown_query_field(smi.text)
        if field is None or field not in fields or field in CORE_FIELDS:
            break
        refused.append(field)
        fields = tuple(f for f in fields if f != field)
        query = _section("query-gpu", shlex.join(probe_query_command(fields)) + " 2>&1")
        again = await transport.run(host, f"{query}; echo '{MARK} end'", timeout=timeout)
        if again.error_kind is not None:
            break
        smi = split_sections(again.stdout).get("query-gpu")
        retried = NodeState(host=host)
        if smi is not None and _read_query(retried, smi, fields) is None:
            state.gpus, state.driver_version = retried.gpus, retried.driver_version or state.driver_version
            if state.error and state.error.startswith(REFUSED_FIELD_TEXT):
                state.error = None
    state.unknown_query_fields = refused
    state.health, state.health_evidence = decide_health(state, baseline_gpus=baseline_gpus)
    return state


async def probe_fleet(
    transport: Transport,
    hosts: Sequence[str],
    *,
    baseline_gpus: Mapping[str, int] | None = None,
    rebooting: Collection[str] = (),
    timeout: float | None = DEFAULT_PROBE_TIMEOUT_S,
    on_done: Callable[[NodeState], None] | None = None,
    platform: bool = False,
    facts: Sequence[FactProbe] = (),
) -> dict[str, NodeState]:
    """Probe many nodes concurrently (the transport caps concurrent connects); ``on_done`` is
    told of each node as its answer (or failure) arrives, for progress."""
    baseline_gpus = baseline_gpus or {}
    started = time.monotonic()

    async def one(host: str) -> NodeState:
        state = await probe_node(
            transport,
            host,
            baseline_gpus=baseline_gpus.get(host),
            rebooting=host in rebooting,
            timeout=timeout,
            platform=platform,
            facts=facts,
        )
        if on_done is not None:
            on_done(state)
        return state

    states = await asyncio.gather(*(one(h) for h in hosts))
    unreachable = sum(1 for s in states if not s.reachable)
    log.info("probe round: %d nodes in %.3f s, %d unreachable", len(hosts), time.monotonic() - started, unreachable)
    return dict(zip(hosts, states, strict=True))
