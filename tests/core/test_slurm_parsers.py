"""Slurm's node records in both forms it prints, read from real captures (tests/fixtures/slurm/,
made by capture.py there against Debian's Slurm 22.05.8), and their mapping onto the cockpit's stages."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from cockpit.fleet.backends.base import BackendAction, BackendError, ObservedStage, ReleaseRequest
from cockpit.fleet.backends.slurm import SlurmBackend, clean_reason
from cockpit.fleet.backends.slurm_nodes import (
    SlurmNode,
    SlurmParseError,
    config_seconds,
    driver_features,
    gpu_count,
    parse_scontrol_nodes,
    parse_show_config,
    parse_sinfo_json,
    parse_squeue_jobs,
    stage_of,
    time_left_s,
)
from cockpit.fleet.results import CommandResult

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "22.05.8"
STEPS = sorted({p.name.split(".")[0] for p in CAPTURES.glob("*.scontrol.txt")})

#: what each capture step shows, node by node: (Slurm's state, the cockpit's stage)
EXPECTED = {
    "01-idle": {"gpu01": ("IDLE", "in-service"), "gpu02": ("IDLE", "in-service"), "gpu03": ("IDLE", "in-service")},
    "02-jobs-running": {"gpu01": ("MIXED", "in-service"), "gpu02": ("MIXED", "in-service")},
    "03-draining-and-reboot-requested": {
        "gpu01": ("MIXED+DRAIN", "draining"),
        "gpu02": ("MIXED+DRAIN+REBOOT_REQUESTED", "rebooting"),
    },
    "04-drained": {"gpu01": ("IDLE+DRAIN", "drained")},
    "05-reboot-issued": {
        "gpu02": ("DOWN+DRAIN+REBOOT_ISSUED", "rebooting"),
        "gpu03": ("DOWN+DRAIN+REBOOT_ISSUED", "rebooting"),
    },
    "06-back-after-reboot": {"gpu02": ("IDLE", "in-service"), "gpu03": ("DOWN+DRAIN+REBOOT_ISSUED", "rebooting")},
    "07-reboot-timed-out": {"gpu03": ("DOWN+NOT_RESPONDING", "down")},
    # just after ``state=resume`` slurmctld waits for the node to register again
    "08-resumed": {"gpu01": ("IDLE+NOT_RESPONDING", "down")},
    # nextstate=DOWN: back, and out of service until the cockpit's resume; a job on each other node
    "09-back-nextstate-down": {"gpu01": ("DOWN", "down"), "gpu02": ("MIXED", "in-service")},
    "09-back-nextstate-down-drained": {"gpu01": ("DOWN+DRAIN", "down")},
}


def test_every_capture_step_is_expected() -> None:
    assert sorted(EXPECTED) == STEPS


@pytest.mark.parametrize("step", STEPS)
def test_both_forms_agree_and_map_as_documented(step: str) -> None:
    text = parse_scontrol_nodes((CAPTURES / f"{step}.scontrol.txt").read_text())
    js = parse_sinfo_json((CAPTURES / f"{step}.sinfo.json").read_text())
    assert [n.name for n in text] == [n.name for n in js] == ["gpu01", "gpu02", "gpu03"]
    for a, b in zip(text, js, strict=True):
        assert (a.native, a.reason, a.gres, a.gpus) == (b.native, b.reason, b.gres, b.gpus)
        assert stage_of(a) is stage_of(b)
        assert (a.boot_time is None) == (b.boot_time is None)
    for name, (native, stage) in EXPECTED[step].items():
        node = next(n for n in text if n.name == name)
        assert (node.native, str(stage_of(node))) == (native, stage)


def test_reasons_boot_times_and_next_state() -> None:
    issued = {n.name: n for n in parse_scontrol_nodes((CAPTURES / "05-reboot-issued.scontrol.txt").read_text())}
    gpu02 = issued["gpu02"]
    assert gpu02.reason == "CHG-1 reboot : reboot issued"
    assert gpu02.reason_by == "root@2026-12-02T04:42:58"
    assert gpu02.boot_time == "2026-12-02T04:18:48" and gpu02.next_state == "RESUME"
    back = {n.name: n for n in parse_scontrol_nodes((CAPTURES / "06-back-after-reboot.scontrol.txt").read_text())}
    assert back["gpu02"].boot_time == "2026-12-02T04:43:00" and back["gpu02"].reason is None
    timed_out = {n.name: n for n in parse_sinfo_json((CAPTURES / "07-reboot-timed-out.sinfo.json").read_text())}
    assert timed_out["gpu03"].reason == "CHG-1 reboot : reboot issued : reboot timed out"
    assert timed_out["gpu03"].boot_time == "1796185128" and timed_out["gpu02"].boot_time == "1796186581"
    resumed = {n.name: n for n in parse_scontrol_nodes((CAPTURES / "08-resumed.scontrol.txt").read_text())}
    assert resumed["gpu01"].boot_time is None  # "BootTime=None" until it registers again


def test_squeue_jobs() -> None:
    lines = (CAPTURES / "02-jobs-running.squeue.txt").read_text()  # squeue -h -o %i|%T|%N
    assert parse_squeue_jobs(lines) == [("1", "RUNNING"), ("2", "RUNNING")]
    assert parse_squeue_jobs("") == []
    with pytest.raises(SlurmParseError):
        parse_squeue_jobs("JOBID PARTITION NAME\n")


def node(state: str, *flags: str) -> SlurmNode:
    return SlurmNode(name="n1", state=state, flags=flags)


@pytest.mark.parametrize(
    ("state", "flags", "stage"),
    [
        ("ALLOCATED", (), ObservedStage.IN_SERVICE),
        ("MIXED", ("COMPLETING",), ObservedStage.IN_SERVICE),
        ("IDLE", ("DRAIN", "COMPLETING"), ObservedStage.DRAINING),  # a job's processes still ending
        ("ALLOCATED", ("DRAIN",), ObservedStage.DRAINING),
        ("UNKNOWN", ("DRAIN", "INVALID_REG"), ObservedStage.FAILED),  # registered with fewer GPUs than configured
        ("IDLE", ("FAIL",), ObservedStage.FAILED),
        ("ERROR", (), ObservedStage.FAILED),
        ("DOWN", ("DRAIN",), ObservedStage.DOWN),
        ("IDLE", ("POWERED_DOWN",), ObservedStage.UNKNOWN),
        # in a maintenance reservation (as the real slurmctld shows a node rebooted inside one): up, back
        ("IDLE", ("MAINTENANCE", "RESERVED"), ObservedStage.IN_SERVICE),
        ("IDLE", ("DRAIN", "MAINTENANCE"), ObservedStage.DRAINED),
        ("ALLOCATED", ("BLOCKED",), ObservedStage.IN_SERVICE),  # Slurm 24's exclusive-topology hold
        ("IDLE", ("EXTERNAL",), ObservedStage.UNKNOWN),  # a flag this change does not read: known, not good
        ("FUTURE", (), ObservedStage.UNKNOWN),
        ("IDLE", ("SOMETHING_NEW",), ObservedStage.UNKNOWN),  # a flag this mapping does not know
        ("BLOSSOMING", (), ObservedStage.UNKNOWN),
    ],
)
def test_stage_mapping_beyond_the_captures(state: str, flags: tuple[str, ...], stage: ObservedStage) -> None:
    assert stage_of(node(state, *flags)) is stage


def test_unknown_is_never_good() -> None:
    good = {ObservedStage.IN_SERVICE, ObservedStage.DRAINED, ObservedStage.DONE}
    assert stage_of(node("IDLE", "CLOUD")) not in good


def test_gres_counts() -> None:
    assert gpu_count("gpu:8") == 8
    assert gpu_count("gpu:a100:4(S:0),gpu:h100:2(S:1)") == 6
    assert gpu_count("gpu:h100:8(S:0-1),nic:2") == 8
    assert gpu_count("(null)") is None and gpu_count(None) is None and gpu_count("nic:2") is None


@pytest.mark.parametrize(
    ("parse", "text", "match"),
    [
        (parse_sinfo_json, "sinfo: error: Unable to contact slurm controller", "no JSON"),
        (parse_sinfo_json, '{"meta": {}, "errors": []}', "no 'nodes' list"),
        (
            parse_sinfo_json,
            '{"errors": [{"error": "Unable to contact slurm controller"}], "nodes": []}',
            "reported an error: Unable to contact",
        ),
        (parse_scontrol_nodes, "PartitionName=gpu AllowGroups=ALL", "not a node line"),
    ],
)
def test_bad_outputs_are_one_line_errors(parse: Callable[[str], object], text: str, match: str) -> None:
    with pytest.raises(SlurmParseError, match=match):
        parse(text)


def test_a_node_not_found_is_no_nodes() -> None:
    assert parse_scontrol_nodes("Node nosuch not found\n") == []


def test_reason_is_tagged_one_printable_line() -> None:
    assert clean_reason("CHG-7\nr580  \x1b[31mupgrade") == "cockpit: CHG-7 r580 [31mupgrade"
    assert len(clean_reason("x" * 500)) == 200
    assert clean_reason('CHG-7 "quoted"') == "cockpit: CHG-7 'quoted'"  # scontrol would strip the double ones
    assert clean_reason("cockpit CHG-7: drain") == "cockpit CHG-7: drain"  # the executor's words, tagged already


class OldSlurm:
    """What a Slurm older than 21.08 answers (sinfo has no --json: the words 22.05's own
    scontrol prints for an option it lacks), and the real text capture otherwise."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def __call__(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        self.calls.append(list(argv))
        if "--json" in argv:
            said = f"{argv[0]}: unrecognized option '--json'\nTry \"{argv[0]} --help\" for more information\n"
            return CommandResult(host="local", command=" ".join(argv), exit_status=1, stderr=said)
        out = (CAPTURES / "04-drained.scontrol.txt").read_text()
        return CommandResult(host="local", command=" ".join(argv), exit_status=0, stdout=out)


#: the shape of ``sinfo --json`` from Slurm 23.02 on, written from the data_parser's SINFO_DATA
#: (src/plugins/data_parser/v0.0.40/parsers.c at slurm-23-11-1-1: "node/state" a flag list,
#: "nodes/nodes" the group's names): node and partition groups, no per-node record
SINFO_23_11 = {
    "sinfo": [
        {"node": {"state": ["IDLE", "DRAIN"]}, "nodes": {"nodes": ["gpu01"], "total": 1},
         "reason": {"description": "cockpit CHG-1: drain"}},
        {"node": {"state": ["IDLE"]}, "nodes": {"nodes": ["gpu03"], "total": 1}},
    ],
    "errors": [], "warnings": [],
}  # fmt: skip


class NewSlurm(OldSlurm):
    """Slurm 23.02 or later: sinfo answers --json, with groups instead of nodes."""

    async def __call__(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        if "--json" in argv:
            self.calls.append(list(argv))
            return CommandResult(host="local", command=" ".join(argv), exit_status=0, stdout=json.dumps(SINFO_23_11))
        return await super().__call__(argv, timeout=timeout)


@pytest.mark.parametrize("slurm_kind", ["before 21.08: no --json", "23.02 on: --json without node records"])
async def test_a_slurm_whose_json_has_no_node_records_is_read_in_text_once_detected(slurm_kind: str) -> None:
    runner = OldSlurm() if slurm_kind.startswith("before") else NewSlurm()
    slurm = SlurmBackend(runner)
    first = await slurm.observe(["gpu01", "gpu03"])
    assert [(o.node, o.stage) for o in first] == [("gpu01", ObservedStage.DRAINED), ("gpu03", ObservedStage.IN_SERVICE)]
    await slurm.observe(["gpu01"])
    assert runner.calls == [
        ["sinfo", "--json"],
        ["scontrol", "show", "node", "-o", "gpu01,gpu03"],
        ["scontrol", "show", "node", "-o", "gpu01"],
    ]


def test_a_word_slurm_does_not_print_is_named_in_the_observation() -> None:
    seen = SlurmBackend(OldSlurm()).observation(node("IDLE", "DRAIN", "SOMETHING_NEW"))
    assert seen.stage is ObservedStage.UNKNOWN and seen.evidence["not_slurms_known_states"] == "SOMETHING_NEW"
    known = SlurmBackend(OldSlurm()).observation(node("MIXED", "PERFCTRS"))
    assert known.stage is ObservedStage.IN_SERVICE and "not_slurms_known_states" not in known.evidence


async def test_json_asked_for_and_refused_is_an_error() -> None:
    with pytest.raises(BackendError, match="unrecognized option"):
        await SlurmBackend(OldSlurm(), form="json").observe(["gpu01"])


async def test_an_action_slurm_does_not_do_is_refused() -> None:
    [result] = await SlurmBackend(OldSlurm()).release(
        ReleaseRequest(BackendAction.UPGRADE, ("gpu01",), reason="x", timeout_s=1)
    )
    assert not result.ok and result.error == "slurm does not upgrade nodes"


@pytest.mark.parametrize("form", ["sinfo.json", "scontrol.txt"])
def test_a_node_back_from_nextstate_down_is_down_with_slurms_words_after_the_cockpits(form: str) -> None:
    """Captured: ``scontrol reboot ASAP nextstate=DOWN reason=...`` leaves the node DOWN with
    "reboot complete" appended to the cockpit's reason, DRAIN cleared; the cockpit's drain then
    makes it DOWN+DRAIN with its own reason. Both are DOWN: out of service."""
    parse = parse_sinfo_json if form == "sinfo.json" else parse_scontrol_nodes
    back = {n.name: n for n in parse((CAPTURES / f"09-back-nextstate-down.{form}").read_text())}["gpu01"]
    assert back.native == "DOWN" and stage_of(back) is ObservedStage.DOWN
    assert back.reason == "cockpit CHG-1: reboot : reboot issued : reboot complete"
    held = {n.name: n for n in parse((CAPTURES / f"09-back-nextstate-down-drained.{form}").read_text())}["gpu01"]
    assert held.native == "DOWN+DRAIN" and stage_of(held) is ObservedStage.DOWN
    assert held.reason == "cockpit CHG-1: reboot"


def test_what_the_preflight_reads_from_slurms_own_output() -> None:
    config = parse_show_config((CAPTURES / "config.txt").read_text())
    assert config_seconds(config["ResumeTimeout"]) == 60
    assert config["ReturnToService"] == "1" and config["RebootProgram"].endswith("/reboot-program")
    assert config_seconds("(null)") is None and config_seconds("INFINITE") is None
    jobs = parse_squeue_jobs((CAPTURES / "10-time-left.squeue.txt").read_text())
    assert [(job, time_left_s(left)) for job, left in jobs] == [("1", 299), ("2", None)]  # -t 5; UNLIMITED
    assert time_left_s("1-02:03:04") == 93784 and time_left_s("03:04") == 184 and time_left_s("NOT_SET") is None


def test_features_that_name_a_driver_branch() -> None:
    assert driver_features(("hgx", "driver575", "nvidia-r570", "nvidia_575"), "580") == {
        "driver575": "driver580", "nvidia-r570": "nvidia-r580", "nvidia_575": "nvidia_580",
    }  # fmt: skip
    assert driver_features(("driver580", "a100", "cuda12"), "580") == {}
