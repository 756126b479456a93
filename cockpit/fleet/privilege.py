"""Privilege: how a ``sudo = true`` step runs on a login that is not root, and how sudo's
refusal reads.

A step that needs root runs as ``sudo -n -- sh -c COMMAND``: the filled command (its
placeholders already shell-quoted) is one argument of ``sh -c``, quoted once more as a
whole for sudo's argv, so redirections and ``&&`` inside it run as root too. sudo(8):
"-n, --non-interactive: Avoid prompting the user for input of any kind. If a password is
required for the command to run, sudo will display an error message and exit." That
message is "sudo: a password is required" (exit status 1); the cockpit turns it into a
refusal that says what to configure, and never retries, never asks for a password.

Whether the login is root is known from the node's baseline (``uid`` from ``id -u`` in the
record probe) or, before that, from the inventory or ssh_config naming ``root`` as the
user; otherwise the step escalates (sudo never asks root for a password: sudoers(5)).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from cockpit.fleet.results import CommandResult

#: what sudo -n prints when the command needs a password (sudo's own wording)
PASSWORD_REQUIRED = "sudo: a password is required"
#: the three answers of the record probe's ``sudo -n true``
SUDO_PASSWORDLESS = "passwordless"
SUDO_PASSWORD_REQUIRED = "password-required"
SUDO_ABSENT = "absent"
#: the shell's "no such command" for sudo itself (dash: "sh: 1: sudo: not found"; bash: "...: command not found")
_NO_SUDO = re.compile(r"(?m)(^|: )sudo: (command )?not found")


def escalate(command: str) -> str:
    """``command`` (already filled and safe) as root through ``sudo -n``, never prompting."""
    return shlex.join(["sudo", "-n", "--", "sh", "-c", command])


def login_is_root(node_facts: Mapping[str, object] | None, configured_user: str | None) -> bool:
    """Whether the SSH login runs as root: the recorded ``uid`` decides, else the configured user."""
    uid = (node_facts or {}).get("recorded_uid")
    if uid is not None and str(uid) != "":
        return str(uid) == "0"
    return configured_user == "root"


def login_name(node_facts: Mapping[str, object] | None, configured_user: str | None) -> str:
    """The SSH user as recorded (``id -un``) or configured, for the refusal's words."""
    user = (node_facts or {}).get("recorded_ssh_user") or configured_user
    return str(user) if user else "the SSH user"


def refusal(result: CommandResult, node: str, user: str) -> str | None:
    """Why an escalated command never ran, in words that say what to do; None when sudo let it run."""
    text = f"{result.stderr}\n{result.stdout}"
    if result.exit_status == 1 and PASSWORD_REQUIRED in text:
        return (
            f"sudo -n on {node} asks for a password: give {user} passwordless sudo for these commands "
            "(see docs/real-nodes.md), or connect as root"
        )
    if result.exit_status == 127 and _NO_SUDO.search(text):
        return (
            f"sudo is not installed on {node}: install it and give {user} passwordless sudo (see docs/real-nodes.md), "
            "or connect as root"
        )
    return None
