"""mkdocs hooks (``mkdocs.yml``): pages that are not written in ``docs/``.

ARCHITECTURE.md, CONTRIBUTING.md and CHANGELOG.md stay at the repository's root, where a
reader of the repository looks first, and are published as they are; the runbook reference
is written from the runbook model at build time (``cockpit.runbook.reference``), so it
cannot fall behind what the loader accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from cockpit.runbook.reference import reference_markdown, undocumented

ROOT = Path(__file__).resolve().parent.parent
FROM_ROOT = {"architecture.md": "ARCHITECTURE.md", "contributing.md": "CONTRIBUTING.md", "changelog.md": "CHANGELOG.md"}


def on_files(files: Files, config: Any) -> Files:
    gaps = undocumented()
    if gaps:
        raise SystemExit(f"runbook keys with no comment in cockpit/runbook/model.py: {', '.join(gaps)}")
    for page, source in FROM_ROOT.items():
        # a root file links the manual as docs/PAGE.md (right on GitHub); published beside
        # those pages, the link is PAGE.md
        text = (ROOT / source).read_text().replace("](docs/", "](")
        files.append(File.generated(config, page, content=text))
    files.append(File.generated(config, "runbook-reference.md", content=reference_markdown()))
    return files
