"""Notification figures: what telling people costs the window while a webhook is slow.

Run: ``python benchmarks/notify_bench.py [--notices 500] [--delay 2]``. Prints figures; it
does not fail on speed. A local receiver on 127.0.0.1, in a process of its own, answers
every notice only after ``--delay`` seconds (a slow webhook); meanwhile the figures are: what ``Notifier.send``
costs the caller per notice, the event loop's worst lag while every delivery is in flight
(a step's output, the screen's frames and the probe rounds share that loop), and how long
the deliveries take to end once the receiver answers.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from cockpit.notify.bodies import Notice, NoticeKind
from cockpit.notify.delivery import MAX_IN_FLIGHT, Delivery, Notifier
from cockpit.notify.settings import Sink, WebhookSettings


async def lag_probe(stop: asyncio.Event, worst: list[float], tick: float = 0.005) -> None:
    """The loop's lateness: how much later than asked a short sleep wakes, worst seen."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(tick)
        worst[0] = max(worst[0], time.perf_counter() - t - tick)


RECEIVER = """
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from webhook_server import webhook_receiver

async def main():
    async with webhook_receiver() as receiver:
        receiver.delay_s["/json"] = float(sys.argv[1])
        print(receiver.url("/json"), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the bench closes it

asyncio.run(main())
"""


def receiver_process(delay: float) -> tuple[str, subprocess.Popen[str]]:
    """The receiver in a process of its own: its work is neither the cockpit's lag nor its GIL."""
    tests = str(Path(__file__).resolve().parents[1] / "tests")
    proc = subprocess.Popen(
        [sys.executable, "-c", RECEIVER, str(delay), tests], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc.stdout.readline().strip(), proc


async def run(notices: int, delay: float) -> None:
    url, receiver = receiver_process(delay)
    try:
        done: list[Delivery] = []
        sink = Sink(WebhookSettings(name="bench", timeout_s=delay * 4 + 10), url)
        notifier = Notifier([sink], done.append)
        # the loop's lag with nothing in flight, for the same time: this machine's own noise
        idle_stop, idle = asyncio.Event(), [0.0]
        idle_ticker = asyncio.create_task(lag_probe(idle_stop, idle))
        await asyncio.sleep(delay)
        idle_stop.set()
        await idle_ticker
        stop, worst = asyncio.Event(), [0.0]
        ticker = asyncio.create_task(lag_probe(stop, worst))
        await asyncio.sleep(0.1)
        at = datetime.now(UTC)
        started = time.perf_counter()
        for i in range(notices):
            notifier.send(
                Notice(NoticeKind.STEP_FAILED, "CHG-BENCH", f"step-failed:{i}", f"step {i} failed", "exit 1", at, seq=i)
            )
        sent = time.perf_counter() - started
        await notifier.close(timeout=delay * (notices / MAX_IN_FLIGHT + 4) + 30)
        all_done = time.perf_counter() - started
        stop.set()
        await ticker
    finally:
        assert receiver.stdin is not None
        receiver.stdin.close()
        receiver.wait(10)
    ok = sum(d.ok for d in done)
    print(f"send, per notice: {sent / notices * 1e6:.1f} us ({notices} notices, receiver answering after {delay:g} s)")
    print(f"event loop worst lag, nothing in flight: {idle[0] * 1e3:.1f} ms")
    print(f"event loop worst lag while {notices} deliveries in flight: {worst[0] * 1e3:.1f} ms")
    print(f"all {notices} deliveries ended after: {all_done:.2f} s ({ok} ok)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notices", type=int, default=500)
    ap.add_argument("--delay", type=float, default=2.0, help="the receiver's answer time, seconds")
    args = ap.parse_args()
    asyncio.run(run(args.notices, args.delay))


if __name__ == "__main__":
    main()
