"""Slurm's node records, read from ``sinfo --json`` or ``scontrol show node -o``, and their stage.

Pure: text in, values out. Two forms, because the installed Slurm decides which it offers:
``sinfo --json`` (Slurm 21.08 and later: the ``data_parser``/``openapi`` plugins, present in
Debian's 22.05.8 build; ``scontrol --json`` arrived only in 23.02, so 22.05 answers it
"unrecognized option '--json'") and the one-line-per-node text of ``scontrol show node -o``
(every version). Both come back as the same :class:`SlurmNode`; the tests hold both to
real captures from the same cluster (tests/fixtures/slurm/).

A node's state is a base state and flags: ``IDLE+DRAIN+REBOOT_REQUESTED`` in the text form,
``"state": "idle", "state_flags": ["DRAIN", "REBOOT_REQUESTED"]`` in JSON. Their meanings
are sinfo(1) "NODE STATE CODES" and scontrol(1) ``reboot`` / ``update State=``
(https://slurm.schedmd.com/sinfo.html, https://slurm.schedmd.com/scontrol.html; the man
pages of slurm-client 22.05.8 say the same). :func:`stage_of` maps them onto the cockpit's
:class:`ObservedStage`; a base state or flag it does not know is ``UNKNOWN``, never good.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict

from cockpit.fleet.backends.base import BackendError, ObservedStage


class SlurmParseError(BackendError, ValueError):
    """The text is not what the Slurm command prints: one line, for the operator."""


class SinfoJsonWithoutNodes(SlurmParseError):
    """``sinfo --json`` of Slurm 23.02 and later: the data_parser's ``{"sinfo": [...]}``, node
    and partition groups with no per-node record (``SINFO_DATA`` in
    src/plugins/data_parser/v0.0.4x/parsers.c); the node records are read as text then."""


class SlurmNode(BaseModel):
    """One node as slurmctld reports it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    state: str  # the base state, upper case as scontrol prints it: IDLE, MIXED, DOWN
    flags: tuple[str, ...] = ()  # DRAIN, REBOOT_ISSUED, NOT_RESPONDING ... in Slurm's order
    reason: str | None = None  # the Reason= text without scontrol's "[user@time]" suffix
    reason_by: str | None = None  # "root@2026-12-02T04:42:54" (text) or the user (JSON)
    #: as Slurm prints it: epoch seconds (JSON) or a local time (text); compared only within one form
    boot_time: str | None = None
    gres: str | None = None  # "gpu:8", "gpu:h100:8(S:0-1)"
    gres_used: str | None = None  # JSON only: "gpu:0"
    next_state: str | None = None  # after a reboot: RESUME, DOWN (text NextState=)
    features: tuple[str, ...] = ()  # AvailableFeatures: what jobs may ask for with --constraint
    active_features: tuple[str, ...] = ()  # ActiveFeatures

    @property
    def native(self) -> str:
        """The state as scontrol spells it: ``DOWN+DRAIN+REBOOT_ISSUED``."""
        return "+".join((self.state, *self.flags))

    @property
    def gpus(self) -> int | None:
        """How many GPUs the node's GRES declares, summed over types; None when it names none."""
        return gpu_count(self.gres)

    def has(self, flag: str) -> bool:
        return flag in self.flags

    @property
    def rebooting(self) -> bool:
        return self.has("REBOOT_REQUESTED") or self.has("REBOOT_ISSUED")

    @property
    def responding(self) -> bool:
        return not self.has("NOT_RESPONDING")


#: sinfo(1) "NODE STATE CODES": the base states (the rest are flags on one of these)
BASE_STATES = frozenset({"IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "FUTURE", "UNKNOWN"})
#: every flag Slurm prints: src/common/slurm_protocol_defs.c, node_state_flags[] (22.05's list,
#: with PERFCTRS, and today's BLOCKED and EXTERNAL), and the JSON's own names in the data_parser
#: (NODE_STATES in src/plugins/data_parser/v0.0.4x/parsers.c: UNDRAIN, POWER_DRAIN,
#: REBOOT_CANCELED). A flag outside it makes the node UNKNOWN, and the observation names it
#: (:func:`unknown_flags`), so it is reported as itself
KNOWN_FLAGS = frozenset({
    "BLOCKED", "CLOUD", "COMPLETING", "DRAIN", "DYNAMIC_FUTURE", "DYNAMIC_NORM", "EXTERNAL", "FAIL",
    "INVALID_REG", "MAINTENANCE", "NOT_RESPONDING", "PERFCTRS", "PLANNED", "POWER_DOWN", "POWER_DRAIN",
    "POWER_UP", "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "REBOOT_CANCELED", "REBOOT_ISSUED",
    "REBOOT_REQUESTED", "RESERVED", "RESUME", "UNDRAIN",
})  # fmt: skip
#: flags that leave a scheduling node scheduling: COMPLETING (a job's processes ending, sinfo(1)),
#: PLANNED (backfill holds it for a job), RESERVED (in an advance reservation), MAINTENANCE (in a
#: maintenance reservation: registered and up, running only the reservation's jobs; scontrol(1)
#: advises keeping rebooted nodes in one, and the real slurmctld shows such a node
#: IDLE+MAINTENANCE+RESERVED once it is back), BLOCKED (held by a job's exclusive topology),
#: PERFCTRS (22.05: the node's network performance counters are in use by a job)
_IN_SERVICE_FLAGS = frozenset({"COMPLETING", "PLANNED", "RESERVED", "MAINTENANCE", "BLOCKED", "PERFCTRS"})
_DRAIN_FLAGS = _IN_SERVICE_FLAGS | {"DRAIN"}
_BUSY = frozenset({"ALLOCATED", "MIXED"})


def unknown_flags(node: SlurmNode) -> list[str]:
    """The base state and flags of ``node`` that are not Slurm's (a newer Slurm's, a typo'd capture)."""
    return ([node.state] if node.state not in BASE_STATES else []) + [f for f in node.flags if f not in KNOWN_FLAGS]


def stage_of(node: SlurmNode) -> ObservedStage:
    """The cockpit's word for a node's Slurm state (sinfo(1), scontrol(1)); UNKNOWN when unsure."""
    flags = set(node.flags)
    if node.state not in BASE_STATES or not flags <= KNOWN_FLAGS:
        return ObservedStage.UNKNOWN
    if flags & {"REBOOT_REQUESTED", "REBOOT_ISSUED"}:
        # "A request to reboot this node has been made, but hasn't been handled yet" / "A reboot
        # request has been sent to the agent" (sinfo(1)): DOWN and NOT_RESPONDING are expected
        # while it is away; it is not back until slurmd registers and the flag is cleared.
        return ObservedStage.REBOOTING
    if "INVALID_REG" in flags or "FAIL" in flags or node.state == "ERROR":
        # INVAL: "did not register correctly ... less resources than configured" (a GPU missing
        # after a reboot is exactly this); FAIL: "expected to fail soon" per an administrator
        return ObservedStage.FAILED
    if node.state == "DOWN" or "NOT_RESPONDING" in flags:
        return ObservedStage.DOWN  # "unavailable for use"; "*": "presently not responding"
    if node.state in {"FUTURE", "UNKNOWN"}:
        return ObservedStage.UNKNOWN
    if "DRAIN" in flags:
        if not flags <= _DRAIN_FLAGS:
            return ObservedStage.UNKNOWN
        # DRAINING: "currently executing a job, but will not be allocated additional jobs";
        # DRAINED once "the last job on it completes" (sinfo(1)): IDLE+DRAIN, nothing completing
        if node.state in _BUSY or "COMPLETING" in flags:
            return ObservedStage.DRAINING
        return ObservedStage.DRAINED
    if flags <= _IN_SERVICE_FLAGS:
        return ObservedStage.IN_SERVICE  # IDLE, ALLOCATED or MIXED: scheduling work
    return ObservedStage.UNKNOWN  # powered down, cloud, external: not a state this change reads


_GPU_GRES = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(?P<count>\d+)")


def gpu_count(gres: str | None) -> int | None:
    """GPUs in a GRES string: ``gpu:8`` -> 8, ``gpu:a100:4(S:0),gpu:h100:2`` -> 6."""
    if not gres or gres in {"(null)", "N/A"}:
        return None
    counts = [int(m["count"]) for m in _GPU_GRES.finditer(gres)]
    return sum(counts) if counts else None


# -- sinfo --json --------------------------------------------------------------------------


def parse_sinfo_json(text: str) -> list[SlurmNode]:
    """``sinfo --json``: one :class:`SlurmNode` per entry of ``nodes`` (Slurm's own errors raised)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SlurmParseError(f"sinfo --json printed no JSON: {exc}") from exc
    if isinstance(doc, dict) and "nodes" not in doc and isinstance(doc.get("sinfo"), list):
        raise SinfoJsonWithoutNodes("sinfo --json prints node groups, not nodes (Slurm 23.02 or later)")
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise SlurmParseError("sinfo --json: no 'nodes' list in its output")
    errors = doc.get("errors") or []
    if errors:
        first = errors[0]
        said = first.get("error") or first.get("description") if isinstance(first, dict) else first
        raise SlurmParseError(f"sinfo --json reported an error: {said}")
    nodes = []
    for entry in doc["nodes"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise SlurmParseError("sinfo --json: a node without a name")
        state = entry.get("state")
        flags = entry.get("state_flags") or []
        if not isinstance(state, str) or not isinstance(flags, list):
            raise SlurmParseError(f"sinfo --json: node {entry['name']} has no state")
        boot = entry.get("boot_time")
        by = entry.get("reason_set_by_user")
        nodes.append(
            SlurmNode(
                name=entry["name"],
                state=state.upper(),
                flags=tuple(str(f).upper() for f in flags),
                reason=entry.get("reason") or None,
                reason_by=by if isinstance(by, str) and by else None,
                boot_time=str(boot) if isinstance(boot, int) and boot > 0 else None,
                gres=entry.get("gres") or None,
                gres_used=entry.get("gres_used") or None,
                next_state=_json_next_state(entry),
                features=_feature_list(entry.get("features")),
                active_features=_feature_list(entry.get("active_features")),
            )
        )
    return nodes


def _json_next_state(entry: dict[str, object]) -> str | None:
    # 22.05 prints "next_state_after_reboot": "unknown" with flags ["RESUME", "?"] after
    # ``nextstate=RESUME`` (captured), and "invalid" when no reboot is pending
    flags = entry.get("next_state_after_reboot_flags")
    if isinstance(flags, list) and "RESUME" in flags:
        return "RESUME"
    state = entry.get("next_state_after_reboot")
    if isinstance(state, str) and state.upper() not in {"INVALID", "UNKNOWN", ""}:
        return state.upper()
    return None


# -- scontrol show node -o -----------------------------------------------------------------

#: a field's key: a word before '='; values such as OS= hold spaces, CfgTRES= holds '='
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_REASON_SUFFIX = re.compile(r"\s*\[(?P<by>[^\[\]@\s]+@[^\[\]\s]+)\]\s*$")


def parse_scontrol_nodes(text: str) -> list[SlurmNode]:
    """``scontrol show node -o``: one line per node, ``Key=value`` fields (Reason= last)."""
    nodes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("No nodes in the system") or (line.startswith("Node ") and " not found" in line):
            continue
        fields = _fields(line)
        name = fields.get("NodeName")
        state = fields.get("State")
        if not name or not state:
            raise SlurmParseError(f"scontrol show node -o: not a node line: {line[:80]!r}")
        base, *flags = state.split("+")
        reason = fields.get("Reason")
        by = None
        if reason:
            suffix = _REASON_SUFFIX.search(reason)
            if suffix:
                by = suffix["by"]
                reason = reason[: suffix.start()]
        boot = fields.get("BootTime")
        gres = fields.get("Gres")
        nodes.append(
            SlurmNode(
                name=name,
                state=base.upper(),
                flags=tuple(f.upper() for f in flags),
                reason=reason or None,
                reason_by=by,
                boot_time=boot if boot and boot not in {"None", "Unknown"} else None,
                gres=gres if gres and gres != "(null)" else None,
                next_state=fields.get("NextState") or None,
                features=_feature_list(fields.get("AvailableFeatures")),
                active_features=_feature_list(fields.get("ActiveFeatures")),
            )
        )
    return nodes


def _feature_list(value: object) -> tuple[str, ...]:
    """``gpu,driver575`` (text, 22.05's JSON) or a list (the data_parser's JSON); ``(null)`` is none."""
    if isinstance(value, list):
        return tuple(str(v) for v in value if v)
    if not isinstance(value, str) or value in {"", "(null)"}:
        return ()
    return tuple(f for f in value.split(",") if f)


def _fields(line: str) -> dict[str, str]:
    """A node line's fields; ``Reason=`` runs to the end of the line (its text may hold anything)."""
    reason = None
    at = line.find(" Reason=")
    if at >= 0:
        reason = line[at + len(" Reason=") :].strip()
        line = line[:at]
    fields: dict[str, str] = {}
    key = None
    for word in line.split(" "):
        name, eq, value = word.partition("=")
        if eq and _KEY.fullmatch(name):
            key = name
            fields[key] = value
        elif key is not None:  # a value with spaces in it (OS=Linux 6.1.0 #1 SMP ...)
            fields[key] += " " + word
    fields = {k: v.strip() for k, v in fields.items()}
    if reason is not None:
        fields["Reason"] = reason
    return fields


# -- squeue --------------------------------------------------------------------------------


def parse_squeue_jobs(text: str) -> list[tuple[str, str]]:
    """``squeue -h -o %i|%T``: (job id, state) per line, as squeue(1) prints them."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        job, sep, state = line.strip().partition("|")
        if not sep or not job:
            raise SlurmParseError(f"squeue: not a 'job|state' line: {line[:80]!r}")
        jobs.append((job, state.split("|")[0]))
    return jobs


# -- what the preflight reads ----------------------------------------------------------------


def parse_show_config(text: str) -> dict[str, str]:
    """``scontrol show config``: ``Key = value`` lines (the header and the plugin sections skipped)."""
    config: dict[str, str] = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        key = key.strip()
        if eq and _KEY.fullmatch(key):
            config.setdefault(key, value.strip())
    return config


_SECONDS = re.compile(r"^(?P<n>\d+)\s*sec\b")


def config_seconds(value: str | None) -> int | None:
    """``60 sec`` -> 60; ``(null)``, ``INFINITE`` and anything else -> None."""
    match = _SECONDS.match(value or "")
    return int(match["n"]) if match else None


_TIME_LEFT = re.compile(r"^(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+)$")


def time_left_s(text: str) -> int | None:
    """squeue(1) ``%L``, "days-hours:minutes:seconds" (leading parts left out when zero), in
    seconds; None for ``UNLIMITED``, ``NOT_SET`` or anything else: a job with no end in sight."""
    match = _TIME_LEFT.match(text.strip())
    if not match:
        return None
    days, hours = int(match["d"] or 0), int(match["h"] or 0)
    return ((days * 24 + hours) * 60 + int(match["m"])) * 60 + int(match["s"])


_DRIVER_FEATURE = re.compile(r"^(?P<prefix>(?:nvidia|driver|nvidia[-_]?driver)[-_]?(?:r)?)(?P<branch>\d{3})$", re.I)


def driver_features(features: tuple[str, ...], target_branch: str) -> dict[str, str]:
    """The node features that name a driver branch other than ``target_branch`` (``driver575``,
    ``nvidia-r570``), each with its name for the target (``driver580``): jobs that ask for the
    old branch with ``--constraint`` would land on the upgraded node, and those asking for the
    new one would never find it."""
    renamed = {}
    for feature in features:
        match = _DRIVER_FEATURE.match(feature)
        if match and match["branch"] != target_branch:
            renamed[feature] = f"{match['prefix']}{target_branch}"
    return renamed
