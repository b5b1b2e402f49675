"""The in-process SQLite write gate: one holder, handed over in order, urgent first (#11)."""

from __future__ import annotations

import asyncio

import pytest

from engram.storage.write_gate import WriteGate, WriteGateTimeoutError

pytestmark = pytest.mark.unit


async def _queue(gate: WriteGate, order: list[str], name: str, *, urgent: bool = False) -> None:
    async with gate.held(urgent=urgent):
        order.append(name)
        await asyncio.sleep(0)


async def _queued(gate: WriteGate, count: int) -> None:
    """One turn of the loop: every writer task created before it runs up to its wait at the gate."""
    await asyncio.sleep(0)
    assert gate.waiting == count


async def _hold(
    gate: WriteGate, release: asyncio.Event, order: list[str], name: str, *, urgent: bool = False
) -> asyncio.Task[None]:
    """A writer that holds the gate until ``release`` is set; returned once it holds it."""

    async def holder() -> None:
        async with gate.held(urgent=urgent):
            order.append(name)
            await release.wait()

    task = asyncio.create_task(holder())
    await asyncio.sleep(0)  # the gate is free: the holder takes it in its first step
    assert order[-1] == name
    return task


async def test_one_holder_at_a_time_in_arrival_order() -> None:
    gate = WriteGate()
    order: list[str] = []
    inside = 0
    most = 0

    async def writer(name: str) -> None:
        nonlocal inside, most
        async with gate.held():
            inside += 1
            most = max(most, inside)
            order.append(name)
            await asyncio.sleep(0.001)
            inside -= 1

    await asyncio.gather(*(writer(f"w{i}") for i in range(6)))
    assert most == 1
    assert order == [f"w{i}" for i in range(6)]
    assert gate.waiting == 0


async def test_an_urgent_writer_goes_ahead_of_the_queued_ones() -> None:
    gate = WriteGate()
    order: list[str] = []
    release = asyncio.Event()
    holder = await _hold(gate, release, order, "first")
    queued = [asyncio.create_task(_queue(gate, order, f"n{i}")) for i in range(2)]
    await _queued(gate, 2)
    ack = asyncio.create_task(_queue(gate, order, "ack", urgent=True))
    await _queued(gate, 3)
    release.set()
    await asyncio.gather(holder, *queued, ack)
    assert order == ["first", "ack", "n0", "n1"]


async def test_urgent_writers_alternate_with_the_others_so_none_starves() -> None:
    gate = WriteGate()
    order: list[str] = []
    release = asyncio.Event()
    holder = await _hold(gate, release, order, "a0", urgent=True)
    tasks = [asyncio.create_task(_queue(gate, order, f"n{i}")) for i in range(2)]
    tasks += [asyncio.create_task(_queue(gate, order, f"a{i}", urgent=True)) for i in (1, 2)]
    await _queued(gate, 4)
    release.set()
    await asyncio.gather(holder, *tasks)
    # After an urgent holder a waiting normal writer has its turn, then urgent again.
    assert order == ["a0", "n0", "a1", "n1", "a2"]


async def test_a_writer_that_waits_too_long_fails_and_the_queue_moves_on() -> None:
    gate = WriteGate(limit_s=0.01)
    release = asyncio.Event()
    order: list[str] = []
    holder = await _hold(gate, release, order, "holder")
    with pytest.raises(WriteGateTimeoutError, match="SQLite write turn"):
        async with gate.held():
            order.append("late")  # pragma: no cover - never reached
    after = asyncio.create_task(_queue(gate, order, "after"))
    await _queued(gate, 1)
    release.set()
    await asyncio.gather(holder, after)
    assert order == ["holder", "after"]
    assert gate.waiting == 0


async def test_a_cancelled_waiter_gives_up_its_place() -> None:
    gate = WriteGate()
    release = asyncio.Event()
    order: list[str] = []
    holder = await _hold(gate, release, order, "holder")
    gone = asyncio.create_task(_queue(gate, order, "gone"))
    kept = asyncio.create_task(_queue(gate, order, "kept"))
    await _queued(gate, 2)
    gone.cancel()
    release.set()
    await asyncio.gather(holder, kept)
    assert gone.cancelled() and order == ["holder", "kept"]
    # Free again: a new writer enters at once.
    async with gate.held():
        order.append("free")
    assert order == ["holder", "kept", "free"]


async def test_a_failing_holder_still_hands_the_gate_on() -> None:
    gate = WriteGate()
    order: list[str] = []
    with pytest.raises(RuntimeError):
        async with gate.held():
            raise RuntimeError("the transaction failed")
    await _queue(gate, order, "next")
    assert order == ["next"]
