"""The stall diagnosis of the shard: where a coroutine waits, as function names and lines."""

from __future__ import annotations

import asyncio

import pytest

from engram.serve.shard import _await_chain

pytestmark = pytest.mark.unit


async def test_the_chain_names_each_function_down_to_the_awaited_future() -> None:
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def inner() -> None:
        await gate

    async def outer() -> None:
        await inner()

    task = asyncio.create_task(outer())
    await asyncio.sleep(0)
    chain = _await_chain(task.get_coro())
    assert [step.split(":")[0] for step in chain] == ["outer", "inner"]
    assert all(step.split(":")[1].isdigit() for step in chain)
    gate.set_result(None)
    await task
