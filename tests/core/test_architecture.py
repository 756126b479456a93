"""The core stays UI-free: importing any ``cockpit`` module must not load Textual.

Run in a fresh interpreter per module so one module's imports cannot hide another's.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import cockpit

UI_ALLOWED = {"cockpit.cli", "cockpit.__main__"}


def core_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(cockpit.__path__, "cockpit.")]
    return sorted(n for n in names if n not in UI_ALLOWED and not n.startswith("cockpit.commands."))


def fresh_python(code: str) -> str:
    """What ``code`` prints in a new interpreter, stripped (nothing this process imported leaks in)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_core_modules_exist() -> None:
    assert "cockpit.runbook.model" in core_modules()


@pytest.mark.binary
def test_no_core_module_imports_textual() -> None:
    mods = core_modules()
    code = (
        "import importlib, sys\n"
        "bad = []\n"
        f"for name in {mods!r}:\n"
        "    before = set(sys.modules)\n"
        "    importlib.import_module(name)\n"
        "    if any(m == 'textual' or m.startswith('textual.') or m == 'screens' or m.startswith('screens.') for m in sys.modules):\n"
        "        bad.append(name); break\n"
        "print(','.join(bad))\n"
    )
    bad = fresh_python(code)
    assert bad == "", f"imports Textual or screens: {bad}"


def test_cli_commands_do_not_import_textual_at_parse_time() -> None:
    code = (
        "import sys\n"
        "from cockpit.cli import build_parser\n"
        "build_parser()\n"
        "print(any(m.startswith('textual') for m in sys.modules))\n"
    )
    assert fresh_python(code) == "False"


@pytest.mark.binary
def test_the_demo_paints_its_first_frame_without_asyncssh() -> None:
    """Everything up to the demo's first frame (its session header, with the fleet's ports)
    runs before asyncssh is imported (about 0.2 s of imports, paid after the frame shows)."""
    code = (
        "import asyncio, sys, tempfile\n"
        "from pathlib import Path\n"
        "import cockpit.commands.demo, screens.app\n"
        "from cockpit.session.demo import demo_session\n"
        "async def main():\n"
        "    with tempfile.TemporaryDirectory() as d:\n"
        "        async with demo_session(nodes=2, sessions_dir=Path(d)) as (session, fleet):\n"
        "            print(sorted(session.state.hosts), 'asyncssh' in sys.modules)\n"
        "asyncio.run(main())\n"
    )
    assert fresh_python(code) == "['gpu01', 'gpu02'] False"
