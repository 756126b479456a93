"""The facts each kind of event carries: one frozen pydantic model per kind.

These are the ``[events.NNNNNN.facts]`` tables of the change log. Every field a
writer may leave out defaults to ``None`` and ``None`` is never written (TOML has
no null), so a model dumped with ``exclude_none=True`` gives exactly the keys that
were written, and a log written before a field existed still reads.

Every model refuses keys it does not know (``extra="forbid"``): a typo in a writer
fails at the append, before anything reaches the disk. The one exception is
:class:`ProbeFacts`, the summary of a probe, which says why.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator


class Facts(BaseModel):
    """Base of every kind's facts: frozen, closed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_toml(self) -> dict[str, Any]:
        """The keys as written: ``None`` (never written) left out, open extras included."""
        return self.model_dump(mode="python", exclude_none=True)


class NoFacts(Facts):
    """For kinds whose meaning is all in the event's own fields (stage, item, note, reason)."""


class SessionStartedFacts(Facts):
    operator: str | None = None
    hosts: list[str] | None = None
    tool_version: str | None = None


class SessionResumedFacts(Facts):
    #: step keys (``stage/step/node``) that were running when the session stopped: outcome unknown
    interrupted: list[str] | None = None
    #: what the reader found at the end of the file (a block torn by a crash), in words
    torn_tail: str | None = None


class SessionEndedFacts(Facts):
    outcome: str | None = None


class GpuFacts(BaseModel):
    """One GPU's table in a probe's or a baseline's ``gpus``, as the engine reads it.

    The log keeps those tables open (a parser gaining a field changes no log), so this is a
    typed reading of one, not what is written: keys this version does not read are ignored.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    index: int | None = None
    uuid: str | None = None
    # the settings a driver change must not move (:data:`cockpit.gpu.nodestate.GPU_SETTINGS`)
    persistence_mode: bool | None = None
    power_limit_w: float | None = None
    app_clock_graphics_mhz: int | None = None
    app_clock_memory_mhz: int | None = None
    mig_mode: bool | None = None
    ecc_mode: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    # the PCIe link it trained at (:data:`cockpit.gpu.nodestate.LINK_SETTINGS`)
    pcie_gen: int | None = None
    pcie_width: int | None = None

    @property
    def key(self) -> str | int | None:
        """How a GPU is matched across two probes: its UUID, else its index."""
        return self.uuid or self.index


def gpu_facts(tables: list[dict[str, Any]] | None) -> list[GpuFacts]:
    """The per-GPU tables of a probe or a baseline, typed (none when it recorded none).

    The tables are open in the log, so a value of another type can be there (a hand-edited or
    hostile log): it reads as not recorded, as a key this version lacks does."""
    out = []
    for table in tables or []:
        try:
            out.append(GpuFacts.model_validate(table))
        except ValidationError as exc:
            bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
            out.append(GpuFacts.model_validate({k: v for k, v in table.items() if k not in bad}))
    return out


class ProbeFacts(Facts):
    """A node's probe summary (:meth:`cockpit.gpu.nodestate.NodeState.summary`), when it changed.

    Open (``extra="allow"``): the summary follows what the probes learn of a node, and
    a key a newer probe adds must not make the log unreadable to this version; the
    keys this version reads are typed here. ``gpus`` (recorded in full at a step
    boundary) is one table per GPU as the parsers model it (:mod:`cockpit.gpu.parsers`),
    kept as plain tables so a parser gaining a field changes no log.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    reachable: bool | None = None
    health: str | None = None
    boot_id: str | None = None
    driver_version: str | None = None
    kernel_module_version: str | None = None
    kernel_module_flavour: str | None = None
    cuda_version: str | None = None
    driver_package: str | None = None
    fabric_manager: str | None = None
    gpu_count: int | None = None
    xid_codes: list[int] | None = None
    kernel_log: str | None = None  # where the XIDs were read ("journal", "dmesg"), or "unreadable: ..."
    health_evidence: str | None = None
    error: str | None = None
    gpus: list[dict[str, Any]] | None = None
    mig_layout: list[str] | None = None  # recorded with ``gpus`` by a probe with the platform sections
    sxid_codes: list[int] | None = None  # NVSwitch SXids since boot, and those the driver called Fatal
    sxid_fatal: list[int] | None = None
    fabric_incomplete: list[str] | None = None  # GPUs whose fabric state is not Completed/Success
    nvlink_active: list[int] | None = None  # per GPU, its active NVLinks
    nvlink_inactive: list[str] | None = None
    peermem_loaded: bool | None = None
    imex: str | None = None  # nvidia-imex's unit state; None: not installed
    imex_version: str | None = None
    dcgm_version: str | None = None  # dcgmi --version
    dcgm_cuda_majors: list[int] | None = None  # the CUDA majors of the datacenter-gpu-manager-4-cudaN installed


class BaselineFacts(Facts):
    """What a node looked like before the change (``kind = "record"`` steps)."""

    driver_package: str | None = None
    driver_version: str | None = None
    kernel_module_version: str | None = None
    cuda_version: str | None = None
    boot_id: str | None = None
    gpu_count: int | None = None
    fabric_manager: str | None = None
    container_toolkit_version: str | None = None
    kernel: str | None = None
    gpu_uuids: list[str] | None = None
    labels: dict[str, str] | None = None  # Kubernetes node labels (written by earlier versions)
    # the platform (:class:`cockpit.gpu.platform.PlatformFacts`), absent from logs written before it
    os_id: str | None = None
    os_version: str | None = None
    os_like: str | None = None
    package_manager: str | None = None
    driver_flavour: str | None = None
    driver_install: str | None = None
    driver_packages: list[str] | None = None
    driver_metapackage: str | None = None
    module_packaging: str | None = None
    module_license: str | None = None
    module_signer: str | None = None
    nvswitch: bool | None = None
    fabric_manager_version: str | None = None
    nscq_version: str | None = None
    imex_version: str | None = None
    container_runtimes: list[str] | None = None
    cdi_specs: list[str] | None = None
    secure_boot: bool | None = None
    module_signer_enrolled: bool | None = None
    kernel_next: str | None = None
    kernel_headers: list[str] | None = None
    dkms: list[str] | None = None
    package_holds: list[str] | None = None
    unattended_upgrades: str | None = None
    gpu_holders: list[str] | None = None
    mig_layout: list[str] | None = None
    gpu_models: list[str] | None = None
    kernel_module_flavour: str | None = None  # open or proprietary, as /proc/driver/nvidia/version says
    # the SSH login and its privilege (absent from logs written before sudo existed)
    ssh_user: str | None = None
    uid: int | None = None
    sudo: str | None = None  # passwordless, password-required or absent
    #: per GPU, the settings compared after the reboot (:data:`cockpit.gpu.nodestate.GPU_SETTINGS`)
    gpus: list[dict[str, Any]] | None = None
    #: the fabric and its links before the change, compared after the reboot: each GPU's active
    #: NVLinks, whether every GPU's fabric state was Completed/Success, whether nvidia_peermem was loaded
    nvlink_active: list[int] | None = None
    fabric_completed: bool | None = None
    peermem_loaded: bool | None = None
    imex: str | None = None  # nvidia-imex's unit state before the change
    dcgm_version: str | None = None
    #: the runbook's own facts (``[facts.NAME]``): name -> value, a fact whose command failed left out
    facts: dict[str, str] | None = None


class StepStartedFacts(Facts):
    command: str | None = None  # as it will run (placeholders filled), redacted
    where: str | None = None  # node, control or local
    target: str | None = None  # the host it runs on, or "local"


class StepFinishedFacts(Facts):
    """A step's outcome (:meth:`cockpit.fleet.executor.StepOutcome.facts` plus the session's)."""

    # in the order the session writes them (the change log keeps that order)
    command: str | None = None
    where: str | None = None
    target: str | None = None
    exit_status: int | None = None
    ok: bool | None = None  # absent: ok when the exit status is 0
    duration_s: float | None = None
    stdout: str | None = None  # head and tail only when the rest went to an artifact
    stderr: str | None = None
    error: str | None = None
    # a reboot's round trip
    boot_id_before: str | None = None
    boot_id_after: str | None = None
    kernel_module_before: str | None = None
    kernel_module_after: str | None = None
    waited_s: float | None = None
    skipped: bool | None = None  # the step's ``when`` did not match
    error_kind: str | None = None
    stdout_artifact: str | None = None  # sha256 of the whole output
    artifact: str | None = None  # the first of the two artifacts
    stderr_artifact: str | None = None
    escalated: bool | None = None  # ran under sudo -n (absent: as the SSH user, or written before sudo existed)
    # a step an engine did (a backend step, or a reboot through the engine): which engine, what it
    # was asked, its last word on the node and its own handles (job ids, label values, node flags)
    backend: str | None = None
    action: str | None = None
    native_state: str | None = None
    observed_stage: str | None = None
    evidence: dict[str, str] | None = None


class NodeObservedFacts(Facts):
    """What an engine (:mod:`cockpit.fleet.backends`) saw of a node, when it changed: its own
    state word, that word in the cockpit's (:class:`cockpit.fleet.backends.base.ObservedStage`),
    the driver it reports, its reason text and its native evidence (label values, job ids)."""

    backend: str | None = None
    native_state: str | None = None
    stage: str | None = None
    driver_version: str | None = None
    reason: str | None = None
    evidence: dict[str, str] | None = None


class ItemVerifiedFacts(Facts):
    ok: bool | None = None
    evidence: str | None = None
    escalated: bool | None = None  # its command ran under sudo -n (only written when true)
    # a command item's run, as a step's (StepFinishedFacts): what ran, where, and what it said
    command: str | None = None  # placeholders filled, redacted
    where: str | None = None
    target: str | None = None
    exit_status: int | None = None
    duration_s: float | None = None
    stdout: str | None = None  # redacted; head and tail only when the rest went to an artifact
    stderr: str | None = None
    error: str | None = None
    error_kind: str | None = None
    stdout_artifact: str | None = None
    artifact: str | None = None
    stderr_artifact: str | None = None


def _as_list(value: object) -> object:
    # one blocker written as a bare string reads as a list of one
    return [value] if isinstance(value, str) else value


class OverrideFacts(Facts):
    blocked_by: list[str] | None = None  # the blockers the override bypassed

    _blocked_by = field_validator("blocked_by", mode="before")(_as_list)


class TriggersArmedFacts(Facts):
    triggers: list[str] | None = None  # ids; absent: every trigger of the runbook


class TriggerFiredFacts(Facts):
    evidence: str | None = None


class WaveStartedFacts(Facts):
    nodes: list[str] | None = None  # absent: the wave as planned
    #: a wave that runs itself: the node set the person typed to confirm its destructive steps
    confirmed: str | None = None
    #: a wave that runs itself: how many of its nodes at once (max_parallel, max_unavailable)
    parallel: int | None = None


class WaveEndedFacts(Facts):
    """A wave that ran itself ended: wave-done (every node through) or wave-halted (why)."""

    reason: str | None = None
    done: list[str] | None = None  # nodes through smoke and expand
    held: list[str] | None = None  # nodes stopped at a failure or waiting for a person
    not_started: list[str] | None = None
    actions: int | None = None  # actions the runner took through the gate


class PathChosenFacts(Facts):
    path: str | None = None
    rationale: str | None = None
    owner: str | None = None


class DecisionFacts(Facts):
    outcome: str | None = None
    answers: dict[str, str] | None = None
    halt_rollout: bool | None = None  # only written when true


class RollbackFinishedFacts(Facts):
    ok: bool | None = None
    blocked_by: list[str] | None = None  # why it did not hold

    _blocked_by = field_validator("blocked_by", mode="before")(_as_list)


class NotificationSentFacts(Facts):
    """What was sent to a webhook and how it went; never the URL (a secret)."""

    notice: str | None = None  # what it told: trigger-fired, signoff-waiting, step-failed, wave-done, ...
    subject: str | None = None  # which one (matched on restart, so nothing is sent twice)
    about_seq: int | None = None  # the event it told of
    sink: str | None = None  # the sink's name in the settings file
    format: str | None = None  # json, slack or teams
    status: str | None = None  # "HTTP 200", "timeout", "connection failed (...)"
    attempts: int | None = None
    ok: bool | None = None
    abandoned: bool | None = None  # only written when true: the cockpit stopped first (sent again on restart)


class WatchStartedFacts(Facts):
    """``cockpit watch`` took the window's triggers over after it closed (or resumed doing so)."""

    until: str | None = None  # ISO 8601 UTC: when the watch stops
    period_s: float | None = None  # between two probes of a node that answers
    nodes: list[str] | None = None  # the nodes it watches: those the window changed
    triggers: list[str] | None = None  # the automatic triggers it keeps armed
    resumed: bool | None = None  # only written when true: a restart took up a watch already started


class WatchFindingFacts(Facts):
    """A trigger that fired while the watch kept it armed, with its evidence."""

    evidence: str | None = None


class WatchEndedFacts(Facts):
    reason: str | None = None  # "its time ran out", "stopped by ..."
    findings: int | None = None
