"""What the benchmarks measure the same way: the CPU the main screen's own handlers spend, a
``cockpit demo``'s start to its first frame in tmux (``ui_bench``, ``bigfleet_bench``), and a
process's own peak RSS.

Not a benchmark itself: the benchmarks import it as ``benchmarks._measure`` (the checkout on
``sys.path``, as they put it there to import the cockpit).
"""

from __future__ import annotations

import resource
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


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
