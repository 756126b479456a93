"""Notification figures: what telling people costs the window while a webhook is slow.

Run: ``python benchmarks/notify_bench.py [--notices 500] [--delay 2]``. Prints figures; it
does not fail on speed. A local receiver on 127.0.0.1 answers every notice only after
``--delay`` seconds (a slow webhook); meanwhile the figures are: what ``Notifier.send``
costs the caller per notice, the event loop's worst lag while every delivery is in flight
(a step's output, the screen's frames and the probe rounds share that loop), and how long
the deliveries take to end once the receiver answers.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from webhook_server import Receiver, webhook_receiver

from cockpit.notify.bodies import Notice, NoticeKind
from cockpit.notify.delivery import MAX_IN_FLIGHT, Delivery, Notifier
from cockpit.notify.settings import Sink, WebhookSettings


async def lag_probe(stop: asyncio.Event, worst: list[float], tick: float = 0.005) -> None:
    """The loop's lateness: how much later than asked a short sleep wakes, worst seen."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(tick)
        worst[0] = max(worst[0], time.perf_counter() - t - tick)


def receiver_thread(delay: float) -> tuple[Receiver, threading.Event]:
    """The receiver on its own event loop in a thread: its work is not the cockpit's lag."""
    ready, stop = threading.Event(), threading.Event()
    box: list[Receiver] = []

    async def serve() -> None:
        async with webhook_receiver() as receiver:
            receiver.delay_s["/json"] = delay
            box.append(receiver)
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    threading.Thread(target=asyncio.run, args=(serve(),), daemon=True).start()
    ready.wait(10)
    return box[0], stop


async def run(notices: int, delay: float) -> None:
    receiver, stop_receiver = receiver_thread(delay)
    try:
        done: list[Delivery] = []
        sink = Sink(WebhookSettings(name="bench", timeout_s=delay * 4 + 10), receiver.url("/json"))
        notifier = Notifier([sink], done.append)
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
        stop_receiver.set()
    ok = sum(d.ok for d in done)
    print(f"send, per notice: {sent / notices * 1e6:.1f} us ({notices} notices, receiver answering after {delay:g} s)")
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
