"""What the benchmarks measure the same way: the CPU the main screen's own handlers spend, a
``cockpit demo``'s start to its first frame in tmux (``ui_bench``, ``bigfleet_bench``), a
process's own peak RSS, and ``cockpit sim`` in its own process beside the measured one.

Not a benchmark itself: the benchmarks import it as ``benchmarks._measure`` (the checkout on
``sys.path``, as they put it there to import the cockpit).
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def peak_rss_mib() -> float:
    """This process's own peak resident set, MiB: Linux's ``VmHWM``. Not ``ru_maxrss``: it is
    kept across ``execve``, so a child forked from a large parent reports the parent's size
    (the 2,000-node client's figure read 352 MiB, its parent's after the key-latency part, where
    its own was 246)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # elsewhere: KiB on Linux, bytes on macOS


@contextmanager
def handler_cpu(cls: type, names: Iterable[str]) -> Iterator[list[float]]:
    """Time the methods ``names`` of ``cls``: the CPU seconds spent inside them add up in the
    one-element list yielded (set it to 0 to start counting); the methods are put back on exit."""
    spent = [0.0]
    originals = {n: getattr(cls, n) for n in names}

    def timed(fn: Callable[..., object]) -> Callable[..., object]:
        def wrapper(self: object, *a: object, **kw: object) -> object:
            t = time.process_time()
            try:
                return fn(self, *a, **kw)
            finally:
                spent[0] += time.process_time() - t

        return wrapper

    for n, fn in originals.items():
        setattr(cls, n, timed(fn))
    try:
        yield spent
    finally:
        for n, fn in originals.items():
            setattr(cls, n, fn)


def tmux_first_frame(
    cmd: str, shows: Iterable[str], *, sock: str, timeout_s: float, quit_wait_s: float
) -> float | None:
    """Seconds from starting ``cmd`` in a private tmux server (80x24) until its pane shows every
    one of ``shows``; None if it never did within ``timeout_s``. Then ``q``, ``quit_wait_s`` for
    the app to end, and the server killed."""
    wanted = tuple(shows)
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    started = time.monotonic()
    subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "24", "-s", "b", cmd], check=True)
    try:
        while time.monotonic() - started < timeout_s:
            out = subprocess.run([*tmux, "capture-pane", "-p", "-t", "b"], capture_output=True, text=True).stdout
            if all(w in out for w in wanted):
                return time.monotonic() - started
            time.sleep(0.02)
        return None
    finally:
        subprocess.run([*tmux, "send-keys", "-t", "b", "q"], capture_output=True)
        time.sleep(quit_wait_s)
        subprocess.run([*tmux, "kill-server"], capture_output=True)


async def cursor_presses(app: Any, presses: int, wall: list[float], cpu: list[float]) -> None:
    """Press down (up from the last row, down again from the first) ``presses`` times in the
    main screen's fleet table; each press is timed until the cursor moved and the node detail
    names the row's node. A table of one row has nowhere to go: nothing is pressed."""
    import asyncio

    from screens.widgets import FleetTable

    main = app.main
    fleet = main.query_one(FleetTable)
    facts = main.query_one("#node-facts")
    if fleet.row_count < 2:
        return
    down = True
    for _ in range(presses):
        if fleet.cursor_row >= fleet.row_count - 1:
            down = False
        elif fleet.cursor_row == 0:
            down = True
        before = fleet.cursor_row
        t, c = time.perf_counter(), time.process_time()
        app.simulate_key("down" if down else "up")
        while fleet.cursor_row == before or not str(facts.render()).startswith(str(main.selected_node())):
            await asyncio.sleep(0)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)


@contextmanager
def simulated_fleet(nodes: int, directory: Path, *, cwd: Path, speed: float | None = None) -> Iterator[Path]:
    """``cockpit sim --nodes N --dir directory`` in its own process, until every port listens
    (it prints "ready"); yields its ssh_config and stops it (SIGTERM, its own PID) at the end."""
    argv = [sys.executable, "-m", "cockpit", "sim", "--nodes", str(nodes), "--dir", str(directory)]
    if speed is not None:
        argv += ["--speed", str(speed)]
    sim = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert sim.stdout is not None and sim.stderr is not None
        if not any(line.startswith("ready") for line in sim.stdout):
            raise RuntimeError(f"cockpit sim did not start: {sim.stderr.read()[-2000:]}")
        yield directory / "ssh_config"
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=60)
