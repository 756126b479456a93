"""Bookkeeping in turns (cockpit.session.pacing): past a slice of work in one pass of the
event loop, the rest waits for later passes, one piece per pass, first come first served,
so what else is ready (a key's handler) runs between two pieces. Real asyncio loop, real
CPU work (busy waits), no mocks."""

from __future__ import annotations

import asyncio
import time

from cockpit.session.pacing import Pacer


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def test_a_burst_of_pieces_leaves_room_for_a_key_between_them() -> None:
    pacer = Pacer(slice_s=0.004)
    done: list[int] = []

    async def piece(i: int) -> None:
        await pacer.turn()
        _busy(0.005)  # one piece of bookkeeping, longer than the slice
        done.append(i)

    async def key() -> float:
        # what a key press is: a callback ready behind the burst; how long until it runs
        t = time.perf_counter()
        await asyncio.sleep(0)
        return time.perf_counter() - t

    pieces = [asyncio.create_task(piece(i)) for i in range(40)]
    await asyncio.sleep(0)  # every piece is ready in the same pass
    waited = await key()
    await asyncio.gather(*pieces)
    assert done == list(range(40))  # first come, first served
    # without turns the key waited behind all 40 (~200 ms); with them, behind about one
    assert waited < 0.05, f"the key waited {waited * 1000:.0f} ms"
    assert pacer.queued >= 30


async def test_turns_while_no_one_waits_are_given_at_once() -> None:
    pacer = Pacer(slice_s=1.0)
    for _ in range(20):
        await pacer.turn()
    assert pacer.queued == 0


async def test_a_task_cancelled_while_it_waits_does_not_stop_the_queue() -> None:
    pacer = Pacer(slice_s=0.0)
    order: list[str] = []

    async def piece(name: str) -> None:
        await pacer.turn()
        order.append(name)

    first = asyncio.create_task(piece("first"))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(piece(n)) for n in ("a", "b", "c")]
    await asyncio.sleep(0)
    waiting[1].cancel()
    await asyncio.gather(first, *waiting, return_exceptions=True)
    assert order == ["first", "a", "c"]


async def test_a_cancel_while_waiting_to_record_a_known_outcome_is_held() -> None:
    pacer = Pacer(slice_s=0.0)
    recorded: list[str] = []

    async def finish() -> None:
        late = await pacer.turn_to_record()
        recorded.append("outcome")  # what is known is recorded first
        if late:
            raise asyncio.CancelledError

    async def first() -> None:
        await pacer.turn()  # the slice of this pass used up: finish(), in the same pass, waits

    before = asyncio.create_task(first())
    task = asyncio.create_task(finish())
    await asyncio.sleep(0)
    assert pacer.queued == 1
    task.cancel()
    await before
    result = await asyncio.gather(task, return_exceptions=True)
    assert recorded == ["outcome"]
    assert isinstance(result[0], asyncio.CancelledError)


def test_a_pacer_used_again_from_another_loop_starts_afresh() -> None:
    pacer = Pacer(slice_s=0.0)

    async def twice() -> None:
        await pacer.turn()
        await pacer.turn()

    asyncio.run(twice())
    asyncio.run(asyncio.wait_for(twice(), timeout=5))  # no waiter left from the first loop
