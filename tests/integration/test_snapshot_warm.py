"""Snapshot warm-up: a starting recall process loads the most recently active users first."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from engram.actors.memory_service import MemoryService
from engram.actors.snapshot import SnapshotCache
from engram.models.api import AddStructuredRequest, DeleteRequest
from engram.models.enums import MemType, Ownership
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.service import remember

pytestmark = pytest.mark.integration


async def test_warm_loads_the_most_recently_active_users(
    stores: Stores, service: MemoryService, clock: ManualClock
) -> None:
    for user in ("old", "middle", "recent"):
        await remember(service, f"{user} likes tea", user)
        clock.advance(hours=1)
    gone = await remember(service, "gone likes coffee", "gone")
    await service.delete(DeleteRequest(user_id="gone", memory_id=gone))  # nothing active: not warmed
    async with stores.metadata.transaction(readonly=True) as tx:
        assert await tx.memories.recently_active_users(10) == ["recent", "middle", "old"]

    cache = SnapshotCache(stores.metadata, stores.vectors, stores.embedder, max_users=2, ttl_s=60)
    assert await cache.warm(10) == 2, "never more users than the cache holds"
    warmed = {user: await cache.get(user) for user in ("recent", "middle")}
    assert [m.content for m in warmed["recent"].memories] == ["recent likes tea"]
    # Served from the cache: the same objects come back.
    for user, snapshot in warmed.items():
        assert await cache.get(user) is snapshot


async def _fill(service: MemoryService, user: str, count: int, words: int = 12) -> None:
    # One batch (one transaction) rather than a write each: the same rows, in a fraction of the time.
    requests = [
        AddStructuredRequest(
            user_id=user,
            ownership=Ownership.USER,
            mem_type=MemType.SEMANTIC,
            content=f"Fact {i} about {user}: " + " ".join(f"{user}{i}w{j}" for j in range(words)),
        )
        for i in range(count)
    ]
    results = await service.add_structured_batch(requests)
    assert all(r.code == 0 for r in results), results


async def test_the_cache_holds_no_more_bytes_than_its_bound(stores: Stores, service: MemoryService) -> None:
    for user, count in (("small", 2), ("medium", 4), ("large", 12)):
        await _fill(service, user, count)
    unbounded = SnapshotCache(stores.metadata, stores.vectors, stores.embedder, max_users=10, ttl_s=60)
    size = {user: (await unbounded.get(user)).nbytes for user in ("small", "medium", "large")}
    assert size["small"] < size["medium"] < size["large"]
    assert unbounded.bytes == sum(size.values())

    bound = size["small"] + size["medium"]
    cache = SnapshotCache(
        stores.metadata, stores.vectors, stores.embedder, max_users=10, ttl_s=60, max_bytes=bound
    )
    await cache.get("small")
    await cache.get("medium")
    assert (len(cache), cache.bytes) == (2, bound)
    # The large user does not fit beside anyone: the least recently used go first, and the newest
    # snapshot is kept even alone over the bound (a recall must be answered).
    await cache.get("large")
    assert (len(cache), cache.bytes) == (1, size["large"])
    await cache.get("small")
    assert (len(cache), cache.bytes) == (1, size["small"])


async def test_warm_up_stops_when_the_bytes_are_spent(
    stores: Stores, service: MemoryService, clock: ManualClock
) -> None:
    for user in ("old", "middle", "recent"):
        await _fill(service, user, 3)
        clock.advance(hours=1)
    unbounded = SnapshotCache(stores.metadata, stores.vectors, stores.embedder, max_users=10, ttl_s=60)
    size = {user: (await unbounded.get(user)).nbytes for user in ("old", "middle", "recent")}

    bound = size["recent"] + size["middle"]
    cache = SnapshotCache(
        stores.metadata, stores.vectors, stores.embedder, max_users=10, ttl_s=60, max_bytes=bound
    )
    assert await cache.warm(10) == 2
    assert cache.bytes <= bound
    recent = await cache.get("recent")
    assert await cache.get("middle") is not None and len(cache) == 2
    assert await cache.get("recent") is recent  # held since the warm-up, not reloaded


async def test_a_snapshots_estimate_is_within_twice_what_it_holds(
    stores: Stores, service: MemoryService
) -> None:
    await _fill(service, "primer", 5)
    await _fill(service, "big", 300, words=20)
    cache = SnapshotCache(stores.metadata, stores.vectors, stores.embedder, max_users=10, ttl_s=60)
    await cache.get("primer")  # the query paths' own caches fill on a first load, not this one
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        snapshot = await cache.get("big")
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    print(f"estimate {snapshot.nbytes} B, measured {held} B for {len(snapshot.memories)} memories")
    assert len(snapshot.memories) == 300
    assert held / 2 <= snapshot.nbytes <= held * 2
