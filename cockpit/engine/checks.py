"""Built-in checklist checks (``verify = "check"``), one pure function per name.

Each reads the folded :class:`~cockpit.engine.state.CockpitState` (the node's baseline and
its latest probe summary) and says whether the item holds, with one line of evidence
naming the node and the numbers. The session engine runs the check and records an
``ITEM_VERIFIED`` event with the result, so replay shows the same verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from cockpit.changelog.facts import BaselineFacts, GpuFacts, ProbeFacts, gpu_facts
from cockpit.engine.prechange import PRECHANGE_CHECKS, node_check, node_progress
from cockpit.engine.prechange import CheckFn as CheckFn  # re-exported: the checks' types live with the gate's
from cockpit.engine.prechange import CheckResult as CheckResult
from cockpit.engine.state import (
    DONE,
    CockpitState,
    ItemState,
    NodeProgress,
    StageState,
    recorded,
)
from cockpit.errors import BadInput
from cockpit.gpu.compat import ceiling_check
from cockpit.gpu.kernel_modules import is_open
from cockpit.gpu.nodestate import GPU_SETTINGS, Health
from cockpit.runbook.builtins import FATAL_XID_CODES
from cockpit.runbook.targets import flavour_after

#: Baseline keys a usable baseline must carry.
BASELINE_KEYS = ("driver_package", "driver_version", "boot_id", "gpu_count")


def version_tuple(text: str) -> tuple[int, ...]:
    """``"580.65.06"`` -> ``(580, 65, 6)``; stops at the first non-numeric part."""
    parts: list[int] = []
    for part in str(text).strip().split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) != len(part):
            break
    return tuple(parts)


def fatal_codes(params: Mapping[str, object], key: str = "fatal_xid_codes") -> set[int]:
    """The XID codes treated as fatal: the built-ins (:data:`FATAL_XID_CODES`), changed by ``params[key]``.

    A list or ``"48,79"`` replaces them; entries written ``+N`` / ``-N`` (``"+13,-94"``) add
    to or take from them, so a runbook can extend or narrow NVIDIA's list without copying it.
    """
    raw = params.get(key)
    if raw is None or raw == "" or raw == []:
        return set(FATAL_XID_CODES)
    if isinstance(raw, bool):
        raise BadInput(f"{key}: expected XID codes, got {raw!r}")
    if isinstance(raw, int):
        return {raw}
    if isinstance(raw, str):
        words = [p for p in raw.replace(" ", "").split(",") if p]
    elif isinstance(raw, list | tuple | set | frozenset):
        words = [str(p).strip() for p in raw]
    else:
        raise BadInput(f"{key}: expected XID codes, got {raw!r}")
    try:
        if not any(w.startswith(("+", "-")) for w in words):
            return {int(w) for w in words}
        codes = set(FATAL_XID_CODES)
        for word in words:
            if word.startswith("-"):
                codes.discard(int(word[1:]))
            else:
                codes.add(int(word.lstrip("+")))
    except ValueError as exc:
        raise BadInput(f'{key}: expected XID codes such as "48,79" or "+13,-94", got {raw!r}') from exc
    return codes


#: How a check that could not look at its node ends its evidence: it failed without a verdict.
NOT_PROBED = ": not probed yet"
UNREACHABLE = ": unreachable at the latest probe"
#: a command item whose run was cut short or never reached its host (connection lost, timeout):
#: it says nothing about the node, as a step with that outcome says nothing
NO_ANSWER = ": no answer from the command, so no verdict"
#: a node whose kernel log the probe could not read: the XID check cannot look either
KERNEL_LOG_UNREAD = ": kernel log unreadable, so no evidence about XID errors"


def no_verdict(evidence: str | None) -> bool:
    """Whether a failed check's evidence says it could not look (no probe reached the node):
    the gate stays shut, but nothing was seen to be wrong."""
    return bool(evidence) and str(evidence).endswith((NOT_PROBED, UNREACHABLE, KERNEL_LOG_UNREAD, NO_ANSWER))


def _probed(state: CockpitState, node: str | None) -> NodeProgress | CheckResult:
    """The node, if a probe reached it; else the failed result saying why not."""
    progress = node_progress(state, node)
    if isinstance(progress, CheckResult):
        return progress
    if not recorded(progress.probe):
        return CheckResult(False, f"{node}{NOT_PROBED}")
    if not progress.probe.reachable:
        return CheckResult(False, f"{node}{UNREACHABLE}")
    return progress


#: A node check over the latest probe: without one that reached the node it fails, saying why.
_needs_probe = node_check(_probed)


@_needs_probe
def node_reachable(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    return CheckResult(True, f"{node}: answered (boot id {progress.probe.boot_id or 'N/A'})")


def _baseline_naming(
    state: CockpitState, node: str | None, keys: Sequence[str], lacking: str = ""
) -> BaselineFacts | CheckResult:
    """The node's baseline when it names every one of ``keys``, else the failed check saying what it lacks."""
    progress = node_progress(state, node)
    if isinstance(progress, CheckResult):
        return progress
    base = progress.baseline
    if not recorded(base):
        return CheckResult(False, f"{node}: no baseline recorded")
    missing = [k for k in keys if getattr(base, k) in (None, "")]
    if missing:
        return CheckResult(False, f"{node}: baseline lacks {', '.join(missing)}{lacking}")
    return base


def baseline_recorded(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
    base = _baseline_naming(state, node, BASELINE_KEYS)
    if isinstance(base, CheckResult):
        return base
    return CheckResult(
        True,
        f"{node}: {base.driver_package} (driver {base.driver_version}), {base.gpu_count} GPUs, boot id {base.boot_id}",
    )


@_needs_probe
def boot_id_changed(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    if progress.current == "rolling-back" and progress.rollback is not None:
        # a rollback needs a reboot of its own: the forward reboot already changed the boot id
        began = progress.rollback.entered_seq or 0
        if progress.reboot_started_seq is None or progress.reboot_started_seq < began:
            return CheckResult(False, f"{node}: not rebooted since the rollback began")
    before = progress.boot_id_before_reboot or progress.baseline.boot_id
    now = progress.probe.boot_id
    if not before:
        return CheckResult(False, f"{node}: no recorded boot id to compare")
    if not now:
        return CheckResult(False, f"{node}: boot id not available")
    if now == before:
        return CheckResult(False, f"{node}: boot id still {now} (no reboot yet)")
    return CheckResult(True, f"{node}: boot id {before} -> {now}")


@_needs_probe
def driver_library_match(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    probe = progress.probe
    kmod, user = probe.kernel_module_version, probe.driver_version
    if probe.health == Health.DRIVER_LIBRARY_MISMATCH:
        return CheckResult(
            False,
            f"{node}: driver/library version mismatch (kernel module {kmod or 'N/A'}, "
            f"userspace {user or 'N/A'}): reboot pending",
        )
    if not kmod or not user:
        return CheckResult(False, f"{node}: kernel module {kmod or 'N/A'}, userspace {user or 'N/A'}")
    if kmod != user:
        return CheckResult(False, f"{node}: kernel module {kmod} != userspace {user}")
    return CheckResult(True, f"{node}: kernel module and userspace both {user}")


def _first_param(params: Mapping[str, object], *names: str) -> str | None:
    """The first of ``names`` given a non-empty value, as text (runbooks spell some names differently)."""
    for name in names:
        value = params.get(name)
        if value not in (None, ""):
            return str(value).strip()
    return None


#: the parameters checks compare the probe with, and every name runbooks give each
_PARAM_NAMES = {
    "target_branch": ("target_branch", "target_driver_branch", "driver_branch"),
    "image_cuda": ("image_cuda", "image_cuda_version", "required_cuda"),
}


def _probe_against_param(
    params: Mapping[str, object],
    param: str,
    node: str,
    seen: object,
    unseen: str,
    judge: Callable[[str, str], CheckResult],
) -> CheckResult:
    """``judge(seen, wanted)`` once the parameter has a value and the probe saw ``seen``.

    Otherwise the failure that says which is missing; ``unseen`` says what the probe did not
    report, after the node's name (``{wanted}`` in it stands for the parameter's value).
    """
    wanted = _first_param(params, *_PARAM_NAMES[param])
    if wanted is None:
        return CheckResult(False, f"no {param} parameter to compare with")
    if not seen:
        return CheckResult(False, f"{node}: {unseen.format(wanted=wanted)}")
    return judge(str(seen), wanted)


@_needs_probe
def driver_matches_target(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    def on_branch(loaded: str, target: str) -> CheckResult:
        if loaded.split(".")[0] != target.split(".")[0]:
            return CheckResult(False, f"{node}: driver {loaded}, target branch {target}")
        return CheckResult(True, f"{node}: driver {loaded} on branch {target}")

    loaded = progress.probe.kernel_module_version or progress.probe.driver_version
    return _probe_against_param(params, "target_branch", node, loaded, "loaded driver version not available", on_branch)


@_needs_probe
def module_flavour_matches_target(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    """The loaded module's flavour (``Open Kernel Module`` in /proc/driver/nvidia/version) is
    the one the change installed: a metapackage's alternatives or a stream switch cannot
    have moved the node to the other modules unseen."""
    want = flavour_after(params.get("driver_flavour"), progress.baseline.driver_flavour)
    loaded = progress.probe.kernel_module_flavour
    if not want:
        return CheckResult(False, f"{node}: the target flavour is not known")
    if loaded is None:
        return CheckResult(False, f"{node}: the loaded module's flavour is not known (/proc/driver/nvidia/version)")
    expected = "open" if is_open(want) else "proprietary"
    if loaded != expected:
        return CheckResult(False, f"{node}: the {loaded} kernel module is loaded, the change installed {want}")
    return CheckResult(True, f"{node}: the {loaded} kernel module is loaded ({want})")


@_needs_probe
def gpus_match_baseline(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    base = progress.baseline.gpu_count
    now = progress.probe.gpu_count
    if base is None:
        return CheckResult(False, f"{node}: no recorded GPU count")
    if now is None:
        return CheckResult(False, f"{node}: GPU count not available, baseline {base}")
    if int(now) < int(base):
        return CheckResult(False, f"{node}: {now} GPUs, baseline {base}")
    return CheckResult(True, f"{node}: {now} GPUs, baseline {base}")


@_needs_probe
def fabric_manager_ok(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    now = progress.probe.fabric_manager
    before = progress.baseline.fabric_manager
    if now == "active":
        return CheckResult(True, f"{node}: fabric manager active")
    if before != "active":
        # Not installed, or not in use before the change: nothing to keep running.
        return CheckResult(True, f"{node}: no fabric manager in use (baseline {before or 'none'}, now {now or 'none'})")
    return CheckResult(False, f"{node}: fabric manager {now or 'not installed'}, was active before the change")


@_needs_probe
def fabric_state_completed(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    """Every GPU's fabric registration is Completed/Success (``fabric.state``, ``fabric.status``):
    fabric manager active is not enough, a fabric that never finished training passes that."""
    now = progress.probe.fabric_incomplete
    before = progress.baseline.fabric_completed
    if now is None:
        if before:
            return CheckResult(False, f"{node}: no GPU reports its fabric state, all were Completed before the change")
        return CheckResult(True, f"{node}: no NVLink fabric (fabric state N/A, before and now)")
    if now:
        shown = ", ".join(map(str, now[:4])) + (f" and {len(now) - 4} more" if len(now) > 4 else "")
        return CheckResult(False, f"{node}: fabric not Completed/Success: {shown}")
    return CheckResult(True, f"{node}: every GPU's fabric state Completed, status Success")


@_needs_probe
def nvlink_links_match_baseline(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    """Each GPU has as many active NVLinks (``nvidia-smi nvlink -s``) as the baseline recorded."""
    before = progress.baseline.nvlink_active
    now = progress.probe.nvlink_active
    if before is None:
        return CheckResult(False, f"{node}: the baseline has no NVLink state (recorded before it was probed)")
    if now is None:
        return CheckResult(False, f"{node}: NVLink state not available (nvidia-smi nvlink -s), baseline {sum(before)}")
    lost = [f"GPU {i} {n} of {b} links" for i, (b, n) in enumerate(zip(before, now, strict=False)) if n < b]
    if len(now) < len(before):
        lost.append(f"{len(before) - len(now)} GPU(s) not listed")
    if lost:
        down = progress.probe.nvlink_inactive or []
        inactive = f" (inactive: {', '.join(map(str, down[:6]))})" if down else ""
        return CheckResult(False, f"{node}: NVLinks down: {'; '.join(lost)}{inactive}")
    return CheckResult(True, f"{node}: {sum(now)} NVLinks active, baseline {sum(before)}")


def pcie_link_matches_baseline(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
    """Each GPU's PCIe link generation and width since the reboot against the baseline's
    (``pcie.link.gen.current``, ``pcie.link.width.current``), GPU by GPU."""
    progress = _probed(state, node)
    if isinstance(progress, CheckResult):
        return progress
    base = gpu_facts(progress.baseline.gpus)
    if not base or all(g.pcie_gen is None for g in base):
        return CheckResult(False, f"{node}: the baseline has no PCIe link per GPU (recorded before it was probed)")
    since = progress.back_seq or progress.reboot_started_seq or progress.baseline_seq or 0
    seq = progress.gpus_detail_seq
    if seq is None or seq < since:
        return CheckResult(False, f"{node}: no per-GPU probe since the reboot (run the probe step){NOT_PROBED}")
    current = {g.key: g for g in gpu_facts(progress.gpus_detail.gpus)}
    slower: list[str] = []
    for before in base:
        after = current.get(before.key)
        if after is None or before.pcie_gen is None:
            continue  # a missing GPU is gpus_match_baseline's and gpu_settings_match_baseline's to name
        was, was_width = before.pcie_gen, before.pcie_width
        gen, width = after.pcie_gen, after.pcie_width
        if gen is None or width is None or gen < was or width < (was_width or 0):
            slower.append(f"GPU {before.index} Gen{_shown(gen)} x{_shown(width)}, was Gen{was} x{was_width}")
    if slower:
        return CheckResult(False, f"{node}: PCIe link downtrained: {'; '.join(slower[:6])}")
    return CheckResult(True, f"{node}: every GPU's PCIe link as recorded")


@_needs_probe
def no_fatal_sxid(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    """No NVSwitch SXid the driver called Fatal since boot (the FM User Guide's fatal SXids)."""
    source = progress.probe.kernel_log
    if source not in KERNEL_LOG_READ:
        why = str(source) if source else "not reported by the probe"
        return CheckResult(False, f"{node} ({why}){KERNEL_LOG_UNREAD}")
    fatal = progress.probe.sxid_fatal or []
    if fatal:
        return CheckResult(False, f"{node}: fatal NVSwitch SXid {', '.join(map(str, fatal))} since boot")
    seen = progress.probe.sxid_codes or []
    rest = f" (non-fatal SXid {', '.join(map(str, seen))})" if seen else ""
    return CheckResult(True, f"{node}: no fatal NVSwitch SXid since boot{rest}")


@_needs_probe
def peermem_loaded_as_before(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    """nvidia_peermem (GPUDirect RDMA) is loaded where it was before the change."""
    before = progress.baseline.peermem_loaded
    now = progress.probe.peermem_loaded
    if not before:
        return CheckResult(True, f"{node}: nvidia_peermem was not loaded before the change, nothing to keep")
    if now is None:
        return CheckResult(False, f"{node}: whether nvidia_peermem is loaded is not known (lsmod), it was before")
    if not now:
        why = "it was before the change (GPUDirect RDMA; modprobe nvidia_peermem)"
        return CheckResult(False, f"{node}: nvidia_peermem not loaded, {why}")
    return CheckResult(True, f"{node}: nvidia_peermem loaded, as before the change")


@_needs_probe
def imex_in_lockstep(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    """Where nvidia-imex was installed before the change, it is still installed at the loaded
    driver's version, and its service runs where it ran (IMEX and the driver move together)."""
    base, probe = progress.baseline, progress.probe
    had, ran = base.imex_version, base.imex == "active"
    if not had and not ran:
        return CheckResult(True, f"{node}: no nvidia-imex before the change, nothing to keep")
    now, state = probe.imex_version, probe.imex
    driver = probe.kernel_module_version or probe.driver_version
    if not now:
        return CheckResult(
            False, f"{node}: nvidia-imex not installed now, it was before the change ({had or 'running'})"
        )
    upstream = str(now).split("-", 1)[0]
    if not driver or upstream != driver:
        return CheckResult(
            False, f"{node}: nvidia-imex {now} beside driver {driver or 'N/A'}: IMEX must match the driver"
        )
    if ran and state != "active":
        return CheckResult(False, f"{node}: nvidia-imex {state or 'not installed'}, it ran before the change")
    return CheckResult(True, f"{node}: nvidia-imex {now} at driver {driver}, service {state or 'N/A'}")


#: the first DCGM major whose diagnostics are built for each CUDA major of the driver (stricter than
#: the driver's backward compatibility: DCGM 4 ships its diagnostics per CUDA major, its install guide
#: picking datacenter-gpu-manager-4-cudaN from nvidia-smi's "CUDA Version"; DCGM 3 has none for 13)
DCGM_MAJOR_FOR_CUDA = {13: 4}


@_needs_probe
def dcgm_matches_driver(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    """DCGM on the node (``dcgmi --version``, its datacenter-gpu-manager-4-cudaN packages) fits the
    new driver's CUDA major; a node that had DCGM still has it."""
    probe = progress.probe
    dcgm, before = probe.dcgm_version, progress.baseline.dcgm_version
    if not dcgm:
        if before:
            return CheckResult(False, f"{node}: dcgmi not found, DCGM {before} was there before the change")
        return CheckResult(True, f"{node}: no DCGM on the node")
    cuda = version_tuple(str(probe.cuda_version or ""))
    if not cuda:
        return CheckResult(False, f"{node}: DCGM {dcgm}, the driver's CUDA version is not known")
    need = max((m for c, m in DCGM_MAJOR_FOR_CUDA.items() if cuda[0] >= c), default=0)
    have = version_tuple(str(dcgm))
    if have and have[0] < need:
        return CheckResult(
            False,
            f"{node}: DCGM {dcgm} with a CUDA {cuda[0]} driver: install DCGM {need} "
            f"(datacenter-gpu-manager-{need}-cuda{cuda[0]})",
        )
    majors = [int(m) for m in probe.dcgm_cuda_majors or []]
    if majors and cuda[0] not in majors:
        return CheckResult(
            False,
            f"{node}: DCGM {dcgm} diagnostics for CUDA {', '.join(map(str, majors))}, the driver is CUDA {cuda[0]}: "
            f"install datacenter-gpu-manager-{have[0] if have else 4}-cuda{cuda[0]}",
        )
    return CheckResult(True, f"{node}: DCGM {dcgm} fits the CUDA {cuda[0]} driver")


#: how a probe says it read the kernel log (``kernel_log`` in its facts); anything else failed to
KERNEL_LOG_READ = ("journal", "dmesg")


@_needs_probe
def no_fatal_xid(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    # A kernel log nobody could read shows no XID: that is no evidence, so the item fails
    # (non-root dmesg under dmesg_restrict=1, journalctl -k without the adm group).
    source = progress.probe.kernel_log
    if source not in KERNEL_LOG_READ:
        why = str(source) if source else "not reported by the probe"
        return CheckResult(False, f"{node} ({why}){KERNEL_LOG_UNREAD}")
    codes = {int(c) for c in progress.probe.xid_codes or []}
    fatal = sorted(codes & fatal_codes(params))
    if fatal:
        return CheckResult(False, f"{node}: fatal XID {', '.join(map(str, fatal))} since boot")
    seen = f" (non-fatal XID {', '.join(map(str, sorted(codes)))})" if codes else ""
    return CheckResult(True, f"{node}: no fatal XID since boot{seen}")


@_needs_probe
def cuda_ceiling_meets_image(progress: NodeProgress, node: str, params: Mapping[str, object]) -> CheckResult:
    def meets(have: str, need: str) -> CheckResult:
        # NVIDIA's minor-version compatibility: a lower minor of the same major runs, with
        # its limits stated in the evidence; a lower major does not (cockpit.gpu.compat)
        try:
            ok, _mode, why = ceiling_check(have, need)
        except BadInput as exc:
            return CheckResult(False, f"{node}: {exc}")
        return CheckResult(ok, f"{node}: {why}")

    have = progress.probe.cuda_version
    unseen = "the driver's CUDA ceiling is not available, image needs {wanted}"
    return _probe_against_param(params, "image_cuda", node, have, unseen, meets)


def triggers_armed(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
    if state.armed:
        return CheckResult(True, f"{len(state.triggers)} rollback trigger(s) armed at seq {state.armed_seq}")
    return CheckResult(False, "the rollback triggers are not armed")


def all_waves_done(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
    behind = [f"{n} at {p.current}" for n, p in state.nodes.items() if p.current != DONE]
    if behind:
        shown = ", ".join(behind[:5]) + (f" and {len(behind) - 5} more" if len(behind) > 5 else "")
        return CheckResult(False, f"{len(behind)} of {len(state.nodes)} node(s) not through: {shown}")
    return CheckResult(True, f"all {len(state.nodes)} node(s) passed smoke and expand in {len(state.waves)} wave(s)")


#: The check that reads earlier records (an item's ``recaps``) instead of the nodes.
RECORDED = "recorded"


def _said(item: ItemState) -> str:
    words = " ".join((item.note or item.evidence or "").split())
    return f"{words[:77]}..." if len(words) > 80 else words


def recaps_recorded(state: CockpitState, recaps: Sequence[str]) -> CheckResult:
    """Each of ``recaps`` holds in the change log: ``stage/item`` done (a window stage's item,
    or a node stage's on at least one node), or ``stage`` passed its gate (a window stage, or
    a node stage on at least one node). The evidence names who recorded it and what they said."""
    if not recaps:
        return CheckResult(False, "recaps nothing: the runbook names no earlier item")
    said: list[str] = []
    for ref in recaps:
        sid, _, iid = ref.partition("/")
        stages: list[tuple[str | None, StageState]]
        if sid in state.window:
            stages = [(None, state.window[sid])]
        else:
            stages = [(n, p.stages[sid]) for n, p in state.nodes.items() if sid in p.stages]
        if not iid:
            passed = [n for n, st in stages if st.status == "passed"]
            if not passed:
                return CheckResult(False, f"stage {sid!r} has not passed its gate")
            nodes = [n for n in passed if n is not None]
            where = f" on {', '.join(nodes[:3])}" + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
            said.append(f"{sid} passed" + (where if nodes else ""))
            continue
        held = [(n, st.items[iid]) for n, st in stages if iid in st.items and st.items[iid].status == "done"]
        if not held:
            return CheckResult(False, f"{ref} does not hold yet")
        node, item = held[0]
        on = f" on {node}" if node else ""
        words = _said(item)
        said.append(f"{ref}{on} by {item.by or 'the cockpit'} (seq {item.seq})" + (f": {words}" if words else ""))
    return CheckResult(True, "; ".join(said))


def path_chosen(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
    """The recovery path is recorded (path-chosen) with its rationale and a named owner."""
    chosen = state.path
    if chosen is None:
        return CheckResult(False, "no recovery path is chosen yet")
    facts = chosen.facts
    given = {"path": facts.path, "rationale": facts.rationale, "owner": facts.owner}
    missing = [k for k, v in given.items() if not (v or "").strip()]
    if missing:
        return CheckResult(False, f"the recorded path lacks its {', '.join(missing)}")
    rationale = " ".join((facts.rationale or "").split())
    return CheckResult(
        True,
        f"path {facts.path!r} chosen by {chosen.actor} (seq {chosen.seq}), owner {facts.owner}: {rationale[:80]}",
    )


def _recorded_unnamed(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
    return recaps_recorded(state, ())  # only through run_check, which passes the item's recaps


#: Platform facts a baseline must name for a runbook to choose its commands by them.
PLATFORM_KEYS = ("os_id", "os_version", "package_manager", "driver_flavour")


def platform_recorded(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
    base = _baseline_naming(state, node, PLATFORM_KEYS, " (not available on this node)")
    if isinstance(base, CheckResult):
        return base
    fm = base.fabric_manager_version or "none"
    install = base.driver_install or "install method N/A"
    return CheckResult(
        True,
        f"{node}: {base.os_id} {base.os_version}, {base.package_manager}, "
        f"{base.driver_flavour} driver ({install}), fabric manager {fm}, "
        f"Secure Boot {_shown(base.secure_boot)}, holds {len(base.package_holds or [])}, "
        f"GPU holders {len(base.gpu_holders or [])}",
    )


def gpu_settings_match_baseline(state: CockpitState, node: str | None, params: Mapping[str, object]) -> CheckResult:
    """The per-GPU settings of the probe since the reboot against the baseline's, GPU by GPU
    (by UUID, else index); a row remapping pending or failed fails it whatever the baseline."""
    progress = _probed(state, node)
    if isinstance(progress, CheckResult):
        return progress
    base = gpu_facts(progress.baseline.gpus)
    if not base:
        return CheckResult(False, f"{node}: the baseline has no per-GPU settings (recorded before they were probed)")
    since = progress.back_seq or progress.reboot_started_seq or progress.baseline_seq or 0
    seq = progress.gpus_detail_seq
    if seq is None or seq < since:
        return CheckResult(False, f"{node}: no per-GPU probe since the reboot (run the probe step){NOT_PROBED}")
    now = gpu_facts(progress.gpus_detail.gpus)
    return CheckResult(*_settings_verdict(node or "", base, now, progress.baseline, progress.gpus_detail))


def _settings_verdict(
    node: str,
    base: list[GpuFacts],
    now: list[GpuFacts],
    baseline: BaselineFacts,
    probe: ProbeFacts,
) -> tuple[bool, str]:
    current = {g.key: g for g in now}
    differences: list[str] = []
    for before in base:
        after = current.get(before.key)
        name = f"GPU {before.index}"
        if after is None:
            differences.append(f"{name} missing")
            continue
        for setting in GPU_SETTINGS:
            was, is_ = getattr(before, setting), getattr(after, setting)
            if setting.startswith("remapped_rows_"):
                if is_ is True:
                    differences.append(f"{name} {setting.replace('_', ' ')}")
            elif was is not None and was != is_:
                differences.append(f"{name} {setting} {_shown(was)} -> {_shown(is_)}")
    layout_before, layout_now = baseline.mig_layout, probe.mig_layout
    if layout_before is not None and layout_now is not None and layout_before != layout_now:
        differences.append(f"MIG layout {_layout(layout_before)} -> {_layout(layout_now)}")
    if differences:
        shown = "; ".join(differences[:6]) + (f"; and {len(differences) - 6} more" if len(differences) > 6 else "")
        return False, f"{node}: {shown}"
    return True, f"{node}: {len(base)} GPU(s) keep persistence, power limit, clocks, MIG and ECC; no row remapping"


def _shown(value: object) -> str:
    return "N/A" if value is None else ("on" if value is True else "off" if value is False else str(value))


def _layout(value: object) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) and value else "none"


CHECK_FUNCTIONS: dict[str, CheckFn] = {
    "node_reachable": node_reachable,
    "baseline_recorded": baseline_recorded,
    "boot_id_changed": boot_id_changed,
    "driver_library_match": driver_library_match,
    "driver_matches_target": driver_matches_target,
    "module_flavour_matches_target": module_flavour_matches_target,
    "gpus_match_baseline": gpus_match_baseline,
    "gpu_settings_match_baseline": gpu_settings_match_baseline,
    "platform_recorded": platform_recorded,
    "fabric_manager_ok": fabric_manager_ok,
    "no_fatal_xid": no_fatal_xid,
    "fabric_state_completed": fabric_state_completed,
    "nvlink_links_match_baseline": nvlink_links_match_baseline,
    "pcie_link_matches_baseline": pcie_link_matches_baseline,
    "no_fatal_sxid": no_fatal_sxid,
    "peermem_loaded_as_before": peermem_loaded_as_before,
    "imex_in_lockstep": imex_in_lockstep,
    "dcgm_matches_driver": dcgm_matches_driver,
    "cuda_ceiling_meets_image": cuda_ceiling_meets_image,
    "triggers_armed": triggers_armed,
    "all_waves_done": all_waves_done,
    RECORDED: _recorded_unnamed,
    "path_chosen": path_chosen,
    **PRECHANGE_CHECKS,
}


def run_check(
    name: str, state: CockpitState, node: str | None, params: Mapping[str, object], *, recaps: Sequence[str] = ()
) -> CheckResult:
    """Run the built-in check ``name`` for ``node`` (None for window-wide checks); ``recaps``:
    the earlier items the ``recorded`` check reads."""
    if name == RECORDED:
        return recaps_recorded(state, recaps)
    fn = CHECK_FUNCTIONS.get(name)
    if fn is None:
        raise BadInput(f"unknown check {name!r}; known: {', '.join(sorted(CHECK_FUNCTIONS))}")
    return fn(state, node, params)
