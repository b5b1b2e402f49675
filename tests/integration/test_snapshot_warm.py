"""Snapshot warm-up: a starting recall process loads the most recently active users first."""

from __future__ import annotations

import pytest

from engram.actors.memory_service import MemoryService
from engram.actors.snapshot import SnapshotCache
from engram.models.api import DeleteRequest
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
