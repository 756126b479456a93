"""Commit subjects of at most 72 characters (CONTRIBUTING.md, "Commits"), checked by CI.

Only commits after ``SINCE`` are held to it: the rule was written there, and history is not
rewritten to follow it. Exit 1 naming each subject that is too long.
"""

from __future__ import annotations

import subprocess
import sys

#: the commit after which the rule holds
SINCE = "c36f25cfffc187060552ae9580c0144097c86403"
LIMIT = 72


def main() -> int:
    listed = subprocess.run(
        ["git", "log", "--format=%h %s", f"{SINCE}..HEAD"], capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        print(f"commit subjects: git log failed: {listed.stderr.strip()}", file=sys.stderr)
        return 1
    long = [line for line in listed.stdout.splitlines() if len(line.split(" ", 1)[1]) > LIMIT]
    for line in long:
        print(f"commit subject over {LIMIT} characters: {line}", file=sys.stderr)
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
