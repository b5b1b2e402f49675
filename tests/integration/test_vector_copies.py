"""Sealed vector copies beside the metadata: kept in step with the index, read by recall snapshots."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import cast

import numpy as np
import pytest
from sqlalchemy import select

from engram.actors.memory_service import MemoryService
from engram.actors.snapshot import SnapshotCache
from engram.models.api import DeleteRequest
from engram.models.enums import Level, MemType, Ownership
from engram.storage import vector_copies
from engram.storage.metadata import MetadataStore, MetadataTx
from engram.storage.quick_reads import open_quick_reader
from engram.storage.schema import memory_vectors
from engram.storage.stores import Stores
from engram.storage.vector_copies import CopyingVectorStore
from engram.storage.vectors import VectorRecord
from tests.conftest import ManualClock
from tests.support.service import remember

pytestmark = pytest.mark.integration


class CountingSource:
    """A vector source that records what it was asked for (the slow path of a snapshot load)."""

    def __init__(self, inner: CopyingVectorStore) -> None:
        self.inner = inner
        self.asked: list[str] = []

    async def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        self.asked.extend(memory_ids)
        return await self.inner.index.get_vectors(memory_ids)


class CountingMetadata:
    """The metadata store, counting the transactions a snapshot cache opens."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.keyring = inner.keyring
        self.transactions = 0

    def transaction(self, *, readonly: bool = False) -> AbstractAsyncContextManager[MetadataTx]:
        self.transactions += 1
        return self.inner.transaction(readonly=readonly)


def _copying(stores: Stores) -> CopyingVectorStore:
    assert isinstance(stores.vectors, CopyingVectorStore)
    return stores.vectors


async def test_every_indexed_vector_has_a_sealed_copy(stores: Stores, service: MemoryService) -> None:
    ids = [await remember(service, t) for t in ("Likes green tea", "Lives in Lisbon")]
    from_index = await _copying(stores).index.get_vectors(ids)
    async with stores.metadata.transaction(readonly=True) as tx:
        copies = await vector_copies.for_user(tx, "u1")
    async with stores.metadata.engine.connect() as conn:
        raw = {r.memory_id: bytes(r.vector) for r in (await conn.execute(select(memory_vectors))).all()}
    assert set(copies) == set(ids)
    for memory_id in ids:
        np.testing.assert_allclose(copies[memory_id], from_index[memory_id], rtol=1e-6)
        # Sealed: the plain float bytes never appear in the stored blob.
        assert copies[memory_id].astype("<f4").tobytes()[:64] not in raw[memory_id]


async def test_snapshot_loads_from_copies_without_the_vector_source(
    stores: Stores, service: MemoryService
) -> None:
    ids = [await remember(service, t) for t in ("Plays tennis on Sundays", "Allergic to peanuts")]
    source = CountingSource(_copying(stores))
    cache = SnapshotCache(stores.metadata, source, stores.embedder, max_users=10, ttl_s=60)
    snapshot = await cache.get("u1")
    assert sorted(m.memory_id for m in snapshot.memories) == sorted(ids)
    assert source.asked == []


async def test_a_missing_copy_falls_back_to_the_index(stores: Stores, service: MemoryService) -> None:
    kept, lost = await remember(service, "Drives a blue car"), await remember(service, "Reads sci-fi")
    async with stores.metadata.transaction() as tx:
        await vector_copies.remove(tx, [lost])
    source = CountingSource(_copying(stores))
    cache = SnapshotCache(stores.metadata, source, stores.embedder, max_users=10, ttl_s=60)
    snapshot = await cache.get("u1")
    assert source.asked == [lost]
    position = [m.memory_id for m in snapshot.memories].index(lost)
    expected = (await _copying(stores).index.get_vectors([lost]))[lost]
    np.testing.assert_allclose(snapshot.vectors[position], expected, rtol=1e-6)
    assert kept in [m.memory_id for m in snapshot.memories]


async def test_a_failed_copy_write_leaves_no_stale_copy(
    stores: Stores, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_id = await remember(service, "Drives a blue car")
    store = _copying(stores)
    [old] = (await store.index.get_vectors([memory_id])).values()
    record = VectorRecord(memory_id, "u1", "", None, Level.GLOBAL, Ownership.USER, MemType.SEMANTIC, -old)

    async def crash(tx: MetadataTx, records: Sequence[VectorRecord]) -> None:
        raise RuntimeError("process died between the index write and the copy write")

    monkeypatch.setattr(vector_copies, "put", crash)
    with pytest.raises(RuntimeError):
        await store.upsert([record])  # a re-embed: the index takes the new vector, the copy fails
    async with stores.metadata.transaction(readonly=True) as tx:
        assert await vector_copies.for_user(tx, "u1") == {}, "the old copy must not outlive the write"
    np.testing.assert_allclose((await store.get_vectors([memory_id]))[memory_id], -old, rtol=1e-6)


async def test_delete_and_delete_user_remove_copies(stores: Stores, service: MemoryService) -> None:
    first = await remember(service, "Works as a nurse")
    second = await remember(service, "Has two cats")
    other = await remember(service, "Collects stamps", user_id="u2")
    await service.delete(DeleteRequest(user_id="u1", memory_id=first))
    got = await stores.vectors.get_vectors([first, second, other])
    assert set(got) == {second, other}
    await stores.vectors.delete_user("u1")
    async with stores.metadata.transaction(readonly=True) as tx:
        assert await vector_copies.for_user(tx, "u1") == {}
        assert set(await vector_copies.for_user(tx, "u2")) == {other}


async def test_copies_of_a_shredded_user_are_unreadable(stores: Stores, service: MemoryService) -> None:
    await remember(service, "Keeps a diary")
    async with stores.metadata.transaction() as tx:
        assert await tx.keys.shred("u1")
    async with stores.metadata.transaction(readonly=True) as tx:
        assert await vector_copies.for_user(tx, "u1") == {}


@pytest.mark.parametrize("reads", ["async", "quick"])
async def test_an_expired_snapshot_refreshes_weights_without_reloading(
    stores: Stores, service: MemoryService, clock: ManualClock, database_url: str, reads: str
) -> None:
    quick = open_quick_reader(database_url) if reads == "quick" else None
    if reads == "quick" and quick is None:
        pytest.skip("quick reads exist for SQLite only")
    memory_id = await remember(service, "Swims every morning")
    ticks = [0.0]
    source = CountingSource(_copying(stores))
    metadata = CountingMetadata(stores.metadata)
    cache = SnapshotCache(
        cast(MetadataStore, metadata),
        source,
        stores.embedder,
        max_users=10,
        ttl_s=60,
        monotonic=lambda: ticks[0],
        quick=quick,
    )
    first = await cache.get("u1")
    async with stores.metadata.transaction() as tx:  # a hit elsewhere: no version bump
        await tx.memories.record_recall_hits("u1", {memory_id: (0.42, 7)}, clock.now)
    assert (await cache.get("u1")).memories[0].recall_count == 0, "fresh within the TTL"
    ticks[0] = 61.0
    refreshed = await cache.get("u1")
    assert refreshed is first, "refreshed in place, not rebuilt"
    assert (refreshed.memories[0].weight, refreshed.memories[0].recall_count) == (0.42, 7)
    assert refreshed.memories[0].last_recalled_at == clock.now
    assert refreshed.memories[0].weight_at == clock.now
    assert source.asked == []
    # Without quick reads the load, the check and the refresh each open a transaction; with them
    # none does (the load reads the user's key with its rows, in one SQLite read).
    assert metadata.transactions == (0 if quick else 3)
