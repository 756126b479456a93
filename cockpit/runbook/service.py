"""Which runbook steps take a node out of service (or return it): the ones a person confirms
by typing the node's name as a "Service change", though the runbook does not mark them
destructive.

A node-stage command run on the control host acts on the node's scheduling (cordon, drain,
uncordon, ``scontrol update``) unless it only reads. The rule is deny-by-default: a
control-host command counts as a service change unless *every* command in it is a known
read-only form (:func:`reads_only`), so a verb nobody listed, a command substitution, a
redirection into a file or a second command after ``&&`` is confirmed, never let through.
A node-side command step is confirmed when it plainly stops the node (a reboot or power-off,
:func:`stops_node`); a reboot step of the runbook is its own kind and confirmed as
destructive. The runbook's ``read_only`` flag is not trusted for this: it is the command
that decides, so a runbook marking ``kubectl drain`` read-only still asks.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence

from cockpit.runbook.model import Runbook, StepKind, Where

__all__ = ["changes_service", "reads_only", "stops_node"]

ROLLBACK_STAGE = "rollback"

#: kubectl verbs that only read the cluster (kubectl(1)); ``auth`` only as ``auth can-i``.
KUBECTL_READ_VERBS: frozenset[str] = frozenset(
    {"get", "describe", "logs", "top", "version", "api-resources", "api-versions", "explain", "cluster-info"}
)
#: kubectl's global flags that take their value as the next word (``-n ns``): skipped before
#: the verb. Any other flag before the verb makes the command unknown, hence not read-only: a
#: flag taking a value we do not know of would make us read its value as the verb.
KUBECTL_VALUE_FLAGS: frozenset[str] = frozenset(
    {"-n", "--namespace", "--context", "--kubeconfig", "--cluster", "--user", "-s", "--server", "--request-timeout"}
)
KUBECTL_BARE_FLAGS: frozenset[str] = frozenset({"-A", "--all-namespaces", "--insecure-skip-tls-verify"})
#: Slurm's commands that only report (sinfo(1), squeue(1), sacct(1), sshare(1), sprio(1), sdiag(1)).
SLURM_READERS: frozenset[str] = frozenset({"sinfo", "squeue", "sacct", "sshare", "sprio", "sdiag"})
#: scontrol's flags before its command word (scontrol(1)); ``show`` is the only read-only command.
SCONTROL_BARE_FLAGS: frozenset[str] = frozenset({"-o", "--oneliner", "-d", "--details", "-a", "--all", "-Q", "--quiet"})
#: Filters a read-only command may pipe into: they read stdin and write stdout, nothing else.
FILTERS: frozenset[str] = frozenset(
    {"cat", "echo", "grep", "egrep", "fgrep", "head", "tail", "jq", "wc", "sort", "uniq", "cut", "tr", "true"}
)
#: The words that separate one shell command from the next (``|`` pipes into a filter).
SEPARATORS: frozenset[str] = frozenset({"|", "||", "&&", ";", "&", "\n"})
#: Shell forms whose effect cannot be read from the words: command substitution, process
#: substitution, a subshell, a here-document. Any of them: not read-only.
OPAQUE = re.compile(r"\$\(|`|<\(|>\(|<<")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

#: Commands that stop the node they run on (reboot(8), shutdown(8), systemctl(1)'s power verbs).
STOPPERS: frozenset[str] = frozenset({"reboot", "shutdown", "poweroff", "halt", "kexec"})
SYSTEMCTL_STOP_VERBS: frozenset[str] = frozenset(
    {"reboot", "poweroff", "halt", "kexec", "soft-reboot", "rescue", "emergency", "isolate"}
)
#: systemd's special targets that stop the machine when started (systemd.special(7)).
STOP_TARGETS: frozenset[str] = frozenset(
    {"reboot.target", "poweroff.target", "halt.target", "kexec.target", "rescue.target", "emergency.target"}
)
#: The kernel's magic SysRq: "echo b > /proc/sysrq-trigger" reboots at once (sysrq.rst).
SYSRQ = re.compile(r"/proc/sysrq-trigger")


def _commands(command: str) -> Iterator[list[str]] | None:
    """The simple commands of a command line, as words; None where the words cannot be read
    (unbalanced quotes, a comment, a redirection other than to /dev/null or of one descriptor
    onto another)."""
    text = command.replace("\\\n", " ")
    try:
        lexer = shlex.shlex(text.replace("\n", " ; "), posix=True, punctuation_chars=True)
        lexer.commenters = ""  # a '#' word is refused below, not silently dropped
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return None
    out: list[list[str]] = [[]]
    i = 0
    while i < len(words):
        word = words[i]
        if word in SEPARATORS:
            out.append([])
        elif word.startswith("#") or word in ("(", ")"):
            return None
        elif set(word) <= set("<>&"):  # a redirection: only away to /dev/null, or 2>&1
            target = words[i + 1] if i + 1 < len(words) else ""
            if not (word in (">", ">>") and target == "/dev/null") and not (word == ">&" and target.isdigit()):
                return None
            if out[-1] and out[-1][-1].isdigit():
                out[-1].pop()  # the descriptor of "2>/dev/null", not an argument
            i += 1
        else:
            out[-1].append(word)
        i += 1
    return iter([c for c in out if c])


def _strip_assignments(words: Sequence[str]) -> Sequence[str]:
    i = 0
    while i < len(words) and ASSIGNMENT.match(words[i]):
        i += 1  # KUBECONFIG=/etc/kubernetes/admin.conf kubectl get ...: the environment, not the command
    return words[i:]


def _kubectl_reads(args: Sequence[str]) -> bool:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        flag = args[i]
        if flag in KUBECTL_VALUE_FLAGS:
            i += 2
        elif flag in KUBECTL_BARE_FLAGS or (flag.split("=", 1)[0] in KUBECTL_VALUE_FLAGS and "=" in flag):
            i += 1
        else:
            return False
    if i >= len(args):
        return False
    verb, rest = args[i], args[i + 1 :]
    if verb == "auth":
        return bool(rest) and rest[0] == "can-i"
    if verb == "cluster-info":
        return "dump" not in rest  # dump can write a directory of files
    return verb in KUBECTL_READ_VERBS


def _scontrol_reads(args: Sequence[str]) -> bool:
    i = 0
    while i < len(args) and args[i] in SCONTROL_BARE_FLAGS:
        i += 1
    return i < len(args) and args[i] in ("show", "-V", "--version")


def _reads(words: Sequence[str]) -> bool:
    words = _strip_assignments(words)
    if not words:
        return False
    program, args = words[0].rsplit("/", 1)[-1], words[1:]
    if program == "kubectl":
        return _kubectl_reads(args)
    if program == "scontrol":
        return _scontrol_reads(args)
    return program in SLURM_READERS or program in FILTERS


def reads_only(command: str) -> bool:
    """Whether every command of ``command`` (a step's ``run`` template, placeholders and all)
    is a known read-only form: ``kubectl get|describe|logs|top|version|api-resources|explain|
    auth can-i``, ``scontrol show``, ``sinfo``, ``squeue``, ``sacct``..., piped into filters
    such as ``grep`` or ``jq``. Anything else, or anything not read with certainty: False."""
    if OPAQUE.search(command):
        return False
    commands = _commands(command)
    if commands is None:
        return False
    listed = list(commands)
    return bool(listed) and all(_reads(words) for words in listed)


def stops_node(command: str) -> bool:
    """Whether ``command`` plainly reboots or powers off the machine it runs on."""
    if SYSRQ.search(command):
        return True
    commands = _commands(command)
    if commands is None:  # not read with certainty: look at the bare words
        commands = iter([command.split()])
    for words in commands:
        words = list(_strip_assignments(words))
        while words and words[0].rsplit("/", 1)[-1] in ("sudo", "nohup", "exec", "command"):
            words = [w for w in words[1:] if not w.startswith("-")]  # sudo -n reboot is a reboot
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program in STOPPERS or (program.startswith("init") and words[1:2] in (["0"], ["6"])):
            return True
        if program == "systemctl" and any(w in SYSTEMCTL_STOP_VERBS or w in STOP_TARGETS for w in words[1:]):
            return True
    return False


def changes_service(runbook: Runbook, stage: str, step: str, node: str | None) -> bool:
    """Whether running ``stage/step`` on ``node`` takes the node out of service or returns it,
    so a person confirms it by typing the node's name (its gate rules stay as the runbook wrote
    them). A window step or a rollback step: no (the rollback has its own dialog)."""
    if node is None or stage == ROLLBACK_STAGE:
        return False
    found = next((s for s in runbook.node_stages if s.id == stage), None)
    command = None if found is None else next((s for s in found.steps if s.id == step), None)
    if command is None or command.kind is not StepKind.COMMAND:
        return False
    run = command.run or ""
    if command.where is Where.CONTROL:
        return not reads_only(run)
    return stops_node(run)
