"""LazyDeploymentHandle: looked up on first use, bounded logged retries while unregistered (issue #19)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from engram.serve.handle_lookup import DeploymentNotRegisteredError, LazyDeploymentHandle
from tests.conftest import ManualMonotonic

pytestmark = pytest.mark.unit


class Registry:
    """Serve's lookup as seen by a caller: ``KeyError`` until the deployment is registered."""

    def __init__(self, unknown_for: int) -> None:
        self.unknown_for = unknown_for
        self.lookups = 0

    def __call__(self) -> str:
        self.lookups += 1
        if self.lookups <= self.unknown_for:
            raise KeyError("Deployment(name='Extraction', app='engram') does not exist.")
        return "handle"


def _lazy(
    registry: Registry, clock: ManualMonotonic, waits: list[float], wait_s: float
) -> LazyDeploymentHandle:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.now += seconds

    return LazyDeploymentHandle(
        "Extraction", "engram", wait_s=wait_s, lookup=registry, sleep=sleep, clock=clock, max_delay_s=2.0
    )


async def test_nothing_is_looked_up_until_the_first_call() -> None:
    registry = Registry(unknown_for=0)
    lazy = _lazy(registry, ManualMonotonic(), [], wait_s=10)
    assert registry.lookups == 0 and not lazy.resolved
    assert await lazy.get() == "handle"
    assert await lazy.get() == "handle"
    assert registry.lookups == 1 and lazy.resolved


async def test_an_unregistered_deployment_is_waited_for_with_a_logged_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry(unknown_for=4)
    waits: list[float] = []
    lazy = _lazy(registry, ManualMonotonic(), waits, wait_s=60)
    with caplog.at_level(logging.WARNING, logger="engram.serve.handle_lookup"):
        assert await lazy.get() == "handle"
    assert registry.lookups == 5
    assert waits == [0.2, 0.4, 0.8, 1.6]
    retries = [r.getMessage() for r in caplog.records]
    assert len(retries) == 4
    assert all("Extraction" in m and "not registered yet" in m for m in retries)


async def test_the_wait_is_bounded_then_a_later_call_waits_afresh() -> None:
    registry = Registry(unknown_for=1_000)
    waits: list[float] = []
    clock = ManualMonotonic()
    lazy = _lazy(registry, clock, waits, wait_s=5)
    with pytest.raises(DeploymentNotRegisteredError, match="not registered within 5 s"):
        await lazy.get()
    # Backoff capped at 2 s, and the last pause ends exactly at the deadline.
    assert waits == [0.2, 0.4, 0.8, 1.6, 2.0]
    assert sum(waits) == pytest.approx(5.0)
    registry.unknown_for = registry.lookups  # registered now
    assert await lazy.get() == "handle"


async def test_concurrent_callers_share_one_lookup() -> None:
    registry = Registry(unknown_for=2)
    lazy = _lazy(registry, ManualMonotonic(), [], wait_s=60)
    handles = await asyncio.gather(*(lazy.get() for _ in range(20)))
    assert handles == ["handle"] * 20
    assert registry.lookups == 3


async def test_a_cancelled_caller_does_not_cancel_the_others_lookup() -> None:
    backing_off = asyncio.Event()
    release = asyncio.Event()
    registry = Registry(unknown_for=1)

    async def sleep(seconds: float) -> None:
        backing_off.set()
        await release.wait()

    lazy = LazyDeploymentHandle("Recall", "engram-recall", wait_s=60, lookup=registry, sleep=sleep)
    first = asyncio.ensure_future(lazy.get())
    second = asyncio.ensure_future(lazy.get())
    await asyncio.wait_for(backing_off.wait(), 10)  # the first lookup failed, the retry waits
    first.cancel()
    release.set()
    assert await asyncio.wait_for(second, 10) == "handle"
    assert first.cancelled()
