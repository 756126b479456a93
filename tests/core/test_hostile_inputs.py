"""Hostile input, refused at the edge (issue 12): each case is one clear line and exit 2
(or, for a runbook, the problems `cockpit check` lists and exit 1); none reaches a shell
or a traceback. Runs the real CLI entry point in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_paths import REPO

from cockpit.cli import main
from cockpit.runbook.placeholders import fill, validate_host_name
from cockpit.runbook.regexes import pattern_problem

MINIMAL_RUNBOOK = (REPO / "checklists" / "minimal-driver-upgrade.toml").read_text()

HOSTILE_HOSTS = [
    "[fe80::1%x -oProxyCommand=touch${IFS}/tmp/pwned]",
    "[fe80::1%eth0;reboot]",
    "[fe80::1%]",
    "[::1%$(id)]",
    "-oProxyCommand=sh",
    "gpu01;reboot",
    "gpu01 gpu02",
    "gpu01\nreboot",
    "gpu01\x1b]0;owned\x07",
    "`id`",
    "$(id)",
    "gpu01|sh",
    "gpu01&",
    "a" * 64 + ".example",
    "gpu..01",
    ".gpu01",
    "gpu01.",
    "-gpu01",
    "gpu_01",
    "999.1.1.1",
    "1.2.3",
    "[not-an-ipv6]",
    "gpu01\x00",
    "gpu01\u2028",
    "ｇｐｕ01",
]


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_hostile_host_names_are_refused(host: str) -> None:
    with pytest.raises(Exception) as info:
        validate_host_name(host)
    assert type(info.value).__name__ == "BadInput"
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("host", ["[fe80::1%eth0]", "[fe80::1%25]", "gpu01", "10.0.0.1", "[::1]", "gpu-01.dc1.example"])
def test_honest_host_names_pass(host: str) -> None:
    assert validate_host_name(host) == host


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(argv)
    err = capsys.readouterr().err
    return status, err


HOSTILE_CHANGE_IDS = [
    "CHG-1\n",
    "CHG-1\nX",
    "../etc/passwd",
    "CHG/1",
    "-CHG",
    ".hidden",
    "",
    "C" * 65,
    "CHG 1",
    "CHG\x1b[2J",
]


@pytest.mark.parametrize("change_id", HOSTILE_CHANGE_IDS)
def test_hostile_change_ids_are_refused_in_one_line(change_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = _cli(["run", "--change-id", change_id, "--hosts", "gpu01", "--dry-run"], capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


HOSTILE_NAMES = [
    "demo-reviewer",
    "Demo-Operator",
    "cockpit",
    "COCKPIT",
    "alice\nbob",
    "alice;reboot",
    "alice bob",
    "-alice",
    "al\x1b[2Jice",
    "a" * 65,
    "élodie",
    "\u0430lice",  # Cyrillic а: mixes scripts, and reads as alice
    "b\u03bfb",  # Greek ο
    "$(id)",
    "",
    "@",
]


HOSTILE_PARAMS = [
    "wave_size=1;reboot",
    "wave_size=-1",
    "wave_size=99999999999999999999999",
    "scheduler=kubernetes;id",
    "scheduler=",
    "driver_package=nvidia-driver-580\nreboot",
    "driver_package=\x1b]0;owned\x07",
    "no_such_parameter=1",
    "=1",
    "wave_size",
]


@pytest.mark.parametrize(
    ("flag", "value"), [*(("--operator", n) for n in HOSTILE_NAMES), *(("--param", p) for p in HOSTILE_PARAMS)]
)
def test_hostile_operator_names_and_parameter_values_are_refused_in_one_line(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = _cli(["run", "--change-id", "CHG-1", "--hosts", "gpu01", flag, value, "--dry-run"], capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


@pytest.mark.parametrize(
    "value", ["x';reboot;'", '"; reboot; "', "$(reboot)", "`reboot`", "a b", "-rf /", "\\", "'", "*", "~root"]
)
def test_a_filled_value_stays_one_inert_shell_word(value: str) -> None:
    import shlex

    command = fill("echo {v}", {"v": value})
    assert shlex.split(command) == ["echo", value]


def _runbook_with_command(command: str) -> str:
    """The shipped minimal runbook with its rollback's reinstall command replaced."""
    text = MINIMAL_RUNBOOK.replace(
        "run = \"find /var/cache/cockpit/{change_id} -maxdepth 1 -name '*.deb' | grep -q . && "
        "find /var/cache/cockpit/{change_id} -maxdepth 1 -name '*.deb' | xargs -r apt-get install -y --allow-downgrades\"",
        f"run = '''{command}'''",
    )
    assert text != MINIMAL_RUNBOOK
    return text


HOSTILE_RUNBOOK_COMMANDS = [
    ("sh -c 'echo {driver_package}'", "inside a single-quoted span"),
    ('python3 -c "print({driver_package})"', "inside a double-quoted span"),
    ('bash -c "apt-get install {driver_package}"', "inside a double-quoted span"),
    ("echo 'unclosed {driver_package}", "inside a single-quoted span"),
    ("echo 'unclosed", "never closed"),
    ("   ", "a blank command"),
    ("echo {nope}", "names no parameter"),
    ("echo {", "lone"),
    # issue 28: a placeholder in a here-document's body passed the check; `$(touch /tmp/pwned)` then ran
    ("cat <<EOF > /etc/modprobe.d/x.conf\noptions {driver_package}\nEOF", "inside the here-document"),
    ("cat <<'EOF'\n{driver_package}\nEOF", "inside the here-document"),
    ('cat <<-"END"\n\tinstall {driver_package}\n\tEND', "inside the here-document"),
    ("cat <<A <<B\nok\nA\n{driver_package}\nB", "inside the here-document"),
    ("tee /tmp/x <<EOF\n{driver_package}", "inside the here-document"),  # never ended: the rest is its body
]


def test_the_base_runbook_passes_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "honest.toml"
    path.write_text(_runbook_with_command("apt-get install -y {driver_package}"))
    assert _cli(["check", str(path)], capsys)[0] == 0


@pytest.mark.parametrize(("command", "said"), HOSTILE_RUNBOOK_COMMANDS)
def test_cockpit_check_refuses_commands_that_let_a_value_escape(
    command: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hostile.toml"
    path.write_text(_runbook_with_command(command))
    status = main(["check", str(path)])
    captured = capsys.readouterr()
    assert status == 2 and said in captured.out + captured.err and "Traceback" not in captured.err


def test_a_here_documents_body_runs_what_filling_quoted_so_check_refuses_it(tmp_path: Path) -> None:
    """Why the here-document rows above are refused: filled and run by a real shell, a value
    quoted as one shell word still runs inside an unquoted body (``'$(touch ...)'``: the
    single quotes are text there), while the same value as a word of the command does not."""
    import shutil
    import subprocess

    from cockpit.runbook.placeholders import fill

    sh = shutil.which("sh")
    assert sh is not None
    pwned = tmp_path / "pwned"
    value = f"$(touch {pwned})"
    in_body = fill("cat <<EOF\n{driver_package}\nEOF", {"driver_package": value})
    subprocess.run([sh, "-c", in_body], check=True, capture_output=True, cwd=tmp_path)
    assert pwned.exists(), "the shell did not run the value: the row above would test nothing"
    pwned.unlink()
    as_word = fill("printf '%s\\n' {driver_package}", {"driver_package": value})
    done = subprocess.run([sh, "-c", as_word], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert done.stdout == value + "\n" and not pwned.exists()
    # honest here-documents (no placeholder in a body) and here-strings stay allowed
    from cockpit.runbook.placeholders import quoting_problems

    assert quoting_problems("cat <<EOF > /etc/x\nplain\nEOF\napt-get install -y {driver_package}") == []
    assert quoting_problems("grep -q nvidia <<< {driver_package}") == []


HOSTILE_REGEXES = [
    (r"(a+)+$", "a quantifier inside a repeated group"),
    (r"(\s*x?)*$", "a quantifier inside a repeated group"),
    (r"(a|a)*b", "a repeated alternation whose branches match the same text"),
    (r"([a-z]+)*\.", "a quantifier inside a repeated group"),
    (r"(x{1,9}){1,99}y", "a quantifier inside a repeated group"),
    ("(" * 3, "not a valid regular expression"),
    ("x" * 1001, "longer than 1000 characters"),
    # issue 28: each passed `cockpit check` and ran on the event loop for tens of seconds
    (r"^(a|aa)+$", "a repeated alternation whose branches match the same text"),
    (r"^\s*\d+\s*\d+\s*\d+\s*\d+x$", "unbounded quantifiers in a row can take the same character"),
    (r"^(\w+|\d+)+$", "a quantifier inside a repeated group"),
    (r"^.*.*.*=x$", "3 unbounded quantifiers in a row"),
    (r"(a|)+b", "a repeated alternation whose branches match the same text"),
    (r"(\d)\1\s*\d+\s*\d+\s*\d+$", "3 unbounded quantifiers in a row"),  # judged even where RE2 cannot run it
]


@pytest.mark.parametrize(("pattern", "said"), HOSTILE_REGEXES)
def test_catastrophic_or_broken_regexes_are_refused(pattern: str, said: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and said in problem, problem


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?m)^ii\s", r"\A\s*\Z", r"--enable-prefix-caching", r"(?>a+)+", r"Gres=gpu:8", r"\S+\s+\S+\s+\S+",
        r"(\d+)\.(\d+)\.(\d+)", r"\A\S+ (\d+\.\d+\.\d+)\n\S+ \1\n\S+ \1\n?\Z",
    ],
)  # fmt: skip
def test_ordinary_regexes_pass(pattern: str) -> None:
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        (r"^(a|aa)+$", "a" * 100_000 + "b", None),  # Python's re: minutes; RE2: linear
        (r"^\s*\d+\s*\d+\s*\d+\s*\d+x$", "1" * 20_000 + "y", None),
        (r"^(\w+|\d+)+$", "a1" * 50_000 + "!", None),
        (r"(?m)^ii\s+(\S+)", "rc  x\nii  nvidia-driver-580  580.95\n", "nvidia-driver-580"),
        (r"\A\s*\Z", "  \n ", ""),  # Python's \Z, RE2's \z
    ],
)
def test_output_checks_run_in_linear_time_on_what_would_stall_a_backtracking_engine(
    pattern: str, text: str, found: str | None
) -> None:
    """Even a pattern `cockpit check` refuses runs without backtracking when the cockpit runs
    it (a runbook that skipped the check): the output check's engine is RE2."""
    from cockpit.runbook.regexes import runs_in_linear_time, search

    assert runs_in_linear_time(pattern)
    match = search(pattern, text)
    if found is None:
        assert match is None
    else:
        assert match is not None and (match.group(1) if match.groups() else match.group(0)).strip() == found


def test_a_fifo_as_runbook_is_refused_without_blocking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "runbook.toml"
    os.mkfifo(fifo)
    status, err = _cli(["check", str(fifo)], capsys)
    assert status == 2 and "not a regular file" in err


def test_deeply_nested_runbook_values_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    status, err = _cli(["check", str(path)], capsys)
    assert status == 2 and "nested too deeply" in err and "Traceback" not in err


def test_a_huge_runbook_is_refused_before_it_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "huge.toml"
    with path.open("wb") as f:
        f.truncate(5 * 1024 * 1024)  # sparse: no time spent writing it
    status, err = _cli(["check", str(path)], capsys)
    assert status == 2 and "more than" in err


#: `cockpit export --to jira`'s settings from the environment: (variable, value, words of the one line)
HOSTILE_TICKET_SETTINGS = [
    ("COCKPIT_JIRA_URL", "ftp://jira.example.com", "expected https://HOST"),
    ("COCKPIT_JIRA_URL", "http://jira.example.com", "plain http would send the credentials in clear"),
    ("COCKPIT_JIRA_URL", "https://user:pw@jira.example.com", "takes no query, fragment or credentials"),
    ("COCKPIT_JIRA_URL", "https://jira.example.com/?x=1", "takes no query, fragment or credentials"),
    ("COCKPIT_JIRA_PROJECT", 'OPS" OR project = "HR', "expected a project key"),
    ("COCKPIT_JIRA_PROJECT", "OPS\nX", "expected a project key"),
    ("COCKPIT_JIRA_ISSUE_TYPE", 'Task"', "expected an issue type's name"),
    ("COCKPIT_JIRA_TOKEN", "", "set COCKPIT_JIRA_TOKEN in the environment"),
]


@pytest.mark.parametrize(("name", "value", "words"), HOSTILE_TICKET_SETTINGS)
def test_hostile_ticket_settings_are_refused_in_one_line_before_any_request(
    name: str, value: str, words: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = {"COCKPIT_JIRA_URL": "https://jira.example.com", "COCKPIT_JIRA_USER": "ops@example.com",
                "COCKPIT_JIRA_TOKEN": "t", "COCKPIT_JIRA_PROJECT": "OPS"} | {name: value}  # fmt: skip
    for key, setting in settings.items():
        monkeypatch.setenv(key, setting)
    example = REPO / "sessions" / "examples" / "demo-gpu-missing.toml"
    assert main(["export", str(example), "--to", "jira"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--for", "72x"], "--for '72x': a duration such as 72h"),
        (["--for", "1h;reboot"], "a duration such as"),
        (["--for", "100d"], "--for '100d': between 60 s and"),
        (["--period", "1s"], "--period '1s': between 10 s and"),
        (["--max-backoff=-1h"], "a duration such as"),
        (["--settings", "/nonexistent/settings.toml"], "no such file"),
        (["--operator", "bob"], "belongs to operator alice, not bob"),
    ],
)
def test_watch_refuses_bad_flags_in_one_line(
    flags: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = _cli(["watch", str(_example_copy(tmp_path)), *flags], capsys)
    assert status == 2 and says in err and err.count("\n") == 1, err


def _example_copy(folder: Path) -> Path:
    """The example log (an ended window) and its runbook, copied: a watch that got past its
    refusals would write to it (and try to reach its nodes: the refusals come first)."""
    from repo_paths import EXAMPLE, with_example_runbook

    copy = folder / EXAMPLE.name
    copy.write_bytes(EXAMPLE.read_bytes())
    with_example_runbook(folder)
    return copy


def test_hostile_settings_files_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    EXAMPLE = _example_copy(tmp_path)
    fifo = tmp_path / "settings.toml"
    os.mkfifo(fifo)
    status, err = _cli(["watch", str(EXAMPLE), "--settings", str(fifo)], capsys)
    assert status == 2 and "not a regular file" in err
    bad = tmp_path / "bad.toml"
    for text, says in [
        ('[[notify.webhook]]\nname = "a b"\nurl_env = "X"\n', "a sink's name is letters"),
        ('[[notify.webhook]]\nname = "a"\nurl_env = "X;id"\n', "not an environment variable's name"),
        ('[[notify.webhook]]\nname = "a"\nformat = "irc"\n', "notify.webhook.0.format"),
        ("[notify\n", "not a TOML settings file"),
        ('[[notify.webhook]]\nname = "a"\n', "needs url_env or url_file"),
    ]:
        bad.write_text(text)
        status, err = _cli(["watch", str(EXAMPLE), "--settings", str(bad)], capsys)
        assert status == 2 and says in err and err.count("\n") == 1, (text, err)


# --- names: one cap across every input, counted before anything is expanded (issue 28) ------

#: (file name, its text, what the refusal says): each would make far more names than the cap
HOSTILE_INVENTORIES = [
    ("product.ini", "[gpu]\nn[0:9999]x[0:9999]\n", "is 100,000,000 names, larger than 10000"),
    ("product.yml", "all:\n  hosts:\n    'n[0:9999]x[0:9999]':\n", "is 100,000,000 names"),
    # (the same under a cap of 1,000: the cap counts INI groups the same way, and 100,000 names
    # checked first would cost this test seconds)
    ("lines.ini", "".join(f"[g{i}]\ns{i}-[0:599]\n" for i in range(2)), "1,200 names in all, more than the 1,000"),
    ("lines.txt", "".join(f"s{i}-[0-9999]\n" for i in range(11)), "110,000 names in all, more than the 100,000"),
    ("stray.ini", "[gpu]\nn[0:3]x[1-2]\n", "bad host range"),
    (
        "bomb.yml",
        "x: &a0 [y, y, y, y, y, y, y, y, y, y]\n"
        + "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
        + "all:\n  hosts:\n    gpu01:\n      cockpit_node_name: *a8\n",
        "more than 1,000,000 values once its aliases are expanded",
    ),
    ("loop.yml", "all:\n  hosts:\n    gpu01:\n      cockpit_node_name: &a [*a]\n", "values once its aliases"),
    ("list.yml", "all:\n  hosts:\n    gpu01:\n      cockpit_node_name: [a, b]\n", "must be one value, not a list"),
    ("deep.yml", "all: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
]


@pytest.mark.parametrize(("name", "text", "said"), HOSTILE_INVENTORIES, ids=[h[0] for h in HOSTILE_INVENTORIES])
def test_inventories_that_expand_past_the_cap_are_refused_before_expanding(
    name: str, text: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if "the 1,000" in said:
        monkeypatch.setenv("COCKPIT_MAX_NAMES", "1000")
    (tmp_path / name).write_text(text)
    status, err = _cli(["probe", f"@{tmp_path / name}"], capsys)
    assert status == 2 and said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_fifty_node_sets_on_hosts_share_one_cap(capsys: pytest.CaptureFixture[str]) -> None:
    spec = ",".join(f"s{i}-[0-9999]" for i in range(50))
    status, err = _cli(["probe", spec], capsys)
    assert status == 2 and "more than the 100,000 the cockpit takes across its inputs" in err, err
    assert len(err.strip().splitlines()) == 1


def test_the_cap_is_settable_and_its_setting_checked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cockpit.fleet.inventory import parse_host_spec

    monkeypatch.setenv("COCKPIT_MAX_NAMES", "5")
    assert len(parse_host_spec("gpu[1-3],gpu[4-5]")) == 5
    status, err = _cli(["probe", "gpu[1-3],gpu[4-6]"], capsys)
    assert status == 2 and "6 names in all, more than the 5" in err, err
    monkeypatch.setenv("COCKPIT_MAX_NAMES", "lots")
    status, err = _cli(["probe", "gpu01"], capsys)
    assert status == 2 and "COCKPIT_MAX_NAMES='lots': expected a whole number" in err, err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (".".join(["a"] * 20_000) + " = 1\n", "line 1: a dotted key of more than 32 parts"),
        ("x = 1\n[" + ".".join(['"a"'] * 20_000) + "]\n", "line 2: a dotted key of more than 32 parts"),
        ("x = {" + " . ".join(["'a'"] * 5_000) + " = 1}\n", "a dotted key of more than 32 parts"),
        # arrays 40 deep: tomllib reads them; the runbook's own walk refuses them, never recursing
        ("w = " + "[" * 40 + "1" + "]" * 40 + "\n", "keys nested more than 32 deep"),
    ],
    ids=["bare", "quoted header", "inline table", "nested arrays"],
)
def test_deep_dotted_keys_are_refused_without_recursion(
    text: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(text)
    status, err = _cli(["check", str(path)], capsys)
    assert status == 2 and said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_what_re2_has_no_syntax_for_still_matches_as_python_reads_it() -> None:
    """The shipped lockstep check needs a backreference: RE2 cannot run it, Python's re does
    (after `cockpit check` judged it), with the same answers as before."""
    from cockpit.runbook.regexes import runs_in_linear_time, search

    lockstep = r"\A\S+ (\d+\.\d+\.\d+)\n\S+ \1\n\S+ \1\n?\Z"
    assert not runs_in_linear_time(lockstep)
    assert search(lockstep, "nvidia-driver 580.95.05\nfm 580.95.05\nnscq 580.95.05\n") is not None
    assert search(lockstep, "nvidia-driver 580.95.05\nfm 580.82.07\nnscq 580.95.05\n") is None


def test_an_ipv6_literal_folds_whole_and_probe_reports_it(capsys: pytest.CaptureFixture[str]) -> None:
    """`cockpit probe '[::1]'` probed, then exited 2 folding its own report ("cannot fold
    '[::1]'"); the literal is now kept whole, and dialled without its brackets."""
    from cockpit.fleet.inventory import parse_host_spec
    from cockpit.fleet.nodeset import fold_nodeset
    from cockpit.fleet.transport import dial_name

    folded = fold_nodeset(["gpu01", "gpu02", "[::1]", "[fe80::1%eth0]"])
    assert folded == "gpu[01-02],[::1],[fe80::1%eth0]"
    assert dial_name("[::1]") == "::1" and dial_name("gpu01") == "gpu01"
    status = main(["probe", "[::1]", "--timeout", "10"])
    out = capsys.readouterr()
    assert status != 2 and "cannot fold" not in out.err and "[::1]" in out.out, (status, out.err)
    assert "Traceback" not in out.err
    assert [t.name for t in parse_host_spec("gpu[01-02],[::1]")] == ["gpu01", "gpu02", "[::1]"]


def test_inventory_and_hosts_share_one_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cockpit run --inventory FILE --hosts ...`: the inventory's names and the --hosts sets
    count against one cap (here 1,000): 600 in the file and 600 more named are refused."""
    monkeypatch.setenv("COCKPIT_MAX_NAMES", "1000")
    inventory = tmp_path / "site.ini"
    inventory.write_text("[gpu]\nn[000:599]\n")
    argv = ["run", "--change-id", "CHG-CAP", "--inventory", str(inventory), "--dry-run"]
    status, err = _cli([*argv, "--hosts", "gpu,m[000-599]"], capsys)
    assert status == 2 and "1,201 names in all, more than the 1,000" in err, err
