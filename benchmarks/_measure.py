"""What the UI benchmarks (``ui_bench``, ``bigfleet_bench``) measure the same way: the CPU the
main screen's own handlers spend, and a ``cockpit demo``'s start to its first frame in tmux.

Not a benchmark itself: the benchmarks import it as ``benchmarks._measure`` (the checkout on
``sys.path``, as they put it there to import the cockpit).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager


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
